"""Sample arrays embedded in reports: base64 of zlib (level 6) of little-endian bytes.

A sample block is ``{"dtype": "int64le"|"float64le", "encoding": "zlib6+base64",
"count": n, "sha256": <hex of the raw little-endian bytes>, "data": <base64>}``. The
digest covers the uncompressed bytes, so two zlib builds that compress differently
still agree on the digest and the decoded values.
"""

from __future__ import annotations

import base64
import binascii
import zlib

import numpy as np

from tracecanary.canonical import sha256_bytes
from tracecanary.limits import current_limits

ENCODING = "zlib6+base64"
_DTYPES = {"int64le": np.dtype("<i8"), "float64le": np.dtype("<f8")}


class SampleDecodeError(ValueError):
    """A sample block is malformed or its data does not match its digest or count."""


def encode(values: np.ndarray) -> dict:
    """Sample block of an int64 or float64 array."""
    arr = np.asarray(values)
    name = "float64le" if arr.dtype.kind == "f" else "int64le"
    raw = np.ascontiguousarray(arr, dtype=_DTYPES[name]).tobytes()
    return {
        "dtype": name,
        "encoding": ENCODING,
        "count": int(arr.size),
        "sha256": sha256_bytes(raw),
        "data": base64.b64encode(zlib.compress(raw, 6)).decode("ascii"),
    }


def decode(block: dict) -> np.ndarray:
    """Values of a sample block; SampleDecodeError when it does not check out."""
    count = block.get("count") if isinstance(block, dict) else None
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise SampleDecodeError("count is not a non-negative integer")
    if count > current_limits().max_events:  # a zlib bomb in a report stops here
        raise SampleDecodeError(f"count {count} is over max_events")
    try:
        dtype = _DTYPES[block["dtype"]]
        if block["encoding"] != ENCODING:
            raise SampleDecodeError(f"unknown encoding {block['encoding']!r}")
        inflate = zlib.decompressobj()
        raw = inflate.decompress(base64.b64decode(block["data"], validate=True), 8 * count + 1)
    except (KeyError, TypeError, ValueError, binascii.Error, zlib.error) as err:
        raise SampleDecodeError(f"undecodable sample block: {err}") from None
    if len(raw) != 8 * count or inflate.unconsumed_tail:
        raise SampleDecodeError("data length does not match its count")
    if sha256_bytes(raw) != block.get("sha256"):
        raise SampleDecodeError("data does not match its sha256")
    return np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("="))
