"""``compile --strict``: the behavior verification runs before anything is written; a
canary that does not come out verified is refused (exit 1, no file, failed checks
printed), a lossless one is written with claim ``verified``."""

from __future__ import annotations

import json

import yaml
from conftest import REPO

from tracecanary.canonical import canonical_json_bytes, sha256_bytes, sha256_file
from tracecanary.compile.document import validate_canary

ADVERSARIAL = REPO / "resources/traces/adversarial.json"
BACKENDS = REPO / "config/backends.yaml"


def _strict(run_cli, out, *extra, source=ADVERSARIAL):
    return run_cli("compile", source, *extra, "--strict", "--backends", BACKENDS, "-o", out)


def test_strict_refuses_a_canary_whose_behavior_fails(tmp_path, run_cli):
    out = tmp_path / "c.json"
    code, stdout, err = _strict(run_cli, out, "--lossless", "--max-executed-repeats", "1")
    assert code == 1
    assert not out.exists() and not list(tmp_path.iterdir())
    lines = err.strip().splitlines()
    assert lines[0].startswith("claim rejected: ") and "behavior=fail" in lines[0]
    failed = [line for line in lines[1:-1] if line.startswith("  ")]
    assert failed and all("tolerance" in line or "ranking" in line for line in failed)
    assert lines[-1].startswith("tracecanary compile: error: ")
    assert "--strict: verification claim rejected" in lines[-1] and "no canary written" in lines[-1]
    assert "canary:" not in stdout


def test_strict_accepts_a_lossless_canary_and_marks_it_verified(tmp_path, run_cli):
    out = tmp_path / "c.json"
    code, stdout, err = _strict(run_cli, out, "--lossless")
    assert code == 0, err
    assert "claim: verified" in stdout
    doc = json.loads(out.read_text())
    validate_canary(doc)
    assert doc["claim"] == "verified"
    reason = doc["claim_reasons"][0]
    assert sha256_file(ADVERSARIAL) in reason
    assert doc["stats"]["bytes_canary"] == len(out.read_bytes())
    # the written file re-verifies from disk
    verification = tmp_path / "v.json"
    code, _, err = run_cli("verify-behavior", ADVERSARIAL, out, "-o", verification)
    assert code == 0, err
    assert json.loads(verification.read_text())["claim"] == "verified"


def test_strict_uses_the_given_tolerances(tmp_path, run_cli):
    tolerances = yaml.safe_load((REPO / "config/tolerances.yaml").read_text())
    tolerances["tail_recall_min"] = 1.0
    path = tmp_path / "tight.yaml"
    path.write_text(yaml.safe_dump(tolerances))
    out = tmp_path / "c.json"
    code, _, err = _strict(run_cli, out, "--lossless", "--tolerances", path)
    assert code == 0, err
    digest = sha256_bytes(canonical_json_bytes(tolerances))
    assert digest in json.loads(out.read_text())["claim_reasons"][0]


def test_strict_refuses_a_prefix_canary_as_partial(tmp_path, run_cli):
    out = tmp_path / "c.json"
    code, _, err = _strict(run_cli, out, "--lossless", "--prefix", "40")
    assert code == 1 and not out.exists()
    assert "claim partial" in err and "coverage=partial" in err


def test_strict_refuses_unknown_skew_as_behaviorally_unverified(tmp_path, run_cli):
    doc = json.loads(ADVERSARIAL.read_text())
    doc["meta"]["clock_domains"] = [{"id": f"host{r}", "ranks": [r]} for r in range(4)]
    source = tmp_path / "unknown_skew.json"
    source.write_text(json.dumps(doc))
    out = tmp_path / "c.json"
    code, _, err = _strict(run_cli, out, "--lossless", source=source)
    assert code == 1 and not out.exists()
    assert "claim behaviorally_unverified" in err


def test_strict_usage_errors_are_one_line_exit_2(tmp_path, run_cli):
    out = tmp_path / "c.json"
    code, _, err = run_cli("compile", ADVERSARIAL, "--lossless", "--strict", "-o", out)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--backends" in err
    code, _, err = run_cli(
        "compile", ADVERSARIAL, "--lossless", "--tolerances", BACKENDS, "-o", out
    )
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--tolerances" in err
    (tmp_path / "bad.yaml").write_text("latency: {p50: {relative: -1}}\n")
    code, _, err = _strict(run_cli, out, "--lossless", "--tolerances", tmp_path / "bad.yaml")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "bad.yaml" in err
    assert not out.exists()
