"""NCCL TUNING logs: the three line forms, the refusal of disagreeing repeated records,
the 2.24+ per-rank byte count, segments and tuner predicted vs measured.

The log lines below are synthetic fixtures written to the exact printf formats of
NVIDIA/nccl src/enqueue.cc (INFO(NCCL_TUNING, ...)) and the ``host:pid:tid [dev] NCCL INFO ``
prefix of src/debug.cc:
    2.20-2.22  "%ld Bytes -> Algo %d proto %d time %f"
    2.23       "%s: %ld Bytes -> Algo %d proto %d time %f"
    2.24+      "%s: %ld Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}"
"""

from __future__ import annotations

import json

import pytest
from test_alphabeta_nccltests import SIZES, ladder_times, synth_run

from tracecanary.alphabeta.tuning import merge_logs, parse_tuning, records_for_ladder
from tracecanary.cli import main
from tracecanary.errors import ImportRefused

PREFIX = "node-a:41234:41301 [0] NCCL INFO "

FORM_220 = "\n".join(
    [
        "node-a:41234:41234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
        PREFIX + "1048576 Bytes -> Algo 1 proto 2 time 38.271999",
        PREFIX + "1048576 Bytes -> Algo 1 proto 2 time 38.271999",
        PREFIX + "1024 Bytes -> Algo 0 proto 0 time 12.500000",
    ]
)
FORM_223 = "\n".join(
    [
        PREFIX + "AllReduce: 1024 Bytes -> Algo 0 proto 0 time 12.500000",
        PREFIX + "AllGather: 1024 Bytes -> Algo 1 proto 1 time 9.750000",
        PREFIX + "AllReduce: 1024 Bytes -> Algo 0 proto 0 time 12.500000",
    ]
)
FORM_224 = "\n".join(
    [
        "[2025-01-01 10:00:00] "
        + PREFIX
        + "AllGather: 4096 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}",
        "[1,0]<stdout>:"
        + PREFIX
        + "AllGather: 4096 Bytes -> Algo RING proto LL channel{Lo..Hi}={2..3}",
        PREFIX
        + "AllReduce [Symmetric]: 4096 Bytes -> Kernel AllReduce_RSxLD_AGxST nchannels 4 nthreads 512 nWorks 1",
        "node-a:41234:41234 [0] NCCL INFO comm 0x55d0 rank 0 nranks 8 cudaDev 0 nvmlDev 0 busId 7000 commId 0x9a - Init COMPLETE",
    ]
)


def test_form_220_records_without_function_name():
    log = parse_tuning(FORM_220, file="t220.log")
    rec = log.records.set_index("bytes")
    assert log.form_counts == {1: 3}
    assert rec.loc[1048576, "func"] is None
    assert (rec.loc[1048576, "algorithm"], rec.loc[1048576, "protocol"]) == ("RING", "SIMPLE")
    assert rec.loc[1048576, "time_us"] == pytest.approx(38.271999)
    assert rec.loc[1048576, "n_lines"] == 2 and rec.loc[1048576, "first_line"] == 2
    assert (rec.loc[1024, "algorithm"], rec.loc[1024, "protocol"]) == ("TREE", "LL")


def test_form_223_records_with_function_name():
    log = parse_tuning(FORM_223, file="t223.log")
    assert log.form_counts == {2: 3}
    rows = {(r.func, r.bytes): r for r in log.records.itertuples()}
    assert rows[("AllReduce", 1024)].algorithm == "TREE" and rows[("AllReduce", 1024)].n_lines == 2
    assert (rows[("AllGather", 1024)].algorithm, rows[("AllGather", 1024)].protocol) == (
        "RING",
        "LL128",
    )
    assert rows[("AllGather", 1024)].time_us == pytest.approx(9.75)


def test_form_224_records_names_channels_and_no_time():
    log = parse_tuning(FORM_224, file="t224.log")
    assert log.form_counts == {3: 2}
    rec = log.records.iloc[0]
    assert (rec["func"], rec["bytes"], rec["algorithm"], rec["protocol"]) == (
        "AllGather",
        4096,
        "RING",
        "LL",
    )
    assert rec["time_us"] != rec["time_us"]  # NaN: 2.24+ logs no time
    assert rec["channels"] == ("0..1", "2..3")
    assert log.nranks == (8,)
    assert log.other_tuning_lines == 1


def test_v224_allgather_bytes_are_per_rank_and_scaled_to_nccl_tests_size():
    log = parse_tuning(FORM_224, file="t224.log")
    mapped = records_for_ladder(
        merge_logs([log]), collective="all_gather", world_size=8, funcless_applies=False
    )
    assert mapped["ladder_bytes"].tolist() == [4096 * 8]
    log223 = parse_tuning(FORM_223, file="t223.log")
    mapped = records_for_ladder(
        merge_logs([log223]), collective="all_gather", world_size=8, funcless_applies=False
    )
    assert mapped["ladder_bytes"].tolist() == [1024]  # 2.20-2.23 already log the nccl-tests size


@pytest.mark.parametrize(
    ("second", "field"),
    [
        ("AllReduce: 1024 Bytes -> Algo 1 proto 0 time 12.500000", "algorithm"),
        ("AllReduce: 1024 Bytes -> Algo 0 proto 2 time 12.500000", "protocol"),
        ("AllReduce: 1024 Bytes -> Algo 0 proto 0 time 12.600000", "time"),
    ],
)
def test_disagreeing_repeated_records_are_refused_naming_the_size(second, field):
    text = PREFIX + "AllReduce: 1024 Bytes -> Algo 0 proto 0 time 12.500000\n" + PREFIX + second
    with pytest.raises(ImportRefused) as err:
        parse_tuning(text, file="bad.log")
    assert (err.value.file, err.value.record, err.value.field) == ("bad.log", 2, field)
    assert "1024 bytes" in err.value.message and "line 1" in err.value.message


def test_malformed_record_and_unknown_enum_are_refused():
    with pytest.raises(ImportRefused) as err:
        parse_tuning(PREFIX + "AllReduce: 1024 Bytes -> Algo 0 proto", file="m.log")
    assert (err.value.record, err.value.field) == (1, "record")
    with pytest.raises(ImportRefused) as err:
        parse_tuning(PREFIX + "1024 Bytes -> Algo 9 proto 0 time 1.0", file="m.log")
    assert err.value.field == "algorithm"


def test_records_across_logs_must_agree():
    a = parse_tuning(
        PREFIX + "AllReduce: 1024 Bytes -> Algo 0 proto 0 time 12.500000", file="a.log"
    )
    b = parse_tuning(
        PREFIX + "AllReduce: 1024 Bytes -> Algo 1 proto 0 time 12.500000", file="b.log"
    )
    with pytest.raises(ImportRefused) as err:
        merge_logs([a, b])
    assert err.value.file == "b.log"


# --------------------------------------------------------------------------- through the CLI


def _tuning_for(sizes, *, form: int, split: int, time_of) -> str:
    """LL below ``split`` bytes, SIMPLE from it on; RING throughout (all_reduce)."""
    lines = []
    for s in sizes:
        proto = 0 if s < split else 2
        if form == 1:
            lines.append(PREFIX + f"{s} Bytes -> Algo 1 proto {proto} time {time_of(s):f}")
        elif form == 2:
            lines.append(
                PREFIX + f"AllReduce: {s} Bytes -> Algo 1 proto {proto} time {time_of(s):f}"
            )
        else:
            lines.append(
                PREFIX
                + f"AllReduce: {s} Bytes -> Algo RING proto {['LL', 'LL128', 'SIMPLE'][proto]} channel{{Lo..Hi}}={{0..7}}"
            )
    return "\n".join(lines * 2) + "\n"


@pytest.mark.parametrize("form", [1, 2, 3])
def test_tuning_segments_and_tuner_predicted_vs_measured(tmp_path, form):
    times = ladder_times(SIZES, alpha=20.0, beta_gbps=100.0)
    stdout = tmp_path / "all_reduce.txt"
    stdout.write_text(synth_run("all_reduce", 8, SIZES, times))
    log = tmp_path / "tuning.log"
    log.write_text(_tuning_for(SIZES, form=form, split=1 << 15, time_of=lambda s: 25.0 + s / 1e5))
    out = tmp_path / "fit.json"
    assert main(["alphabeta", str(stdout), "--tuning", str(log), "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    ladder = doc["ladders"][0]
    seg = ladder["fits"]["segments"]
    assert seg["evidence"] == "tuning"
    spans = [
        (i["algorithm"], i["protocol"], i["fit"]["min_bytes"], i["fit"]["max_bytes"])
        for i in seg["items"]
    ]
    assert spans == [("RING", "LL", 1024, 1 << 14), ("RING", "SIMPLE", 1 << 15, 1 << 20)]
    assert all(r["algorithm"] == "RING" for r in ladder["rungs"])
    if form == 3:
        assert ladder["tuner"] is None
        assert all(r["predicted_us"] is None for r in ladder["rungs"])
    else:
        assert len(ladder["tuner"]) == len(SIZES)
        for t in ladder["tuner"]:
            predicted = 25.0 + t["bytes"] / 1e5
            assert t["predicted_us"] == pytest.approx(predicted, abs=1e-6)
            assert t["error_pct"] == pytest.approx(
                (predicted - t["measured_us"]) / t["measured_us"] * 100, rel=1e-6
            )


def test_tuning_log_for_another_world_size_is_not_applied(tmp_path):
    stdout = tmp_path / "all_reduce.txt"
    stdout.write_text(synth_run("all_reduce", 4, SIZES, ladder_times(SIZES)))
    log = tmp_path / "tuning.log"
    log.write_text(
        "node-a:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 8 cudaDev 0 busId 7000 commId 0x2 - Init COMPLETE\n"
        + _tuning_for(SIZES, form=2, split=1 << 15, time_of=lambda s: 10.0)
    )
    out = tmp_path / "fit.json"
    assert main(["alphabeta", str(stdout), "--tuning", str(log), "-o", str(out)]) == 0
    ladder = json.loads(out.read_text())["ladders"][0]
    assert ladder["fits"]["segments"]["evidence"] == "absent"
    assert any("nranks [8]" in n for n in ladder["notes"])


def test_inconsistent_tuning_log_exits_2_with_one_line_and_no_output(tmp_path, capsys):
    stdout = tmp_path / "all_reduce.txt"
    stdout.write_text(synth_run("all_reduce", 8, SIZES, ladder_times(SIZES)))
    log = tmp_path / "tuning.log"
    log.write_text(
        PREFIX
        + "AllReduce: 2048 Bytes -> Algo 1 proto 0 time 10.000000\n"
        + PREFIX
        + "AllReduce: 2048 Bytes -> Algo 1 proto 2 time 10.000000\n"
    )
    out = tmp_path / "fit.json"
    md = tmp_path / "fit.md"
    assert (
        main(
            ["alphabeta", str(stdout), "--tuning", str(log), "-o", str(out), "--markdown", str(md)]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert (
        str(log) in err[0]
        and "line 2" in err[0]
        and "field protocol" in err[0]
        and "2048 bytes" in err[0]
    )
    assert not out.exists() and not md.exists()


def test_nccl_tests_stdout_with_interleaved_tuning_lines_serves_as_its_own_log(tmp_path):
    stdout = tmp_path / "all_reduce_with_tuning.txt"
    stdout.write_text(synth_run("all_reduce", 8, SIZES, ladder_times(SIZES), info_lines=True))
    out = tmp_path / "fit.json"
    assert main(["alphabeta", str(stdout), "--tuning", str(stdout), "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["tuning"]["logs"][0]["line_forms"] == {"2.24+": len(SIZES)}
    for ladder in doc["ladders"]:
        items = ladder["fits"]["segments"]["items"]
        assert [(i["algorithm"], i["protocol"]) for i in items] == [("RING", "SIMPLE")]
        assert items[0]["fit"]["n_points"] == len(SIZES)
