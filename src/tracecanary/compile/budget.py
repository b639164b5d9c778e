"""Timing budgets: per-field maximum absolute error, in integer nanoseconds.

A budget spec is ``field=amount[,field=amount...]`` with fields ``skew``, ``overlap``,
``gap``, ``latency`` and amounts such as ``2us``, ``500ns``, ``1.5ms``, ``0`` (units ns,
us, ms, s; a bare number is nanoseconds; the amount must be a whole number of ns).
A field left out of the spec gets budget 0: it is kept exact. Per-signature overrides
``{signature_id: {field: ns}}`` replace the field budget for occurrences of that
signature (the behavior search tightens or loosens one signature group at a time).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from tracecanary.compile.timing_streams import FIELDS
from tracecanary.errors import InputError

_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_AMOUNT = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ns|us|µs|ms|s)?\s*$")
MAX_BUDGET_NS = 1 << 59


def parse_duration_ns(text: str, *, field_name: str = "budget") -> int:
    """``'2us'`` -> 2000. Refuses negative, fractional-nanosecond or unit-less garbage."""
    from decimal import Decimal, InvalidOperation  # only where a duration is read

    m = _AMOUNT.match(str(text))
    if not m:
        raise InputError(
            f"cannot read duration {text!r} (use e.g. 2us, 500ns, 1ms)", field=field_name
        )
    try:
        ns = Decimal(m.group(1)) * _UNITS[m.group(2) or "ns"]
    except InvalidOperation as err:  # pragma: no cover - regex guarantees a number
        raise InputError(f"cannot read duration {text!r}", field=field_name) from err
    if ns != ns.to_integral_value():
        raise InputError(
            f"duration {text!r} is not a whole number of nanoseconds", field=field_name
        )
    if ns > MAX_BUDGET_NS:
        raise InputError(f"duration {text!r} is too large", field=field_name)
    return int(ns)


@dataclass(frozen=True)
class Budget:
    """Per-field budgets (ns) plus per-signature overrides."""

    fields: dict[str, int]
    overrides: dict[int, dict[str, int]] = field(default_factory=dict)

    @staticmethod
    def exact() -> Budget:
        return Budget({f: 0 for f in FIELDS})

    def per_signature(self, name: str, n_signatures: int) -> np.ndarray:
        """Budget of ``name`` for every signature id (overrides applied)."""
        out = np.full(n_signatures, self.fields[name], dtype=np.int64)
        for sig, fields in self.overrides.items():
            if name in fields:
                if not 0 <= sig < n_signatures:
                    raise InputError(
                        f"budget override names signature {sig}, but the program has "
                        f"{n_signatures} signatures",
                        field="budget_overrides",
                    )
                out[sig] = fields[name]
        return out

    def to_json(self) -> dict:
        return {
            **{f"{f}_ns": int(self.fields[f]) for f in FIELDS},
            "overrides": {
                str(sig): {f"{f}_ns": int(v) for f, v in sorted(fields.items())}
                for sig, fields in sorted(self.overrides.items())
            },
        }


def parse_budget(spec: str, overrides: dict | None = None) -> Budget:
    """Budget from ``skew=2us,overlap=5us,...`` and optional ``{sig: {field: ns|str}}``."""
    fields = {f: 0 for f in FIELDS}
    seen = set()
    for part in str(spec).split(","):
        if not part.strip():
            continue
        if "=" not in part:
            raise InputError(f"budget entry {part!r} is not field=amount", field="budget")
        name, amount = (s.strip() for s in part.split("=", 1))
        if name not in FIELDS:
            raise InputError(
                f"unknown budget field {name!r} (known: {', '.join(FIELDS)})", field="budget"
            )
        if name in seen:
            raise InputError(f"budget field {name!r} given twice", field="budget")
        seen.add(name)
        fields[name] = parse_duration_ns(amount, field_name=f"budget.{name}")
    return Budget(fields, parse_overrides(overrides or {}))


def parse_overrides(overrides: dict) -> dict[int, dict[str, int]]:
    out: dict[int, dict[str, int]] = {}
    if not isinstance(overrides, dict):
        raise InputError(
            "budget overrides must map signature id -> {field: amount}", field="budget_overrides"
        )
    for sig, fields in overrides.items():
        try:
            sig_id = int(sig)
        except (TypeError, ValueError) as err:
            raise InputError(
                f"override key {sig!r} is not a signature id", field="budget_overrides"
            ) from err
        if not isinstance(fields, dict):
            raise InputError(
                f"override for signature {sig} is not a mapping", field="budget_overrides"
            )
        entry = {}
        for name, amount in fields.items():
            key = name[:-3] if str(name).endswith("_ns") else name
            if key not in FIELDS:
                raise InputError(f"unknown budget field {name!r}", field=f"budget_overrides.{sig}")
            if isinstance(amount, bool) or not isinstance(amount, int | str):
                raise InputError(
                    f"budget {amount!r} is not an amount", field=f"budget_overrides.{sig}.{name}"
                )
            ns = amount if isinstance(amount, int) else parse_duration_ns(amount, field_name=name)
            if ns < 0 or ns > MAX_BUDGET_NS:
                raise InputError(
                    f"budget {amount!r} out of range", field=f"budget_overrides.{sig}.{name}"
                )
            entry[key] = int(ns)
        out[sig_id] = entry
    return out
