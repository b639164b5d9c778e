"""The program: a trace's collectives as logical occurrences, the unit that the
compiler encodes, the simulator replays and the verifier compares.

One *occurrence* is one collective instance (all members of its group together) or
one matched send/recv pair. Occurrences are in global issue order (by the earliest
member arrival, ties by group then per-group instance).

Columns of ``Program.occurrences`` (one row per occurrence, numpy-backed):
    occ          int64   0..n-1, the logical occurrence index
    op           str     all_reduce | all_gather | ... | send (a matched pair) | custom:<name>
    bytes        int64   payload bytes per rank (nccl-tests size convention)
    dtype        str
    group        str     group id ("p2p:<src>-><dst>" for a matched pair)
    group_size   int64   number of members
    root         int64   global root rank, -1 where not meaningful
    phase        str     "" when absent
    stream       str     "" when absent
    gap_ns       int64   issue time of this occurrence minus the previous one's (first: 0);
                         an occurrence's issue time is its earliest member arrival
    overlap_ns   int64   compute concurrent with the communication (max over members);
                         meaningful only where has_overlap is True
    has_overlap  bool    False = not measured (never read as 0)
    latency_ns   int64   measured latency (max over members); meaningful where has_latency
    has_latency  bool
    weight       float64 how many logical occurrences this executed one stands for (1.0 in a
                         source program; > 1 in a reduced-execution canary)
    tail         bool    part of a rare tail window (kept whole by reduced execution)

Columns of ``Program.members`` (one row per member of each occurrence, sorted by occ, rank):
    occ          int32   index into occurrences
    rank         int32   global rank
    skew_ns      int64   arrival of this member minus the occurrence's issue time (>= 0);
                         meaningful only when Program.skew_known
``occ`` and ``rank`` are int32 (4 bytes per member event, not 8): ``make_program``
refuses (InputError, exit 2, naming the field) a program with 2**31 or more occurrences
or a rank of 2**31 or more rather than let a value wrap. A reader that computes with them
(``occ * width + rank``, offsets, sums) widens to int64 first.

``skew_known`` is False when cross-rank arrivals could not be related (no clock
calibration, groups captured on only some ranks); ``skew_reason`` then says why. Unknown
skew is never stored as zero: consumers must check ``skew_known``. A known skew carries
``skew_uncertainty_ns``: the bound on the error of any member's skew_ns that the clock
mapping allows (0 for one shared clock). The decision is made once
(``tracecanary.clocks.status``) and carried, never re-derived; ``skew_status`` gives it
as one value.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tracecanary.clocks.status import SkewStatus
from tracecanary.errors import InputError

OCCURRENCE_COLUMNS: dict[str, str] = {
    "occ": "int64",
    "op": "str",
    "bytes": "int64",
    "dtype": "str",
    "group": "str",
    "group_size": "int64",
    "root": "int64",
    "phase": "str",
    "stream": "str",
    "gap_ns": "int64",
    "overlap_ns": "int64",
    "has_overlap": "bool",
    "latency_ns": "int64",
    "has_latency": "bool",
    "weight": "float64",
    "tail": "bool",
}

MEMBER_COLUMNS: dict[str, str] = {"occ": "int32", "rank": "int32", "skew_ns": "int64"}
# the largest occurrence index / rank a member table holds (its int32 columns)
MEMBER_INDEX_LIMIT = int(np.iinfo(np.int32).max)

SIGNATURE_COLUMNS = ("op", "bytes", "dtype", "group", "root", "phase", "stream")


@dataclass(frozen=True)
class Program:
    occurrences: pd.DataFrame
    members: pd.DataFrame
    world_size: int
    skew_known: bool
    skew_reason: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    skew_uncertainty_ns: int = 0

    @property
    def skew_status(self) -> SkewStatus:
        """The skew decision this program carries (``tracecanary.clocks.status``)."""
        if self.skew_known:
            return SkewStatus(True, uncertainty_ns=int(self.skew_uncertainty_ns))
        return SkewStatus(False, reason=self.skew_reason)

    def __post_init__(self) -> None:
        for name, dtype in OCCURRENCE_COLUMNS.items():
            if name not in self.occurrences.columns:
                raise ValueError(f"program occurrences lack column {name!r}")
            got = self.occurrences[name].dtype
            ok = pd.api.types.is_string_dtype(got) if dtype == "str" else str(got) == dtype
            if not ok:
                raise ValueError(
                    f"program column {name!r} has dtype {self.occurrences[name].dtype}, want {dtype}"
                )
        for name, dtype in MEMBER_COLUMNS.items():
            if name not in self.members.columns or str(self.members[name].dtype) != dtype:
                raise ValueError(f"program members column {name!r} missing or not {dtype}")

    @property
    def n(self) -> int:
        return len(self.occurrences)

    def issue_ns(self) -> np.ndarray:
        """Issue time of every occurrence relative to the first (cumulative gaps)."""
        return np.cumsum(self.occurrences["gap_ns"].to_numpy(dtype=np.int64))

    def signature_ids(self) -> tuple[np.ndarray, pd.DataFrame]:
        """(id per occurrence, table of distinct signatures in first-seen order).

        Ids number the distinct (op, bytes, dtype, group, root, phase, stream) tuples
        0..k-1 in order of first appearance; table row i is signature i (the columns'
        own dtypes). Computed from per-column codes combined pairwise into one int64 key
        (each step a bijection of the tuples so far), not from a MultiIndex of rows."""
        keys = self.occurrences[list(SIGNATURE_COLUMNS)]
        n = len(keys)
        combined = np.zeros(n, dtype=np.int64)
        for name in SIGNATURE_COLUMNS:
            codes, uniques = pd.factorize(keys[name], sort=False, use_na_sentinel=False)
            # combined < n and codes < len(uniques) <= n: the key stays below n^2
            combined, _ = pd.factorize(combined * len(uniques) + codes.astype(np.int64), sort=False)
            combined = combined.astype(np.int64)
        if n == 0:
            return np.zeros(0, dtype=np.int64), keys.iloc[:0].reset_index(drop=True)
        # ids appear in order 0, 1, 2, ...: a row is a first appearance where the running
        # maximum grows
        running = np.maximum.accumulate(combined)
        new = np.ones(n, dtype=bool)
        new[1:] = running[1:] > running[:-1]
        return combined, keys.iloc[np.flatnonzero(new)].reset_index(drop=True)


def empty_members() -> pd.DataFrame:
    """A members table with no rows (``MEMBER_COLUMNS``, their dtypes), referencing no
    other table's arrays."""
    return pd.DataFrame({name: np.zeros(0, dtype=dtype) for name, dtype in MEMBER_COLUMNS.items()})


def unfit_bounds(values: np.ndarray, dtype: str) -> tuple[int, int] | None:
    """(min, max) of integer ``values`` when some value does not fit the integer
    ``dtype`` (a members column), else None."""
    if not values.size or values.dtype == dtype:
        return None
    info = np.iinfo(dtype)
    lo, hi = int(values.min()), int(values.max())
    return (lo, hi) if lo < info.min or hi > info.max else None


def _member_column(name: str, values, dtype: str, *, limit: int) -> np.ndarray:
    """``values`` as a members column of ``dtype``; refuses (InputError naming ``name``)
    an int32 column whose values do not fit (occurrence count ``limit`` for ``occ``)."""
    if dtype == "int32":
        array = np.asarray(values)
        if name == "occ" and limit > MEMBER_INDEX_LIMIT:
            raise InputError(
                f"{limit} occurrences: more than a program holds ({MEMBER_INDEX_LIMIT + 1})",
                field="occ",
            )
        bounds = unfit_bounds(array, dtype)
        if bounds is not None:
            lo, hi = bounds
            raise InputError(
                f"member {name} {hi if hi > MEMBER_INDEX_LIMIT else lo} does not fit a "
                f"program (below {MEMBER_INDEX_LIMIT + 1})",
                field=name,
            )
        return array.astype(np.int32, copy=False)
    return np.asarray(values, dtype=dtype)


def make_program(
    occurrences: dict[str, np.ndarray | list],
    members: dict[str, np.ndarray | list],
    *,
    world_size: int,
    skew_known: bool,
    skew_reason: str | None = None,
    notes: tuple[str, ...] = (),
    skew_uncertainty_ns: int = 0,
    take_columns: bool = False,
) -> Program:
    """Build a Program from column arrays, filling optional columns with their defaults
    (weight 1.0, tail False, has_* False with value 0, root -1, phase/stream "").
    ``take_columns``: the caller hands its arrays over (it keeps no reference that it
    changes later), so the tables use them instead of copying them, and the two dicts
    are emptied as their columns are taken (peak memory: a text column's object array
    is dropped once its str array is made)."""
    n = len(occurrences["op"])
    cols: dict[str, np.ndarray] = {}
    defaults = {  # built only for a column not given
        "occ": lambda: np.arange(n, dtype=np.int64),
        "root": lambda: np.full(n, -1, dtype=np.int64),
        "phase": lambda: np.full(n, "", dtype=object),
        "stream": lambda: np.full(n, "", dtype=object),
        "overlap_ns": lambda: np.zeros(n, dtype=np.int64),
        "has_overlap": lambda: np.zeros(n, dtype=bool),
        "latency_ns": lambda: np.zeros(n, dtype=np.int64),
        "has_latency": lambda: np.zeros(n, dtype=bool),
        "weight": lambda: np.ones(n, dtype=np.float64),
        "tail": lambda: np.zeros(n, dtype=bool),
    }
    for name, dtype in OCCURRENCE_COLUMNS.items():
        value = occurrences.pop(name, None) if take_columns else occurrences.get(name)
        if value is None:
            if name not in defaults:
                raise ValueError(f"make_program needs column {name!r}")
            value = defaults[name]()
        cols[name] = np.asarray(value, dtype=object if dtype == "str" else dtype)
    mcols = {
        name: _member_column(
            name, members.pop(name) if take_columns else members[name], dtype, limit=n
        )
        for name, dtype in MEMBER_COLUMNS.items()
    }
    return Program(
        occurrences=pd.DataFrame(
            {  # each object array dropped once its str array is made
                k: (pd.array(cols.pop(k), dtype="str") if dtype == "str" else cols.pop(k))
                for k, dtype in OCCURRENCE_COLUMNS.items()
            },
            copy=not take_columns,
        ),
        members=pd.DataFrame(mcols, copy=not take_columns),
        world_size=world_size,
        skew_known=skew_known,
        skew_reason=skew_reason,
        notes=tuple(notes),
        skew_uncertainty_ns=int(skew_uncertainty_ns) if skew_known else 0,
    )
