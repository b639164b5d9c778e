"""Bounded loading of one Kineto trace file (``.json`` or ``.json.gz``).

Guarantees: at most ``max_json_document_bytes`` (2 GiB by default) of decompressed JSON
are read; more is refused with ``ResourceLimitExceeded`` before parsing, in bounded
memory (a gzip bomb stops at the limit). The document is parsed once with the stdlib
parser; floats are kept as their decimal text so microsecond timestamps with
nanosecond decimals convert to integer nanoseconds exactly (``us_to_ns``); the price is
that a number written as a JSON string is read as that number (Kineto writes none).
"""

from __future__ import annotations

import gc
import json
import os
from decimal import Decimal, InvalidOperation
from typing import Any

from tracecanary.errors import ImportRefused, ResourceLimitExceeded
from tracecanary.limits import (
    Limits,
    check_text_depth,
    current_limits,
    open_input,
    read_limited,
    refuse_json_constant,
    refuse_lone_surrogates,
)

# top-level keys only Kineto writes (any one marks a PyTorch profiler trace)
KINETO_KEYS = frozenset(
    {"schemaVersion", "distributedInfo", "deviceProperties", "baseTimeNanoseconds", "traceName"}
)


def load_kineto(path: str | os.PathLike, limits: Limits | None = None) -> dict[str, Any]:
    """Parse a Kineto trace; refuse (exit 2) what is not JSON or not a Kineto trace."""
    limits = limits or current_limits()
    cap = limits.max_json_document_bytes
    with open_input(path, limits) as stream:
        data = read_limited(
            stream,
            cap,
            what="decompressed trace",
            limit_name="max_json_document_bytes",
            file=str(path),
        )
    check_text_depth(data, limits.max_depth, file=str(path))
    # json.loads builds millions of containers but no reference cycles: the cyclic
    # collector would only rescan them (about 40% of the parse time), so pause it
    collecting = gc.isenabled()
    gc.disable()
    try:
        doc = json.loads(data, parse_float=str, parse_constant=refuse_json_constant)
    except RecursionError:
        raise ResourceLimitExceeded(
            f"JSON nesting deeper than max_depth={limits.max_depth}", file=str(path)
        ) from None
    except json.JSONDecodeError as err:
        raise ImportRefused(
            f"not JSON (line {err.lineno} column {err.colno}): {err.msg}", file=str(path)
        ) from None
    except UnicodeDecodeError as err:
        raise ImportRefused(f"not JSON (bad UTF-8 at byte {err.start})", file=str(path)) from None
    except ValueError as err:  # NaN / Infinity, or an integer too long to convert
        raise ImportRefused(f"not JSON: {err}", file=str(path)) from None
    finally:
        if collecting:
            gc.enable()
    refuse_lone_surrogates(data, doc, file=str(path))  # one memchr unless a \u escape
    if not isinstance(doc, dict):
        raise ImportRefused("not a Kineto trace: top level is not a JSON object", file=str(path))
    if not isinstance(doc.get("traceEvents"), list):
        raise ImportRefused(
            "not a Kineto trace: no traceEvents list", file=str(path), field="traceEvents"
        )
    limits.check("max_events", len(doc["traceEvents"]), file=path, field="traceEvents")
    if not KINETO_KEYS.intersection(doc):
        raise ImportRefused(
            "not a Kineto trace: none of schemaVersion, distributedInfo, deviceProperties, "
            "baseTimeNanoseconds, traceName is present",
            file=str(path),
        )
    return doc


def us_to_ns(value: Any) -> int | None:
    """Exact integer nanoseconds of a Kineto microsecond value (int, or decimal text as
    kept by ``load_kineto``); ``None`` if it is not a JSON number. Sub-nanosecond digits are
    rounded half to even (Kineto writes at most three decimals)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value * 1000
    if isinstance(value, str):
        whole, dot, frac = value.partition(".")
        if dot and whole.lstrip("-").isdigit() and frac.isdigit() and len(frac) <= 3:
            ns = int(whole.lstrip("-") or "0") * 1000 + int(frac.ljust(3, "0"))
            return -ns if whole.startswith("-") else ns
        try:
            return int((Decimal(value) * 1000).to_integral_value())
        except (InvalidOperation, ValueError):
            return None
    if isinstance(value, float):  # documents parsed elsewhere
        return int(round(value * 1000))
    return None
