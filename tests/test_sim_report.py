"""Replay reports: determinism, schema, bit-for-bit verification and tampering, ablations,
and the isolated-vs-workload ranking on the adversarial trace."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from tracecanary.canonical import canonical_json_bytes, sha256_file, write_json
from tracecanary.cli import main
from tracecanary.formats.schemas import validate
from tracecanary.program import make_program
from tracecanary.sim import samples
from tracecanary.sim.backends import load_backends
from tracecanary.sim.report import build_report, verify_report
from tracecanary.synth.adversarial import build_adversarial

try:
    from test_sim_support import adversarial_program
except ImportError:  # tests/ as a package
    from tests.test_sim_support import adversarial_program

pytest.importorskip(
    "tracecanary.load", reason="replay reads inputs with the lead's tracecanary.load"
)

REPO = Path(__file__).resolve().parents[1]
BACKENDS = REPO / "config" / "backends.yaml"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("sim")
    write_json(d / "adversarial.json", build_adversarial())
    return d


@pytest.fixture(scope="module")
def report_path(workdir) -> Path:
    out = workdir / "report.json"
    assert (
        main(
            [
                "replay",
                str(workdir / "adversarial.json"),
                "--backends",
                str(BACKENDS),
                "--isolated",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    return out


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def test_replay_is_deterministic_same_bytes_twice(workdir, report_path):
    again = workdir / "again.json"
    assert (
        main(
            [
                "replay",
                str(workdir / "adversarial.json"),
                "--backends",
                str(BACKENDS),
                "--isolated",
                "-o",
                str(again),
            ]
        )
        == 0
    )
    assert sha256_file(again) == sha256_file(report_path)
    program = adversarial_program()
    backends = load_backends(BACKENDS)
    one = canonical_json_bytes(
        build_report(program, backends, input_sha256="0" * 64, ablations=["order"])
    )
    two = canonical_json_bytes(
        build_report(program, backends, input_sha256="0" * 64, ablations=["order"])
    )
    assert one == two


def test_report_validates_and_is_labelled_a_model_with_its_protocol(report_path, workdir):
    report = _load(report_path)
    validate(report, "report", file=str(report_path))
    assert (
        "not NCCL" in report["model"]["notice"] and "not about silicon" in report["model"]["notice"]
    )
    proto = report["protocol"]
    assert proto["input"]["sha256"] == sha256_file(workdir / "adversarial.json")
    assert proto["backends"]["sha256"] == load_backends(BACKENDS).sha256
    assert proto["ablations"] == {
        "applied": [],
        "label": "simulator controls, not physical interventions",
    }
    assert proto["configs"] == sorted(load_backends(BACKENDS).configs)
    assert report["program"]["skew"]["status"] == "simulated"


def test_samples_recompute_the_reported_metrics(report_path):
    report = _load(report_path)
    weights = samples.decode(report["samples"]["weight"])
    for block in report["configs"].values():
        latency = samples.decode(block["samples"]["latency_ns"])
        assert int(latency.max()) == block["latency"]["max_ns"]
        assert int(np.quantile(latency, 0.99, method="inverted_cdf")) == block["latency"]["p99_ns"]
        assert float(np.sum(weights * latency) / weights.sum()) == pytest.approx(
            block["latency"]["mean_ns"], rel=1e-12
        )
        hidden = samples.decode(block["samples"]["hidden_ns"])
        assert float(hidden.sum()) == block["hidden"]["total_ns"]
        top = sorted(latency.tolist(), reverse=True)[:10]
        assert [e["latency_ns"] for e in block["tail_events"]] == top


def test_verify_report_accepts_an_untouched_report(report_path, workdir, capsys):
    rc = main(
        [
            "verify-report",
            str(report_path),
            "--input",
            str(workdir / "adversarial.json"),
            "--backends",
            str(BACKENDS),
        ]
    )
    assert rc == 0, capsys.readouterr().err
    assert "bit for bit" in capsys.readouterr().out


def _tamper_latency_sample(report):
    block = report["configs"]["ring_only"]["samples"]["latency_ns"]
    values = samples.decode(block).copy()
    values[3] += 1
    report["configs"]["ring_only"]["samples"]["latency_ns"] = samples.encode(
        values
    )  # consistent digest


def _set(path, fn):
    def apply(report):
        node = report
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = fn(node[path[-1]])

    return apply


TAMPERS = {
    "p99": (
        _set(["configs", "upgrade", "latency", "p99_ns"], lambda v: v - 1),
        "configs.upgrade.latency.p99_ns",
    ),
    "mean": (
        _set(["configs", "baseline", "latency", "mean_ns"], lambda v: v * 0.97),
        "configs.baseline.latency.mean_ns",
    ),
    "tail_event": (
        _set(
            ["configs", "few_channels", "tail_events"],
            lambda v: [dict(v[0], occ=v[0]["occ"] + 1)] + v[1:],
        ),
        "configs.few_channels.tail_events[0].occ",
    ),
    "phase": (
        _set(
            ["configs", "no_ll128", "by_phase"], lambda v: {**v, "tail": {**v["tail"], "p99_ns": 1}}
        ),
        "configs.no_ll128.by_phase.tail.p99_ns",
    ),
    "ranking": (
        _set(["rankings", "metrics", "mean", "order"], lambda v: list(reversed(v))),
        "rankings.metrics.mean.order",
    ),
    "isolated": (
        _set(["configs", "upgrade", "isolated"], lambda v: {**v, "score_ns": v["score_ns"] * 2}),
        "configs.upgrade.isolated.score_ns",
    ),
    "sample": (_tamper_latency_sample, "configs.ring_only.samples.latency_ns"),
    "notice": (_set(["model", "notice"], lambda v: "measured on H100"), "model.notice"),
    "type": (
        _set(["configs", "baseline", "latency", "p50_ns"], float),
        "configs.baseline.latency.p50_ns",
    ),
}


@pytest.mark.parametrize("case", sorted(TAMPERS))
def test_verify_report_fails_on_any_edited_number_naming_the_field(
    case, report_path, workdir, tmp_path, capsys
):
    report = _load(report_path)
    edit, field = TAMPERS[case]
    edit(report)
    bad = tmp_path / "tampered.json"
    write_json(bad, report)
    rc = main(["verify-report", str(bad), "--input", str(workdir / "adversarial.json")])
    err = capsys.readouterr().err.strip()
    assert rc == 1
    assert len(err.splitlines()) == 1
    assert f"field {field}" in err, err


def test_verify_report_fails_for_another_input_or_other_backends(
    report_path, workdir, tmp_path, capsys
):
    doc = build_adversarial()
    doc["events"][0]["overlap_ns"] += 1
    other = tmp_path / "other.json"
    write_json(other, doc)
    assert main(["verify-report", str(report_path), "--input", str(other)]) == 1
    assert "field protocol.input.sha256" in capsys.readouterr().err
    backends = tmp_path / "b.yaml"
    backends.write_text(BACKENDS.read_text().replace("contention: 0.8", "contention: 0.7"))
    assert (
        main(
            [
                "verify-report",
                str(report_path),
                "--input",
                str(workdir / "adversarial.json"),
                "--backends",
                str(backends),
            ]
        )
        == 1
    )
    assert "field protocol.backends.sha256" in capsys.readouterr().err


def test_verify_report_refuses_a_non_report_with_exit_2(workdir, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["verify-report", str(bad), "--input", str(workdir / "adversarial.json")]) == 2
    assert str(bad) in capsys.readouterr().err


def test_isolated_ranking_differs_from_workload_ranking_on_the_adversarial_trace(report_path):
    report = _load(report_path)
    rk = report["rankings"]
    for metric in ("p50", "p95", "p99", "mean"):
        cmp = rk["isolated_vs_workload"][metric]
        assert cmp["differs"], metric
        assert any(p["inverted"] for p in cmp["pairs"]), metric
    assert rk["isolated"]["order"] != rk["metrics"]["mean"]["order"]
    # the isolated winner is beaten in the workload by at least one configuration
    iso_best = rk["isolated"]["order"][0]
    assert rk["metrics"]["mean"]["order"].index(iso_best) > 0
    # the report's isolated scores are the weighted sums of its per-signature times
    sigs = report["isolated"]["signatures"]
    for block in report["configs"].values():
        score = sum(
            s["weight"] * t for s, t in zip(sigs, block["isolated"]["time_ns"], strict=True)
        )
        assert block["isolated"]["score_ns"] == pytest.approx(score, rel=1e-12)


def _run(program, ablations):
    backends = load_backends(BACKENDS)
    return build_report(
        program, backends, input_sha256="0" * 64, config_names=["baseline"], ablations=ablations
    )


def _lat(report, name="latency_ns"):
    return samples.decode(report["configs"]["baseline"]["samples"][name])


def test_skew_ablation_removes_rendezvous_waits_and_never_lengthens_latency():
    program = adversarial_program()
    full, ablated = _run(program, []), _run(program, ["skew"])
    assert full["rendezvous_wait"]["max_ns"] > 0
    assert (
        ablated["rendezvous_wait"]["max_ns"] == 0
        and ablated["rendezvous_wait"]["member_wait_total_ns"] == 0
    )
    assert ablated["program"]["skew"]["status"] == "ablated"
    assert (_lat(ablated) <= _lat(full)).all() and _lat(ablated).sum() < _lat(full).sum()


def test_overlap_ablation_hides_nothing_and_removes_contention():
    program = adversarial_program()
    full, ablated = _run(program, []), _run(program, ["overlap"])
    assert full["configs"]["baseline"]["hidden"]["total_ns"] > 0
    assert ablated["configs"]["baseline"]["hidden"]["total_ns"] == 0
    assert (_lat(ablated, "service_ns") <= _lat(full, "service_ns")).all()
    assert (_lat(ablated, "service_ns") < _lat(full, "service_ns")).any()


def test_order_ablation_groups_equal_signatures_and_keeps_the_gap_sequence():
    program = adversarial_program()
    ablated = _run(program, ["order"])
    occ = samples.decode(ablated["samples"]["occ"])
    sig, _ = program.signature_ids()
    assert (np.diff(sig[occ]) >= 0).all()  # grouped by signature id
    assert sorted(occ.tolist()) == list(range(program.n))
    assert occ.tolist() != list(range(program.n))
    assert _lat(ablated).tolist() != _lat(_run(program, [])).tolist()


def test_tail_ablation_drops_exactly_the_tail_windows():
    program = adversarial_program()
    ablated = _run(program, ["tail"])
    occ = samples.decode(ablated["samples"]["occ"])
    tail = program.occurrences["tail"].to_numpy()
    assert ablated["program"]["simulated"] == program.n - int(tail.sum()) == 92
    assert set(occ.tolist()) == set(np.flatnonzero(~tail).tolist())
    assert "tail" not in ablated["configs"]["baseline"]["by_phase"]


def test_ablated_replay_records_its_protocol_and_verifies(workdir, tmp_path, capsys):
    out = tmp_path / "abl.json"
    args = [
        "replay",
        str(workdir / "adversarial.json"),
        "--backends",
        str(BACKENDS),
        "--config",
        "upgrade",
        "--config",
        "baseline",
    ]
    assert main([*args, "--ablate", "tail", "--ablate", "skew", "-o", str(out)]) == 0
    report = _load(out)
    assert report["protocol"]["ablations"]["applied"] == ["skew", "tail"]
    assert report["protocol"]["configs"] == ["baseline", "upgrade"]
    validate(report, "report", file=str(out))
    assert main(["verify-report", str(out), "--input", str(workdir / "adversarial.json")]) == 0
    capsys.readouterr()
    assert main([*args, "--ablate", "jitter", "-o", str(tmp_path / "x.json")]) == 2
    assert "unknown ablation 'jitter'" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_unknown_skew_report_says_unknown_and_not_simulated_never_zero():
    program = adversarial_program()
    unknown = make_program(
        {c: program.occurrences[c].to_numpy() for c in program.occurrences.columns},
        {c: program.members[c].to_numpy() for c in program.members.columns},
        world_size=4,
        skew_known=False,
        skew_reason="ranks read 2 different clocks and no clock calibration was given",
    )
    report = build_report(unknown, load_backends(BACKENDS), input_sha256="0" * 64)
    skew = report["program"]["skew"]
    assert (
        skew["status"] == "unknown"
        and "UNKNOWN" in skew["statement"]
        and "NOT simulated" in skew["statement"]
    )
    assert "not a claim that skew is zero" in skew["statement"]
    assert skew["reason"].startswith("ranks read 2 different clocks")
    assert set(report["rendezvous_wait"].values()) == {None}
    assert "rendezvous_wait_ns" not in report["samples"]
    validate(json.loads(canonical_json_bytes(report)), "report", file="unknown-skew report")
    # verify_report (library) replays it
    verify_report(json.loads(canonical_json_bytes(report)), unknown)


def test_weighted_canary_metrics_count_logical_occurrences():
    program = adversarial_program()
    weighted = make_program(
        {
            **{c: program.occurrences[c].to_numpy() for c in program.occurrences.columns},
            "weight": np.full(program.n, 2.5),
        },
        {c: program.members[c].to_numpy() for c in program.members.columns},
        world_size=4,
        skew_known=True,
    )
    plain, heavy = _run(program, []), _run(weighted, [])
    assert heavy["program"]["weight_total"] == 250.0
    assert heavy["configs"]["baseline"]["by_op"]["all_reduce"]["count"] == 72 * 2.5
    assert (
        heavy["configs"]["baseline"]["latency"]["p99_ns"]
        == plain["configs"]["baseline"]["latency"]["p99_ns"]
    )
    assert (
        heavy["configs"]["baseline"]["hidden"]["total_ns"]
        == 2.5 * plain["configs"]["baseline"]["hidden"]["total_ns"]
    )


def test_library_verify_report_names_field_after_copy_edit():
    program = adversarial_program()
    report = json.loads(canonical_json_bytes(_run(program, [])))
    verify_report(copy.deepcopy(report), program)
    report["configs"]["baseline"]["queue_wait"]["p95_ns"] += 7
    from tracecanary.errors import ClaimFailed

    with pytest.raises(ClaimFailed) as err:
        verify_report(report, program)
    assert err.value.field == "configs.baseline.queue_wait.p95_ns"
