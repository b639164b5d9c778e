"""Matching per-rank events into collective occurrences (the core of merge and of
every trace -> Program conversion).

Guarantees of ``build_program``:
- a collective instance is the k-th event of each member rank in that group (or the
  event's explicit ``instance``); a send is paired with the recv of the same (src,
  dst, k);
- it refuses (MergeError, exit 2, naming group, instance, ranks and field): two
  contributions of one rank to one instance; conflicting op/bytes/dtype/root across
  members; latency or overlap measured on some members only; a captured rank missing
  an instance its group peers recorded; a send or recv without its partner;
- skew is known only when every captured rank reads one clock (one declared clock
  domain, or a calibration mapping all of them onto one reference); otherwise
  ``skew_known`` is False with the reason, and no skew value is used.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracecanary.errors import MergeError
from tracecanary.program import Program, make_program

TAIL_OVERLAP_FACTOR = 3.0


@dataclass(frozen=True)
class ClockMap:
    """Per-rank mapping local ns -> reference ns: ref = local + offset + drift_ppb*(local-anchor)/1e9."""

    offset_ns: np.ndarray
    drift_ppb: np.ndarray
    anchor_ns: np.ndarray
    uncertainty_ns: np.ndarray
    reference: str

    def to_reference(self, rank: np.ndarray, local_ns: np.ndarray) -> np.ndarray:
        drift = self.drift_ppb[rank] * (local_ns - self.anchor_ns[rank]).astype(np.float64) / 1e9
        return local_ns + self.offset_ns[rank] + np.rint(drift).astype(np.int64)


def _refuse(field: str, group: str, instance, ranks, message: str) -> MergeError:
    ranks_txt = ",".join(str(int(r)) for r in ranks)
    return MergeError(
        message, record=f"collective {group}#{instance} ranks {ranks_txt}", field=field
    )


def assign_instances(events: pd.DataFrame) -> pd.DataFrame:
    """Add ``key_group`` and ``key_instance`` identifying each event's occurrence."""
    p2p = events["op"].isin(["send", "recv"]).to_numpy()
    rank = events["rank"].to_numpy()
    peer = events["peer"].fillna(-1).astype(np.int64).to_numpy()
    is_send = (events["op"] == "send").to_numpy()
    src = np.where(is_send, rank, peer)
    dst = np.where(is_send, peer, rank)
    key_group = np.where(
        p2p,
        pd.Series(src)
        .astype(str)
        .radd("p2p:")
        .str.cat(pd.Series(dst).astype(str), sep="->")
        .to_numpy(),
        events["group"].to_numpy(dtype=object),
    )
    events = events.assign(key_group=key_group)
    if "instance" in events and events["instance"].notna().all():
        events["key_instance"] = events["instance"].astype(np.int64)
    else:
        events["key_instance"] = (
            events.groupby(["rank", "key_group"], sort=False).cumcount().astype(np.int64)
        )
    return events


def build_program(
    events: pd.DataFrame,
    *,
    groups: dict[str, list[int]],
    world_size: int,
    clocks: dict[int, str],
    clock_map: ClockMap | None = None,
    notes: tuple[str, ...] = (),
) -> Program:
    """Occurrence-level program of a normalized trace (rows in per-rank issue order)."""
    ev = assign_instances(events.reset_index(drop=True))
    ranks_seen = np.unique(ev["rank"].to_numpy())
    seen = set(int(r) for r in ranks_seen)

    # duplicate contributions
    dup = ev.duplicated(["key_group", "key_instance", "rank"], keep=False)
    if dup.any():
        row = ev[dup].iloc[0]
        raise _refuse(
            "rank",
            row.key_group,
            row.key_instance,
            [row["rank"]],
            "two contributions of the same rank to one collective",
        )

    grouped = ev.groupby(["key_group", "key_instance"], sort=False)
    # conflicting metadata
    ev["root_f"] = ev["root"].fillna(-1).astype(np.int64)
    for field, column in (("op", "op"), ("bytes", "bytes"), ("dtype", "dtype"), ("root", "root_f")):
        if field == "op":
            kind = ev["op"].where(~ev["op"].isin(["send", "recv"]), "p2p")
            nun = kind.groupby([ev["key_group"], ev["key_instance"]], sort=False).nunique()
        else:
            nun = (
                grouped[column].nunique(dropna=False)
                if column != "root_f"
                else ev.groupby(["key_group", "key_instance"], sort=False)["root_f"].nunique()
            )
        bad = nun[nun > 1]
        if len(bad):
            g, k = bad.index[0]
            members = ev[(ev.key_group == g) & (ev.key_instance == k)]
            values = ", ".join(
                f"rank {r}: {v}"
                for r, v in zip(
                    members["rank"], members[column if field != "root" else "root_f"], strict=True
                )
            )
            raise _refuse(
                field, g, k, members["rank"], f"conflicting {field} across members ({values})"[:300]
            )
    # p2p pairing: each pair must have exactly one send and one recv
    p2p = ev[ev["op"].isin(["send", "recv"])]
    if len(p2p):
        counts = p2p.groupby(["key_group", "key_instance"], sort=False)["op"].agg(
            lambda s: tuple(sorted(s))
        )
        bad = counts[counts != ("recv", "send")]
        if len(bad):
            g, k = bad.index[0]
            members = p2p[(p2p.key_group == g) & (p2p.key_instance == k)]
            raise _refuse(
                "peer",
                g,
                k,
                members["rank"],
                f"send/recv do not pair (found {', '.join(bad.iloc[0])})",
            )
    # membership: every captured rank of the group must contribute
    size = grouped.size()
    expected = {}
    partially_captured = []
    for gid, ranks in groups.items():
        captured = [r for r in ranks if r in seen]
        expected[gid] = len(captured)
        if len(captured) < len(ranks):
            partially_captured.append(gid)
    keys = size.index.get_level_values(0)
    want = np.array([2 if k.startswith("p2p:") else expected.get(k, 0) for k in keys])
    short = np.flatnonzero(size.to_numpy() < want)
    if short.size:
        g, k = size.index[short[0]]
        members = ev[(ev.key_group == g) & (ev.key_instance == k)]["rank"].tolist()
        missing = [r for r in groups[g] if r in seen and r not in members]
        raise _refuse(
            "rank",
            g,
            k,
            members,
            f"rank(s) {','.join(map(str, missing))} of group {g} did not record this collective",
        )
    # measured fields: all members or none
    for field in ("latency_ns", "overlap_ns"):
        measured = (
            ev[field]
            .notna()
            .groupby([ev["key_group"], ev["key_instance"]], sort=False)
            .agg(["any", "all"])
        )
        bad = measured[measured["any"] & ~measured["all"]]
        if len(bad):
            g, k = bad.index[0]
            members = ev[(ev.key_group == g) & (ev.key_instance == k)]
            which = members[members[field].isna()]["rank"].tolist()
            raise _refuse(
                field,
                g,
                k,
                members["rank"],
                f"{field} partially measured (absent on rank(s) {','.join(map(str, which))})",
            )

    # clocks -> arrival on one timeline
    rank = ev["rank"].to_numpy(dtype=np.int64)
    local = (
        ev["arrival_ns"].fillna(ev["issue_ns"]).astype(np.int64).to_numpy()
        if "arrival_ns" in ev
        else ev["issue_ns"].to_numpy(np.int64)
    )
    domains = {clocks[r] for r in seen}
    skew_reason = None
    if clock_map is not None:
        arrival = clock_map.to_reference(rank, local)
        skew_known = True
    elif len(domains) == 1:
        arrival = local
        skew_known = True
    else:
        skew_known = False
        skew_reason = (
            f"ranks read {len(domains)} different clocks and no clock calibration was given"
        )
        origin = (
            ev.assign(local=local)
            .groupby(ev["rank"].map(clocks))["local"]
            .transform("min")
            .to_numpy()
        )
        arrival = local - origin
    if partially_captured:
        skew_known = False
        reason = f"group(s) {', '.join(sorted(partially_captured))} were captured on only some of their ranks"
        skew_reason = reason if skew_reason is None else f"{skew_reason}; {reason}"
    ev["arrival_ref"] = arrival

    occ = grouped.agg(
        op=("op", "first"),
        bytes=("bytes", "first"),
        dtype=("dtype", "first"),
        root=("root_f", "first"),
        phase=("phase", "first"),
        stream=("stream", "first"),
        T=("arrival_ref", "min"),
        overlap_ns=("overlap_ns", "max"),
        latency_ns=("latency_ns", "max"),
        group_size=("rank", "size"),
    ).reset_index()
    is_p2p = occ["key_group"].str.startswith("p2p:").to_numpy()
    # the declared group size (members may be fewer when only some ranks were captured)
    declared = {gid: len(ranks) for gid, ranks in groups.items()}
    occ["group_size"] = np.where(
        is_p2p, 2, occ["key_group"].map(declared).fillna(0).to_numpy()
    ).astype(np.int64)
    occ["op"] = np.where(is_p2p, "send", occ["op"].to_numpy(dtype=object))
    occ = occ.sort_values(["T", "key_group", "key_instance"], kind="stable").reset_index(drop=True)
    occ["occ"] = np.arange(len(occ), dtype=np.int64)
    T = occ["T"].to_numpy(np.int64)
    gap = np.diff(T, prepend=T[:1]) if len(T) else T
    has_overlap = occ["overlap_ns"].notna().to_numpy()
    overlap = occ["overlap_ns"].fillna(0).astype(np.int64).to_numpy()
    tail = _tail_windows(overlap, has_overlap)

    index = pd.MultiIndex.from_frame(occ[["key_group", "key_instance"]])
    ev_index = pd.MultiIndex.from_frame(ev[["key_group", "key_instance"]])
    member_occ = occ["occ"].to_numpy()[index.get_indexer(ev_index)]
    skew = ev["arrival_ref"].to_numpy(np.int64) - T[member_occ]
    members = pd.DataFrame(
        {"occ": member_occ, "rank": rank, "skew_ns": skew if skew_known else np.zeros_like(skew)}
    )
    members = members.sort_values(["occ", "rank"], kind="stable").reset_index(drop=True)
    return make_program(
        {
            "op": occ["op"].to_numpy(dtype=object),
            "bytes": occ["bytes"].to_numpy(np.int64),
            "dtype": occ["dtype"].to_numpy(dtype=object),
            "group": occ["key_group"].to_numpy(dtype=object),
            "group_size": occ["group_size"].to_numpy(np.int64),
            "root": occ["root"].to_numpy(np.int64),
            "phase": occ["phase"].fillna("").to_numpy(dtype=object),
            "stream": occ["stream"].fillna("").to_numpy(dtype=object),
            "gap_ns": gap,
            "overlap_ns": overlap,
            "has_overlap": has_overlap,
            "latency_ns": occ["latency_ns"].fillna(0).astype(np.int64).to_numpy(),
            "has_latency": occ["latency_ns"].notna().to_numpy(),
            "tail": tail,
        },
        {
            "occ": members["occ"].to_numpy(),
            "rank": members["rank"].to_numpy(),
            "skew_ns": members["skew_ns"].to_numpy(),
        },
        world_size=world_size,
        skew_known=skew_known,
        skew_reason=skew_reason,
        notes=notes,
    )


def _tail_windows(overlap: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """Rare high-overlap windows: measured overlap above TAIL_OVERLAP_FACTOR x the
    median of the positive measured overlaps."""
    values = overlap[measured & (overlap > 0)]
    if values.size == 0:
        return np.zeros(overlap.shape, dtype=bool)
    threshold = TAIL_OVERLAP_FACTOR * float(np.median(values))
    return measured & (overlap > threshold)
