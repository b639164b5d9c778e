"""The program: a trace's collectives as logical occurrences, the unit that the
compiler encodes, the simulator replays and the verifier compares.

One *occurrence* is one collective instance (all members of its group together) or
one matched send/recv pair. Occurrences are in global issue order (by the earliest
member arrival, ties by group then per-group instance), or, where the program was built
with ``order="canonical"`` (``OCCURRENCE_ORDERS``), in the canonical order
(``tracecanary.matching.canonical_order``): a linear extension of every rank's issue
order that timing does not change, in which ``gap_ns`` may be negative.

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
                         (>= 0 in time order; signed in the canonical order)
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
  and, only where some member's measured value differs from its occurrence's (the max
  over members), the member's own value (``MEMBER_VALUE_COLUMNS``; 0 where unmeasured):
    latency_ns   int64
    overlap_ns   int64
  Absent, every member's value is its occurrence's; ``member_values`` reads either form.
``occ`` and ``rank`` are int32 (4 bytes per member event, not 8): ``make_program``
refuses (InputError, exit 2, naming the field) a program with 2**31 or more occurrences
or a rank of 2**31 or more rather than let a value wrap. A reader that computes with them
(``occ * width + rank``, offsets, sums) widens to int64 first.

``occurrence_order`` says which order the occurrences are in (``OCCURRENCE_ORDERS``:
"canonical" where built in the canonical order and that order differs from the time
order, else "time"); a canary declares a canonical one and its readers load the source
in it.

``skew_known`` is False when cross-rank arrivals could not be related (no clock
calibration, groups captured on only some ranks); ``skew_reason`` then says why. Unknown
skew is never stored as zero: consumers must check ``skew_known``. A known skew carries
``skew_uncertainty_ns``: the bound on the error of any member's skew_ns that the clock
mapping allows (0 for one shared clock). The decision is made once
(``tracecanary.clocks.status``) and carried, never re-derived; ``skew_status`` gives it
as one value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tracecanary.clocks.status import SkewStatus
from tracecanary.errors import InputError
from tracecanary.factorize import factorize, first_rows
from tracecanary.formats.vocab import OCCURRENCE_ORDERS

if TYPE_CHECKING:  # imported where a table is built: a canary's replay needs no pandas
    import pandas as pd

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
# optional member columns: each member's own measured value, held only where some member
# differs from its occurrence's value (occurrence column of the same name: the max)
MEMBER_VALUE_COLUMNS: dict[str, str] = {"latency_ns": "int64", "overlap_ns": "int64"}
# the largest occurrence index / rank a member table holds (its int32 columns)
MEMBER_INDEX_LIMIT = int(np.iinfo(np.int32).max)

SIGNATURE_COLUMNS = ("op", "bytes", "dtype", "group", "root", "phase", "stream")

SPLITS_COLUMN = "splits"
"""An optional occurrence column (str), present only in a program whose trace carries
split sizes (an uneven all_to_all, ``formats.trace.SPLIT_FIELDS``): for such an
occurrence its send matrix, row i the elements of ``dtype`` that its i-th member sends to
each member (members in ascending rank order), rows joined by ``;`` and values by ``,``; ""
for every other occurrence. Its ``bytes`` is then the largest member's send buffer. It is
not a signature field: the all_to_allvs that agree on everything but their matrices (and
so their buffers) share one signature (``Program.signature_rows``; the signature's
``bytes`` is its first occurrence's), and a canary carries the matrices per occurrence."""


@dataclass(frozen=True)
class TextColumn:
    """A text column held as ``codes`` (int64, one per row) into ``literals`` (a few
    strings, possibly repeated: a canary's signature field). Its rows are
    ``literals[codes[i]]``; every code is a valid index (the builder checks)."""

    codes: np.ndarray
    literals: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.codes)

    def values(self) -> np.ndarray:
        """The rows as an object array of str."""
        return np.array(self.literals, dtype=object)[self.codes]

    def take(self, idx: np.ndarray) -> TextColumn:
        """The rows ``idx`` (in that order)."""
        return TextColumn(self.codes[idx], self.literals)

    def factorized(self, *, sort: bool) -> tuple[np.ndarray, tuple[str, ...]]:
        """As ``Program.factorized``, from the codes (no Python step per row)."""
        if not len(self.codes):
            return np.zeros(0, dtype=np.int64), ()
        # the literal indices that occur, ascending (np.unique would import numpy.ma: 17 ms)
        used = np.flatnonzero(np.bincount(self.codes, minlength=len(self.literals)))
        names = [self.literals[i] for i in used.tolist()]
        if sort:
            distinct = sorted(set(names))
        else:  # first appearance of each text among the rows
            order = np.argsort(_first_rows(self.codes, used), kind="stable")
            distinct = list(dict.fromkeys(names[i] for i in order.tolist()))
        index = {text: i for i, text in enumerate(distinct)}
        code_of_literal = np.zeros(len(self.literals), dtype=np.int64)
        code_of_literal[used] = [index[t] for t in names]
        return code_of_literal[self.codes], tuple(distinct)


def _first_rows(codes: np.ndarray, used: np.ndarray) -> np.ndarray:
    """Per literal index in ``used`` (sorted), the first row whose code it is."""
    order = np.argsort(codes, kind="stable")
    starts = np.searchsorted(codes[order], used, side="left")
    return order[starts]


ColumnValues = np.ndarray | TextColumn


class Program:
    """A program's occurrences and members, with how its clocks relate (module doc).

    The two tables are held either as pandas DataFrames (``Program(occurrences=...,
    members=...)``) or as column arrays (``Program.from_columns``: numpy arrays, text
    as ``TextColumn`` or object arrays), which need no pandas. ``column``,
    ``member_column`` and ``factorized`` read either form; ``occurrences`` and
    ``members`` give the DataFrames, built once from the columns on first use (after
    which the DataFrames are the tables). Read-only: a change is a new Program
    (``replace``, ``with_column``)."""

    __slots__ = (
        "_occ",
        "_mem",
        "world_size",
        "skew_known",
        "skew_reason",
        "notes",
        "skew_uncertainty_ns",
        "occurrence_order",
        "__weakref__",
    )

    def __init__(
        self,
        occurrences: pd.DataFrame | Mapping[str, ColumnValues],
        members: pd.DataFrame | Mapping[str, np.ndarray],
        world_size: int,
        skew_known: bool,
        skew_reason: str | None = None,
        notes: tuple[str, ...] = (),
        skew_uncertainty_ns: int = 0,
        occurrence_order: str = "time",
    ) -> None:
        self._set(
            occurrences,
            members,
            world_size,
            skew_known,
            skew_reason,
            notes,
            skew_uncertainty_ns,
            occurrence_order,
        )
        _check_tables(occurrences, members)

    @classmethod
    def from_columns(
        cls,
        occurrences: Mapping[str, ColumnValues],
        members: Mapping[str, np.ndarray],
        **attributes,
    ) -> Program:
        """A Program over these column arrays (used as they are, not copied): every
        ``OCCURRENCE_COLUMNS`` column (text as ``TextColumn`` or an object array of
        str; others of their dtype; extra columns allowed after them) and every
        ``MEMBER_COLUMNS`` column of its dtype; ``attributes`` as ``Program(...)``
        takes them. Its DataFrames, when asked for, are those ``Program(...)`` would
        hold for the same values."""
        return cls(occurrences, members, **attributes)

    def _set(
        self, occ, mem, world_size, skew_known, skew_reason, notes, uncertainty, order="time"
    ) -> None:
        if order not in OCCURRENCE_ORDERS:
            raise ValueError(f"occurrence_order must be one of {OCCURRENCE_ORDERS}, not {order!r}")
        setter = object.__setattr__
        # column arrays are held in a dict of their own (a DataFrame is not a Mapping)
        setter(self, "_occ", dict(occ) if isinstance(occ, Mapping) else occ)
        setter(self, "_mem", dict(mem) if isinstance(mem, Mapping) else mem)
        setter(self, "world_size", world_size)
        setter(self, "skew_known", skew_known)
        setter(self, "skew_reason", skew_reason)
        setter(self, "notes", tuple(notes))
        setter(self, "skew_uncertainty_ns", uncertainty)
        setter(self, "occurrence_order", order)

    def __setattr__(self, name, value) -> None:
        raise AttributeError(f"Program is read-only ({name}); use replace or with_column")

    def __reduce__(self):
        return (
            _restore,
            (
                self._occ,
                self._mem,
                self.world_size,
                self.skew_known,
                self.skew_reason,
                self.notes,
                self.skew_uncertainty_ns,
                self.occurrence_order,
            ),
        )

    def replace(self, **changes) -> Program:
        """This program with the given attributes (``notes``, ``skew_known``, ...)
        changed; the tables are shared, in the form they are held."""
        fields = {
            "world_size": self.world_size,
            "skew_known": self.skew_known,
            "skew_reason": self.skew_reason,
            "notes": self.notes,
            "skew_uncertainty_ns": self.skew_uncertainty_ns,
            "occurrence_order": self.occurrence_order,
        }
        unknown = set(changes) - set(fields) - {"occurrences", "members"}
        if unknown:
            raise TypeError(f"Program has no attribute {sorted(unknown)[0]!r}")
        fields.update({k: v for k, v in changes.items() if k in fields})
        occ = changes.get("occurrences", self._occ)
        mem = changes.get("members", self._mem)
        program = Program.__new__(Program)
        program._set(
            occ,
            mem,
            fields["world_size"],
            fields["skew_known"],
            fields["skew_reason"],
            fields["notes"],
            fields["skew_uncertainty_ns"],
            fields["occurrence_order"],
        )
        if "occurrences" in changes or "members" in changes:
            _check_tables(occ, mem)
        return program

    def with_column(self, name: str, values: np.ndarray) -> Program:
        """This program with the occurrence column ``name`` set to ``values`` (added
        after the others when new); the other columns are shared, not copied."""
        if isinstance(self._occ, dict):
            return self.replace(occurrences={**self._occ, name: values})
        frame = self._occ.copy(deep=False)
        frame[name] = values
        return self.replace(occurrences=frame)

    def raw_column(self, name: str) -> ColumnValues:
        """The occurrence column ``name`` as held (a numpy array or a ``TextColumn``);
        only while ``holds_columns``."""
        if not isinstance(self._occ, dict):
            raise TypeError("raw_column: the occurrences are a DataFrame")
        return self._occ[name]

    def raw_members(self) -> dict[str, np.ndarray]:
        """The member columns as held (numpy arrays), or the DataFrame once built."""
        return dict(self._mem) if isinstance(self._mem, dict) else self._mem

    @property
    def holds_columns(self) -> bool:
        """Whether the occurrence table is still column arrays (no DataFrame built)."""
        return isinstance(self._occ, dict)

    @property
    def occurrences(self) -> pd.DataFrame:
        """The occurrence table as a DataFrame (built from the columns on first use)."""
        if isinstance(self._occ, dict):
            object.__setattr__(self, "_occ", _occurrence_frame(self._occ))
        return self._occ

    @property
    def members(self) -> pd.DataFrame:
        """The member table as a DataFrame (built from the columns on first use)."""
        if isinstance(self._mem, dict):
            import pandas as pd

            object.__setattr__(self, "_mem", pd.DataFrame(self._mem, copy=False))
        return self._mem

    @property
    def column_names(self) -> tuple[str, ...]:
        """The occurrence table's columns, in order."""
        return tuple(self._occ) if isinstance(self._occ, dict) else tuple(self._occ.columns)

    def column(self, name: str, dtype=None) -> np.ndarray:
        """The occurrence column ``name`` as a read-only numpy array (text: object
        array of str), converted to ``dtype`` when given. KeyError when absent."""
        if isinstance(self._occ, dict):
            value = self._occ[name]
            return _read_only(value.values() if isinstance(value, TextColumn) else value, dtype)
        return self._occ[name].to_numpy(dtype=dtype)

    def member_column(self, name: str, dtype=None) -> np.ndarray:
        """The members column ``name`` as a read-only numpy array (``dtype``: as
        ``column``)."""
        if isinstance(self._mem, dict):
            return _read_only(self._mem[name], dtype)
        return self._mem[name].to_numpy(dtype=dtype)

    def held_member_values(self) -> tuple[str, ...]:
        """The ``MEMBER_VALUE_COLUMNS`` this program holds (members' own values)."""
        held = self._mem if isinstance(self._mem, dict) else self._mem.columns
        return tuple(name for name in MEMBER_VALUE_COLUMNS if name in held)

    def member_values(self, name: str) -> np.ndarray:
        """Each member's own value of the measured field ``name`` (``latency_ns`` or
        ``overlap_ns``; int64, 0 where unmeasured): the members column where held, else
        its occurrence's value."""
        if name in self.held_member_values():
            return self.member_column(name, np.int64)
        has = self.column("has_" + name.removesuffix("_ns"), bool)
        occ = self.member_column("occ")
        return np.where(has, self.column(name, np.int64), 0)[occ]

    @property
    def member_count(self) -> int:
        """The number of member rows."""
        if isinstance(self._mem, dict):
            return len(self._mem["occ"])
        return len(self._mem)

    def factorized(self, name: str, *, sort: bool) -> tuple[np.ndarray, tuple[str, ...]]:
        """(int64 code per occurrence, the distinct texts) of the text column ``name``:
        code i means text i. ``sort``: the texts ascending (as ``pd.factorize(...,
        sort=True)``); else in order of first appearance (as ``pd.factorize(...,
        sort=False, use_na_sentinel=False)``)."""
        if isinstance(self._occ, dict):
            if isinstance(self._occ[name], TextColumn):
                return self._occ[name].factorized(sort=sort)
            return _factorize_objects(self.column(name), sort=sort)
        import pandas as pd

        codes, uniques = pd.factorize(self._occ[name], sort=sort, use_na_sentinel=False)
        return codes.astype(np.int64), tuple(str(u) for u in uniques)

    @property
    def skew_status(self) -> SkewStatus:
        """The skew decision this program carries (``tracecanary.clocks.status``)."""
        if self.skew_known:
            return SkewStatus(True, uncertainty_ns=int(self.skew_uncertainty_ns))
        return SkewStatus(False, reason=self.skew_reason)

    @property
    def n(self) -> int:
        if isinstance(self._occ, dict):
            return len(self._occ["occ"])
        return len(self._occ)

    def issue_ns(self) -> np.ndarray:
        """Issue time of every occurrence relative to the first (cumulative gaps)."""
        return np.cumsum(self.column("gap_ns", np.int64))

    @property
    def signature_columns(self) -> tuple[str, ...]:
        """The fields of a signature (``SIGNATURE_COLUMNS``)."""
        return SIGNATURE_COLUMNS

    def _identity_bytes(self) -> np.ndarray | None:
        """``bytes`` as a signature's identity reads it where the program has splits: -1
        for every all_to_allv (its send matrix and so its buffer change from step to step;
        one signature stands for them all, the matrices travel per occurrence), else
        None (the column itself)."""
        if SPLITS_COLUMN not in self.column_names:
            return None
        uneven = self.column(SPLITS_COLUMN, object) != ""
        return np.where(uneven, -1, self.column("bytes", np.int64))

    def signature_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(signature id per occurrence, the first occurrence of each signature).

        Ids number the distinct (op, bytes, dtype, group, root, phase, stream) tuples
        0..k-1 in order of first appearance (int64); ``first[i]`` (int64, increasing)
        is the row where signature i first appears. Computed by pandas when the
        program holds DataFrames, else from the columns' codes without pandas (below
        ``factorize.PANDAS_MIN_ROWS`` occurrences); both give the same ids."""
        if isinstance(self._occ, dict):
            ids = self._signature_codes_from_columns()
        else:
            ids = self._signature_codes_from_frame()
        return ids, first_rows(ids)

    def _signature_codes_from_frame(self) -> np.ndarray:
        """Signature ids by ``pd.factorize``: per-column codes combined pairwise into one
        int64 key (each step a bijection of the tuples so far), not from a MultiIndex of
        rows."""
        import pandas as pd

        n = len(self._occ)
        combined = np.zeros(n, dtype=np.int64)
        identity_bytes = self._identity_bytes()
        for name in self.signature_columns:
            values = self._occ[name]
            if name == "bytes" and identity_bytes is not None:
                values = identity_bytes
            codes, uniques = pd.factorize(values, sort=False, use_na_sentinel=False)
            # combined < n and codes < len(uniques) <= n: the key stays below n^2
            combined, _ = pd.factorize(combined * len(uniques) + codes.astype(np.int64), sort=False)
            combined = combined.astype(np.int64)
        return combined

    def _signature_codes_from_columns(self) -> np.ndarray:
        """Signature ids from the held columns: text by its codes (``factorized``), the
        others by ``factorize``, mixed into one int64 key (re-numbered densely
        before it could pass 2**62), whose first-appearance codes are the ids."""
        key = np.zeros(self.n, dtype=np.int64)
        bound = 1  # every key value is below this
        identity_bytes = self._identity_bytes()
        for name in self.signature_columns:
            if OCCURRENCE_COLUMNS.get(name, "str") == "str":
                codes, uniques = self.factorized(name, sort=False)
            elif name == "bytes" and identity_bytes is not None:
                codes, uniques = factorize(identity_bytes)
            else:
                codes, uniques = factorize(self.column(name))
            if bound * max(len(uniques), 1) > 1 << 62:
                key, distinct = factorize(key)
                bound = len(distinct)
            key = key * len(uniques) + codes
            bound *= max(len(uniques), 1)
        return factorize(key)[0]

    def signatures(self) -> tuple[np.ndarray, list[dict]]:
        """(signature id per occurrence, the signatures in id order): as
        ``signature_rows``, each signature a dict of ``SIGNATURE_COLUMNS`` in that order
        (text as str, ``bytes`` and ``root`` as int). Needs no pandas when the program
        holds columns."""
        ids, first = self.signature_rows()
        names = self.signature_columns
        values = [self._values_at(name, first) for name in names]
        convert = [str if OCCURRENCE_COLUMNS.get(name, "str") == "str" else int for name in names]
        table = [
            {name: f(v) for name, f, v in zip(names, convert, row, strict=True)}
            for row in zip(*values, strict=True)
        ]
        return ids, table

    def _values_at(self, name: str, rows: np.ndarray) -> list:
        """The occurrence column ``name`` at ``rows`` as a list of Python values."""
        if isinstance(self._occ, dict):
            value = self._occ[name]
            if isinstance(value, TextColumn):
                return [value.literals[c] for c in value.codes[rows].tolist()]
            return value[rows].tolist()
        return self._occ[name].iloc[rows].tolist()

    def signature_ids(self) -> tuple[np.ndarray, pd.DataFrame]:
        """(id per occurrence, table of distinct signatures in first-seen order), as
        ``signature_rows``; table row i is signature i (``SIGNATURE_COLUMNS``, the
        columns' own dtypes, index 0..k-1). Builds a DataFrame (imports pandas):
        ``signature_rows`` and ``signatures`` give the same without one."""
        ids, first = self.signature_rows()
        if isinstance(self._occ, dict):
            held = {name: self._occ[name] for name in self.signature_columns}
            return ids, _occurrence_frame(
                {
                    name: value.take(first) if isinstance(value, TextColumn) else value[first]
                    for name, value in held.items()
                }
            )
        keys = self._occ[list(self.signature_columns)]
        return ids, keys.iloc[first].reset_index(drop=True)


def _read_only(values: np.ndarray, dtype) -> np.ndarray:
    """``values`` as ``dtype`` (None: as they are); a read-only view when that is
    ``values`` itself, so no reader can change a program's column."""
    array = np.asarray(values, dtype=dtype)
    if array is values:
        array = array.view()
        array.flags.writeable = False
    return array


def _restore(
    occ, mem, world_size, skew_known, skew_reason, notes, uncertainty, order="time"
) -> Program:
    """A Program from its pickled parts (``Program.__reduce__``)."""
    program = Program.__new__(Program)
    program._set(occ, mem, world_size, skew_known, skew_reason, notes, uncertainty, order)
    return program


def _factorize_objects(values: np.ndarray, *, sort: bool) -> tuple[np.ndarray, tuple[str, ...]]:
    """``Program.factorized`` of an object array of str."""
    index: dict[str, int] = {}
    codes = np.fromiter(
        (index.setdefault(v, len(index)) for v in values.tolist()),
        dtype=np.int64,
        count=len(values),
    )
    distinct = tuple(index)
    if not sort:
        return codes, distinct
    ordered = sorted(distinct)
    rank = {text: i for i, text in enumerate(ordered)}
    remap = np.array([rank[t] for t in distinct], dtype=np.int64)
    return (remap[codes] if len(codes) else codes), tuple(ordered)


def _check_tables(occurrences, members) -> None:
    """ValueError naming a missing column or one of the wrong dtype, each table checked
    in the form it is held (a DataFrame or column arrays)."""
    if isinstance(occurrences, Mapping):
        _check_occurrence_columns(occurrences)
    else:
        _check_occurrence_frame(occurrences)
    for name, dtype in MEMBER_COLUMNS.items():
        if isinstance(members, Mapping):
            value = members.get(name)
            ok = isinstance(value, np.ndarray) and str(value.dtype) == dtype
        else:
            ok = name in members.columns and str(members[name].dtype) == dtype
        if not ok:
            raise ValueError(f"program members column {name!r} missing or not {dtype}")
    held = members if isinstance(members, Mapping) else members.columns
    for name, dtype in MEMBER_VALUE_COLUMNS.items():
        if name in held and str(members[name].dtype) != dtype:
            raise ValueError(f"program members column {name!r} not {dtype}")


def _check_occurrence_frame(occurrences) -> None:
    import pandas as pd

    for name, dtype in OCCURRENCE_COLUMNS.items():
        if name not in occurrences.columns:
            raise ValueError(f"program occurrences lack column {name!r}")
        got = occurrences[name].dtype
        ok = pd.api.types.is_string_dtype(got) if dtype == "str" else str(got) == dtype
        if not ok:
            raise ValueError(
                f"program column {name!r} has dtype {occurrences[name].dtype}, want {dtype}"
            )


def _check_occurrence_columns(occurrences: Mapping) -> None:
    """Each column present, of its dtype (text: a ``TextColumn`` of str literals or an
    object array), all of one length."""
    lengths = set()
    for name, dtype in OCCURRENCE_COLUMNS.items():
        if name not in occurrences:
            raise ValueError(f"program occurrences lack column {name!r}")
        value = occurrences[name]
        if dtype == "str":
            ok = (
                isinstance(value, TextColumn) and all(type(t) is str for t in value.literals)
            ) or (isinstance(value, np.ndarray) and value.dtype == object)
        else:
            ok = isinstance(value, np.ndarray) and str(value.dtype) == dtype
        if not ok:
            raise ValueError(f"program column {name!r} is not a {dtype} column")
        lengths.add(len(value))
    if len(lengths) > 1:
        raise ValueError("program occurrence columns differ in length")


def _occurrence_frame(columns: dict) -> pd.DataFrame:
    """The DataFrame ``Program(...)`` holds for these column arrays: text as pandas
    ``str`` arrays (a ``TextColumn`` taken in Arrow from its literals), the others as
    they are, columns in the same order."""
    import pandas as pd
    import pyarrow as pa

    data = {}
    for name, value in columns.items():
        if isinstance(value, TextColumn):
            literals = pa.array(list(value.literals), type=pa.large_string())
            data[name] = pd.array(
                literals.take(pa.array(value.codes, type=pa.int64())), dtype="str"
            )
        elif OCCURRENCE_COLUMNS.get(name) == "str" or name == SPLITS_COLUMN:
            data[name] = pd.array(value, dtype="str")
        else:
            data[name] = value
    # copy=False: one block per column, not the int64 columns consolidated into one 2-D copy
    return pd.DataFrame(data, copy=False)


def empty_members() -> pd.DataFrame:
    """A members table with no rows (``MEMBER_COLUMNS``, their dtypes), referencing no
    other table's arrays."""
    import pandas as pd

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
    occurrences: dict[str, np.ndarray | list | TextColumn],
    members: dict[str, np.ndarray | list],
    *,
    world_size: int,
    skew_known: bool,
    skew_reason: str | None = None,
    notes: tuple[str, ...] = (),
    skew_uncertainty_ns: int = 0,
    take_columns: bool = False,
    columns: bool = False,
    occurrence_order: str = "time",
) -> Program:
    """Build a Program from column arrays, filling optional columns with their defaults
    (weight 1.0, tail False, has_* False with value 0, root -1, phase/stream "").
    A text column is a sequence of str or a ``TextColumn``.
    ``take_columns``: the caller hands its arrays over (it keeps no reference that it
    changes later), so the tables use them instead of copying them, and the two dicts
    are emptied as their columns are taken (peak memory: a text column's object array
    is dropped once its str array is made).
    ``columns``: the Program holds column arrays (``Program.from_columns``: text as
    ``TextColumn`` or object arrays; no pandas imported) instead of DataFrames; the
    DataFrames it builds when asked for are those made without ``columns``."""
    n = len(occurrences["op"])
    cols: dict[str, np.ndarray | TextColumn] = {}
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
        elif columns and not take_columns:  # a copy: the caller may change its arrays
            value = (
                TextColumn(np.array(value.codes), value.literals)
                if isinstance(value, TextColumn)
                else np.array(value, dtype=object if dtype == "str" else dtype)
            )
        if isinstance(value, TextColumn):
            cols[name] = value if columns else value.values()
        else:
            cols[name] = np.asarray(value, dtype=object if dtype == "str" else dtype)
    splits = (
        occurrences.pop(SPLITS_COLUMN, None) if take_columns else occurrences.get(SPLITS_COLUMN)
    )
    if splits is not None:  # optional: only a program with an uneven all_to_all has it
        if isinstance(splits, TextColumn):
            cols[SPLITS_COLUMN] = splits if columns else splits.values()
        else:
            cols[SPLITS_COLUMN] = np.array(splits, dtype=object)
    mcols = {
        name: _member_column(
            name, members.pop(name) if take_columns else members[name], dtype, limit=n
        )
        for name, dtype in MEMBER_COLUMNS.items()
    }
    for name, dtype in MEMBER_VALUE_COLUMNS.items():
        value = members.pop(name, None) if take_columns else members.get(name)
        if value is not None:
            mcols[name] = np.asarray(value, dtype=dtype)
    attributes = {
        "world_size": world_size,
        "skew_known": skew_known,
        "skew_reason": skew_reason,
        "notes": tuple(notes),
        "skew_uncertainty_ns": int(skew_uncertainty_ns) if skew_known else 0,
        "occurrence_order": occurrence_order,
    }
    if columns:
        if not take_columns:  # an int32 column that needed no conversion is the caller's
            mcols = {name: np.array(value) for name, value in mcols.items()}
        program = Program.from_columns(cols, mcols, **attributes)
        if not all(
            isinstance(value, TextColumn) or all(type(v) is str for v in value.tolist())
            for name, value in cols.items()
            if OCCURRENCE_COLUMNS.get(name, "str") == "str"
        ):
            program.occurrences  # noqa: B018 (built now: readers see the DataFrame's text)
        return program
    import pandas as pd

    return Program(
        occurrences=pd.DataFrame(
            {  # each object array dropped once its str array is made
                k: (pd.array(cols.pop(k), dtype="str") if dtype == "str" else cols.pop(k))
                for k, dtype in {
                    **OCCURRENCE_COLUMNS,
                    **({SPLITS_COLUMN: "str"} if SPLITS_COLUMN in cols else {}),
                }.items()
            },
            copy=not take_columns,
        ),
        members=pd.DataFrame(mcols, copy=not take_columns),
        **attributes,
    )
