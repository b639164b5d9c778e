"""The skew decision: is cross-rank arrival skew known, how well, and if not, why.

Decided once per trace (``decide_skew``) and carried as a declared field: the merged
trace's ``meta.skew``, the ingest sidecar's ``skew`` and ``Program.skew_uncertainty_ns`` /
``skew_known`` / ``skew_reason``. Consumers read the field; nothing re-derives it.

Guarantees:
- skew is ``known`` only when every captured rank reads one clock (one declared clock
  domain, or a calibration that mapped them all onto one reference) and every group was
  captured on all its ranks; otherwise ``unknown`` with the reason, never zero;
- a known skew carries ``uncertainty_ns`` (>= 0): the bound on the error of any arrival
  difference between two ranks (0 for one shared clock);
- every message about an unknown or too-uncertain skew ends with ``WAYS_OUT``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracecanary.errors import SchemaError

SHARED_CLOCK_METHOD = "one declared clock domain"
NO_CALIBRATION = "no clock calibration was given"
WAYS_OUT = (
    "give a clock calibration (tracecanary merge --calibration CLOCKS.json) or derive one "
    "from the trace (tracecanary calibrate-clocks CAPTURE... -o CLOCKS.json); "
    "see docs/calibration.md"
)


@dataclass(frozen=True)
class SkewStatus:
    """``known`` with ``uncertainty_ns`` (and where it came from), or unknown with ``reason``."""

    known: bool
    reason: str | None = None
    uncertainty_ns: int | None = None
    reference: str | None = None
    method: str | None = None
    calibration_sha256: str | None = None

    def to_json(self) -> dict:
        """The declared field (trace ``meta.skew``, sidecar ``skew``)."""
        if not self.known:
            return {"status": "unknown", "reason": self.reason or NO_CALIBRATION}
        out = {"status": "known", "uncertainty_ns": int(self.uncertainty_ns or 0)}
        for key in ("reference", "method", "calibration_sha256"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out

    @staticmethod
    def from_json(doc: dict) -> SkewStatus:
        if doc["status"] == "known":
            return SkewStatus(
                True,
                uncertainty_ns=int(doc["uncertainty_ns"]),
                reference=doc.get("reference"),
                method=doc.get("method"),
                calibration_sha256=doc.get("calibration_sha256"),
            )
        return SkewStatus(False, reason=doc.get("reason") or NO_CALIBRATION)


def shared_clock() -> SkewStatus:
    return SkewStatus(True, uncertainty_ns=0, reference="shared clock", method=SHARED_CLOCK_METHOD)


def decide_skew(
    clocks: dict[int, str],
    ranks_seen: list[int],
    groups: dict[str, list[int]],
    declared: dict | None = None,
    *,
    file: str | None = None,
) -> SkewStatus:
    """The skew status of a trace whose captured ranks ``ranks_seen`` read ``clocks``
    (rank -> clock domain id). ``declared`` is the trace's own ``meta.skew`` (a merged
    trace states how its clocks were mapped): honoured when consistent, refused
    (SchemaError naming ``meta/skew``) when it claims one clock over several domains."""
    domains = sorted({clocks[r] for r in ranks_seen})
    seen = set(ranks_seen)
    partial = sorted(g for g, ranks in groups.items() if any(r not in seen for r in ranks))
    if declared is not None and declared.get("status") == "known" and len(domains) > 1:
        raise SchemaError(
            f"meta.skew says skew is known, but the ranks read {len(domains)} clocks "
            f"({', '.join(domains[:4])})",
            file=file,
            field="meta/skew",
        )
    if declared is not None:
        status = SkewStatus.from_json(declared)
    elif len(domains) <= 1:
        status = shared_clock()
    else:
        status = SkewStatus(
            False, reason=f"ranks read {len(domains)} different clocks and {NO_CALIBRATION}"
        )
    if partial:
        reason = f"group(s) {', '.join(partial)} were captured on only some of their ranks"
        joined = reason if status.known else f"{status.reason}; {reason}"
        status = SkewStatus(False, reason=joined)
    return status


def calibrated(uncertainty_ns: int, reference: str, method: str, sha256: str) -> SkewStatus:
    """The status of timestamps mapped through a calibration onto ``reference``."""
    return SkewStatus(
        True,
        uncertainty_ns=int(uncertainty_ns),
        reference=reference,
        method=method,
        calibration_sha256=sha256,
    )


def unknown_skew_message(reason: str | None) -> str:
    """One line: the cause and the two ways out."""
    return f"cross-rank skew unknown ({reason or NO_CALIBRATION}): {WAYS_OUT}"


def too_uncertain_message(uncertainty_ns: int, budget_ns: int) -> str:
    return (
        f"skew uncertainty {uncertainty_ns} ns exceeds the skew budget {budget_ns} ns: "
        f"tighten the calibration or raise the skew budget; {WAYS_OUT}"
    )
