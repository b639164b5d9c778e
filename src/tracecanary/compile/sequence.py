"""Exact sequence encoding: run-length and nested periodic motifs over int64 tokens.

``encode_sequence(x)`` turns a sequence of integers (signature ids, timing values, ids
of skew vectors) into a small grammar that expands back to exactly ``x``:

* level 0 collapses runs of one value (run-length);
* each further level scans the token sequence for periodic motifs (a body of p tokens
  repeated r >= 2 times) and replaces each by one new token, so motifs nest (a decode
  step whose body holds a run of 32 identical all_reduces is a motif over a run).
  Levels go bottom-up: a level only accepts periods up to a cap that doubles whenever
  a scan finds nothing, so inner repetitions collapse before an outer motif forms
  around them; scanning stops when the cap spans the whole sequence.

The scan is near-linear: candidate periods at position i are the distances to the next
few occurrences of the same token; a polynomial rolling hash (mod 2^64) tests the first
repetition of every candidate in one vectorized pass, and the Python loop only visits
positions where a motif really starts. Every motif is confirmed by direct comparison
before it is used, so hash collisions cannot change the output.

Tokens (``Grammar.node``): ``("run", value, length)`` or ``("motif", children, repeat)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tracecanary.factorize import factorize, first_rows

_BASE = np.uint64(0x9E3779B97F4A7C15)
CANDIDATES = 4
MAX_LEVELS = 12


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer: spreads token ids over 64 bits (wrapping arithmetic)."""
    z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@dataclass
class Grammar:
    """Token definitions and the top-level token sequence.

    Tokens ``0 .. n_runs-1`` are runs (``run_values[t]`` repeated ``run_lengths[t]``
    times); tokens from ``n_runs`` on are motifs (``motifs[t - n_runs]`` =
    (children, repeat)). ``node(t)`` gives either as a tuple."""

    run_values: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    run_lengths: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    motifs: list[tuple] = field(default_factory=list)
    top: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    _motif_ids: dict = field(default_factory=dict)

    @property
    def n_runs(self) -> int:
        return len(self.run_values)

    @property
    def n_tokens(self) -> int:
        return self.n_runs + len(self.motifs)

    def node(self, tid: int) -> tuple:
        if tid < self.n_runs:
            return ("run", int(self.run_values[tid]), int(self.run_lengths[tid]))
        children, repeat = self.motifs[tid - self.n_runs]
        return ("motif", children, repeat)

    def motif(self, children: tuple[int, ...], repeat: int) -> int:
        key = (children, repeat)
        tid = self._motif_ids.get(key)
        if tid is None:
            tid = self.n_tokens
            self.motifs.append((children, int(repeat)))
            self._motif_ids[key] = tid
        return tid

    def length(self, tid: int, _memo: dict | None = None) -> int:
        """Number of source elements token ``tid`` expands to."""
        memo = {} if _memo is None else _memo
        if tid in memo:
            return memo[tid]
        node = self.node(tid)
        if node[0] == "run":
            out = node[2]
        else:
            out = node[2] * sum(self.length(c, memo) for c in node[1])
        memo[tid] = out
        return out


def _next_same(seq: np.ndarray) -> np.ndarray:
    """Index of the next position holding the same token, -1 where none."""
    order = np.argsort(seq, kind="stable")
    nxt = np.full(len(seq), -1, dtype=np.int64)
    same = seq[order[1:]] == seq[order[:-1]]
    nxt[order[:-1][same]] = order[1:][same]
    return nxt


def _scan_level(
    seq: np.ndarray, grammar: Grammar, max_period: int
) -> tuple[np.ndarray | None, int]:
    """One motif-finding pass over periods <= ``max_period``.

    Returns (the new, shorter token sequence or None if no motif was formed, the
    smallest period of any repetition seen at all: 0 if there is none, so the caller
    can raise the cap straight to it)."""
    m = len(seq)
    if m < 2:
        return None, 0
    h = _mix(seq)
    powers = np.empty(m + 1, dtype=np.uint64)
    powers[0] = 1
    powers[1:] = _BASE
    powers = np.cumprod(powers, dtype=np.uint64)  # wraps mod 2^64
    prefix = np.zeros(m + 1, dtype=np.uint64)
    h *= powers[:m]
    np.cumsum(h, out=prefix[1:])
    del h

    idx = np.arange(m, dtype=np.int64)
    nxt = _next_same(seq)
    # each candidate's hits sparsely, (positions, periods): read back at the starts only
    cands: list[tuple[np.ndarray, np.ndarray]] = []
    ok = np.zeros(m, dtype=bool)
    smallest = 0
    cur = nxt
    for _ in range(CANDIDATES):
        period = np.where(cur >= 0, cur - idx, 0)
        valid = (cur >= 0) & (idx + 2 * period <= m)
        a = idx[valid]
        p = period[valid]
        first = (prefix[a + p] - prefix[a]) * powers[p]
        second = prefix[a + 2 * p] - prefix[a + p]
        match = first == second
        if match.any():
            least = int(p[match].min())
            smallest = least if smallest == 0 else min(smallest, least)
        keep = match & (p <= max_period)
        ok[a[keep]] = True
        cands.append((a[keep], p[keep]))  # a is increasing: one period per position
        del period, valid, a, p, first, second, match, keep
        cur = np.where(cur >= 0, nxt[np.maximum(cur, 0)], -1)
    del cur, nxt, idx, prefix, powers
    starts = np.flatnonzero(ok)
    if len(starts) == 0:
        return None, smallest
    # candidate c's period at starts[k] (0: no hit there), as the dense arrays held
    at_starts = []
    for positions, periods in cands:
        dense = np.zeros(len(starts), dtype=np.int64)
        dense[np.searchsorted(starts, positions)] = periods
        at_starts.append(dense)
    del cands

    pieces: list[np.ndarray] = []
    i = 0
    found = False
    while i < m:
        k = int(np.searchsorted(starts, i))
        if k == len(starts):
            pieces.append(seq[i:])
            break
        j = int(starts[k])
        if j > i:
            pieces.append(seq[i:j])
        best_cover, best_p, best_r = 0, 0, 0
        for cand in at_starts:
            p = int(cand[k])
            if p <= 0 or p >= best_p > 0 and p * ((m - j) // p) <= best_cover:
                continue
            r = _repeats(seq, j, p)
            if r >= 2 and (r * p > best_cover or (r * p == best_cover and p < best_p)):
                best_cover, best_p, best_r = r * p, p, r
        if best_r >= 2:
            tid = grammar.motif(tuple(int(t) for t in seq[j : j + best_p]), best_r)
            pieces.append(np.array([tid], dtype=np.int64))
            i = j + best_cover
            found = True
        else:  # hash collision: no motif here after all
            pieces.append(seq[j : j + 1])
            i = j + 1
    if not found:
        return None, smallest
    return np.concatenate(pieces), smallest


def _repeats(seq: np.ndarray, j: int, p: int) -> int:
    """How many times seq[j:j+p] repeats back to back from j (exact comparison)."""
    m = len(seq)
    matched = 0  # seq[j+p+t] == seq[j+t] for t < matched
    window = max(64, 2 * p)
    while j + p + matched < m:
        hi = min(m - j - p, matched + window)
        a = seq[j + matched : j + hi]
        b = seq[j + p + matched : j + p + hi]
        diff = np.flatnonzero(a != b)
        if len(diff):
            matched += int(diff[0])
            break
        matched = hi
        window *= 2
    return (p + matched) // p


def encode_sequence(x: np.ndarray) -> Grammar:
    """Exact grammar of ``x`` (int64): runs, then nested periodic motifs."""
    x = np.asarray(x, dtype=np.int64)
    grammar = Grammar()
    if len(x) == 0:
        return grammar
    change = np.flatnonzero(x[1:] != x[:-1]) + 1
    run_starts = np.concatenate(([0], change))
    run_lengths = np.diff(np.concatenate((run_starts, [len(x)])))
    run_values = x[run_starts]
    value_codes, _ = factorize(run_values)
    key = value_codes * (int(run_lengths.max()) + 1) + run_lengths
    seq, _ = factorize(key)
    first = first_rows(seq)
    grammar.run_values = run_values[first].astype(np.int64)
    grammar.run_lengths = run_lengths[first].astype(np.int64)
    # Bottom-up: short periods first, so inner repetitions are collapsed before an outer
    # motif is formed around them (nesting); the cap doubles until it spans everything.
    max_period = 2
    for _ in range(MAX_LEVELS * 8):
        new, smallest = _scan_level(seq, grammar, max_period)
        if new is not None and len(new) < len(seq):
            seq = new
            continue
        if smallest == 0 or max_period >= len(seq):
            break
        max_period = max(2 * max_period, smallest)
    grammar.top = seq
    return grammar


def expand_tokens(grammar: Grammar, tokens: np.ndarray) -> np.ndarray:
    """The source elements a token sequence stands for."""
    memo: dict[int, np.ndarray] = {}

    def one(tid: int) -> np.ndarray:
        got = memo.get(tid)
        if got is not None:
            return got
        node = grammar.node(tid)
        if node[0] == "run":
            out = np.full(node[2], node[1], dtype=np.int64)
        else:
            out = np.tile(np.concatenate([one(c) for c in node[1]]), node[2])
        memo[tid] = out
        return out

    if len(tokens) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate([one(int(t)) for t in tokens])


# ---------------------------------------------------------------------------------------
# JSON records: the grammar as nested run / block / motif records.
#
#   run    {RUN_KEY: value, "repeat": r}          value repeated r >= 2 times
#   block  {BLOCK_KEY: [v1, v2, ...]}             literal values, each once
#   motif  {"body": [records...], "repeat": r}    the body's expansion repeated r times
#
# With ``execute=True`` (structure records) every record also carries ``execute``
# (executed repetitions, equal to ``repeat`` until reduced execution lowers it) and
# blocks carry ``repeat: 1, execute: 1``.
# ---------------------------------------------------------------------------------------


def grammar_records(
    grammar: Grammar,
    tokens: np.ndarray | None = None,
    *,
    run_key: str,
    block_key: str,
    value=int,
    execute: bool = False,
    table: list | None = None,
) -> list[dict]:
    """Records for ``tokens`` (default: the grammar's top level).

    ``value`` maps a run node's value to its JSON value; ``table`` (optional) is a list
    indexed by that value used for literal blocks in bulk (faster than ``value``)."""
    memo: dict[int, dict] = {}
    pad = np.zeros(len(grammar.motifs), dtype=np.int64)
    is_single = np.concatenate([grammar.run_lengths == 1, pad.astype(bool)])
    node_value = np.concatenate([grammar.run_values, pad])

    def block(values: np.ndarray) -> dict:
        if table is not None:
            items = [table[i] for i in values.tolist()]
        elif value is int:
            items = values.tolist()
        else:
            items = [value(v) for v in values.tolist()]
        rec = {block_key: items}
        if execute:
            rec["repeat"] = 1
            rec["execute"] = 1
        return rec

    def convert(seq) -> list[dict]:
        seq = np.asarray(seq, dtype=np.int64)
        out: list[dict] = []
        single = is_single[seq]
        # maximal stretches of single-value runs become one literal block each
        edges = np.flatnonzero(np.diff(np.concatenate(([0], single.view(np.int8), [0]))))
        stretches = iter(zip(edges[0::2], edges[1::2], strict=True))
        nxt = next(stretches, None)
        i = 0
        while i < len(seq):
            if nxt is not None and i == nxt[0]:
                out.append(block(node_value[seq[nxt[0] : nxt[1]]]))
                i = int(nxt[1])
                nxt = next(stretches, None)
                continue
            out.append(one(int(seq[i])))
            i += 1
        return out

    def one(tid: int) -> dict:
        rec = memo.get(tid)
        if rec is not None:
            return copy_json(rec)  # never alias: a record may later be edited in place
        if rec is None:
            node = grammar.node(tid)
            if node[0] == "run":
                v = table[node[1]] if table is not None else value(node[1])
                rec = {run_key: v, "repeat": int(node[2])}
            else:
                rec = {"body": convert(np.asarray(node[1], dtype=np.int64)), "repeat": int(node[2])}
            if execute:
                rec["execute"] = rec["repeat"]
            memo[tid] = rec
        return rec

    try:
        return convert(grammar.top if tokens is None else tokens)
    finally:
        # ``one`` and ``convert`` refer to each other: break that cycle so the memo and
        # the grammar are freed now, not at the next garbage collection (compile runs
        # with the collector paused)
        one = convert = None  # noqa: F841


def copy_json(obj):
    """A deep copy of a JSON-like value that shares no containers (unlike deepcopy,
    which keeps aliasing)."""
    if isinstance(obj, dict):
        return {k: copy_json(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [copy_json(v) for v in obj]
    return obj


def records_length(records: list[dict], block_key: str) -> int:
    """Number of elements the records expand to (no materialization)."""
    total = 0
    for rec in records:
        total += record_length(rec, block_key)
    return total


def record_length(rec: dict, block_key: str) -> int:
    if block_key in rec:
        return len(rec[block_key])
    if "body" in rec:
        return int(rec["repeat"]) * records_length(rec["body"], block_key)
    return int(rec["repeat"])


def count_records(records: list[dict], block_key: str) -> int:
    """Encoded records: 1 per run, 1 per literal value of a block, 1 + body per motif."""
    total = 0
    for rec in records:
        if block_key in rec:
            total += len(rec[block_key])
        elif "body" in rec:
            total += 1 + count_records(rec["body"], block_key)
        else:
            total += 1
    return total


def expand_records(
    records: list[dict], *, run_key: str, block_key: str, leaf_id=None
) -> np.ndarray:
    """Expand records to an int64 array: the leaf values themselves (integers or
    booleans), or ``leaf_id(value)`` of each leaf when given."""
    parts: list[np.ndarray] = []
    for rec in records:
        if block_key in rec:
            items = rec[block_key]
            if leaf_id is None:
                parts.append(np.asarray(items, dtype=np.int64))
            else:
                parts.append(
                    np.fromiter((leaf_id(v) for v in items), dtype=np.int64, count=len(items))
                )
        elif "body" in rec:
            body = expand_records(
                rec["body"], run_key=run_key, block_key=block_key, leaf_id=leaf_id
            )
            parts.append(np.tile(body, int(rec["repeat"])))
        else:
            v = rec[run_key] if leaf_id is None else leaf_id(rec[run_key])
            parts.append(np.full(int(rec["repeat"]), v, dtype=np.int64))
    if not parts:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate(parts)
