"""Backend configurations: the shipped defaults and every refusal (exit 2, one line)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tracecanary.canonical import write_json
from tracecanary.cli import main
from tracecanary.sim.backends import load_backends
from tracecanary.synth.adversarial import build_adversarial

REPO = Path(__file__).resolve().parents[1]
DEFAULT = REPO / "config" / "backends.yaml"


def test_default_backends_name_five_configurations_that_differ_like_rollouts():
    backends = load_backends(DEFAULT)
    configs = backends.configs
    assert len(configs) == 5
    # they differ in algorithm/protocol availability, channels, costs, overlap, contention
    assert len({c.algorithms for c in configs.values()}) > 1
    assert len({c.protocols for c in configs.values()}) > 1
    assert len({c.channels for c in configs.values()}) > 1
    assert len({c.overlap_efficiency for c in configs.values()}) > 1
    assert len({c.contention for c in configs.values()}) > 1
    assert (
        len(
            {
                tuple((k.latency_us, k.busbw_gbps_per_channel) for k in c.candidates)
                for c in configs.values()
            }
        )
        > 1
    )


def test_backends_digest_ignores_yaml_formatting(tmp_path):
    doc = yaml.safe_load(DEFAULT.read_text())
    other = tmp_path / "b.json"
    write_json(other, doc)
    assert load_backends(other).sha256 == load_backends(DEFAULT).sha256


def _base_doc() -> dict:
    return yaml.safe_load(DEFAULT.read_text())


def _edit(path, value):
    def apply(doc):
        node = doc
        for key in path[:-1]:
            node = node[key]
        if value is _DELETE:
            del node[path[-1]]
        else:
            node[path[-1]] = value
        return doc

    return apply


_DELETE = object()

BAD_EDITS = {
    "missing_channels": (_edit(["configs", "baseline", "channels"], _DELETE), "configs/baseline"),
    "unknown_algorithm": (
        _edit(["configs", "baseline", "algorithms"], ["ring", "nvls"]),
        "configs/baseline/algorithms/1",
    ),
    "negative_latency": (
        _edit(["configs", "upgrade", "candidates", 0, "latency_us"], -1.0),
        "configs/upgrade/candidates/0/latency_us",
    ),
    "efficiency_above_one": (
        _edit(["configs", "upgrade", "overlap_efficiency"], 1.5),
        "configs/upgrade/overlap_efficiency",
    ),
    "no_ring_enabled": (
        _edit(["configs", "ring_only", "algorithms"], ["tree"]),
        "configs/ring_only/candidates",
    ),
    "wrong_format": (_edit(["format"], "tracecanary.backends/v0"), "format"),
    "unknown_field": (_edit(["configs", "baseline", "nccl_algo"], "Ring"), "configs/baseline"),
    "bad_config_name": (_edit(["configs", "has space"], {}), "configs"),
}


@pytest.fixture(scope="module")
def trace_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "adversarial.json"
    write_json(path, build_adversarial())
    return path


def _replay_refused(tmp_path, capsys, trace_path, backends_path, *extra) -> str:
    out = tmp_path / "report.json"
    rc = main(["replay", str(trace_path), "--backends", str(backends_path), *extra, "-o", str(out)])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert not out.exists()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("case", sorted(BAD_EDITS))
def test_replay_refuses_invalid_backends_naming_file_and_field(case, tmp_path, capsys, trace_path):
    edit, field = BAD_EDITS[case]
    path = tmp_path / "backends.json"
    write_json(path, edit(_base_doc()))
    err = _replay_refused(tmp_path, capsys, trace_path, path)
    assert str(path) in err
    assert f"field {field}" in err


def test_replay_refuses_duplicate_candidate(tmp_path, capsys, trace_path):
    doc = _base_doc()
    cands = doc["configs"]["upgrade"]["candidates"]
    cands.append(dict(cands[0]))
    path = tmp_path / "backends.json"
    write_json(path, doc)
    err = _replay_refused(tmp_path, capsys, trace_path, path)
    assert "listed twice" in err and f"configs/upgrade/candidates/{len(cands) - 1}" in err


def test_replay_refuses_duplicate_yaml_keys(tmp_path, capsys, trace_path):
    text = DEFAULT.read_text().replace(
        "    channels: 16\n", "    channels: 16\n    channels: 8\n", 1
    )
    path = tmp_path / "backends.yaml"
    path.write_text(text)
    err = _replay_refused(tmp_path, capsys, trace_path, path)
    assert "duplicate key 'channels'" in err and str(path) in err


def test_replay_refuses_broken_yaml_and_missing_file(tmp_path, capsys, trace_path):
    path = tmp_path / "backends.yaml"
    path.write_text("configs: [unclosed\n")
    assert "not valid YAML" in _replay_refused(tmp_path, capsys, trace_path, path)
    assert "no such file" in _replay_refused(tmp_path, capsys, trace_path, tmp_path / "absent.yaml")


def test_replay_refuses_unknown_configuration_name(tmp_path, capsys, trace_path):
    err = _replay_refused(tmp_path, capsys, trace_path, DEFAULT, "--config", "nope")
    assert "no configuration named 'nope'" in err and "baseline" in err
