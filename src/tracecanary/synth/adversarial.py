"""The adversarial trace: 100 collectives arranged so that context decides the ranking.

``build_adversarial()`` returns a ``tracecanary.trace/v1`` document (a plain dict; the
same dict on every call, no randomness): 4 ranks on one clock domain (so arrival skew
is known from ``ts_ns``), exactly 100 collective occurrences on the group ``world``,
i.e. 400 per-rank events, each with rank, seq, op, bytes, dtype, group, phase, stream,
ts_ns and overlap_ns.

Layout in issue order (phase names in brackets):

* 6 decode bursts [``decode``]: 12 small all_reduces (64 KiB) issued 2 us apart, far
  faster than any configuration serves them, so a queue builds inside each burst;
  bursts are separated by idle gaps of several milliseconds, long enough for every
  queue to drain (queue reset). No compute overlaps a decode collective (measured 0).
  Per-rank arrival skew (0 .. 1.5 us) varies with the step.
* 20 prefill all_gathers [``prefill``] of 4 MiB, one every 400 us between the bursts,
  each overlapping 150 us of compute (measured).
* 2 tail windows [``tail``] of 4 back-to-back 64 MiB reduce_scatters overlapping about
  3 ms of compute each: rare high-overlap windows (overlap far above 3x the median
  positive overlap, the ingest's tail rule), where contention and overlap efficiency,
  not bandwidth, decide the exposed latency.

Why the rankings differ: an isolated (nccl-tests style) replay weighs every signature
by its count and its stand-alone time, so the large, bandwidth-bound collectives
dominate and high-bandwidth configurations win. In the workload the large collectives
are mostly hidden behind compute (by how much depends on each configuration's overlap
efficiency and contention), while the small decode collectives queue inside their
bursts, so per-message latency and overlap behaviour win. Under the five default
configurations (config/backends.yaml) the isolated ranking and the workload ranking
differ (tests pin this).
"""

from __future__ import annotations

from tracecanary.formats.ids import TRACE_FORMAT

RANKS = 4
OCCURRENCES = 100
DTYPE = "bfloat16"
KIB = 1024
MIB = 1024 * KIB

DECODE_BURSTS = 6
DECODE_PER_BURST = 12
DECODE_BYTES = 64 * KIB
DECODE_SPACING_NS = 2_000
PREFILL_COUNT = 20
PREFILL_BYTES = 4 * MIB
PREFILL_OVERLAP_NS = 150_000
PREFILL_SPACING_NS = 400_000
TAIL_AFTER_BURSTS = (1, 3)
TAIL_PER_WINDOW = 4
TAIL_BYTES = 64 * MIB
TAIL_OVERLAP_NS = 600_000
TAIL_SPACING_NS = 600_000
IDLE_GAP_NS = 8_000_000
START_NS = 1_000_000

# deterministic per-rank arrival skew patterns (ns), indexed by occurrence mod len
_SKEW_PATTERNS = (
    (0, 400, 900, 1_500),
    (700, 0, 1_200, 300),
    (1_100, 800, 0, 500),
    (200, 1_400, 600, 0),
)


def _occ(op: str, nbytes: int, phase: str, t: int, overlap: int) -> dict:
    return {"op": op, "bytes": nbytes, "phase": phase, "stream": "0", "t": t, "overlap": overlap}


def _occurrences() -> list[dict]:
    """The 100 occurrences in issue order: op, bytes, phase, stream, issue time, overlap."""
    occ: list[dict] = []
    t = START_NS
    for burst in range(DECODE_BURSTS):
        for _ in range(DECODE_PER_BURST):
            occ.append(_occ("all_reduce", DECODE_BYTES, "decode", t, 0))
            t += DECODE_SPACING_NS
        t += IDLE_GAP_NS // 2
        # 4 prefill all_gathers after each of the first 5 bursts
        if burst < PREFILL_COUNT // 4:
            for _ in range(4):
                occ.append(_occ("all_gather", PREFILL_BYTES, "prefill", t, PREFILL_OVERLAP_NS))
                t += PREFILL_SPACING_NS
        # the tail windows follow bursts 2 and 4
        if burst in TAIL_AFTER_BURSTS:
            for j in range(TAIL_PER_WINDOW):
                occ.append(
                    _occ("reduce_scatter", TAIL_BYTES, "tail", t, TAIL_OVERLAP_NS + 10_000 * j)
                )
                t += TAIL_SPACING_NS
        t += IDLE_GAP_NS // 2
    if len(occ) != OCCURRENCES:
        raise RuntimeError(f"adversarial layout has {len(occ)} occurrences, not {OCCURRENCES}")
    return occ


def build_adversarial() -> dict:
    """The adversarial ``tracecanary.trace/v1`` document (see module doc)."""
    occ = _occurrences()
    events = []
    for rank in range(RANKS):
        for seq, o in enumerate(occ):
            skew = _SKEW_PATTERNS[seq % len(_SKEW_PATTERNS)][rank]
            events.append(
                {
                    "rank": rank,
                    "seq": seq,
                    "op": o["op"],
                    "bytes": o["bytes"],
                    "dtype": DTYPE,
                    "group": "world",
                    "phase": o["phase"],
                    "stream": o["stream"],
                    "ts_ns": o["t"] + skew,
                    "overlap_ns": o["overlap"],
                }
            )
    return {
        "format": TRACE_FORMAT,
        "meta": {
            "world_size": RANKS,
            "source": "tracecanary.synth.adversarial (deterministic, no randomness)",
            "clock_domains": [{"id": "node0", "ranks": list(range(RANKS)), "host": "synthetic"}],
            "notes": [
                "synthetic adversarial trace: queue-reset gaps and high-overlap tail windows arranged "
                "so that the isolated ranking differs from the workload ranking under config/backends.yaml",
                "all ranks read one clock: arrival skew is known from ts_ns",
            ],
        },
        "groups": [{"id": "world", "ranks": list(range(RANKS))}],
        "events": events,
    }
