"""The bridge between Snakemake ``script:`` adapters and the library.

``run_rule(snakemake, work, deterministic=...)`` runs one stage function, logs to the
rule's log file, then writes the provenance record (output ``prov``) and stores every
output in the content-addressed store. A stage error is written to the log as one line
and re-raised, so Snakemake marks the job failed and removes its outputs.
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Callable
from typing import Any

from tracecanary.errors import TraceCanaryError
from tracecanary.campaign.provenance import statement, write_statement

PROVENANCE_OUTPUT = "prov"


def _named(namedlist) -> dict[str, Any]:
    items = dict(namedlist.items())
    if items:
        return {k: (list(v) if isinstance(v, list | tuple) else v) for k, v in items.items()}
    return {f"_{i}": v for i, v in enumerate(namedlist)}


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


def run_rule(
    snakemake, work: Callable[[], Any], *, deterministic: bool = True, store: str | None = None
) -> Any:
    """Run ``work`` for a Snakemake job and record its provenance (see module doc)."""
    log_path = snakemake.log[0] if len(snakemake.log) else None
    log = open(log_path, "w") if log_path else sys.stderr
    try:
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            try:
                result = work()
            except TraceCanaryError as err:
                print(f"error: {err.one_line()}")
                raise
            except Exception:
                traceback.print_exc()
                raise
        outputs = {k: v for k, v in _named(snakemake.output).items() if k != PROVENANCE_OUTPUT}
        params = {k: _jsonable(v) for k, v in _named(snakemake.params).items()}
        record = statement(
            rule=snakemake.rule,
            wildcards=dict(snakemake.wildcards.items()),
            params=params,
            inputs=_named(snakemake.input),
            outputs=outputs,
            deterministic=deterministic,
        )
        prov = getattr(snakemake.output, PROVENANCE_OUTPUT)
        if store is None:
            store = snakemake.config.get("store", "results/cas")
        write_statement(prov, record, store)
        return result
    finally:
        if log is not sys.stderr:
            log.close()


def cli(argv: list[str], ok_codes: tuple[int, ...] = (0,)) -> int:
    """Run one ``tracecanary`` stage in-process; raise unless its exit code is in
    ``ok_codes`` (a gate that did not hold, exit 1, is a recorded result for the
    verification and compare rules; its one-line error is already in the rule's log)."""
    from tracecanary.cli import main

    code = main([str(a) for a in argv])
    if code not in ok_codes:
        raise SystemExit(f"tracecanary {argv[0]} exited {code}")
    return code
