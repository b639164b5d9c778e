"""Both replayers side by side: our replayer's attempts (``replay-physical``, one column per
physical configuration) and upstream PARAM's (``replay-param``, column ``upstream-param``),
canary against full program, computed only from complete attempt archives.

One definition for both replayers, so the columns compare: per occurrence and recorded
pass the slowest rank's ``latency_ns`` (a collective is done when its last member is), per
occurrence the median over passes; p50/p99/mean weighted by the execution weights (us);
``op_time_ms`` = median over passes of the sum of those per-pass latencies (the time spent
inside ops, which PARAM can report; it records no start or end times). Per column and
program the median over repetitions; per column the canary/full ratio of each.
``ranking``: per metric, the columns ordered by the full program's value and by the
canary's, and whether the orders agree (medians only, no confidence intervals: the
physical report's decided rankings cover our configurations).

Barrier semantics differ and the output says so (``BARRIER_NOTE``): PARAM barriers the
op's group before and after every op, so its latencies exclude waiting for late ranks;
ours (native mode) include it.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from tracecanary.sim.metrics import weighted_quantile_values

UPSTREAM_COLUMN = "upstream-param"
SIDE_METRICS = ("p50", "p99", "mean", "op_time_ms")
BARRIER_NOTE = (
    "Barrier semantics differ: upstream PARAM barriers the op's process group before and "
    "after every op (commsTraceReplay.py:778, :828), so its latencies exclude waiting for "
    "late ranks and its passes are serialised op by op; our replayer's native mode issues "
    "ops back to back and its latencies include that wait. Compare rankings and "
    "canary/full ratios within a replayer, not absolute latencies across replayers."
)


def replayer_metrics(archive: str | Path) -> dict:
    """p50/p99/mean latency (us, weighted) and op_time_ms of one complete archive."""
    rows = pq.read_table(
        Path(archive) / "rows.parquet", columns=["occ", "iteration", "latency_ns", "weight"]
    ).to_pandas()
    per = rows.groupby(["occ", "iteration"], sort=True).agg(
        latency=("latency_ns", "max"), weight=("weight", "first")
    )
    occ = per.groupby(level="occ").agg(latency=("latency", "median"), weight=("weight", "first"))
    lat = occ["latency"].to_numpy(np.float64) / 1000.0
    w = occ["weight"].to_numpy(np.float64)
    p50, p99 = weighted_quantile_values(lat, w, [0.50, 0.99])
    op_time = per.groupby(level="iteration")["latency"].sum().to_numpy(np.float64)
    return {
        "p50": float(p50),
        "p99": float(p99),
        "mean": float(np.sum(lat * w) / np.sum(w)),
        "op_time_ms": float(np.median(op_time)) / 1e6,
    }


def _column(attempt: dict, archive: Path) -> str:
    if attempt.get("source") == "param":
        return UPSTREAM_COLUMN
    return (attempt.get("physical_config") or {}).get("name", "unknown")


def _program(attempt: dict) -> str | None:
    execution = ((attempt.get("input") or {}).get("export_fields") or {}).get("execution")
    return {"reduced": "canary", "full": "full"}.get(execution)


def side_by_side(attempts: list[str]) -> dict:
    """The side-by-side document from attempt archives of both replayers (see module doc);
    incomplete archives, and archives that do not say canary or full, are listed under
    ``excluded`` with the reason."""
    values: dict[str, dict[str, list[dict]]] = {}
    excluded = []
    for path in sorted(attempts):
        archive = Path(path)
        attempt = json.loads((archive / "attempt.json").read_text(encoding="utf-8"))
        program = _program(attempt)
        if attempt.get("status") != "complete" or program is None:
            why = attempt.get("reason") or "export.json does not say canary (reduced) or full"
            excluded.append({"attempt": str(path), "reason": str(why)})
            continue
        column = _column(attempt, archive)
        values.setdefault(column, {}).setdefault(program, []).append(replayer_metrics(archive))
    columns = {}
    for column, programs in sorted(values.items()):
        if set(programs) != {"canary", "full"}:
            continue
        med = {
            prog: {m: statistics.median(r[m] for r in runs) for m in SIDE_METRICS}
            for prog, runs in programs.items()
        }
        columns[column] = {
            "repetitions": {prog: len(runs) for prog, runs in sorted(programs.items())},
            "canary": med["canary"],
            "full": med["full"],
            "ratio": {
                m: (med["canary"][m] / med["full"][m]) if med["full"][m] else None
                for m in SIDE_METRICS
            },
        }
    ranking = {}
    for m in SIDE_METRICS:
        order = {
            prog: sorted(columns, key=lambda c, p=prog: (columns[c][p][m], c))
            for prog in ("canary", "full")
        }
        ranking[m] = {**order, "agree": order["canary"] == order["full"]}
    return {
        "columns": columns,
        "ranking": ranking,
        "excluded": excluded,
        "barrier_semantics": BARRIER_NOTE,
    }


def side_by_side_markdown(doc: dict) -> list[str]:
    """The section of the physical report (markdown lines)."""
    cols = list(doc["columns"])
    lines = ["## Both replayers: our replayer and upstream PARAM", "", doc["barrier_semantics"], ""]
    if not cols:
        return lines + ["No column has complete canary and full attempts.", ""]
    lines += ["| | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for m in SIDE_METRICS:
        unit = "ms" if m == "op_time_ms" else "us"
        name = m.removesuffix("_ms")
        for prog in ("canary", "full"):
            cells = [f"{doc['columns'][c][prog][m]:.1f}" for c in cols]
            lines.append(f"| {name} {prog} ({unit}) | " + " | ".join(cells) + " |")
        ratios = [doc["columns"][c]["ratio"][m] for c in cols]
        cells = ["-" if r is None else f"{r:.3f}" for r in ratios]
        lines.append(f"| {name} canary/full | " + " | ".join(cells) + " |")
    lines += ["", "Ranking of the columns (lowest first), full program vs canary:", ""]
    for m, r in doc["ranking"].items():
        verdict = "agree" if r["agree"] else "DIFFER"
        lines.append(
            f"- {m}: full {' < '.join(r['full'])}; canary {' < '.join(r['canary'])}: {verdict}"
        )
    for e in doc["excluded"]:
        lines.append(f"- excluded {e['attempt']}: {e['reason']}")
    return lines + [""]
