"""The claim words and the rules that pick one, shared by the compiler and the verifier.

A canary's ``claim`` is one of ``CLAIMS``:

- ``unverified``: compiled, not yet judged (only the behavior verifier writes ``verified``);
- ``behaviorally_unverified``: behavior cannot be judged because the source's cross-rank
  skew is unknown, or known less precisely than the canary's skew budget
  (``skew_obstacle`` says which, with the ways out);
- ``partial``: built from a prefix of the source;
- ``verified``: commitments recomputed, coverage full, behavior within tolerance and
  ranking preserved;
- ``rejected``: the verifier found a mismatch or a failed check.

The verifier's ``behavior`` status is ``pass`` | ``fail`` | ``BEHAVIOR_UNJUDGED``.
"""

from __future__ import annotations

from tracecanary.clocks.status import too_uncertain_message, unknown_skew_message

VERIFIED = "verified"
UNVERIFIED = "unverified"
BEHAVIORALLY_UNVERIFIED = "behaviorally_unverified"
PARTIAL = "partial"
REJECTED = "rejected"
CLAIMS = (VERIFIED, UNVERIFIED, BEHAVIORALLY_UNVERIFIED, PARTIAL, REJECTED)
BEHAVIOR_UNJUDGED = "unverified"

NOT_YET_VERIFIED = "not yet verified: only the behavior verifier writes 'verified'"

# The standard a behaviour check is held to (config key ``verification_standard``,
# ``--standard``): the fixed tolerances (the default), or the source's own
# reproducibility (``verify.reproducibility``): a check also passes when the canary's
# value lies inside the source's bootstrap interval of that statistic.
STRICT = "strict"
REPRODUCIBILITY = "reproducibility"
STANDARDS = (STRICT, REPRODUCIBILITY)
DEFAULT_STANDARD = STRICT
MET_FIXED = "fixed_tolerances"
MET_REPRODUCIBILITY = "source_reproducibility"
MET_WORDS = {
    MET_FIXED: "verified within the fixed tolerances",
    MET_REPRODUCIBILITY: "verified within the source's reproducibility",
}


def standard_met(checks: list[dict]) -> str | None:
    """Which standard every behaviour check meets: the fixed tolerances, else the
    source's reproducibility (each failing check's canary value inside its source
    interval), else None."""
    if all(c["pass"] for c in checks):
        return MET_FIXED
    if all(c["pass"] or (c.get("reproducibility") or {}).get("within") for c in checks):
        return MET_REPRODUCIBILITY
    return None


def behavior_passes(met: str | None, standard: str) -> bool:
    """Whether behaviour passes under the chosen ``standard``, given what it ``met``."""
    if standard == STRICT:
        return met == MET_FIXED
    return met is not None


def skew_budget_ns(budget: dict) -> int:
    """The tightest skew budget a canary's ``budget`` document allows anywhere (the
    field budget or any per-signature override)."""
    values = [int(budget["skew_ns"])]
    values += [int(o["skew_ns"]) for o in budget.get("overrides", {}).values() if "skew_ns" in o]
    return min(values)


def skew_obstacle(
    skew_known: bool, skew_reason: str | None, uncertainty_ns: int, budget_ns: int
) -> str | None:
    """Why behavior cannot be judged on the source's skew, or None when it can: skew
    unknown, or its uncertainty above the skew budget the canary is held to."""
    if not skew_known:
        return unknown_skew_message(skew_reason)
    if uncertainty_ns > budget_ns:
        return too_uncertain_message(uncertainty_ns, budget_ns)
    return None


def compile_claim(*, partial: bool, obstacle: str | None) -> str:
    """The compiler's claim: partial (prefix), behaviorally_unverified (skew obstacle),
    else unverified."""
    if partial:
        return PARTIAL
    return BEHAVIORALLY_UNVERIFIED if obstacle is not None else UNVERIFIED


def verification_claim(statuses: dict) -> str:
    """The verifier's claim from its separate ``statuses`` (never a blended verdict)."""
    commitments_ok = statuses["commitments"] == "verified"
    if (
        commitments_ok
        and statuses["coverage"] == "full"
        and statuses["behavior"] == "pass"
        and statuses["ranking"] == "preserved"
    ):
        return VERIFIED
    if statuses["coverage"] == "partial" and commitments_ok:
        return PARTIAL
    if statuses["behavior"] == BEHAVIOR_UNJUDGED and commitments_ok:
        return BEHAVIORALLY_UNVERIFIED
    return REJECTED
