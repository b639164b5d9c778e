"""Every physical source of a campaign gets its own physical pipeline (issue 15, "every
physical source"): ``physical.sources`` is a list (an entry may carry its own
configurations and gate threshold), the old single ``physical.source`` key is refused
naming its replacement, a real Snakemake plan has one chain of physical jobs per source,
and the summary shows one physical section per source."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import REPO, make_tiny_campaign, run_snakemake

from tracecanary.campaign.physical_sources import (
    physical_sources,
    refuse_renamed_physical_keys,
)
from tracecanary.campaign.summary import physical_section, sources_table
from tracecanary.errors import InputError, SchemaError
from tracecanary.formats.schemas import validate

SOURCES = [{"id": "decode", "kind": "trace", "path": "d.json"}, {"id": "zoo", "kind": "trace", "path": "z.json"}]  # fmt: skip


def _config(physical: dict) -> dict:
    return {"campaign": "c", "sources": SOURCES, "physical": physical}


def _resolved(physical: dict) -> dict:
    """``physical`` with the schema's defaults set, as Snakemake's validate leaves it."""
    defaults = {"configs": ["native", "fused64k"], "repetitions": 5, "max_runtime_ratio": 0.5}
    config = _config({**defaults, **physical})
    validate(config, "config", file="c.yaml")
    return physical_sources(config, file="c.yaml")


def test_config_schema_accepts_a_list_of_ids_and_per_source_entries():
    validate(_config({"sources": ["decode"]}), "config", file="c.yaml")
    entry = {"id": "zoo", "configs": ["native"], "repetitions": 3, "max_runtime_ratio": 0.6}
    validate(_config({"sources": ["decode", entry]}), "config", file="c.yaml")


@pytest.mark.parametrize(
    "bad",
    [
        "decode",  # a bare id, not a list
        [{"id": "zoo", "max_runtime_ratio": 0}],
        [{"id": "zoo", "configs": []}],
        [{"id": "zoo", "threshold": 0.6}],
        [{"id": "zoo", "repetitions": 0}],
        ["../victim"],
    ],
)
def test_config_schema_refuses_a_malformed_sources_list(bad):
    with pytest.raises(SchemaError):
        validate(_config({"sources": bad}), "config", file="c.yaml")


def test_the_old_single_source_key_is_refused_naming_sources():
    with pytest.raises(InputError) as err:
        refuse_renamed_physical_keys(_config({"source": "decode"}), file="c.yaml")
    line = err.value.one_line()
    assert "physical.sources" in line and "c.yaml" in line and "physical.source" in line
    assert "\n" not in line
    refuse_renamed_physical_keys(_config({"sources": ["decode"]}), file="c.yaml")


def test_an_entry_overrides_configs_repetitions_and_threshold_for_its_source_only():
    zoo = {"id": "zoo", "configs": ["native"], "repetitions": 3, "max_runtime_ratio": 0.6}
    resolved = _resolved({"sources": ["decode", zoo]})
    assert list(resolved) == ["decode", "zoo"]
    assert resolved["decode"].configs == ("native", "fused64k")
    assert (resolved["decode"].repetitions, resolved["decode"].max_runtime_ratio) == (5, 0.5)
    assert resolved["zoo"].configs == ("native",)
    assert (resolved["zoo"].repetitions, resolved["zoo"].max_runtime_ratio) == (3, 0.6)


@pytest.mark.parametrize(
    ("sources", "message"),
    [(["nowhere"], "'nowhere' is not one of the campaign's sources"), (["zoo", "zoo"], "twice")],
)
def test_an_unknown_or_repeated_physical_source_is_refused_by_name(sources, message):
    with pytest.raises(InputError, match=message) as err:
        _resolved({"sources": sources})
    assert "physical.sources[" in err.value.one_line()


def _report(status: str, *, sim_agreeing: int, error: float, reasons=()) -> dict:
    pair = {"pairs": 1, "decided_pairs": 1, "undetermined_pairs": 0, "agreeing_decided_pairs": 1}
    open_pair = {"pairs": 1, "decided_pairs": 0, "undetermined_pairs": 1}
    return {
        "ranking_agreement": {"p50": {**pair, "agreeing_pairs": 1}, "p99": {**open_pair, "agreeing_pairs": 1}},
        "configs": {"native": {"runtime_reduction": 0.34}, "fused64k": {"runtime_reduction": 0.31}},
        "gate": {"status": status, "reasons": list(reasons), "warnings": [], "decided_pairs": 1,
                 "max_runtime_ratio": 0.6},
        "simulator_agreement": {
            "status": "computed", "decided_pairs": 2, "agreeing_pairs": sim_agreeing,
            "agreement": sim_agreeing / 2,
            "programs": {"full": {"prediction_error_pct": {"native": error, "fused64k": -error}}},
        },
    }  # fmt: skip


def test_the_summary_shows_one_physical_section_per_source():
    docs = {
        "decode_small": _report("pass", sim_agreeing=2, error=4.25),
        "zoo_tp_decode": _report("fail", sim_agreeing=1, error=31.0, reasons=["native: ratio"]),
    }
    lines = physical_section(docs)
    text = "\n".join(lines)
    assert [line for line in lines if line.startswith("### ")] == [
        "### `decode_small`",
        "### `zoo_tp_decode`",
    ]
    first, second = text.split("### `zoo_tp_decode`")
    assert "2 of 2 decided pairs rank alike (100%)" in first
    assert "native +4.2%" in first and "fused64k -4.2%" in first
    assert "physical gate: **pass** (canary/full runtime ratio at most 0.6)" in first
    assert "1 decided, 1 undetermined" in first
    assert "1 of 2 decided pairs rank alike (50%)" in second
    assert "native +31.0%" in second
    assert "physical gate: **fail**" in second and "fails: native: ratio" in second
    assert "physical/zoo_tp_decode.md" in second
    assert physical_section({}) == []


def test_a_source_without_a_simulator_comparison_says_why():
    doc = _report("warning", sim_agreeing=0, error=0.0)
    doc["simulator_agreement"] = {"status": "not_computed", "reason": "no calibrated backends"}
    text = "\n".join(physical_section({"s": doc}))
    assert "simulator vs machine: not computed (no calibrated backends)" in text


def test_the_sources_table_gives_each_physical_source_its_own_verdict(tmp_path):
    canaries = []
    for source in ("decode", "zoo", "other"):
        path = tmp_path / "search" / source / "canary.json"
        path.parent.mkdir(parents=True)
        stats = {"occurrences_logical": 10, "occurrences_executed": 5, "compressed": True,
                 "byte_compression": 2.0}  # fmt: skip
        path.write_text(json.dumps({"claim": "verified", "stats": stats}))
        canaries.append(str(path))
    docs = {"decode": _report("pass", sim_agreeing=2, error=1.0), "zoo": _report("fail", sim_agreeing=1, error=1.0)}  # fmt: skip
    rows = {r.split("|")[1].strip(): r for r in sources_table(canaries, {}, {}, docs)[2:]}
    assert "physical gate **pass**" in rows["decode"]
    assert "physical gate **fail**" in rows["zoo"]
    assert rows["other"].rstrip().endswith("not run |")


@pytest.fixture
def two_source_campaign(tmp_path):
    make_tiny_campaign(tmp_path, with_alphabeta=False)
    config_file = tmp_path / "config" / "tiny.yaml"
    config = yaml.safe_load(config_file.read_text())
    config["sources"].append(dict(config["sources"][0], id="decode2"))
    config["physical"] = {
        "sources": [
            "decode",
            {"id": "decode2", "configs": ["native"], "repetitions": 2, "max_runtime_ratio": 0.6},
        ],
        "configs": ["native", "fused64k"],
        "repetitions": 3,
        "sweeps": [{"id": "ar", "collective": "all_reduce"}],
    }
    config_file.write_text(yaml.safe_dump(config))
    (tmp_path / "config" / "physical.yaml").write_bytes(
        (REPO / "config" / "physical.yaml").read_bytes()
    )
    return tmp_path


def _planned(workdir) -> dict[str, list[str]]:
    """Snakemake's plan for the default target: output file -> rule, for what is missing."""
    run = run_snakemake(workdir, "--summary")
    assert run.returncode == 0, run.stderr[-3000:]
    plan: dict[str, list[str]] = {}
    for row in run.stdout.splitlines():
        cols = row.split("\t")
        if len(cols) >= 5 and cols[4] == "missing":
            plan.setdefault(cols[2], []).append(cols[0])
    return plan


@pytest.mark.slow
def test_a_campaign_with_two_physical_sources_plans_a_physical_chain_per_source(
    two_source_campaign,
):
    plan = _planned(two_source_campaign)
    replays = sorted(p for p in plan["replay_physical"] if p.startswith("results/tiny/provenance"))
    expected = [
        f"results/tiny/provenance/replay_physical/{s}/{c}/rep{r}.json"
        for s, configs, reps in (("decode", ("fused64k", "native"), 3), ("decode2", ("native",), 2))
        for c in configs
        for r in range(1, reps + 1)
    ]
    assert replays == sorted(expected)
    for source in ("decode", "decode2"):
        assert f"results/tiny/physical/{source}.json" in plan["physical_report"]
        assert f"results/tiny/physical_gate/{source}.txt" in plan["physical_gate"]
        assert f"results/tiny/backends/{source}/calibrated.yaml" in plan["calibrate_backends"]
    dispatch = sorted(p for p in plan["replay_dispatch"] if "/provenance/" not in p)
    assert dispatch == [
        "results/tiny/dispatch/decode/fused64k/attempt",
        "results/tiny/dispatch/decode/native/attempt",
        "results/tiny/dispatch/decode2/native/attempt",
    ]
    exports = sorted(p for p in plan["export_param"] if "/provenance/" not in p)
    assert exports == [
        f"results/tiny/param/{s}/{p}" for s in ("decode", "decode2") for p in ("canary", "full")
    ]


@pytest.mark.slow
def test_snakemake_refuses_the_old_physical_source_key_in_one_line_naming_sources(tmp_path):
    make_tiny_campaign(tmp_path, with_alphabeta=False)
    config_file = tmp_path / "config" / "tiny.yaml"
    config = yaml.safe_load(config_file.read_text())
    config["physical"] = {"source": "decode"}
    config_file.write_text(yaml.safe_dump(config))
    run = run_snakemake(tmp_path, "-n")
    assert run.returncode != 0
    out = run.stdout + run.stderr
    assert "physical.source was replaced by physical.sources" in out, out[-2000:]
    assert "config/tiny.yaml" in out
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_snakemake_refuses_a_physical_source_the_campaign_does_not_have(tmp_path):
    make_tiny_campaign(tmp_path, with_alphabeta=False)
    config_file = tmp_path / "config" / "tiny.yaml"
    config = yaml.safe_load(config_file.read_text())
    config["physical"] = {"sources": ["decode", "nowhere"]}
    config_file.write_text(yaml.safe_dump(config))
    run = run_snakemake(tmp_path, "-n")
    assert run.returncode != 0
    out = run.stdout + run.stderr
    assert "physical source 'nowhere' is not one of the campaign's sources" in out, out[-2000:]


def test_a_live_capture_on_fewer_ranks_than_the_physical_replay_is_refused_before_any_job():
    """A zoo source captured on 2 ranks cannot be replayed on physical.nproc 4: refused at
    config time naming the entry, not after capture, search and export have run."""
    sources = [{"id": "zoo", "kind": "live_capture", "workload": "ddp", "nproc": 2, "steps": 5}]
    physical = {"sources": ["zoo"], "nodes": 1, "nproc": 4, "configs": ["native"]}
    physical |= {"repetitions": 5, "max_runtime_ratio": 0.5}
    with pytest.raises(InputError) as err:
        physical_sources({"campaign": "c", "sources": sources, "physical": physical}, file="c.yaml")
    line = err.value.one_line()
    assert "captured on 2 ranks but physical replays run on 4" in line
    assert "physical.sources[0]" in line and "c.yaml" in line
    sources[0]["nproc"] = 4
    assert list(physical_sources({"campaign": "c", "sources": sources, "physical": physical}, file="c.yaml")) == ["zoo"]
