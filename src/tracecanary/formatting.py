"""One precision policy for every number a person reads (tables, plot axes, titles).

- ratios and fractions: 3 significant digits (``ratio``), never scientific notation;
- byte counts: binary units, as nccl-tests and ``--min-bytes 64K`` (``size``: ``33.0 KiB``;
  ``size_tick`` for axis ticks: ``1K``, ``4M``, ``1G``);
- durations: the largest unit that keeps the value >= 1 (``duration_ns``: ``88.2 ms``),
  3 significant digits;
- counts: exact, with thousands separators (``count``).

Every function takes a finite number and returns plain ASCII (microseconds are ``us``).
"""

from __future__ import annotations

import math

SIGNIFICANT_DIGITS = 3
BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
TICK_UNITS = ("", "K", "M", "G", "T", "P")  # axis ticks: the same binary steps, short
DURATION_UNITS = (("s", 1e9), ("ms", 1e6), ("us", 1e3), ("ns", 1.0))


def significant(value: float, digits: int = SIGNIFICANT_DIGITS) -> str:
    """``value`` rounded to ``digits`` significant digits, in positional notation
    (``147.6687`` -> ``148``, ``0.926829`` -> ``0.927``, ``123456`` -> ``123,000``)."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    magnitude = math.floor(math.log10(abs(value)))
    decimals = digits - 1 - magnitude
    rounded = round(value, decimals)
    if rounded != 0 and math.floor(math.log10(abs(rounded))) > magnitude:
        decimals -= 1  # 9.996 rounds up to 10.0: one digit fewer after the point
    if decimals <= 0:
        return f"{int(round(rounded)):,}"
    return f"{rounded:.{decimals}f}"


def ratio(value: float) -> str:
    """A ratio or fraction at 3 significant digits (``0.0681``, ``148``)."""
    return significant(value)


def times(value: float) -> str:
    """A factor (``148x``)."""
    return f"{significant(value)}x"


def percent(fraction: float) -> str:
    """A fraction as a percentage at 3 significant digits (``0.0681`` -> ``6.81%``)."""
    return f"{significant(100.0 * fraction)}%"


def count(value: int) -> str:
    return f"{int(value):,}"


def _binary_step(n_bytes: float) -> int:
    if n_bytes < 1024:
        return 0
    return min(int(math.log(n_bytes, 1024) + 1e-9), len(BINARY_UNITS) - 1)


def size(n_bytes: float) -> str:
    """A byte count in binary units at 3 significant digits (``512 B``, ``33.0 KiB``)."""
    step = _binary_step(abs(n_bytes))
    if step == 0:
        return f"{int(n_bytes)} B"
    scaled = n_bytes / 1024**step
    if round(scaled, 1) >= 1024 and step + 1 < len(BINARY_UNITS):
        step, scaled = step + 1, scaled / 1024
    text = significant(scaled)
    if "." not in text and len(text.replace(",", "")) < SIGNIFICANT_DIGITS:
        text = f"{scaled:.{SIGNIFICANT_DIGITS - len(text)}f}"  # 33 KiB -> 33.0 KiB
    return f"{text} {BINARY_UNITS[step]}"


def size_tick(n_bytes: float) -> str:
    """A compact axis tick for a byte count: ``512``, ``1K``, ``1.5K``, ``4M``, ``1G``."""
    if n_bytes <= 0:
        return "0"
    step = _binary_step(n_bytes)
    scaled = n_bytes / 1024**step
    return f"{scaled:.4g}{TICK_UNITS[step]}"


def duration_ns(ns: float) -> str:
    """A duration in the largest unit that keeps it >= 1, at 3 significant digits
    (``850 ns``, ``12.3 us``, ``88.2 ms``, ``1.23 s``)."""
    for unit, scale in DURATION_UNITS:
        if abs(ns) >= scale:
            return f"{significant(ns / scale)} {unit}"
    return f"{significant(ns)} ns"


def duration_us(us: float) -> str:
    return duration_ns(us * 1e3)
