"""Deterministic Parquet: the same table always gives the same bytes.

Fixed writer options (format version, compression, dictionary, statistics, row-group
size) and no pandas metadata in the schema, so the digest depends on the data alone
(for one pyarrow version; the version is recorded in every provenance record).
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq

from tracecanary.canonical import atomic_output, sha256_file

ROW_GROUP_SIZE = 1 << 20

WRITER_OPTIONS = dict(
    version="2.6",
    compression="zstd",
    compression_level=3,
    use_dictionary=True,
    write_statistics=True,
    data_page_size=1 << 20,
    store_schema=False,
)


def strip_metadata(table: pa.Table) -> pa.Table:
    """The table with schema-level metadata removed (pandas adds some)."""
    return table.replace_schema_metadata(None)


def write_parquet(table: pa.Table, path: str | os.PathLike) -> str:
    """Write ``table`` atomically with the fixed options; return the file's SHA-256."""
    with atomic_output(path) as tmp:
        pq.write_table(strip_metadata(table), tmp, row_group_size=ROW_GROUP_SIZE, **WRITER_OPTIONS)
    return sha256_file(path)


def read_parquet(path: str | os.PathLike, columns: list[str] | None = None) -> pa.Table:
    return pq.read_table(path, columns=columns)


def exact_nullable_int(table: pa.Table, name: str):
    """Column ``name`` of ``table`` as a pandas Series that holds every int64 value exactly:
    int64 when nothing is missing, else object (Python ints and None). pandas' default
    conversion turns an int64 column with gaps into float64, which rounds epoch
    nanoseconds (about 1.8e18) to multiples of 256 ns. None when the column is absent."""
    if name not in table.column_names:
        return None
    column = table.column(name)
    if column.null_count == 0:
        return column.to_pandas()
    return column.to_pandas(integer_object_nulls=True)
