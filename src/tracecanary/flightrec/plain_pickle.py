"""Reading a pickle that holds plain data only, executing nothing.

A Flight Recorder dump (``torch._C._distributed_c10d._dump_fr_trace``) is a pickle of
dicts, lists, tuples, strings and numbers. A pickle can also name any importable
callable and call it (``GLOBAL``/``STACK_GLOBAL`` then ``REDUCE``, ``INST``, ``OBJ``,
``NEWOBJ``, the copyreg extension codes, persistent ids), which is how a malicious file
runs ``os.system``. Two independent fences keep that from happening:

1. ``scan_opcodes`` walks the opcodes with ``pickletools.genops`` (which decodes and
   never executes) and refuses the file at the first opcode outside ``PLAIN_OPCODES``,
   naming it, its byte position and, for ``GLOBAL``, the callable it names; it also
   refuses a memo read of a slot no earlier opcode wrote, and a memo write beyond the
   next slot (picklers, torch's included, number slots in order; a huge index would
   make the unpickler allocate a huge memo table);
2. ``PlainUnpickler.find_class`` refuses every class, so even an opcode the scan let
   through could not reach a callable.

``load_plain_pickle`` then turns the result into JSON-like values (tuples become lists)
and refuses anything else (sets, bytes, floats that are not finite, non-string keys),
visiting at most ``nodes_per_byte`` nodes per input byte: memo references share objects,
so a small pickle can describe a deep DAG whose tree walk would never end.

Every refusal is ``ImportRefused`` (exit 2) naming the file, the byte offset or the path
to the value, and what was found.
"""

from __future__ import annotations

import io
import math
import pickle
import pickletools
from typing import Any

from tracecanary.errors import ImportRefused, ResourceLimitExceeded

PLAIN_OPCODES = frozenset(
    {
        # framing and structure
        "PROTO",
        "FRAME",
        "STOP",
        "MARK",
        "POP",
        "POP_MARK",
        "DUP",
        # memo (shared references, no code)
        "PUT",
        "BINPUT",
        "LONG_BINPUT",
        "MEMOIZE",
        "GET",
        "BINGET",
        "LONG_BINGET",
        # None, booleans, numbers
        "NONE",
        "NEWTRUE",
        "NEWFALSE",
        "INT",
        "BININT",
        "BININT1",
        "BININT2",
        "LONG",
        "LONG1",
        "LONG4",
        "FLOAT",
        "BINFLOAT",
        # strings
        "STRING",
        "BINSTRING",
        "SHORT_BINSTRING",
        "UNICODE",
        "BINUNICODE",
        "SHORT_BINUNICODE",
        "BINUNICODE8",
        # containers
        "EMPTY_LIST",
        "APPEND",
        "APPENDS",
        "LIST",
        "EMPTY_TUPLE",
        "TUPLE",
        "TUPLE1",
        "TUPLE2",
        "TUPLE3",
        "EMPTY_DICT",
        "DICT",
        "SETITEM",
        "SETITEMS",
    }
)
"""Opcodes that build None, booleans, numbers, strings, lists, tuples and dicts."""

_MEMO_PUTS = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})
_MEMO_GETS = frozenset({"GET", "BINGET", "LONG_BINGET"})
_CODE_OPCODES = frozenset(
    {"GLOBAL", "STACK_GLOBAL", "REDUCE", "INST", "OBJ", "NEWOBJ", "NEWOBJ_EX", "BUILD"}
)


class PlainUnpickler(pickle.Unpickler):
    """An unpickler that resolves no class and no persistent id: plain data only."""

    def find_class(self, module: str, name: str):  # noqa: ANN201 - pickle's signature
        raise pickle.UnpicklingError(f"refused to resolve {module}.{name}")

    def persistent_load(self, pid: Any):  # noqa: ANN201 - pickle's signature
        raise pickle.UnpicklingError("refused a persistent id")


def scan_opcodes(data: bytes, *, file: str) -> None:
    """Refuse ``data`` unless every opcode is in ``PLAIN_OPCODES`` and every memo read
    names an index an earlier write gave (see module docstring). Executes nothing."""
    written: set[int] = set()
    try:
        for opcode, arg, pos in pickletools.genops(io.BytesIO(data)):
            name = opcode.name
            if name not in PLAIN_OPCODES:
                named = f" ({arg.replace(' ', '.')})" if name == "GLOBAL" and arg else ""
                why = (
                    "would resolve or call code"
                    if name in _CODE_OPCODES
                    else "builds something other than plain data"
                )
                raise ImportRefused(
                    f"pickle opcode {name}{named} at byte {pos} {why}; only plain "
                    "containers, strings and numbers are accepted, nothing was executed",
                    file=file,
                    field="pickle",
                )
            if name in _MEMO_PUTS:
                if arg > len(written):  # picklers number slots in order; a far one allocates
                    raise ImportRefused(
                        f"pickle opcode {name} at byte {pos} writes memo slot {arg} after "
                        f"{len(written)} slots: out of sequence",
                        file=file,
                        field="pickle",
                    )
                written.add(arg)
            elif name == "MEMOIZE":  # the next slot, as the unpickler numbers it
                written.add(len(written))
            elif name in _MEMO_GETS and arg not in written:
                raise ImportRefused(
                    f"pickle opcode {name} at byte {pos} reads memo slot {arg}, "
                    "which no earlier opcode wrote",
                    file=file,
                    field="pickle",
                )
    except ImportRefused:
        raise
    except Exception as err:  # genops raises ValueError/EOFError on malformed input
        raise ImportRefused(
            f"not a valid pickle: {type(err).__name__}: {err}"[:240], file=file, field="pickle"
        ) from None


def load_plain_pickle(data: bytes, *, file: str, max_depth: int, nodes_per_byte: int = 8) -> Any:
    """The plain value in ``data`` as JSON-like Python values (dict with str keys, list,
    str, int, finite float, bool, None); refused as described in the module docstring."""
    scan_opcodes(data, file=file)
    try:
        value = PlainUnpickler(io.BytesIO(data)).load()
    except Exception as err:  # the scan makes this unreachable for code; kept as a fence
        raise ImportRefused(
            f"not a plain-data pickle: {type(err).__name__}: {err}"[:240],
            file=file,
            field="pickle",
        ) from None
    budget = [max(1024, nodes_per_byte * len(data))]
    return _plain(value, file=file, path="", depth=0, max_depth=max_depth, budget=budget)


def _plain(value: Any, *, file: str, path: str, depth: int, max_depth: int, budget: list) -> Any:
    budget[0] -= 1
    if budget[0] < 0:
        raise ResourceLimitExceeded(
            "pickle expands to more values than its size allows (shared references "
            "repeated); refused",
            file=file,
            field=path or "pickle",
        )
    if depth > max_depth:
        raise ResourceLimitExceeded(
            f"pickle nesting deeper than max_depth={max_depth}", file=file, field=path or "pickle"
        )
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        if not math.isfinite(value):
            raise ImportRefused(f"non-finite number {value!r}", file=file, field=path or "pickle")
        return value
    if kind in (list, tuple):
        return [
            _plain(
                item,
                file=file,
                path=f"{path}[{i}]",
                depth=depth + 1,
                max_depth=max_depth,
                budget=budget,
            )
            for i, item in enumerate(value)
        ]
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise ImportRefused(
                    f"dict key {key!r} is not a string"[:160], file=file, field=path or "pickle"
                )
            out[key] = _plain(
                item,
                file=file,
                path=f"{path}.{key}" if path else key,
                depth=depth + 1,
                max_depth=max_depth,
                budget=budget,
            )
        return out
    raise ImportRefused(
        f"holds a {kind.__name__}, not plain data (dict, list, tuple, str, int, float, bool, None)",
        file=file,
        field=path or "pickle",
    )
