"""The source's own reproducibility beside the fixed tolerances: the block bootstrap
computes each check's statistic exactly as the simulator's metrics do, is seeded and
recorded, finds the source's steps, and the claim says which standard was met; the
strict standard stays the default.

The end-to-end cases run the CLI on the shipped decode capture set (resources/decode:
4 ranks, synthetic, merged through its calibration), where a 64 us canary misses the
fixed tolerances on statistics the source itself does not reproduce that closely."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tracecanary.formats.schemas import load_schema, validate
from tracecanary.sim.backends import load_backends
from tracecanary.sim.metrics import weighted_quantiles
from tracecanary.synth.examples import decode_like_program
from tracecanary.verify import reproducibility as repro
from tracecanary.verify.behavior import replay_program
from tracecanary.verify.claims import (
    DEFAULT_STANDARD,
    MET_FIXED,
    MET_REPRODUCIBILITY,
    STANDARDS,
    STRICT,
    behavior_passes,
    standard_met,
)

DECODE = Path(__file__).resolve().parents[1] / "resources" / "decode"


@pytest.mark.parametrize("n, blocks", [(300, 30), (5000, 97), (17, 17), (1000, 3)])
@pytest.mark.parametrize("weighted", [False, True])
def test_each_resample_statistic_is_the_simulators_weighted_statistic(n, blocks, weighted):
    rng = np.random.default_rng(n)
    values = rng.integers(0, 1000, n)
    block = np.unique(np.sort(rng.integers(0, blocks, n)), return_inverse=True)[1]
    weights = rng.integers(1, 4, n).astype(float) if weighted else np.ones(n)
    counts = repro._resample_counts(int(block.max()) + 1).astype(float)
    got = repro._distribution(values, weights, block, counts)
    for r in range(counts.shape[0]):
        w = counts[r][block] * weights
        if w.sum() == 0:
            assert np.isnan(got["p50"][r])
            continue
        assert weighted_quantiles(values, w, [0.5, 0.95, 0.99]) == [
            got["p50"][r],
            got["p95"][r],
            got["p99"][r],
        ]
        assert got["max"][r] == values[w > 0].max()
        assert np.isclose(got["mean"][r], (values * w).sum() / w.sum())


def test_the_decode_loop_s_steps_are_the_blocks():
    program = decode_like_program(40, layers=4, world_size=4)
    block_of, blocks = repro.source_blocks(program)
    assert blocks["kind"] == "steps"
    assert blocks["count"] >= 40
    assert np.all(np.diff(block_of) >= 0) and block_of[0] == 0


def test_a_program_without_repeated_steps_is_cut_into_fixed_windows():
    from tracecanary.synth.examples import random_program

    short = random_program(4, 12)
    _, blocks = repro.source_blocks(short)
    assert blocks == {"kind": "windows", "count": 12}


def test_source_intervals_are_the_same_twice_and_record_their_seed():
    program = decode_like_program(30, layers=4, world_size=4)
    backends = load_backends(None)
    one = replay_program(program, backends, reproducibility=True).reproducibility
    two = replay_program(program, backends, reproducibility=True).reproducibility
    assert one == two
    assert one["method"]["seed"] == repro.SEED
    assert one["method"]["resamples"] == repro.RESAMPLES
    interval = one["intervals"]["baseline"]["latency.mean"]
    assert interval[0] <= interval[1]


def _check(passed: bool, within: bool | None) -> dict:
    return {"pass": passed, "reproducibility": None if within is None else {"within": within}}


def test_the_claim_says_which_standard_was_met_and_strict_needs_the_fixed_tolerances():
    assert standard_met([_check(True, False)]) == MET_FIXED
    assert standard_met([_check(True, None), _check(False, True)]) == MET_REPRODUCIBILITY
    assert standard_met([_check(False, None)]) is None
    assert standard_met([_check(False, False)]) is None
    assert not behavior_passes(MET_REPRODUCIBILITY, STRICT)
    assert behavior_passes(MET_REPRODUCIBILITY, "reproducibility")
    assert DEFAULT_STANDARD == STRICT


def test_the_config_key_defaults_to_the_strict_standard():
    key = load_schema("config")["properties"]["verification_standard"]
    assert key["default"] == DEFAULT_STANDARD
    assert tuple(key["enum"]) == STANDARDS


@pytest.fixture(scope="module")
def decode_canary(tmp_path_factory):
    """The decode capture set merged and normalized, and its 64 us canary."""
    from tracecanary.cli import main

    root = tmp_path_factory.mktemp("decode")
    ranks = sorted(str(p) for p in DECODE.glob("rank*.jsonl.gz"))
    merged, table, canary = root / "merged.jsonl", root / "source.parquet", root / "c64.json"
    assert (
        main(
            ["merge", "--calibration", str(DECODE / "calibration.json"), "-o", str(merged), *ranks]
        )
        == 0
    )
    assert main(["ingest", "-o", str(table), str(merged)]) == 0
    budget = ",".join(f"{f}=64us" for f in ("skew", "overlap", "gap", "latency"))
    assert main(["compile", str(table), "--budget", budget, "-o", str(canary)]) == 0
    return table, canary


def test_a_canary_inside_the_sources_own_noise_is_verified_only_under_that_standard(
    decode_canary, run_cli, tmp_path
):
    table, canary = decode_canary
    strict, repro_doc = tmp_path / "strict.json", tmp_path / "repro.json"
    code, _, err = run_cli("verify-behavior", table, canary, "-o", strict)
    assert code == 1
    assert "source interval" in err
    code, out, _ = run_cli(
        "verify-behavior", table, canary, "--standard", "reproducibility", "-o", repro_doc
    )
    assert code == 0
    assert "verified within the source's reproducibility" in out
    for path in (strict, repro_doc):
        doc = json.loads(path.read_text())
        validate(doc, "verification", file=str(path))
        assert doc["standard"]["met"] == MET_REPRODUCIBILITY
        assert doc["standard"]["reproducibility"]["seed"] == repro.SEED
        assert doc["standard"]["wider_than_tolerance"]
        failed = [c for c in doc["checks"] if not c["pass"]]
        assert failed and all(c["reproducibility"]["within"] for c in failed)
    assert json.loads(strict.read_text())["claim"] == "rejected"
    assert json.loads(strict.read_text())["standard"]["chosen"] == "strict"
    assert json.loads(repro_doc.read_text())["claim"] == "verified"


def test_the_search_log_carries_both_figures_and_validates(decode_canary, run_cli, tmp_path):
    table, _ = decode_canary
    log, canary = tmp_path / "search.json", tmp_path / "canary.json"
    code, _, err = run_cli(
        "search", table, "--quiet", "--budgets", "1,64", "-o", canary, "--log", log
    )
    assert code == 0
    assert "standard strict: verified within the fixed tolerances" in err
    doc = json.loads(log.read_text())
    validate(doc, "search-log", file=str(log))
    rejected = [e for e in doc["candidates"] if e.get("blocking")]
    assert rejected
    assert any("source_interval" in b for e in rejected for b in e["blocking"])
    assert {e.get("standard_met") for e in doc["candidates"]} >= {MET_REPRODUCIBILITY}


def test_the_summary_names_the_checks_whose_source_interval_is_wider_than_the_tolerance(
    decode_canary, run_cli, tmp_path
):
    from tracecanary.campaign.summary import reproducibility_section

    table, canary = decode_canary
    out = tmp_path / "v.json"
    run_cli("verify-behavior", table, canary, "-o", out)
    doc = json.loads(out.read_text())
    text = "\n".join(reproducibility_section({"decode": doc}))
    assert "standard **strict**" in text
    for name in doc["standard"]["wider_than_tolerance"]:
        config, metric = name.split(":", 1)
        assert f"| {config} | {metric} |" in text


def test_a_long_capture_joins_consecutive_steps_into_at_most_max_blocks():
    program = decode_like_program(3 * repro.MAX_BLOCKS + 7, layers=1, world_size=2)
    block_of, blocks = repro.source_blocks(program)
    assert blocks["kind"] == "steps"
    assert repro.MIN_BLOCKS <= blocks["count"] <= repro.MAX_BLOCKS
    assert int(block_of.max()) + 1 == blocks["count"]


def _synth_capture(run_cli, root: Path, seed: int) -> Path:
    """One capture of a synthetic decode program (its seed: the run's noise), merged and
    normalized."""
    out = root / f"synth{seed}"
    argv = ["synth", "decode", "-o", out, "--events-per-rank", 1200, "--layers", 2]
    assert run_cli(*argv, "--seed", seed)[0] == 0
    merged, table = root / f"merged{seed}.jsonl", root / f"source{seed}.parquet"
    ranks = sorted(out.glob("rank*.jsonl.gz"))
    assert run_cli("merge", "--calibration", out / "calibration.json", "-o", merged, *ranks)[0] == 0
    assert run_cli("ingest", "-o", table, merged)[0] == 0
    return table


def test_a_second_capture_of_the_program_widens_each_interval_to_hold_its_value(run_cli, tmp_path):
    from tracecanary.canonical import sha256_file

    first, second = _synth_capture(run_cli, tmp_path, 1), _synth_capture(run_cli, tmp_path, 2)
    canary = tmp_path / "c.json"
    assert run_cli("compile", first, "--budget", "skew=2us,gap=2us", "-o", canary)[0] == 0
    out = tmp_path / "v.json"
    code, _, err = run_cli("verify-behavior", first, canary, "--second-capture", second, "-o", out)
    assert code in (0, 1), err
    doc = json.loads(out.read_text())
    validate(doc, "verification", file=str(out))
    assert doc["standard"]["reproducibility"]["second_capture"] == {"sha256": sha256_file(second)}
    held = [c["reproducibility"] for c in doc["checks"] if c["reproducibility"]]
    assert held and all("second_capture" in r for r in held)
    assert all(r["interval"][0] <= r["second_capture"] <= r["interval"][1] for r in held)
    # the two captures differ: some statistic of the second lies outside the first's own
    # bootstrap interval, and widens it
    alone = tmp_path / "alone.json"
    run_cli("verify-behavior", first, canary, "-o", alone)
    narrow = {
        (c["config"], c["metric"]): c["reproducibility"]["interval"]
        for c in json.loads(alone.read_text())["checks"]
        if c["reproducibility"]
    }
    widened = [
        c
        for c in doc["checks"]
        if c["reproducibility"]
        and c["reproducibility"]["interval"] != narrow[(c["config"], c["metric"])]
    ]
    assert widened


def test_a_source_names_a_second_capture_of_its_program_only_among_the_campaigns():
    from tracecanary.campaign.config_check import second_captures
    from tracecanary.errors import InputError

    sources = [
        {"id": "a", "kind": "trace", "path": "a.json", "second_capture": "b"},
        {"id": "b", "kind": "trace", "path": "b.json"},
    ]
    assert second_captures({"sources": sources}, file="c.yaml") == {"a": "b"}
    for wrong in ("zz", "a"):
        bad = [{**sources[0], "second_capture": wrong}, sources[1]]
        with pytest.raises(InputError, match="second_capture") as err:
            second_captures({"sources": bad}, file="c.yaml")
        assert err.value.field == "sources[0].second_capture"


def test_the_campaign_verifies_and_searches_against_the_second_capture(tmp_path):
    import subprocess
    import sys

    import yaml

    repo = DECODE.parents[1]
    config = yaml.safe_load((repo / "config" / "config.yaml").read_text())
    decode = config["sources"][0]
    small = {
        "id": "decode_small",
        "kind": "captures",
        "captures": [str(p) for p in sorted((repo / "resources" / "decode-small").glob("rank*"))],
        "calibration": str(repo / "resources" / "decode-small" / "calibration.json"),
    }
    decode["captures"] = [str(repo / p) for p in decode["captures"]]
    decode["calibration"] = str(repo / decode["calibration"])
    decode["second_capture"] = "decode_small"
    config["sources"] = [decode, small]
    ids = ["decode", "decode_small"]
    for key in ("backends", "tolerances"):
        config[key] = str(repo / config[key])
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "pair.yaml").write_text(yaml.safe_dump(config))
    cmd = [sys.executable, "-m", "snakemake", "-s", str(repo / "Snakefile"), "--directory"]
    cmd += [str(tmp_path), "--configfile", "config/pair.yaml", "--cores", "1", "--dry-run"]
    cmd += ["--until", "search", "verify"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    second = f"results/{config['campaign']}/ingest/{ids[1]}.parquet"
    jobs = run.stdout.split("\nrule ")
    for rule in ("search", "verify"):
        first_source = [j for j in jobs if j.startswith(f"{rule}:") and f"/{ids[0]}" in j]
        assert first_source and all(second in j for j in first_source), rule
