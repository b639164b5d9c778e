"""Load any program-bearing input as a ``Program``: a native trace (JSON, JSON Lines,
.gz), a normalized Parquet (with its sidecar), a merged trace, or a canary (expanded:
``executed=True`` gives what a replay runs, with weights)."""

from __future__ import annotations

import json
import os
from collections.abc import MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from tracecanary.errors import InputError
from tracecanary.formats.ids import CANARY_FORMAT, TRACE_FORMAT
from tracecanary.limits import load_json, open_input, parse_json_bytes

if TYPE_CHECKING:  # imported where used: a canary's path needs no Arrow, Parquet or matching
    import pandas as pd

    from tracecanary.program import Program
    from tracecanary.trace_columns import TraceColumns


def sniff_format(path: str | os.PathLike) -> str:
    """The ``format`` field of a JSON/JSONL document, or 'parquet'."""
    p = Path(path)
    if p.suffix == ".parquet":
        return "parquet"
    with open_input(p) as f:
        head = f.read(1 << 16)
    text = head.decode("utf-8", errors="replace")
    for marker in (CANARY_FORMAT, TRACE_FORMAT):
        if f'"format":"{marker}"' in text.replace(" ", ""):
            return marker
    first = text.splitlines()[0] if text.strip() else ""
    try:
        doc = parse_json_bytes(first, file=str(path))
    except InputError:  # not one JSON line (or over the depth limit): look further
        doc = None
    if doc is None and len(head) >= 1 << 16:  # a large single-line document: parse it whole
        doc = load_json(p)
    if isinstance(doc, dict) and isinstance(doc.get("format"), str):
        return doc["format"]
    raise InputError("not a TraceCanary trace, normalized table or canary", file=str(path))


# The normalized columns ``matching.build_program`` reads (the others, e.g. seq, ts_ns,
# gap_ns and clock, are ingest's bookkeeping); a column absent from a table stays absent.
MATCHING_COLUMNS = (
    "rank",
    "op",
    "bytes",
    "dtype",
    "group",
    "root",
    "peer",
    "instance",
    "phase",
    "stream",
    "latency_ns",
    "overlap_ns",
    "arrival_ns",
    "issue_ns",
    "send_splits",  # an uneven all_to_all's splits: only a trace that has them has them
    "recv_splits",
)
# Text columns are read dictionary-encoded (pandas categoricals: a small code per event,
# not a string per event).
TEXT_MATCHING_COLUMNS = ("op", "dtype", "group", "phase", "stream")
# Columns whose absence means to matching what a column with every value missing means
# (no explicit instances, arrival = issue, no phase / stream, no root), so a table where
# they hold nothing need not read them.
OPTIONAL_MATCHING_COLUMNS = ("instance", "arrival_ns", "phase", "stream", "root")


def _matching_names(meta, skip_empty_optional: bool) -> list[str]:
    """The ``MATCHING_COLUMNS`` a Parquet file (its metadata) has, in file order, less
    the all-missing ``OPTIONAL_MATCHING_COLUMNS`` when ``skip_empty_optional``."""
    names = meta.schema.to_arrow_schema().names
    empty = _all_missing_columns(meta, OPTIONAL_MATCHING_COLUMNS) if skip_empty_optional else ()
    return [c for c in names if c in MATCHING_COLUMNS and c not in empty]


class ParquetColumns(MutableMapping):
    """The columns of a normalized Parquet that matching reads (``MATCHING_COLUMNS``, those
    present, in file order; with ``skip_empty_optional``, less an
    ``OPTIONAL_MATCHING_COLUMNS`` column whose Parquet statistics say every value is
    missing), as a mapping name -> pandas Series that reads a column from the file when
    first asked for it, converted as pyarrow's ``to_pandas`` converts it (text columns
    dictionary-encoded, so categorical; an integer column with gaps float64), except
    ``arrival_ns``, kept exact, and ``rank``, in the members' rank dtype when every
    value fits. Matching (``build_program_from_columns``) asks
    for each column where it needs it and removes it once read, so only the columns in
    use are held, each read alone (its Arrow buffers handed back before the next), never
    the Arrow table and its conversion at once. Refuses an unreadable file, when opened
    or when a column is read (InputError)."""

    def __init__(self, path: str | os.PathLike, *, skip_empty_optional: bool = False) -> None:
        import pyarrow.parquet as pq

        self._path = str(path)
        with _parquet_errors(path):
            self._file = pq.ParquetFile(path, read_dictionary=list(TEXT_MATCHING_COLUMNS))
            self._names = _matching_names(self._file.metadata, skip_empty_optional)
        self._read: dict[str, pd.Series] = {}

    def __getitem__(self, name: str) -> pd.Series:
        if name not in self._names:
            raise KeyError(name)
        if name not in self._read:
            self._read[name] = self._read_column(name)
        return self._read[name]

    def __setitem__(self, name: str, value: pd.Series) -> None:
        if name not in self._names:
            self._names.append(name)
        self._read[name] = value

    def __delitem__(self, name: str) -> None:
        if name not in self._names:
            raise KeyError(name)
        self._names.remove(name)
        self._read.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self):
        return iter(list(self._names))

    def __len__(self) -> int:
        return len(self._names)

    def _read_column(self, name: str) -> pd.Series:
        import pyarrow as pa

        from tracecanary.parquet_io import exact_nullable_int

        with _parquet_errors(self._path):
            table = self._file.read(columns=[name])
            exact = exact_nullable_int(table, name) if name == "arrival_ns" else None
            # converted into the system allocator's memory: freed (as matching drops
            # the column) straight back to the system, not kept in Arrow's pool
            column = (
                exact
                if exact is not None
                else table.column(name).to_pandas(memory_pool=pa.system_memory_pool())
            )
            del table, exact
            pa.default_memory_pool().release_unused()  # the read's own buffers
        return _narrow_ranks(column) if name == "rank" else column


@contextmanager
def _parquet_errors(path):
    """A Parquet read's Arrow or OS error as the one-line InputError refusal."""
    import pyarrow as pa

    try:
        yield
    except (pa.ArrowException, OSError) as err:
        raise InputError(f"unreadable Parquet: {err}"[:300], file=str(path)) from None


def _narrow_ranks(ranks: pd.Series) -> pd.Series:
    """``ranks`` as the members' rank dtype (``program.MEMBER_COLUMNS``) when every value
    fits (matching refuses one that does not, naming it), else unchanged."""
    from tracecanary.program import MEMBER_COLUMNS, MEMBER_INDEX_LIMIT

    if len(ranks) == 0 or ranks.isna().any():
        return ranks
    if not 0 <= ranks.min() <= ranks.max() <= MEMBER_INDEX_LIMIT:
        return ranks
    return ranks.astype(MEMBER_COLUMNS["rank"])


def _all_missing_columns(meta, candidates: tuple[str, ...]) -> set[str]:
    """The ``candidates`` (top-level columns) that every row group's statistics show as
    all null; a column without statistics anywhere is not among them."""
    index = {meta.schema.column(i).path: i for i in range(meta.num_columns)}
    empty = set()
    for name in candidates:
        i = index.get(name)
        if i is None or meta.num_rows == 0:
            continue
        groups = [meta.row_group(g) for g in range(meta.num_row_groups)]
        stats = [g.column(i).statistics for g in groups]
        if all(
            st is not None and st.has_null_count and st.null_count == g.num_rows
            for st, g in zip(stats, groups, strict=True)
        ):
            empty.add(name)
    return empty


def _check_sidecar(sidecar: dict) -> None:
    if "skew" not in sidecar:
        raise InputError(
            "normalized table's sidecar declares no skew status (written by an older "
            "tracecanary ingest): re-run ingest",
            field="skew",
        )


def program_from_series(
    columns: MutableMapping[str, pd.Series], sidecar: dict, *, order: str = "time"
) -> Program:
    """Match a normalized table's columns (``ParquetColumns``, read on demand) into a
    Program in occurrence ``order`` (``build_program``'s), with the skew status its sidecar
    declares (decided once at ingest, not re-derived). Matching takes the columns over one
    by one, each freed once read: the caller must not use ``columns`` afterwards."""
    from tracecanary.clocks.status import SkewStatus
    from tracecanary.matching import build_program_from_columns

    _check_sidecar(sidecar)
    groups = {k: list(v) for k, v in sidecar["groups"].items()}
    clocks = {int(k): v for k, v in sidecar["clocks"].items()}
    return build_program_from_columns(
        columns,
        groups=groups,
        world_size=int(sidecar["meta"]["world_size"]),
        clocks=clocks,
        skew=SkewStatus.from_json(sidecar["skew"]),
        notes=tuple(sidecar["meta"].get("notes", [])),
        order=order,
    )


def program_from_trace_columns(trace: TraceColumns, *, order: str = "time") -> Program:
    """The program of a trace read as columns (``trace_columns.read_json_trace``): the one
    ingest's normalized table of that trace gives, held as column arrays (no pandas).
    ``order``: the occurrence order (``build_program``'s)."""
    from tracecanary.columns import IntColumn
    from tracecanary.matching import build_program_from_columns

    def holds_nothing(column) -> bool:
        if isinstance(column, IntColumn):
            return column.present is not None and not column.present.any()
        return not len(column.labels)

    # as ``ParquetColumns(..., skip_empty_optional=True)`` reads a normalized table
    columns = {
        name: trace.columns[name]
        for name in MATCHING_COLUMNS
        if name in trace.columns
        and not (name in OPTIONAL_MATCHING_COLUMNS and holds_nothing(trace.columns[name]))
    }
    return build_program_from_columns(
        columns,
        groups=trace.groups,
        world_size=trace.world_size,
        clocks=trace.clocks,
        skew=trace.skew,
        notes=trace.notes,
        frames=False,
        order=order,
    )


def load_program(path: str | os.PathLike, *, executed: bool = True, order: str = "time") -> Program:
    """Program of a trace / normalized table / canary at ``path`` (see module doc).
    ``order``: how a trace's or table's occurrences are ordered
    (``formats.vocab.OCCURRENCE_ORDERS``); a canary keeps the order it was compiled in."""
    kind = sniff_format(path)
    if kind == "parquet":
        from tracecanary.ingest import sidecar_path

        side = sidecar_path(path)
        if not side.is_file():
            raise InputError("normalized table has no .meta.json sidecar", file=str(path))
        sidecar = load_json(side)
        return program_from_series(
            ParquetColumns(path, skip_empty_optional=True), sidecar, order=order
        )
    if kind == TRACE_FORMAT:
        from tracecanary.trace_columns import read_json_trace, reads_as_columns

        trace = read_json_trace(path) if reads_as_columns(path) else None
        if trace is not None:
            return program_from_trace_columns(trace, order=order)
        import tempfile

        from tracecanary.ingest import ingest_files

        with tempfile.TemporaryDirectory(prefix="tracecanary-load-") as tmp:
            out = Path(tmp) / "trace.parquet"
            result = ingest_files([str(path)], out)
            return program_from_series(
                ParquetColumns(out, skip_empty_optional=True),
                json.loads(result.sidecar.read_text()),
                order=order,
            )
    if kind == CANARY_FORMAT:
        from tracecanary.compile.document import load_canary
        from tracecanary.compile.expand import expand_canary

        return expand_canary(load_canary(path), executed=executed)
    raise InputError(f"unsupported format {kind!r}", file=str(path), field="format")
