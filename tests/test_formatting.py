"""One precision policy for what a person reads: 3 significant digits for ratios, binary
units for bytes, human units for times."""

from __future__ import annotations

import pytest

from tracecanary.formatting import (
    count,
    duration_ns,
    duration_us,
    percent,
    ratio,
    size,
    size_tick,
    times,
)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (147.6687, "148"),
        (0.926829, "0.927"),
        (0.068133, "0.0681"),
        (9.996, "10.0"),
        (1.0, "1.00"),
        (123456.0, "123,000"),
        (0.0, "0"),
    ],
)
def test_ratios_have_three_significant_digits_in_positional_notation(value, text):
    assert ratio(value) == text


def test_factors_and_percentages_use_the_same_precision():
    assert times(147.6687) == "148x"
    assert percent(0.0841) == "8.41%"
    assert percent(1.0) == "100%"


@pytest.mark.parametrize(
    ("n_bytes", "text"),
    [
        (0, "0 B"),
        (512, "512 B"),
        (1023, "1023 B"),
        (1024, "1.00 KiB"),
        (33792, "33.0 KiB"),
        (33466, "32.7 KiB"),
        (4 * 2**20, "4.00 MiB"),
        (2**30 - 1, "1.00 GiB"),
    ],
)
def test_byte_counts_use_binary_units_with_three_significant_digits(n_bytes, text):
    assert size(n_bytes) == text


@pytest.mark.parametrize(
    ("n_bytes", "tick"),
    [(1, "1"), (512, "512"), (1024, "1K"), (1536, "1.5K"), (2**20, "1M"), (3 * 2**30, "3G")],
)
def test_axis_ticks_for_bytes_read_as_1K_1M_1G(n_bytes, tick):
    assert size_tick(n_bytes) == tick


@pytest.mark.parametrize(
    ("ns", "text"),
    [(850, "850 ns"), (12_345, "12.3 us"), (88_166_500, "88.2 ms"), (1.234e9, "1.23 s")],
)
def test_durations_use_the_largest_unit_that_keeps_the_value_at_least_one(ns, text):
    assert duration_ns(ns) == text


def test_microsecond_inputs_and_counts():
    assert duration_us(88166.5) == "88.2 ms"
    assert count(20528) == "20,528"
