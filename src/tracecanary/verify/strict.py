"""``compile --strict``: verify a freshly compiled canary against its source before
anything is written, and mark it ``verified`` only when every check passed."""

from __future__ import annotations

from tracecanary.canonical import sha256_bytes, sha256_file
from tracecanary.compile.canary import canary_bytes
from tracecanary.errors import ClaimFailed
from tracecanary.program import Program
from tracecanary.verify.behavior import describe_failures, verify_behavior
from tracecanary.verify.marking import mark_verified, tolerances_digest


class StrictVerificationFailed(ClaimFailed):
    """The canary's verification claim is not ``verified`` (exit 1). ``failures``: the
    failed checks, one line each (``describe_failures``), for the caller to show;
    ``verification``: the verification document (None when not at hand)."""

    def __init__(
        self, message: str, *, failures: list[str], verification: dict | None = None, **where
    ) -> None:
        super().__init__(message, **where)
        self.failures = failures
        self.verification = verification


def strict_gate(source: Program, canary: dict, backends, tolerances, *, source_file: str) -> dict:
    """Verify ``canary`` against ``source`` (read from ``source_file``) under the loaded
    ``backends`` and ``tolerances`` (``verify_behavior``).

    Returns the canary marked ``verified`` (``mark_verified``: the claim reasons name the
    source, backends and tolerances digests). Any other claim (rejected, partial,
    behaviorally_unverified) raises StrictVerificationFailed (exit 1) carrying the failed
    checks; the caller writes nothing."""
    verification = verify_behavior(
        source,
        canary,
        backends,
        tolerances,
        source_digest=sha256_file(source_file),
        canary_digest=sha256_bytes(canary_bytes(canary)),
    )
    if verification["claim"] != "verified":
        failed = verification["summary"]["failed"]
        changed = len(verification["ranking"]["changed"])
        obstacle = verification["source"].get("skew_obstacle")
        cause = f"; behavior not judged: {obstacle}" if obstacle else ""
        raise StrictVerificationFailed(
            f"--strict: verification claim {verification['claim']} ({failed} failed checks, "
            f"{changed} changed ranking decisions){cause}; no canary written",
            failures=list(describe_failures(verification)),
            verification=verification,
            file=source_file,
            field="strict",
        )
    return mark_verified(canary, verification, tolerances_sha256=tolerances_digest(tolerances))
