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
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # resolved where a tensor is made: reading names needs no torch (3 s)
    import torch


@dataclass(frozen=True)
class DtypeInfo:
    param_name: str
    canonical: str  # torch-style name written into rows ("float32", "bfloat16", ...)
    element_bytes: int
    exact_limit: int
    is_float: bool
    is_bool: bool

    @property
    def torch_dtype(self) -> torch.dtype:
        """The torch dtype of this name (imports torch)."""
        import torch

        return getattr(torch, self.canonical)


# canonical name: (bytes per element, largest integer magnitude held exactly, floating)
# (tests/test_param_dtypes.py checks each against torch's own dtype)
_F32 = ("float32", 4, 1 << 24, True)
_F16 = ("float16", 2, 1 << 11, True)
_BF16 = ("bfloat16", 2, 1 << 8, True)
_F64 = ("float64", 8, 1 << 53, True)
_I32 = ("int32", 4, (1 << 31) - 1, False)
_I64 = ("int64", 8, (1 << 62), False)
_U8 = ("uint8", 1, 255, False)
_I8 = ("int8", 1, 127, False)
_I16 = ("int16", 2, (1 << 15) - 1, False)
_BOOL = ("bool", 1, 1, False)


def _info(param_name: str, canonical: str, element_bytes: int, exact_limit: int, is_float: bool):
    return DtypeInfo(
        param_name=param_name,
        canonical=canonical,
        element_bytes=element_bytes,
        exact_limit=exact_limit,
        is_float=is_float,
        is_bool=canonical == "bool",
    )


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
