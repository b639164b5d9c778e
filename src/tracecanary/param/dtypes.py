"""PARAM dtype names and what the replayer needs to know about each: the one dtype table
of the PARAM contract, used by the export (``EXPORT_NAMES``), program reading and the
import of PARAM results (``PARAM_DTYPES``).

PARAM's ``dtypeMap`` (train/comms/pt/comms_utils.py) accepts these names, case-sensitive;
``char`` is torch's Char (int8) and ``byte`` its Byte (uint8). ``exact_limit`` is the
largest integer magnitude the dtype represents exactly (sums of fills stay below it so
the correctness check can compare bit for bit); ``fill_modulus`` bounds fill values for
data-movement ops (no arithmetic on them).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DtypeInfo:
    param_name: str
    torch_dtype: torch.dtype
    canonical: str  # torch-style name written into rows ("float32", "bfloat16", ...)
    element_bytes: int
    exact_limit: int
    is_float: bool
    is_bool: bool


def _info(param_name: str, dtype: torch.dtype, canonical: str, exact_limit: int) -> DtypeInfo:
    is_float = dtype.is_floating_point
    return DtypeInfo(
        param_name=param_name,
        torch_dtype=dtype,
        canonical=canonical,
        element_bytes=torch.empty((), dtype=dtype).element_size(),
        exact_limit=exact_limit,
        is_float=is_float,
        is_bool=dtype == torch.bool,
    )


_F32 = (torch.float32, "float32", 1 << 24)
_F16 = (torch.float16, "float16", 1 << 11)
_BF16 = (torch.bfloat16, "bfloat16", 1 << 8)
_F64 = (torch.float64, "float64", 1 << 53)
_I32 = (torch.int32, "int32", (1 << 31) - 1)
_I64 = (torch.int64, "int64", (1 << 62))
_U8 = (torch.uint8, "uint8", 255)
_I8 = (torch.int8, "int8", 127)
_I16 = (torch.int16, "int16", (1 << 15) - 1)
_BOOL = (torch.bool, "bool", 1)

PARAM_DTYPES: dict[str, DtypeInfo] = {
    name: _info(name, *spec)
    for name, spec in {
        "float": _F32,
        "float32": _F32,
        "float16": _F16,
        "half": _F16,
        "bfloat16": _BF16,
        "float64": _F64,
        "double": _F64,
        "int32": _I32,
        "int": _I32,
        "long": _I64,
        "uint8": _U8,
        "byte": _U8,
        "int8": _I8,
        "char": _I8,
        "short": _I16,
        "bool": _BOOL,
    }.items()
}

# gloo (torch 2.13) rejects int16 in collectives ("Invalid scalar type"): refuse up front.
GLOO_UNSUPPORTED = frozenset({"int16"})


CANONICAL_DTYPES: dict[str, DtypeInfo] = {info.canonical: info for info in PARAM_DTYPES.values()}

# The one PARAM spelling the exporter writes for each trace dtype it can export (int16 is
# left out: gloo rejects it, see GLOO_UNSUPPORTED).
EXPORT_NAMES: dict[str, str] = {
    "float32": "float",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float64": "double",
    "int32": "int",
    "int64": "long",
    "int8": "int8",
    "uint8": "uint8",
    "bool": "bool",
}


def export_dtype(canonical: str) -> DtypeInfo | None:
    """The PARAM dtype the exporter writes for a trace dtype (``float32`` -> ``float``), None
    if it exports none."""
    name = EXPORT_NAMES.get(canonical)
    return None if name is None else PARAM_DTYPES[name]


def canonical_dtype(name: str) -> DtypeInfo | None:
    """The dtype for a torch-style name (``float32``, ``bfloat16``, ``int64`` ...) or a PARAM name."""
    return CANONICAL_DTYPES.get(name) or PARAM_DTYPES.get(name)
