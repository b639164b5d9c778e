"""The PARAM dtype table is written without torch (a launcher or an export need not
import it); here every entry is held to torch's own dtype."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from tracecanary.param.dtypes import CANONICAL_DTYPES, PARAM_DTYPES


@pytest.mark.parametrize("name", sorted(PARAM_DTYPES))
def test_each_dtype_entry_states_torchs_own_element_size_and_kind(name):
    info = PARAM_DTYPES[name]
    dtype = info.torch_dtype
    assert isinstance(dtype, torch.dtype)
    assert str(dtype) == f"torch.{info.canonical}"
    assert torch.empty((), dtype=dtype).element_size() == info.element_bytes
    assert dtype.is_floating_point == info.is_float
    assert (dtype == torch.bool) == info.is_bool
    if info.is_float:  # every integer up to 2 ** (mantissa bits + 1) = 2 / eps is exact
        assert info.exact_limit == round(2 / torch.finfo(dtype).eps)
    elif not info.is_bool:
        assert info.exact_limit <= torch.iinfo(dtype).max


def test_every_canonical_name_is_its_torch_dtypes_name():
    for canonical, info in CANONICAL_DTYPES.items():
        assert info.canonical == canonical == str(info.torch_dtype).removeprefix("torch.")


def test_reading_the_dtype_table_imports_no_torch():
    probe = (
        "import sys, tracecanary.param.dtypes as d; d.PARAM_DTYPES; print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
