"""The contested-configurations campaign (config/contest.yaml, issue 15 item 6): a valid
campaign whose ladders price every call its configurations make of its source's ops, so its
simulator twins (decomposed included) are computed, not refused."""

from __future__ import annotations

import gzip
import json

import yaml
from conftest import REPO
from snakemake.utils import validate

from tracecanary.campaign.physical_sources import physical_sources
from tracecanary.physical.config import resolve_config
from tracecanary.sim.twin import _pieces

CONTEST = REPO / "config" / "contest.yaml"
SCHEMA = str(REPO / "schemas" / "config.schema.json")


def _config() -> dict:
    config = yaml.safe_load(CONTEST.read_text())
    validate(config, SCHEMA)  # what the Snakefile does, defaults filled in
    return config


def _source_ops(source: dict) -> set[tuple[str, str, int]]:
    """(op, dtype, bytes) of every event in the source's capture files."""
    ops = set()
    for path in source["captures"]:
        with gzip.open(REPO / path, "rt", encoding="utf-8") as lines:
            next(lines)  # the header
            for line in lines:
                event = json.loads(line)
                ops.add((event["op"], event["dtype"], int(event["bytes"])))
    return ops


def test_contest_campaign_replays_the_closest_pair_beside_native_five_times():
    config = _config()
    (physical,) = physical_sources(config, file=str(CONTEST)).values()
    assert {"chunked2", "decomposed"} <= set(physical.configs)
    assert physical.repetitions >= 5


def test_contest_ladders_price_every_call_each_configuration_makes_of_the_source():
    config = _config()
    (physical,) = physical_sources(config, file=str(CONTEST)).values()
    (source,) = [s for s in config["sources"] if s["id"] == physical.id]
    swept = {(s["collective"], s["dtype"]) for s in config["physical"]["sweeps"]}
    physical_yaml = REPO / config["physical"]["physical_configs"]
    needed = set()
    for name in physical.configs:
        replay = resolve_config(physical_yaml, name, "gloo")
        for op, dtype, nbytes in _source_ops(source):
            needed |= {(call, dtype) for call, _ in _pieces(op, nbytes, 4, replay)}
    assert ("scatter", "int64") in needed  # decomposed turns the int64 broadcast into scatter
    assert needed <= swept, f"no ladder for {sorted(needed - swept)}"
    big = {s["id"] for s in config["physical"]["sweeps"] if s["max_bytes"] != "64M"}
    assert not big, f"ladders stopping short of 64 MiB: {sorted(big)}"
