"""The commitments check compares a canary's logical expansion with its source in bounded
chunks (``verify.commitments.CHUNK_MEMBERS``) and gives the verdicts, and the same
mismatch text, as the check that compared the whole expansion at once.

``CASES`` are pinned to what the whole-expansion check (the code before chunking) gave:
the segments in order and the SHA-256 of the whole mismatch list as JSON (expected and
found values included); the property test compares chunk sizes down to one member
against one chunk holding everything, on random programs with random tampering."""

from __future__ import annotations

import copy
import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracecanary.compile import compile_program, parse_budget
from tracecanary.compile.canary import prefix_program
from tracecanary.program import Program
from tracecanary.synth.examples import decode_like_program, random_program
from tracecanary.verify import commitments
from tracecanary.verify.commitments import verify_commitments

BUDGET = parse_budget("skew=2us,overlap=5us,gap=5us,latency=5us")
TIGHT = parse_budget("gap=30,overlap=30,latency=30,skew=30")
# signature 0 gets more room than the others
OVERRIDDEN = parse_budget(
    "gap=40,overlap=40,latency=40,skew=40", {"0": {"latency": 100, "skew": 100}}
)


def _decode_like() -> Program:
    return decode_like_program(120, layers=6, world_size=4, jitter_ns=4_000, tail_every=40)


def _with_occurrence(program: Program, i: int, col: str, delta: int) -> Program:
    occ = program.occurrences.copy()
    occ.loc[i, col] = int(occ.loc[i, col]) + delta
    return Program(
        occ, program.members, program.world_size, program.skew_known, program.skew_reason
    )


def _with_member_skew(program: Program, m: int, delta: int) -> Program:
    members = program.members.copy()
    members.loc[m, "skew_ns"] = int(members.loc[m, "skew_ns"]) + delta
    return Program(
        program.occurrences, members, program.world_size, program.skew_known, program.skew_reason
    )


def _bounded(canary: dict, name: str) -> dict:
    stream = canary["timing"][name]
    assert stream["encoding"] == "bounded_intervals"
    return stream


def _understate_error(canary: dict, name: str) -> dict:
    stream = _bounded(canary, name)
    itv = next(i for i in stream["intervals"] if any(e for e in i["max_error_ns"] if e))
    j = next(j for j, e in enumerate(itv["max_error_ns"]) if e)
    itv["max_error_ns"][j] -= 1
    return canary


def _move_representative(canary: dict, name: str, k: int, delta: int) -> dict:
    itv = _bounded(canary, name)["intervals"][k]
    if name == "skew":
        itv["rep"][0][0] += delta
    else:
        itv["rep"][0] = (itv["rep"][0] or 0) + delta
    return canary


def _rename_signature_op(program: Program, canary: dict) -> dict:
    op = program.occurrences["op"].iloc[3]
    sig = next(i for i, s in enumerate(canary["signatures"]) if s["op"] == op)
    canary["signatures"][sig]["op"] = "custom:tampered"
    return canary


def _swap_group_rank(canary: dict) -> dict:
    name = sorted(canary["groups"])[0]
    ranks = canary["groups"][name]
    ranks[0] = max(ranks) + 1
    return canary


def _flip_skew_known(canary: dict) -> dict:
    canary["source"]["skew_known"] = not canary["source"]["skew_known"]
    return canary


def _case(name: str):
    """(source, canary) of each pinned case."""
    dl = _decode_like()
    rnd = random_program(3, 200)
    if name == "bounded untouched":
        return dl, compile_program(dl, budget=BUDGET)
    if name == "lossless untouched":
        return dl, compile_program(dl)
    if name == "prefix untouched":
        return rnd, compile_program(rnd, budget=TIGHT, prefix=120)
    if name == "override untouched":
        return rnd, compile_program(rnd, budget=OVERRIDDEN, intervals_always=True)
    if name == "override, skew within the override":
        canary = compile_program(rnd, budget=OVERRIDDEN, intervals_always=True)
        return _with_member_skew(rnd, 0, 70), canary
    if name == "override, latency over the plain budget":
        canary = compile_program(rnd, budget=OVERRIDDEN, intervals_always=True)
        return _with_occurrence(
            _with_occurrence(rnd, 1, "latency_ns", 70), 3, "latency_ns", 70
        ), canary
    if name == "source gap, lossless":
        return _with_occurrence(dl, 77, "gap_ns", 1), compile_program(dl)
    if name == "source latency, bounded":
        return _with_occurrence(dl, 300, "latency_ns", 40_000), compile_program(dl, budget=BUDGET)
    if name == "source bytes, bounded":
        return _with_occurrence(dl, 500, "bytes", 4), compile_program(dl, budget=BUDGET)
    if name == "source skew, bounded":
        return _with_member_skew(dl, 901, 60_000), compile_program(dl, budget=BUDGET)
    if name == "source skew, lossless":
        return _with_member_skew(rnd, 333, 7), compile_program(rnd)
    if name == "understated gap error":
        return dl, _understate_error(compile_program(dl, budget=BUDGET), "gap")
    if name == "understated skew error":
        return dl, _understate_error(compile_program(dl, budget=BUDGET), "skew")
    if name == "moved latency representative":
        return dl, _move_representative(compile_program(dl, budget=BUDGET), "latency", 0, 50_000)
    if name == "moved skew representative":
        return dl, _move_representative(compile_program(dl, budget=BUDGET), "skew", 1, 50_000)
    if name == "renamed signature op":
        return dl, _rename_signature_op(dl, compile_program(dl, budget=BUDGET))
    if name == "swapped group rank":
        return dl, _swap_group_rank(compile_program(dl, budget=BUDGET))
    if name == "flipped skew_known":
        return dl, _flip_skew_known(compile_program(dl, budget=BUDGET))
    if name == "prefix canary, shorter source":
        return prefix_program(rnd, 100), compile_program(rnd, budget=TIGHT, prefix=120)
    raise KeyError(name)


def _fingerprint(mismatches: list[dict]) -> str:
    return hashlib.sha256(json.dumps(mismatches, sort_keys=True).encode()).hexdigest()


# (segments, SHA-256 of the mismatch list) the whole-expansion check gave
CASES: dict[str, tuple[list[str], str]] = {
    "bounded untouched": ([], "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"),
    "lossless untouched": ([], "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"),
    "prefix untouched": ([], "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"),
    "override untouched": ([], "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"),
    "source gap, lossless": (
        ["source", "source_commitment [0, 843)", "timing.gap occurrence 77"],
        "c3018a49a8dd39ff70ed6661c14122880aa7280288013f0e3444dbd50a1b3976",
    ),
    "source latency, bounded": (
        [
            "source",
            "source_commitment [0, 843)",
            "timing.gap.intervals[3] [3, 843)",
            "timing.overlap.intervals[1] [3, 843)",
            "timing.latency.intervals[3] [150, 423)",
            "timing.skew.intervals[1] [3, 843)",
            "timing.latency.intervals[3] [150, 423) max_error_ns",
            "timing.latency.intervals[3] [150, 423) budget at occurrence 300",
        ],
        "8c7305b1009d19120019e69bbde4292c2de96acd7995bf5c96e26e74f905c2fa",
    ),
    "source bytes, bounded": (
        [
            "source",
            "source_commitment [0, 843)",
            "timing.gap.intervals[3] [3, 843)",
            "timing.overlap.intervals[1] [3, 843)",
            "timing.latency.intervals[5] [430, 703)",
            "timing.skew.intervals[1] [3, 843)",
            "occurrence 500 field bytes",
        ],
        "96bc3054d4e585baa5573dd048941be96ec1c995f65157d2bae0ce77614c3b0e",
    ),
    "source skew, bounded": (
        [
            "source",
            "source_commitment [0, 843)",
            "timing.gap.intervals[3] [3, 843)",
            "timing.overlap.intervals[1] [3, 843)",
            "timing.latency.intervals[3] [150, 423)",
            "timing.skew.intervals[1] [3, 843)",
            "timing.skew.intervals[1] [3, 843) max_error_ns",
            "timing.skew.intervals[1] [3, 843) budget at occurrence 225",
        ],
        "8eef1f824598ac473cdab0b68911fee1b4b4516a6a461a9ec21c287402d30e0d",
    ),
    "source skew, lossless": (
        ["source", "source_commitment [0, 200)", "timing.skew occurrence 166"],
        "f3fc4800f1a4ca99ed2d6993947b930606c8db8cbc910e5a70644c6442141540",
    ),
    "override, skew within the override": (
        [
            "source",
            "source_commitment [0, 200)",
            "timing.gap.intervals[0] [0, 1)",
            "timing.overlap.intervals[0] [0, 2)",
            "timing.latency.intervals[0] [0, 1)",
            "timing.skew.intervals[0] [0, 1)",
            "timing.skew.intervals[0] [0, 1) max_error_ns",
        ],
        "58ee63bf7395fbb0ae73ae4e74656554e79c4925049ec8af660db3b79ad3539c",
    ),
    "override, latency over the plain budget": (
        [
            "source",
            "source_commitment [0, 200)",
            "timing.gap.intervals[1] [1, 13)",
            "timing.overlap.intervals[0] [0, 2)",
            "timing.overlap.intervals[1] [2, 9)",
            "timing.latency.intervals[1] [1, 3)",
            "timing.latency.intervals[2] [3, 4)",
            "timing.skew.intervals[1] [1, 3)",
            "timing.skew.intervals[2] [3, 4)",
            "timing.latency.intervals[1] [1, 3) max_error_ns",
            "timing.latency.intervals[1] [1, 3) budget at occurrence 1",
            "timing.latency.intervals[2] [3, 4) max_error_ns",
        ],
        "13c0794580cc0f0a2de75f7184366f7d3b85de5355cf48d9b49d36a6554bc8d6",
    ),
    "understated gap error": (
        ["timing.gap.intervals[3] [3, 843) max_error_ns"],
        "a0cb198ca34ebd56f48b9b9b4b4eaeaf34a90c9702700a51ae516c6dd74c06fd",
    ),
    "understated skew error": (
        ["timing.skew.intervals[0] [0, 3) max_error_ns"],
        "3f7190551a375607a1a87f3f47e1ce0ad360a57f51aab110907cd39ad95f9ba6",
    ),
    "moved latency representative": (
        [
            "timing.latency.intervals[0] [0, 3) max_error_ns",
            "timing.latency.intervals[0] [0, 3) budget at occurrence 0",
        ],
        "2524cce69e10cca59874c2401dec32e1e4e465da95d960a5c58399be7de95975",
    ),
    "moved skew representative": (
        [
            "timing.skew.intervals[1] [3, 843) max_error_ns",
            "timing.skew.intervals[1] [3, 843) budget at occurrence 3",
        ],
        "27fdebe4640431868208bdac003f18a62827af1cd11b7a2509d209cb44a8d10b",
    ),
    "renamed signature op": (
        ["occurrence 2 field op"],
        "861136eb94cc8d329cb344a87a4d2b36cac628d9ca6a8a5497f5f946ec84352c",
    ),
    "swapped group rank": (
        ["members"],
        "370e51a3795fcadeb1e4358b33f2baac643f37589e8162486fc8e7a71ec27199",
    ),
    "flipped skew_known": (
        ["source.skew_known"],
        "768bde6a97236ebe111f9a495a742d2d0273e8d775ad486f19af10aeaf8f1202",
    ),
    "prefix canary, shorter source": (
        ["source", "source_commitment [0, 120)"],
        "65213de39729ec6deabd61e42dbc996a55236744d043d4c72c9f27580c33fcf2",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_case_gives_the_mismatches_of_the_whole_expansion_check(name):
    source, canary = _case(name)
    found = verify_commitments(source, canary)
    segments, digest = CASES[name]
    assert [m["segment"] for m in found] == segments
    assert _fingerprint(found) == digest


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_case_gives_the_same_mismatches_one_member_per_chunk(name, monkeypatch):
    source, canary = _case(name)
    monkeypatch.setattr(commitments, "CHUNK_MEMBERS", 1)
    assert _fingerprint(verify_commitments(source, canary)) == CASES[name][1]


def test_untouched_canaries_pass_and_each_tampering_is_caught():
    untouched = {n for n in CASES if n.endswith("untouched")}
    assert untouched and all(CASES[n][0] == [] for n in untouched)
    assert all(CASES[n][0] for n in set(CASES) - untouched)


_TAMPERINGS = ("none", "gap", "latency", "overlap", "skew", "max_error", "representative")


def _tampered(seed: int, n: int, what: str, where: int, delta: int, bounded: bool):
    program = random_program(seed, n)
    canary = compile_program(
        program, budget=OVERRIDDEN if bounded else None, intervals_always=bounded
    )
    if what in ("gap", "latency", "overlap"):
        program = _with_occurrence(program, where % program.n, f"{what}_ns", delta)
    elif what == "skew":
        program = _with_member_skew(program, where % len(program.members), delta)
    elif what in ("max_error", "representative"):
        streams = [
            k for k, s in canary["timing"].items() if s and s["encoding"] == "bounded_intervals"
        ]
        if streams:
            name = streams[where % len(streams)]
            if what == "max_error":
                itv = canary["timing"][name]["intervals"][
                    where % 3 % len(canary["timing"][name]["intervals"])
                ]
                itv["max_error_ns"][0] = (itv["max_error_ns"][0] or 0) + delta
            else:
                k = where % len(canary["timing"][name]["intervals"])
                _move_representative(canary, name, k, delta)
    return program, canary


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 10_000),
    st.integers(1, 80),
    st.sampled_from(_TAMPERINGS),
    st.integers(0, 1_000),
    st.integers(1, 5_000),
    st.booleans(),
    st.integers(1, 9),
)
def test_chunks_of_any_size_give_the_mismatches_of_one_chunk(
    seed, n, what, where, delta, bounded, chunk
):
    program, canary = _tampered(seed, n, what, where, delta, bounded)
    original = commitments.CHUNK_MEMBERS
    try:
        commitments.CHUNK_MEMBERS = 1 << 40
        whole = verify_commitments(program, copy.deepcopy(canary))
        commitments.CHUNK_MEMBERS = chunk
        assert verify_commitments(program, copy.deepcopy(canary)) == whole
    finally:
        commitments.CHUNK_MEMBERS = original
    if what == "none":
        assert whole == []


def _pin() -> None:
    """Print ``CASES`` from the check as it is (run once, on the code before chunking)."""
    names = [
        "bounded untouched",
        "lossless untouched",
        "prefix untouched",
        "override untouched",
        "source gap, lossless",
        "source latency, bounded",
        "source bytes, bounded",
        "source skew, bounded",
        "source skew, lossless",
        "override, skew within the override",
        "override, latency over the plain budget",
        "understated gap error",
        "understated skew error",
        "moved latency representative",
        "moved skew representative",
        "renamed signature op",
        "swapped group rank",
        "flipped skew_known",
        "prefix canary, shorter source",
    ]
    for name in names:
        found = verify_commitments(*_case(name))
        print(f"    {name!r}: ({[m['segment'] for m in found]!r}, {_fingerprint(found)!r}),")


if __name__ == "__main__":
    _pin()
