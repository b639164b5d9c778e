"""Marking a canary ``verified``: the one place a canary's claim is raised to
``verified``, always together with the receipt of the verification that allowed it."""

from __future__ import annotations

from tracecanary.canonical import canonical_json_bytes, sha256_bytes
from tracecanary.compile.execution import finalize
from tracecanary.verify.claims import MET_REPRODUCIBILITY, MET_WORDS, VERIFIED


def tolerances_digest(tolerances) -> str:
    """SHA-256 of the canonical JSON of the tolerances' content (what a receipt names)."""
    return sha256_bytes(canonical_json_bytes(tolerances.content))


def mark_verified(canary: dict, verification: dict, *, tolerances_sha256: str) -> dict:
    """The canary with claim ``verified`` and the receipt of that verification (what was
    replayed against what); stats recomputed so byte counts stay exact. ``canary`` is
    not changed. Raises ValueError unless ``verification`` itself claims ``verified``."""
    if verification["claim"] != VERIFIED:
        raise ValueError("only a verified verification can mark a canary verified")
    doc = dict(canary)
    doc["stats"] = dict(canary["stats"])  # finalize() edits these in place
    doc["execution"] = dict(canary["execution"]) if canary.get("execution") else None
    doc["claim"] = VERIFIED
    met = (verification.get("standard") or {}).get("met")
    behavior = (
        f"behavior {MET_WORDS[met]} (95% block bootstrap of the source)"
        if met == MET_REPRODUCIBILITY
        else "behavior within tolerances"
    )
    doc["claim_reasons"] = [
        f"verified by tracecanary verify-behavior: commitments recomputed, full coverage, {behavior} "
        f"and rankings preserved against source sha256 {verification['source']['sha256']} "
        f"under backends sha256 {verification['backends']['sha256']} and tolerances sha256 {tolerances_sha256}"
    ]
    return finalize(doc)
