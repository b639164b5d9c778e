"""``tracecanary alphabeta`` end to end: every real nccl-tests sample produces a report and
plots that validate against the schema; outputs are deterministic bytes; bad input exits 2
with one line naming file, line and field, and leaves no output behind."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import jsonschema
import pytest
from test_alphabeta_nccltests import SIZES, ladder_times, synth_json

from tracecanary.canonical import canonical_json_bytes
from tracecanary.cli import main

REPO = Path(__file__).resolve().parents[1]
SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "nccltests_samples"
SCHEMA = json.loads((REPO / "schemas" / "alphabeta.schema.json").read_text())
needs_samples = pytest.mark.skipif(
    not SAMPLES.is_dir(), reason="../shared/nccltests_samples is absent (real nccl-tests outputs)"
)
REAL = sorted(p.name for p in SAMPLES.glob("*.txt")) if SAMPLES.is_dir() else []


def _validate(doc: dict) -> None:
    jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(doc)


def _digests(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_schema_is_valid_draft_2020_12():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@needs_samples
def test_every_real_sample_produces_a_report_and_plots(tmp_path):
    out, md, plots = tmp_path / "fit.json", tmp_path / "fit.md", tmp_path / "plots"
    args = [
        "alphabeta",
        *[str(SAMPLES / n) for n in REAL],
        "-o",
        str(out),
        "--markdown",
        str(md),
        "--plot-dir",
        str(plots),
    ]
    assert main(args) == 0
    doc = json.loads(out.read_text())
    _validate(doc)
    assert out.read_bytes() == canonical_json_bytes(doc)
    assert [i["name"] for i in doc["inputs"]] == REAL
    # one ladder per placement per sample
    assert len(doc["ladders"]) == 2 * len(REAL)
    text = md.read_text()
    pngs = sorted(plots.glob("*.png"))
    assert len(pngs) == 3 * len(doc["ladders"])
    for ladder in doc["ladders"]:
        assert f"`{ladder['id']}`" in text
        for kind in ("time_vs_bytes", "algbw_vs_bytes", "residuals"):
            png = plots / f"{ladder['id']}.{kind}.png"
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            assert f"plots/{png.name}" in text
        assert ladder["rungs"] and ladder["fits"]["global"]["n_points"] >= 3


@needs_samples
def test_real_h100_ladder_shows_the_high_r2_large_mape_trap_and_piecewise_fit(tmp_path):
    out = tmp_path / "fit.json"
    assert (
        main(["alphabeta", str(SAMPLES / "gcp_a3mega_h100_16rank_all_reduce.txt"), "-o", str(out)])
        == 0
    )
    ladder = json.loads(out.read_text())["ladders"][0]
    g = ladder["fits"]["global"]
    assert g["r2"] > 0.99 and g["mape_pct"] > 50  # one line over 8 B..8 GiB mispredicts small sizes
    large = ladder["fits"]["large_message"]
    assert large["mape_pct"] < 2 and large["alpha_extrapolated"] is True
    assert ladder["saturation_entry_bytes"] == 1 << 30
    # the busbw of the top rung is nccl-tests' printed 338.82 within its rounding
    top = ladder["rungs"][-1]
    assert top["bytes"] == 8589934592 and top["busbw_gbps"] == pytest.approx(338.82, abs=0.01)


@needs_samples
def test_report_bytes_are_deterministic(tmp_path):
    sample = SAMPLES / "polaris_a100_8rank_all_gather.txt"
    runs = []
    for name in ("a", "b"):
        root = tmp_path / name
        args = [
            "alphabeta",
            str(sample),
            "-o",
            str(root / "fit.json"),
            "--markdown",
            str(root / "fit.md"),
            "--plot-dir",
            str(root / "plots"),
        ]
        assert main(args) == 0
        runs.append(_digests(root))
    assert runs[0] == runs[1]
    assert len([k for k in runs[0] if k.endswith(".png")]) == 6


def test_json_input_is_detected_by_content(tmp_path):
    path = tmp_path / "looks_like_text.log"
    path.write_bytes(
        b"\n  " + synth_json("reduce_scatter", 8, SIZES, ladder_times(SIZES, cycles=2))
    )
    out = tmp_path / "fit.json"
    assert main(["alphabeta", str(path), "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    _validate(doc)
    assert doc["inputs"][0]["kind"] == "nccltests_json"
    assert {ld["collective"] for ld in doc["ladders"]} == {"reduce_scatter"}
    assert doc["ladders"][0]["n_cycles"] == 2


# --------------------------------------------------------------------------- refusals


def _corrupt_sample(tmp_path: Path, name: str, row: int, transform) -> tuple[Path, int]:
    lines = (SAMPLES / name).read_text().split("\n")
    data = [i for i, line in enumerate(lines) if line.strip() and line.split()[0].isdigit()]
    i = data[row]
    lines[i] = transform(lines[i])
    path = tmp_path / name
    path.write_text("\n".join(lines))
    return path, i + 1


def _set_token(index: int, value: str):
    def transform(line: str) -> str:
        tokens = line.split()
        tokens[index] = value
        return "  ".join(tokens)

    return transform


@needs_samples
@pytest.mark.parametrize(
    ("name", "row", "transform", "field"),
    [
        ("polaris_a100_8rank_all_reduce.txt", 7, lambda s: s[:70], "row"),
        ("gcp_a3mega_h100_16rank_all_reduce.txt", 12, _set_token(5, "1O3.4"), "out_of_place.time"),
        ("polaris_a100_8rank_all_gather.txt", 20, _set_token(1, "65536"), "count"),
        ("polaris_a100_8rank_alltoall.txt", 10, _set_token(8, "many"), "out_of_place.#wrong"),
    ],
    ids=["truncated_row", "non_numeric_time", "mixed_world_sizes", "non_numeric_wrong"],
)
def test_bad_input_exits_2_naming_file_line_and_field_and_writes_nothing(
    tmp_path, capsys, name, row, transform, field
):
    bad, line = _corrupt_sample(tmp_path, name, row, transform)
    good = SAMPLES / "polaris_a100_8rank_all_reduce.txt"
    out, md, plots = (
        tmp_path / "out" / "fit.json",
        tmp_path / "out" / "fit.md",
        tmp_path / "out" / "plots",
    )
    code = main(
        [
            "alphabeta",
            str(good),
            str(bad),
            "-o",
            str(out),
            "--markdown",
            str(md),
            "--plot-dir",
            str(plots),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert str(bad) in err[0] and f"line {line}" in err[0] and f"field {field}" in err[0]
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*"))


@needs_samples
def test_world_size_option_contradicting_the_device_list_exits_2(tmp_path, capsys):
    out = tmp_path / "fit.json"
    code = main(
        [
            "alphabeta",
            str(SAMPLES / "polaris_a100_8rank_all_reduce.txt"),
            "--world-size",
            "4",
            "-o",
            str(out),
        ]
    )
    assert code == 2
    assert "field world_size" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    "flag",
    [
        ["--r2-min", "1.5"],
        ["--share-min", "-0.1"],
        ["--cv-max-pct", "0"],
        ["--saturation-fraction", "0"],
    ],
)
def test_out_of_range_thresholds_exit_2(tmp_path, capsys, flag):
    path = tmp_path / "r.json"
    path.write_bytes(synth_json("all_reduce", 8, SIZES, ladder_times(SIZES)))
    assert main(["alphabeta", str(path), *flag, "-o", str(tmp_path / "fit.json")]) == 2
    assert flag[0] in capsys.readouterr().err
    assert not (tmp_path / "fit.json").exists()


def test_thresholds_change_the_gates(tmp_path):
    path = tmp_path / "r.json"
    path.write_bytes(
        synth_json("all_reduce", 8, SIZES, ladder_times(SIZES, alpha=20.0, beta_gbps=100.0))
    )
    strict, lenient = tmp_path / "s.json", tmp_path / "l.json"
    assert main(["alphabeta", str(path), "--share-min", "0.99", "-o", str(strict)]) == 0
    assert main(["alphabeta", str(path), "--share-min", "0", "-o", str(lenient)]) == 0
    s = json.loads(strict.read_text())["ladders"][0]["fits"]["global"]
    v = json.loads(lenient.read_text())["ladders"][0]["fits"]["global"]
    assert s["beta_withheld_reason"] == "not_bandwidth_bound" and s["beta_gbps"] is None
    assert v["beta_withheld_reason"] is None and v["beta_gbps"] == pytest.approx(100.0, rel=1e-3)
    assert json.loads(strict.read_text())["parameters"]["share_min"] == 0.99


def test_unwritable_output_removes_what_this_run_wrote(tmp_path, capsys):
    path = tmp_path / "r.json"
    path.write_bytes(synth_json("all_reduce", 8, SIZES, ladder_times(SIZES)))
    blocker = tmp_path / "plots"
    blocker.write_text("a file where the plot directory should go")
    out, md = tmp_path / "fit.json", tmp_path / "fit.md"
    code = main(
        ["alphabeta", str(path), "-o", str(out), "--markdown", str(md), "--plot-dir", str(blocker)]
    )
    assert code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not out.exists() and not md.exists()
    assert blocker.read_text().startswith("a file")


def test_missing_input_exits_2(tmp_path, capsys):
    assert main(["alphabeta", str(tmp_path / "nope.txt"), "-o", str(tmp_path / "fit.json")]) == 2
    assert "nope.txt" in capsys.readouterr().err


def test_plain_directory_is_not_a_sweep_archive(tmp_path, capsys):
    (tmp_path / "d").mkdir()
    assert main(["alphabeta", str(tmp_path / "d"), "-o", str(tmp_path / "fit.json")]) == 2
    assert "attempt.json" in capsys.readouterr().err
