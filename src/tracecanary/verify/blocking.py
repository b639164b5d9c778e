"""What blocks a rejected canary, named: for a search log, per reduction step, which
check failed, under which configuration, and on which op signature of the source.

``BlockingExplainer.explain`` lists, worst first, every reason a verification is not
``verified``:

- each failed behavior check: ``check`` (the metric, e.g. ``latency.p99``,
  ``tail_event_recall``, ``by_op.all_reduce.mean``), ``config``, ``source``, ``canary``,
  ``allowed`` (the tolerance as it applied; for tail recall the minimum) and ``excess``
  (how many allowances the canary is off; for tail recall the missing share over the
  allowed one), and ``signature``: the source op signature the failure is attributed to
  (``op``, ``bytes``, ``dtype``, ``group``, ``stream`` and its id in
  ``Program.signature_ids``) with ``attributed_by`` saying how:

  * ``tail_events_not_executed``: for tail recall, the signature holding most of the
    source's tail events that the canary does not execute at all;
  * ``latency_sum_deviation``: otherwise, the signature (within the check's op or phase
    for a breakdown check) whose weighted sum of replayed latency differs most between
    the canary and the source; for the mean this is an exact decomposition of the
    error, for quantiles, queue wait and the hidden share it is the largest latency
    deviation, a pointer and not a proof;

- each changed ranking decision (``check`` ``ranking.<metric>``, ``config`` ``a vs b``);
- a commitment mismatch, partial coverage, or behavior not judged (``check`` named by
  status, with the reason).

Nothing here changes a verdict: it reads the verification document and the two replays
the checks compared (``verify_behavior(replays_out=...)``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracecanary.program import Program
from tracecanary.verify.behavior import Replay

SIGNATURE_FIELDS = ("op", "bytes", "dtype", "group", "stream")
"""Signature fields a blocking entry names (root and phase are left out: rarely telling)."""


def _allowed(check: dict) -> float | None:
    tol = check["tolerance"]
    return tol.get("allowed", tol.get("minimum"))


def _excess(check: dict) -> float:
    """How far outside its tolerance a failed check is (for ordering; inf when one side
    has no value)."""
    src, can = check["source"], check["canary"]
    if src is None or can is None:
        return float("inf")
    if "minimum" in check["tolerance"]:
        allowed_missing = max(1.0 - float(check["tolerance"]["minimum"]), 1e-9)
        return (1.0 - float(can)) / allowed_missing
    allowed = check["tolerance"].get("allowed") or 0.0
    return abs(float(can) - float(src)) / allowed if allowed > 0 else float("inf")


class _Attribution:
    """Per-signature figures of one source program, computed once per search."""

    def __init__(self, program: Program) -> None:
        self.sig_ids, table = program.signature_ids()
        self.table = table.reset_index(drop=True)
        occ = program.occurrences
        self.op = occ["op"].astype(str).to_numpy()
        self.phase = occ["phase"].astype(str).to_numpy()

    def describe(self, sig: int) -> dict:
        row = self.table.iloc[sig]
        out: dict = {"id": int(sig)}
        for name in SIGNATURE_FIELDS:
            value = row[name]
            out[name] = int(value) if name == "bytes" else str(value)
        return out

    def _scope(self, metric: str) -> np.ndarray | None:
        """Source occurrences a breakdown check covers (None: every occurrence)."""
        for kind, column in (("by_op.", self.op), ("by_phase.", self.phase)):
            if metric.startswith(kind):
                key = metric[len(kind) :].rsplit(".", 1)[0]
                return column == ("" if key == "(none)" else key)
        return None

    def by_latency(self, metric: str, src: tuple, can: tuple) -> int | None:
        """The signature whose weighted latency sum deviates most (see module doc)."""
        n = len(self.sig_ids)
        total_src = np.zeros(n)
        np.add.at(total_src, src[0], src[1] * src[2])
        total_can = np.zeros(n)
        ids = can[0]
        inside = (ids >= 0) & (ids < n)
        np.add.at(total_can, ids[inside], (can[1] * can[2])[inside])
        scope = self._scope(metric)
        delta = total_can - total_src
        if scope is not None:
            delta = np.where(scope, delta, 0.0)
        per_sig = pd.Series(delta).groupby(self.sig_ids).sum()
        if per_sig.empty or not np.any(per_sig.to_numpy()):
            return None
        return int(per_sig.abs().idxmax())

    def by_missing_tail(self, tail_occ: list[int], can: tuple) -> int | None:
        """The signature holding most source tail events the canary never executes."""
        executed = set(np.unique(can[0]).tolist())
        missing = [o for o in tail_occ if o not in executed]
        if not missing:
            return None
        sigs = pd.Series(self.sig_ids[np.asarray(missing, dtype=np.int64)])
        return int(sigs.value_counts(sort=True).index[0])


class BlockingExplainer:
    """``explain(verification, replays)`` -> the blocking entries (see module doc) for
    candidates verified against ``program``."""

    def __init__(self, program: Program) -> None:
        self._program = program
        self._attribution: _Attribution | None = None

    def _attr(self) -> _Attribution:
        if self._attribution is None:
            self._attribution = _Attribution(self._program)
        return self._attribution

    def explain(self, verification: dict, replays: dict[str, Replay], limit: int = 5) -> list[dict]:
        statuses = verification["statuses"]
        out: list[dict] = []
        if statuses["commitments"] != "verified":
            out.append({"check": "commitments", "reason": "commitments do not recompute"})
        if statuses["coverage"] != "full":
            out.append({"check": "coverage", "reason": "the canary covers a prefix only"})
        obstacle = verification["source"].get("skew_obstacle")
        if obstacle:
            out.append({"check": "behavior", "reason": f"not judged: {obstacle}"})
        failed = sorted(
            (c for c in verification["checks"] if not c["pass"]),
            key=lambda c: (-_excess(c), c["config"], c["metric"]),
        )
        for check in failed[:limit]:
            out.append(self._behavior_entry(check, replays))
        for change in verification["ranking"]["changed"][: max(limit - len(failed), 1)]:
            out.append(
                {
                    "check": f"ranking.{change['metric']}",
                    "config": f"{change['a']} vs {change['b']}",
                    "source": change["source"],
                    "canary": change["canary"],
                }
            )
        return out

    def _behavior_entry(self, check: dict, replays: dict[str, Replay]) -> dict:
        entry = {
            "check": check["metric"],
            "config": check["config"],
            "source": check["source"],
            "canary": check["canary"],
            "allowed": _allowed(check),
            "excess": None if _excess(check) == float("inf") else round(_excess(check), 2),
        }
        if check.get("reproducibility"):  # the source's own interval beside the tolerance
            entry["source_interval"] = check["reproducibility"]["interval"]
        src, can = replays.get("source"), replays.get("canary")
        if src is None or can is None or check["config"] not in can.latencies:
            return entry
        attr = self._attr()
        config = check["config"]
        sig, how = None, None
        if check["metric"] == "tail_event_recall":
            tail = [int(e["occ"]) for e in src.metrics[config]["tail_events"]]
            sig, how = attr.by_missing_tail(tail, can.latencies[config]), "tail_events_not_executed"
        if sig is None:
            sig = attr.by_latency(check["metric"], src.latencies[config], can.latencies[config])
            how = "latency_sum_deviation"
        if sig is not None:
            entry.update(signature=attr.describe(sig), attributed_by=how)
        return entry


def blocking_text(entries: list[dict]) -> str:
    """One line naming the first blocker (and how many more), for a search log reason."""
    if not entries:
        return "no failed check recorded"
    first = entries[0]
    text = first["check"]
    if "config" in first:
        text += f" on config {first['config']}"
    if "source" in first and "canary" in first and "reason" not in first:
        text += f" (source {_num(first['source'])}, canary {_num(first['canary'])}"
        text += f", allowed {_num(first['allowed'])})" if first.get("allowed") is not None else ")"
    if "reason" in first:
        text += f": {first['reason']}"
    sig = first.get("signature")
    if sig:
        text += (
            f", mostly signature {sig['id']} ({sig['op']} {sig['bytes']} B {sig['dtype']} "
            f"on group {sig['group']}"
            + (f", stream {sig['stream']}" if sig["stream"] else "")
            + ")"
        )
    if len(entries) > 1:
        text += f"; {len(entries) - 1} more blocking"
    return text


def _num(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def blocking_table(candidates: list[dict], limit: int = 5) -> list[str]:
    """Why the search stopped where it did, for a terminal: one row per rejected candidate
    that names what blocks it (its worst blocking check: metric, configuration, source and
    canary values, allowance), nearest miss (smallest excess) first, at most ``limit``
    rows; [] when no candidate was rejected by a check. Values as the search log has them,
    4 significant digits."""
    rejected = [c for c in candidates if c.get("blocking")]
    if not rejected:
        return []

    def excess(candidate: dict) -> float:
        value = candidate["blocking"][0].get("excess")
        return float("inf") if value is None else float(value)

    rows = [("candidate", "check", "config", "source", "canary", "allowed")]
    for candidate in sorted(rejected, key=excess)[:limit]:
        block = candidate["blocking"][0]
        settings = ",".join(f"{k}={v}" for k, v in candidate["settings"].items())
        rows.append(
            (
                f"{candidate['stage']}:{settings}",
                block["check"],
                block.get("config", "-"),
                *(
                    _num(block[k]) if block.get(k) is not None else "-"
                    for k in ("source", "canary", "allowed")
                ),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    more = len(rejected) - (len(rows) - 1)
    lines = [
        f"not smaller: {len(rejected)} candidate(s) rejected; the worst check of each, "
        "nearest miss first" + (f" ({more} more in the search log)" if more > 0 else "")
    ]
    lines += [
        "  " + "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    return lines
