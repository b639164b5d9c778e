"""The bridge between Snakemake ``script:`` adapters and the library.

Every ``scripts/<rule>.py`` is ``run_rule(snakemake)``: it runs the rule's stage (looked up
by rule name in ``tracecanary.campaign.stages``), logs to the rule's log file, then, when the
rule has a ``prov`` output, writes the provenance record there and stores every output in
the content-addressed store. A stage's ``TraceCanaryError`` (bad input, a claim that did not
hold) is one line, ``error: ...``, in the log and on the terminal, and the job exits with its
code without a Python traceback; any other exception is logged with its traceback and
re-raised. Either way Snakemake marks the job failed and removes its outputs.
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from typing import Any

from tracecanary.campaign.provenance import statement, write_statement
from tracecanary.campaign.stages import RECORDED_RULES, STAGES
from tracecanary.errors import TraceCanaryError

__all__ = ["PROVENANCE_OUTPUT", "run_rule"]

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


def run_rule(snakemake) -> None:
    """Run the job's stage (``STAGES[rule]``) and record its provenance (see module doc);
    the record says ``deterministic: false`` for the rules whose outputs are measurements
    (``RECORDED_RULES``)."""
    stage = STAGES[snakemake.rule]
    deterministic = snakemake.rule not in RECORDED_RULES
    log_path = snakemake.log[0] if len(snakemake.log) else None
    log = open(log_path, "w") if log_path else sys.stderr
    terminal = sys.stderr
    try:
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            try:
                stage(snakemake)
            except TraceCanaryError as err:
                failure = err
            except Exception:
                traceback.print_exc()
                raise
            else:
                failure = None
        if failure is not None:
            # one line where the user looks (the terminal) and in the log; no traceback
            line = f"error: {failure.one_line()}"
            for stream in {id(log): log, id(terminal): terminal}.values():
                print(line, file=stream, flush=True)
            raise SystemExit(failure.exit_code)
        prov = getattr(snakemake.output, PROVENANCE_OUTPUT, None)
        if prov is None:  # the manifest: it binds the records, it has none of its own
            return
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
        write_statement(prov, record, snakemake.config["store"])
    finally:
        if log is not sys.stderr:
            log.close()
