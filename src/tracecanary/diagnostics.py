"""What failed in a checked claim, its numbers and the fix: the one place that turns a
verification, a search log, a commitment mismatch or a gate verdict into failed checks.

Two consumers: the one-line messages of exit 1 (``verification_cause``,
``search_cause``) and ``--diagnostics-json PATH`` (``Diagnostics``), a
``tracecanary.diagnostics/v1`` document (``formats/schemas/diagnostics.schema.json``)
written whether the claim held (exit 0, no failed checks) or not (exit 1). Bad input
(exit 2) writes no diagnostics: there is no claim to diagnose, and nothing partial is left.

Every failed check carries ``check`` (what was checked), ``message``, its numbers
(``observed``, ``expected``, ``limit`` where they exist; ``None`` where not) and ``fix``.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator

from tracecanary.errors import ClaimFailed
from tracecanary.formats.ids import DIAGNOSTICS_FORMAT

FIX_BEHAVIOR = (
    "keep more of the source: a smaller timing budget (compile --budget / search --budgets; "
    "0 = lossless) or more executed repetitions (--max-executed-repeats); if the tolerance "
    "is stricter than you need, raise it in a tolerances YAML (--tolerances T)"
)
FIX_RANKING = (
    "keep more of the source (smaller budget, more executed repetitions); or, when the "
    "configurations are near-equal, raise tie_tolerance in a tolerances YAML (--tolerances T)"
)
FIX_COMMITMENTS = (
    "the canary was not compiled from this source, or was edited: recompile it from this "
    "source (tracecanary compile SOURCE ...) and verify again"
)
FIX_COVERAGE = "compile without --prefix, so the canary covers the whole source"
FIX_GATE = (
    "the candidate regressed beyond the threshold: keep the baseline configuration, or, "
    "if the change is intended, raise the threshold (--threshold METRIC=N%)"
)
FIX_REPORT = (
    "the report does not recompute from this input: replay it again "
    "(tracecanary replay INPUT ...) or give the input it was made from (--input)"
)
FIX_PHYSICAL = (
    "a rank failed or timed out: read the attempt's rank logs under the output directory, "
    "fix the cause (ports, memory, backend) and run again"
)
FIX_READ = "read the message: it names the file, record and field that did not hold"


def failed_check(
    check: str,
    message: str,
    *,
    fix: str,
    observed=None,
    expected=None,
    limit=None,
    config: str | None = None,
) -> dict:
    """One failed check (the schema's ``failed_checks`` item)."""
    return {
        "check": check,
        "config": config,
        "message": message,
        "observed": observed,
        "expected": expected,
        "limit": limit,
        "fix": fix,
    }


def skew_check(obstacle: str) -> dict:
    """A skew obstacle (``verify.claims.skew_obstacle``: ``cause: ways out``) as a failed
    check whose fix is the ways out."""
    return failed_check("skew", obstacle, fix=obstacle.split(": ", 1)[-1])


def verification_checks(doc: dict) -> list[dict]:
    """The failed checks of a ``tracecanary.verification/v1`` document, with numbers and
    fixes: the skew obstacle (its message names the ways out), commitments, coverage,
    each failed behavior check and each changed ranking decision."""
    out: list[dict] = []
    obstacle = doc["source"].get("skew_obstacle")
    if obstacle:
        out.append(skew_check(obstacle))
    statuses = doc["statuses"]
    if statuses.get("commitments") != "verified":
        out.append(
            failed_check(
                "commitments",
                f"commitments {statuses.get('commitments')}",
                fix=FIX_COMMITMENTS,
            )
        )
    if statuses.get("coverage") == "partial":
        out.append(failed_check("coverage", "coverage partial", fix=FIX_COVERAGE))
    for c in doc["checks"]:
        if c["pass"]:
            continue
        out.append(
            failed_check(
                c["metric"],
                f"{c['config']} {c['metric']}: source {c['source']}, canary {c['canary']}",
                config=c["config"],
                observed=c["canary"],
                expected=c["source"],
                limit=c["tolerance"],
                fix=FIX_BEHAVIOR,
            )
        )
    for d in doc["ranking"]["changed"]:
        out.append(
            failed_check(
                f"ranking.{d['metric']}",
                f"ranking {d['metric']} {d['a']} vs {d['b']}: source {d['source']}, "
                f"canary {d['canary']}",
                observed=d["canary"],
                expected=d["source"],
                fix=FIX_RANKING,
            )
        )
    return out


def most_failed(checks: list[dict], limit: int = 3) -> str:
    """``"p99 (4), mean (2)"``: the check names that failed most often, by count."""
    counts = Counter(c["check"] for c in checks)
    return ", ".join(f"{name} ({n})" for name, n in counts.most_common(limit))


def verification_cause(doc: dict) -> str:
    """One clause: why a verification is not ``verified`` and the fix (the first
    failed check's fix; a skew obstacle comes first since it stops all judging)."""
    checks = verification_checks(doc)
    if not checks:
        return "no failed check recorded"
    return f"most failed: {most_failed(checks)}; fix: {checks[0]['fix']}"


def search_log_checks(log: dict) -> list[dict]:
    """Failed checks over every candidate of a search log (``failed_checks`` entries
    are ``config:metric``), plus each compile refusal."""
    out: list[dict] = []
    for entry in log["candidates"]:
        settings = entry.get("settings", {})
        for item in entry.get("failed_checks", []):
            config, _, metric = item.partition(":")
            out.append(
                failed_check(
                    metric,
                    f"candidate {settings}: {item} outside its tolerance",
                    config=config,
                    fix=FIX_BEHAVIOR,
                )
            )
        reason = entry.get("reason", "")
        if reason.startswith("compile failed closed"):
            out.append(
                failed_check(
                    "compile",
                    f"candidate {settings}: {reason}",
                    fix="give larger budgets in --budgets, or include 0 (lossless)",
                )
            )
    return out


def search_cause(log: dict, skew_obstacle: str | None) -> str:
    """Why no search candidate verified, and the fix: the skew obstacle when behavior
    could not be judged, else the checks that failed most and how to keep them."""
    if skew_obstacle:
        return f"behavior not judged: {skew_obstacle}"
    checks = search_log_checks(log)
    if not checks:
        return "no candidate was judged"
    return f"checks that failed most: {most_failed(checks)}; fix: {checks[0]['fix']}"


def diagnostics_document(command: str, *, exit_code: int, summary: str, checks: list) -> dict:
    """The ``tracecanary.diagnostics/v1`` document."""
    return {
        "format": DIAGNOSTICS_FORMAT,
        "command": command,
        "exit_code": exit_code,
        "claim_held": exit_code == 0,
        "summary": summary,
        "failed_checks": checks,
        "fixes": sorted({c["fix"] for c in checks}),
    }


class Diagnostics:
    """The failed checks a command collects; written by ``diagnostics_to``."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.checks: list[dict] = []
        self.summary = "claim held"

    def fail(self, checks: list[dict], summary: str) -> None:
        """Record failed checks and the one-line summary of the failure (a failure with no
        itemized check is recorded as one ``claim`` check, so ``exit_code`` is 1)."""
        self.checks.extend(checks or [failed_check("claim", summary, fix=FIX_READ)])
        self.summary = summary

    @property
    def exit_code(self) -> int:
        """1 when a check failed, else 0."""
        return 1 if self.checks else 0


@contextlib.contextmanager
def diagnostics_to(path: str | None, command: str) -> Iterator[Diagnostics]:
    """Collect a command's failed checks; on leaving, write them to ``path`` (when given):
    on a normal exit (exit 0, or 1 when checks were recorded) and on ``ClaimFailed``
    (exit 1; the error's line is the summary, and it is re-raised). Any other error
    (bad input, exit 2) writes nothing."""
    diag = Diagnostics(command)
    try:
        yield diag
    except ClaimFailed as err:
        if path:
            checks = diag.checks or [
                failed_check("claim", err.one_line(), fix=getattr(err, "fix", None) or FIX_READ)
            ]
            _write(
                path,
                diagnostics_document(command, exit_code=1, summary=err.one_line(), checks=checks),
            )
        raise
    if path:
        _write(
            path,
            diagnostics_document(
                command, exit_code=diag.exit_code, summary=diag.summary, checks=diag.checks
            ),
        )


def _write(path: str, doc: dict) -> None:
    from tracecanary.canonical import write_json
    from tracecanary.formats.schemas import validate

    validate(doc, "diagnostics", file=path)
    write_json(path, doc)
