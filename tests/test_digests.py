"""``canonical``'s digests are SHA-256 of the bytes (``hashlib``), whole or streamed."""

from __future__ import annotations

import hashlib
import os

import pytest

from tracecanary.canonical import sha256_bytes, sha256_file, sha256_regular_file

SIZES = [0, 1, 55, 64, 1000, (1 << 20) - 1, 1 << 20, 3 * (1 << 20) + 7]


@pytest.mark.parametrize("size", SIZES)
def test_sha256_bytes_is_the_digest_of_its_bytes(size):
    data = os.urandom(size)
    assert sha256_bytes(data) == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("size", [0, 1000, 3 * (1 << 20) + 7])
def test_sha256_file_is_the_digest_of_the_files_bytes(tmp_path, size):
    data = os.urandom(size)
    (tmp_path / "f").write_bytes(data)
    expected = hashlib.sha256(data).hexdigest()
    assert sha256_file(tmp_path / "f") == sha256_regular_file(tmp_path / "f") == expected
