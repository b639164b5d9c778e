"""Everything ``tracecanary alphabeta`` computes, as bytes in memory.

``compute`` reads the inputs and TUNING logs, analyses every ladder and renders the JSON,
Markdown and PNG bytes; nothing touches the output paths until all of it succeeded
(``write_outputs`` then writes each file atomically and removes what it wrote if a later
write fails).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from tracecanary.alphabeta.analysis import AnalysisParams, analyze_ladder
from tracecanary.alphabeta.ladder import iter_ladders
from tracecanary.alphabeta.load import load_inputs
from tracecanary.alphabeta.plots import PLOT_KINDS, render_ladder_plots
from tracecanary.alphabeta.report import FORM_LABELS, build_document, render_markdown
from tracecanary.alphabeta.tuning import (
    TuningLog,
    merge_logs,
    parse_tuning,
    records_for_ladder,
)
from tracecanary.canonical import canonical_json_bytes, sha256_file, write_bytes_atomic
from tracecanary.errors import InputError
from tracecanary.limits import read_input

# Collectives NCCL logs TUNING algorithm records for (p2p-based ones never appear).
TUNED_COLLECTIVES = frozenset({"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"})


@dataclass
class Outputs:
    document: dict
    files: dict[str, bytes]  # path -> bytes, in write order (json, markdown, plots)


def _tuning_section(logs: list[TuningLog], names: list[str], digests: list[str]) -> dict:
    merged = merge_logs(logs)
    records = []
    for row in merged.itertuples(index=False):
        records.append(
            {
                "func": row.func,
                "bytes": int(row.bytes),
                "algorithm": row.algorithm,
                "protocol": row.protocol,
                "time_us": None if row.time_us != row.time_us else float(row.time_us),
                "form": FORM_LABELS[int(row.form)],
                "channels": list(row.channels),
                "n_lines": int(row.n_lines),
                "first_line": int(row.first_line),
                "log": names[[log.file for log in logs].index(row.file)],
            }
        )
    return {
        "logs": [
            {
                "name": name,
                "sha256": digest,
                "line_forms": {FORM_LABELS[k]: v for k, v in sorted(log.form_counts.items())},
                "nranks": list(log.nranks),
                "other_tuning_lines": log.other_tuning_lines,
                "n_records": int(len(log.records)),
            }
            for log, name, digest in zip(logs, names, digests, strict=True)
        ],
        "records": records,
    }


def compute(
    inputs: list[str],
    *,
    tuning_paths: list[str] | None,
    world_size: int | None,
    collective: str | None,
    params: AnalysisParams,
    json_path: str,
    markdown_path: str | None,
    plot_dir: str | None,
) -> Outputs:
    ladder_table, loaded, _runs = load_inputs(inputs, world_size=world_size, collective=collective)
    logs: list[TuningLog] = []
    for tpath in tuning_paths or []:
        p = Path(tpath)
        if not p.is_file():
            raise InputError("no such file", file=tpath, field="--tuning")
        text = read_input(p).decode("utf-8", errors="replace")
        logs.append(parse_tuning(text, file=tpath))
    merged = merge_logs(logs) if logs else None
    nranks_stated = sorted({n for log in logs for n in log.nranks})
    ladder_collectives = (
        set(ladder_table["collective"].unique()) if not ladder_table.empty else set()
    )
    eligible = ladder_collectives & TUNED_COLLECTIVES
    funcless_ok = len(eligible) == 1
    has_funcless = merged is not None and bool(merged["func"].isna().any())

    ladders = []
    for key, rows in iter_ladders(ladder_table):
        notes: list[str] = []
        tuning = None
        if merged is not None and len(merged):
            if nranks_stated and int(key["world_size"]) not in nranks_stated:
                notes.append(
                    f"TUNING log states nranks {nranks_stated}, not this ladder's {int(key['world_size'])}: "
                    "not applied"
                )
            elif key["collective"] in TUNED_COLLECTIVES:
                if has_funcless and not funcless_ok:
                    notes.append(
                        "TUNING records without a function name (NCCL 2.20-2.22) not attributed: the "
                        "inputs hold several tuned collectives"
                    )
                tuning = records_for_ladder(
                    merged,
                    collective=key["collective"],
                    world_size=int(key["world_size"]),
                    funcless_applies=funcless_ok and key["collective"] in eligible,
                )
                if tuning.empty:
                    notes.append("the TUNING log(s) hold no record for this collective")
                    tuning = None
            else:
                notes.append(f"NCCL logs no TUNING algorithm records for {key['collective']}")
        ladders.append(
            analyze_ladder(
                key,
                rows,
                params=params,
                source_name=loaded[int(key["input"])].name,
                tuning=tuning,
                tuning_notes=notes,
            )
        )
    if not ladders:
        raise InputError("no ladder rows in the inputs")
    tuning_section = None
    if logs:
        tuning_section = _tuning_section(
            logs, [Path(p).name for p in tuning_paths], [sha256_file(p) for p in tuning_paths]
        )
    document = build_document(
        parameters=params.as_dict(),
        inputs=[
            {
                "index": item.index,
                "name": item.name,
                "kind": item.kind,
                "sha256": item.sha256,
                "runs": item.runs,
                "notes": item.notes,
            }
            for item in loaded
        ],
        tuning=tuning_section,
        ladders=ladders,
    )
    files: dict[str, bytes] = {json_path: canonical_json_bytes(document)}
    plot_links: dict[str, list[tuple[str, str]]] = {}
    plot_files: dict[str, bytes] = {}
    if plot_dir is not None:
        md_dir = Path(markdown_path).parent if markdown_path else Path(".")
        for ladder in document["ladders"]:
            pngs = render_ladder_plots(ladder, saturation_fraction=params.saturation_fraction)
            links = []
            for kind, (name, data) in zip(PLOT_KINDS, pngs.items(), strict=True):
                target = str(Path(plot_dir) / name)
                plot_files[target] = data
                links.append((kind, Path(os.path.relpath(target, md_dir)).as_posix()))
            plot_links[ladder["id"]] = links
    if markdown_path is not None:
        files[markdown_path] = render_markdown(document, plot_links).encode("utf-8")
    files.update(plot_files)
    return Outputs(document=document, files=files)


def write_outputs(files: dict[str, bytes]) -> None:
    """Write each file atomically; on any failure remove the files this call wrote."""
    written: list[str] = []
    current = None
    try:
        for path, data in files.items():
            current = path
            write_bytes_atomic(path, data)
            written.append(path)
    except BaseException as err:
        for path in written:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        if isinstance(err, OSError):
            raise InputError(f"cannot write output: {err.strerror or err}", file=current) from None
        raise
