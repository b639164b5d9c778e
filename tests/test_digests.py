"""``canonical.sha256_hasher``: SHA-256 whichever implementation serves it (CPython's own
for a few bytes, OpenSSL's through hashlib for many), one-shot or streamed."""

from __future__ import annotations

import hashlib
import os

import pytest

from tracecanary.canonical import (
    SMALL_HASH_BYTES,
    _builtin_sha256,
    sha256_bytes,
    sha256_file,
    sha256_hasher,
)

SIZES = [0, 1, 55, 64, 1000, SMALL_HASH_BYTES - 1, SMALL_HASH_BYTES, 3 * SMALL_HASH_BYTES + 7]


def _is_openssl(h) -> bool:
    return type(h) is type(hashlib.sha256())


@pytest.mark.parametrize("size", SIZES)
def test_the_digest_is_sha256_whichever_implementation_serves_it(size):
    data = os.urandom(size)
    h = sha256_hasher(data)
    assert h.hexdigest() == hashlib.sha256(data).hexdigest() == sha256_bytes(data)
    if _builtin_sha256() is not None:
        assert _is_openssl(h) == (size >= SMALL_HASH_BYTES)


@pytest.mark.parametrize("size", [0, 1000, 3 * SMALL_HASH_BYTES + 7])
def test_a_stream_told_its_size_gives_the_digest_of_its_bytes(size):
    data = os.urandom(size)
    h = sha256_hasher(size=size)
    for start in range(0, size, 4099):
        h.update(data[start : start + 4099])
    assert h.hexdigest() == hashlib.sha256(data).hexdigest()
    assert h.copy().hexdigest() == h.hexdigest()


@pytest.mark.parametrize("size", [0, 1000, 3 * SMALL_HASH_BYTES + 7])
def test_sha256_file_is_the_digest_of_the_files_bytes(tmp_path, size):
    data = os.urandom(size)
    (tmp_path / "f").write_bytes(data)
    assert sha256_file(tmp_path / "f") == hashlib.sha256(data).hexdigest()
