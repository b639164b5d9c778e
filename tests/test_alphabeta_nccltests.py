# ruff: noqa: UP031 -- the synthetic printer mirrors nccl-tests' printf formats on purpose
"""nccl-tests parsing: every shipped real sample, and the layout variants nccl-tests prints.

Real samples are read from ../shared/nccltests_samples (see SOURCES.md there). The variants
(-N cycles, -S timestamps, -I per-iteration columns, mpirun tags, interleaved NCCL INFO
lines, concatenated runs, -J JSON) are synthetic: ``synth_run`` prints rows with the
printf formats of NVIDIA/nccl-tests src/util.cu (``%12li  %12li  %8s  %6s  %6s`` preamble,
``  %7s  %6s  %6s  %6g`` per placement, getFloatStr widths 7/6/6), and ``synth_json`` writes
the keys of its JSON writer (version 3; booleans as strings, NaN as "nan").
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tracecanary.alphabeta.ladder import busbw_factor
from tracecanary.alphabeta.load import load_inputs
from tracecanary.alphabeta.nccltests import (
    recomputed_algbw_gbps,
    recomputed_busbw_gbps,
    rows_per_cycle,
)
from tracecanary.alphabeta.nccltests_json import parse_json
from tracecanary.alphabeta.nccltests_text import half_ulp, parse_stdout
from tracecanary.errors import ImportRefused

SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "nccltests_samples"
needs_samples = pytest.mark.skipif(
    not SAMPLES.is_dir(), reason="../shared/nccltests_samples is absent (real nccl-tests outputs)"
)

# file -> (collective, world size, printed data lines, how the collective was determined)
REAL = {
    "gcp_a3mega_h100_16rank_all_reduce.txt": ("all_reduce", 16, 31, "data"),
    "polaris_a100_8rank_all_reduce.txt": ("all_reduce", 8, 29, "data"),
    "polaris_a100_8rank_all_gather.txt": ("all_gather", 8, 29, "file_name"),
    "polaris_a100_8rank_alltoall.txt": ("all_to_all", 8, 29, "file_name"),
}

PROGRAM = {
    "all_reduce": "all_reduce_perf",
    "all_gather": "all_gather_perf",
    "reduce_scatter": "reduce_scatter_perf",
    "all_to_all": "alltoall_perf",
    "broadcast": "broadcast_perf",
    "reduce": "reduce_perf",
    "sendrecv": "sendrecv_perf",
    "scatter": "scatter_perf",
    "gather": "gather_perf",
}
PER_RANK = ("all_gather", "reduce_scatter", "all_to_all", "scatter", "gather")
DATA_MOVING = ("all_gather", "all_to_all", "broadcast", "sendrecv", "scatter", "gather")
ROOTED = ("broadcast", "reduce", "scatter", "gather")


# --------------------------------------------------------------------------- synthetic printer


def float_str(value: float, width: int) -> str:
    """nccl-tests getFloatStr: %.2f, then %.1f, then %.0f, then exponent form, to fit width."""
    for fmt in (f"%{width}.2f", f"%{width}.1f", f"%{width}.0f"):
        text = fmt % value
        if len(text) <= width:
            return text
    return ("%*.1e" if width >= 7 else "%*.0e") % (width, value)


def _count(collective: str, size: int, n: int) -> int:
    return size // 4 // n if collective in PER_RANK else size // 4


def synth_run(
    collective: str,
    world_size: int,
    sizes: list[int],
    times: list[list[tuple[float, float]]],
    *,
    wrong: object = 0,
    per_iter: bool = False,
    stamp: bool = False,
    named: bool = True,
    tag: str = "",
    info_lines: bool = False,
    footer: bool = True,
) -> str:
    """One nccl-tests run; ``times[c][i]`` = (out-of-place us, in-place us) of size i in cycle c."""
    redop = "none" if collective in DATA_MOVING else "sum"
    root = 0 if collective in ROOTED else -1
    step = 2
    lines = []
    if named:
        lines += [
            "# nccl-tests version 2.17.6 nccl-headers=22703 nccl-library=22703",
            f"# Collective test starting: {PROGRAM[collective]}",
        ]
    lines += [
        f"# nThread 1 nGpus 1 minBytes {sizes[0]} maxBytes {sizes[-1]} step: {step}(factor) warmup iters: 1 "
        f"iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0",
        "#",
        "# Using devices",
    ]
    for r in range(world_size):
        lines.append(
            f"#  Rank {r:2d} Group  0 Pid {1000 + r:6d} on     host{r // 8} device {r % 8:2d} [0000:{r:02x}:00] NVIDIA H100"
        )
        if info_lines and r == 0:
            lines.append("host0:1000:1000 [0] NCCL INFO NCCL version 2.27.3+cuda12.9")
    lines.append("#")
    if per_iter:
        lines.append(
            "# size count type redop root time algbw busbw #wrong i_min i_max i_p99 i_cv% time algbw busbw #wrong i_min i_max i_p99 i_cv%"
            + (" timestamp" if stamp else "")
        )
    else:
        lines.append(
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
            + (" timestamp" if stamp else "")
        )
    lines.append(
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)"
    )
    factor = busbw_factor(collective, world_size)
    busbws = []
    for cycle in times:
        for size, (t_oop, t_ip) in zip(sizes, cycle, strict=True):
            text = "%12li  %12li  %8s  %6s  %6s" % (
                size,
                _count(collective, size, world_size),
                "float",
                redop,
                "%6i" % root,
            )
            for t in (t_oop, t_ip):
                alg = size / 1e3 / t
                bus = alg * factor
                busbws.append(bus)
                w = "    N/A" if wrong is None else "  %6g" % wrong
                text += "  %7s  %6s  %6s%s" % (
                    float_str(t, 7),
                    float_str(alg, 6),
                    float_str(bus, 6),
                    w,
                )
                if per_iter:
                    text += "  %7s  %7s  %7s  %7s" % (
                        float_str(t * 0.9, 7),
                        float_str(t * 1.1, 7),
                        float_str(t * 1.05, 7),
                        float_str(1.5, 7),
                    )
            if stamp:
                text += "%21s" % "2025-10-28 12:34:56"
            lines.append(text)
            if info_lines:
                lines.append(
                    f"host0:1000:1001 [0] NCCL INFO AllReduce: {size} Bytes -> Algo RING proto SIMPLE channel{{Lo..Hi}}={{0..3}}"
                )
    if footer:
        lines += [
            "# Out of bounds values : 0 OK",
            "# Avg bus bandwidth    : %g " % np.mean(busbws),
            "#",
        ]
        if named:
            lines.append(f"# Collective test concluded: {PROGRAM[collective]}")
    lines.append("")
    return "\n".join(tag + line for line in lines)


def ladder_times(sizes, *, alpha=20.0, beta_gbps=100.0, cycles=1, jitter=0.0):
    rng = np.random.default_rng(7)
    return [
        [
            (
                alpha + s / (beta_gbps * 1e3) + jitter * rng.random(),
                alpha + s / (beta_gbps * 1e3) + jitter * rng.random(),
            )
            for s in sizes
        ]
        for _ in range(cycles)
    ]


SIZES = [1 << k for k in range(10, 21)]  # 1 KiB .. 1 MiB, 11 rows per cycle


def synth_json(
    collective: str,
    world_size: int,
    sizes: list[int],
    times,
    *,
    version: int = 3,
    typo: bool = False,
) -> bytes:
    factor = busbw_factor(collective, world_size)
    redop = "none" if collective in DATA_MOVING else "sum"
    results, busbws = [], []
    for cycle in times:
        for size, (t_oop, t_ip) in zip(sizes, cycle, strict=True):
            rec = {
                "size": size,
                "count": _count(collective, size, world_size),
                "type": "float",
                "redop": redop,
                "root": "    -1",
            }
            for key, t in (("out_of_place", t_oop), ("in_place", t_ip)):
                alg = size / 1e3 / t
                busbws.append(alg * factor)
                rec[key] = {
                    "time": round(t, 6),
                    "alg_bw": round(alg, 6),
                    "bus_bw": round(alg * factor, 6),
                    "nwrong": 0.0,
                }
            if version >= 2:
                rec["out_of_place_per_iter"] = {
                    "skipped_iterations": 0,
                    "min_us": 1.0,
                    "max_us": 2.0,
                    "avg_us": 1.5,
                    "p50_us": 1.5,
                    "p95_us": 2.0,
                    "p99_us": 2.0,
                    "stdev_us": "nan",
                    "cv_pct": "nan",
                    "times_us": [1.0, 2.0],
                }
            rec["actual_iterations"] = 20
            rec["experiment_name"] = ""
            results.append(rec)
    avg_key, bw_key = (
        ("average_bus_bandwidith", "bandwidith") if typo else ("average_bus_bandwidth", "bandwidth")
    )
    doc = {
        "version": version,
        "start_time": "2025-10-17 10:00:00",
        "args": [
            f"./build/{PROGRAM[collective]}",
            "-b",
            str(sizes[0]),
            "-e",
            str(sizes[-1]),
            "-f",
            "2",
            "-J",
            "out.json",
        ],
        "env": ["NCCL_DEBUG=WARN"],
        "nccl_version": 22703,
        "config": {
            "nthreads": 1,
            "ngpus": world_size,
            "minimum_bytes": sizes[0],
            "maximum_bytes": sizes[-1],
            "step_factor": 2,
            "warmup_iters": 1,
            "iterations": 20,
            "aggregated_iterations": 1,
            "validation": 1,
            "graph": 0,
            "blocking_collectives": "false",
            "per_iter_timing": "true",
            "per_iter_skip": 0,
            "parallel_init": "false",
            "devices": [
                {
                    "rank": 0,
                    "group": 0,
                    "pid": 1,
                    "hostname": "h",
                    "device": 0,
                    "device_hex": "0000:04:00",
                    "device_info": "NVIDIA H100",
                }
            ],
        },
        "results": results,
        "out_of_bounds": {"count": 0, "okay": "true"},
        avg_key: {bw_key: float(np.mean(busbws)), "okay": "unchecked"},
        "errors": [],
        "end_time": "2025-10-17 10:01:00",
    }
    return json.dumps(doc, separators=(",", ":")).encode()


# --------------------------------------------------------------------------- real samples


@needs_samples
@pytest.mark.parametrize("name", sorted(REAL))
def test_real_sample_row_counts_collective_and_world_size(name):
    collective, world_size, n_lines, source = REAL[name]
    runs = parse_stdout((SAMPLES / name).read_text(), file=name)
    assert len(runs) == 1
    run = runs[0]
    assert (run.collective, run.world_size, run.collective_source) == (
        collective,
        world_size,
        source,
    )
    assert run.world_size_source == "device_list"
    assert run.rows["line"].nunique() == n_lines
    assert len(run.rows) == 2 * n_lines  # out-of-place and in-place per printed row
    assert run.n_cycles == 1 and run.rows_per_cycle == n_lines
    assert set(run.rows["placement"]) == {"out_of_place", "in_place"}


@needs_samples
@pytest.mark.parametrize("name", sorted(REAL))
def test_real_sample_bandwidth_recomputed_within_rounding_of_printed_columns(name):
    run = parse_stdout((SAMPLES / name).read_text(), file=name)[0]
    rows = run.rows
    factor = busbw_factor(run.collective, run.world_size)
    size = rows["size_bytes"].to_numpy(np.float64)
    t = rows["time_us"].to_numpy()
    dt = rows["time_half_ulp_us"].to_numpy()
    alg_lo, alg_hi = size / ((t + dt) * 1e3), size / ((t - dt) * 1e3)
    printed_alg = rows["printed_algbw_gbps"].to_numpy()
    printed_bus = rows["printed_busbw_gbps"].to_numpy()
    eps = 1e-9
    assert np.all(printed_alg >= alg_lo - rows["algbw_half_ulp_gbps"] - eps)
    assert np.all(printed_alg <= alg_hi + rows["algbw_half_ulp_gbps"] + eps)
    assert np.all(printed_bus >= alg_lo * factor - rows["busbw_half_ulp_gbps"] - eps)
    assert np.all(printed_bus <= alg_hi * factor + rows["busbw_half_ulp_gbps"] + eps)
    # the recomputed value is what the report uses; it sits inside the same bounds
    recomputed = recomputed_busbw_gbps(run)
    assert np.all(
        np.abs(recomputed - printed_bus)
        <= (alg_hi - alg_lo) * factor + rows["busbw_half_ulp_gbps"] + eps
    )
    assert np.allclose(recomputed_algbw_gbps(run) * factor, recomputed)


@needs_samples
@pytest.mark.parametrize("name", sorted(REAL))
def test_real_sample_avg_bus_bandwidth_recomputed(name):
    run = parse_stdout((SAMPLES / name).read_text(), file=name)[0]
    rows = run.rows
    factor = busbw_factor(run.collective, run.world_size)
    size = rows["size_bytes"].to_numpy(np.float64)
    t, dt = rows["time_us"].to_numpy(), rows["time_half_ulp_us"].to_numpy()
    lo = float(np.mean(size / ((t + dt) * 1e3) * factor))
    hi = float(np.mean(size / ((t - dt) * 1e3) * factor))
    printed = run.avg_busbw_printed_gbps
    slack = 5e-6 * printed  # "%g" keeps 6 significant digits
    assert lo - slack <= printed <= hi + slack
    assert run.avg_busbw_recomputed_gbps() == pytest.approx(printed, rel=1e-3)


@needs_samples
def test_real_alltoall_na_wrong_is_unchecked_not_zero():
    run = parse_stdout(
        (SAMPLES / "polaris_a100_8rank_alltoall.txt").read_text(),
        file="polaris_a100_8rank_alltoall.txt",
    )[0]
    in_place = run.rows[run.rows["placement"] == "in_place"]
    out_place = run.rows[run.rows["placement"] == "out_of_place"]
    assert in_place["wrong"].isna().all()
    assert (out_place["wrong"] == 0).all()
    # three requested sizes round to 0 bytes: three rows of one size, all in cycle 0
    assert (out_place["size_bytes"] == 0).sum() == 3 and (out_place["cycle"] == 0).all()


@needs_samples
def test_old_layout_alltoall_needs_file_name_or_option_to_tell_it_from_all_gather(tmp_path):
    text = (SAMPLES / "polaris_a100_8rank_alltoall.txt").read_text()
    anonymous = tmp_path / "capture.txt"
    anonymous.write_text(text)
    with pytest.raises(ImportRefused) as err:
        parse_stdout(text, file=str(anonymous))
    assert err.value.field == "collective" and "all_gather" in err.value.message
    run = parse_stdout(text, file=str(anonymous), collective="all_to_all")[0]
    assert (run.collective, run.collective_source) == ("all_to_all", "option")
    with pytest.raises(ImportRefused) as err:
        parse_stdout(text, file=str(anonymous), collective="all_reduce")
    assert err.value.field == "collective"


# --------------------------------------------------------------------------- variants


def test_new_layout_names_collective_and_version():
    text = synth_run("all_gather", 8, SIZES, ladder_times(SIZES))
    run = parse_stdout(text, file="ag.txt")[0]
    assert (run.collective, run.collective_source, run.nccl_tests_version) == (
        "all_gather",
        "header",
        "2.17.6",
    )
    assert run.world_size == 8 and run.rows["line"].nunique() == len(SIZES)


def test_cycles_of_repeated_ladder_are_numbered(tmp_path):
    times = ladder_times(SIZES, cycles=3, jitter=2.0)
    run = parse_stdout(synth_run("all_reduce", 4, SIZES, times), file="n3.txt")[0]
    assert run.n_cycles == 3 and run.rows_per_cycle == len(SIZES)
    oop = run.rows[run.rows["placement"] == "out_of_place"]
    assert list(oop["cycle"]) == [c for c in range(3) for _ in SIZES]
    path = tmp_path / "run.txt"
    path.write_text(synth_run("all_reduce", 4, SIZES, times))
    ladder, _, _ = load_inputs([str(path)])
    assert ladder["cycle"].nunique() == 3
    assert len(ladder) == 3 * 2 * len(SIZES)


def test_rows_per_cycle_follows_the_nccl_tests_size_loop():
    assert rows_per_cycle(8, 8589934592, 2, "factor") == 31
    assert rows_per_cycle(4, 1073741824, 2, "factor") == 29
    assert rows_per_cycle(1024, 4096, 1024, "bytes") == 4


def test_mpirun_tags_and_interleaved_nccl_info_lines_are_skipped():
    clean = parse_stdout(synth_run("all_reduce", 8, SIZES, ladder_times(SIZES)), file="a")[0]
    noisy_text = synth_run(
        "all_reduce", 8, SIZES, ladder_times(SIZES), tag="[1,0]<stdout>:", info_lines=True
    )
    noisy = parse_stdout("NCCL version 2.27.3+cuda12.9\n" + noisy_text, file="b")[0]
    cols = ["size_bytes", "time_us", "placement", "wrong", "cycle"]
    assert noisy.rows[cols].equals(clean.rows[cols])


def test_concatenated_runs_become_separate_runs():
    text = synth_run("all_reduce", 8, SIZES, ladder_times(SIZES)) + synth_run(
        "all_gather", 8, SIZES, ladder_times(SIZES, beta_gbps=50.0)
    )
    runs = parse_stdout(text, file="both.txt")
    assert [(r.run, r.collective) for r in runs] == [(0, "all_reduce"), (1, "all_gather")]
    assert runs[1].first_line > runs[0].first_line


@pytest.mark.parametrize(
    ("per_iter", "stamp", "tokens"), [(False, True, 15), (True, False, 21), (True, True, 23)]
)
def test_timestamp_and_per_iteration_layouts(per_iter, stamp, tokens):
    text = synth_run("all_reduce", 8, SIZES, ladder_times(SIZES), per_iter=per_iter, stamp=stamp)
    data_line = next(line for line in text.splitlines() if line.strip().startswith(str(SIZES[0])))
    assert len(data_line.split()) == tokens
    run = parse_stdout(text, file="x")[0]
    assert len(run.rows) == 2 * len(SIZES)
    assert run.rows["time_us"].iloc[0] == pytest.approx(float(data_line.split()[5]))


def test_wrong_count_as_number_and_na():
    checked = parse_stdout(
        synth_run("all_reduce", 8, SIZES, ladder_times(SIZES), wrong=3), file="w"
    )[0]
    assert (checked.rows["wrong"] == 3).all()
    unchecked = parse_stdout(
        synth_run("all_reduce", 8, SIZES, ladder_times(SIZES), wrong=None), file="w"
    )[0]
    assert unchecked.rows["wrong"].isna().all()


def test_half_ulp_of_printed_numbers():
    assert half_ulp("135.8") == pytest.approx(0.05)
    assert half_ulp("12646") == pytest.approx(0.5)
    assert half_ulp("0.00") == pytest.approx(0.005)
    assert half_ulp("1.2e+07") == pytest.approx(0.05e7)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_json_report_versions(version):
    times = ladder_times(SIZES, cycles=2, jitter=1.0)
    data = synth_json("all_gather", 8, SIZES, times, version=version, typo=(version == 1))
    run = parse_json(data, file="r.json")[0]
    assert (run.collective, run.collective_source, run.world_size, run.world_size_source) == (
        "all_gather",
        "json_args",
        8,
        "device_list",
    )
    assert run.n_cycles == 2 and len(run.rows) == 2 * 2 * len(SIZES)
    assert run.avg_busbw_printed_gbps == pytest.approx(run.avg_busbw_recomputed_gbps(), rel=1e-5)
    assert run.rows["line"].max() == 2 * len(SIZES)


def test_json_nan_time_is_refused_with_record_and_field():
    doc = json.loads(synth_json("all_reduce", 8, SIZES, ladder_times(SIZES)))
    doc["results"][4]["in_place"]["time"] = "nan"
    with pytest.raises(ImportRefused) as err:
        parse_json(json.dumps(doc).encode(), file="bad.json")
    assert (err.value.record, err.value.field) == (5, "in_place.time")


# --------------------------------------------------------------------------- refusals


def _replace_line(text: str, index_from_start_of_data: int, transform) -> tuple[str, int]:
    lines = text.split("\n")
    data = [i for i, line in enumerate(lines) if line.strip() and line.split()[0].isdigit()]
    i = data[index_from_start_of_data]
    lines[i] = transform(lines[i])
    return "\n".join(lines), i + 1


def test_truncated_row_is_refused_with_line_and_field():
    text, line = _replace_line(
        synth_run("all_reduce", 8, SIZES, ladder_times(SIZES)), 3, lambda s: s[:60]
    )
    with pytest.raises(ImportRefused) as err:
        parse_stdout(text, file="t.txt")
    assert (err.value.file, err.value.record, err.value.field) == ("t.txt", line, "row")
    assert f"line {line}" in err.value.one_line()


def test_non_numeric_time_is_refused_with_line_and_field():
    def corrupt(s: str) -> str:
        tokens = s.split()
        tokens[9] = "12x.5"
        return "  ".join(tokens)

    text, line = _replace_line(synth_run("all_reduce", 8, SIZES, ladder_times(SIZES)), 2, corrupt)
    with pytest.raises(ImportRefused) as err:
        parse_stdout(text, file="t.txt")
    assert (err.value.record, err.value.field) == (line, "in_place.time")


def test_row_implying_another_world_size_is_refused_as_mixed():
    def halve_count(s: str) -> str:
        tokens = s.split()
        tokens[1] = str(int(tokens[1]) // 2)
        return "  ".join(tokens)

    text, line = _replace_line(
        synth_run("all_gather", 8, SIZES, ladder_times(SIZES)), 5, halve_count
    )
    with pytest.raises(ImportRefused) as err:
        parse_stdout(text, file="m.txt")
    assert (err.value.record, err.value.field) == (line, "count")
    assert "mixed world sizes" in err.value.message


def test_world_size_option_contradicting_device_list_is_refused():
    with pytest.raises(ImportRefused) as err:
        parse_stdout(
            synth_run("all_reduce", 8, SIZES, ladder_times(SIZES)), file="w.txt", world_size=16
        )
    assert err.value.field == "world_size"


def test_run_without_footer_is_refused_as_truncated():
    with pytest.raises(ImportRefused) as err:
        parse_stdout(
            synth_run("all_reduce", 8, SIZES, ladder_times(SIZES), footer=False), file="f.txt"
        )
    assert err.value.field == "footer"


def test_partial_cycle_is_refused():
    text = synth_run("all_reduce", 8, SIZES, ladder_times(SIZES, cycles=2))
    lines = text.split("\n")
    data = [i for i, line in enumerate(lines) if line.strip() and line.split()[0].isdigit()]
    del lines[data[-1]]
    with pytest.raises(ImportRefused) as err:
        parse_stdout("\n".join(lines), file="p.txt")
    assert err.value.field == "row" and "whole number of cycles" in err.value.message


def test_cputime_table_and_pre_213_layout_are_refused():
    text = synth_run("all_reduce", 8, SIZES, ladder_times(SIZES))
    cpu = text.replace("root     time   algbw", "root  cputime   algbw")
    with pytest.raises(ImportRefused) as err:
        parse_stdout(cpu, file="c.txt")
    assert err.value.field == "time"
    old = text.replace("   redop    root     time", "   redop     time")
    with pytest.raises(ImportRefused) as err:
        parse_stdout(old, file="o.txt")
    assert err.value.field == "layout"


def test_unsupported_collective_is_refused():
    text = synth_run("broadcast", 4, SIZES, ladder_times(SIZES)).replace(
        "broadcast_perf", "hypercube_perf"
    )
    with pytest.raises(ImportRefused) as err:
        parse_stdout(text, file="s.txt")
    assert err.value.field == "collective" and "hypercube" in err.value.message


@pytest.mark.parametrize("collective", ["scatter", "gather"])
def test_scatter_and_gather_logs_parse_with_per_rank_counts_and_a_root(collective):
    """nccl-tests scatter_perf / gather_perf: size = n x count x element, root printed,
    busbw = algbw (n-1)/n (src/scatter.cu, src/gather.cu)."""
    (run,) = parse_stdout(synth_run(collective, 4, SIZES, ladder_times(SIZES)), file="g.txt")
    assert run.collective == collective and run.world_size == 4
    assert (run.rows["size_bytes"] == 4 * 4 * run.rows["count"]).all()
    assert (run.rows["root"] == 0).all()
    printed = run.rows["printed_busbw_gbps"].to_numpy()
    bound = run.rows["busbw_half_ulp_gbps"].to_numpy() + 0.01 * printed
    assert np.all(np.abs(recomputed_busbw_gbps(run) - printed) <= bound)
    assert recomputed_busbw_gbps(run) == pytest.approx(recomputed_algbw_gbps(run) * 3 / 4)


def test_unnamed_scatter_and_gather_rows_are_told_apart_by_file_name_only():
    text = synth_run("gather", 4, SIZES, ladder_times(SIZES), named=False)
    (run,) = parse_stdout(text, file="polaris_gather.txt")
    assert (run.collective, run.collective_source) == ("gather", "file_name")
    with pytest.raises(ImportRefused) as err:
        parse_stdout(text, file="unnamed.txt")
    assert err.value.field == "collective" and "'gather', 'scatter'" in err.value.message


def test_named_collective_contradicted_by_rows_is_refused():
    text = synth_run("all_reduce", 8, SIZES, ladder_times(SIZES)).replace(
        "all_reduce_perf", "all_gather_perf"
    )
    with pytest.raises(ImportRefused) as err:
        parse_stdout(text, file="x.txt")
    assert err.value.field == "redop"


def test_a_negative_minimum_size_has_no_ladder_instead_of_looping_forever():
    """A hostile -J header with a negative minimum_bytes and a step factor once walked its
    geometric ladder forever (size * step never passes the maximum)."""
    from tracecanary.alphabeta.nccltests import rows_per_cycle

    assert rows_per_cycle(-8, 1 << 20, 2, "factor") is None
    assert rows_per_cycle(-8, 1 << 20, 8, "increment") is None
    assert rows_per_cycle(8, 1 << 20, 2, "factor") == 18
