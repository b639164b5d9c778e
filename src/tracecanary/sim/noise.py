"""Seeded noise replays: ``--iterations N --seed S`` (the model is in docs/simulator.md,
"Noise model").

Per iteration k (0-based) one generator ``numpy.random.default_rng([seed, k])`` draws,
in this order and for every simulated occurrence i (in simulated order):
- u_i ~ Uniform[-1, 1): the service time becomes service_i * (1 + j * u_i) before rounding
  (per-op multiplicative jitter, symmetric around the noise-free service);
- d_i ~ Uniform{0, ..., A} (integers): the occurrence's arrival (issue and ready time) is
  delayed by d_i ns (arrival jitter; it changes latency only through queueing).
The same draws are used for every configuration of an iteration (common random numbers,
so configurations are compared under the same noise).

Guarantees:
- deterministic: the same program, protocol and noise settings give identical
  per-iteration metrics (and report bytes); the draws are vectorized, no per-event loop;
- j = 0 and A = 0 reproduce the plain model exactly (every iteration equals it);
- summaries use ``math.fsum`` and ``math.sqrt`` (correctly rounded), so ``verify-report``
  recomputes them bit for bit;
- bad settings raise ``InputError`` naming the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tracecanary.errors import InputError
from tracecanary.sim import samples as sample_codec
from tracecanary.sim.engine import Prepared, simulate
from tracecanary.sim.metrics import distribution

DEFAULT_SERVICE_JITTER = 0.05  # j: relative half-width of the service multiplier
DEFAULT_ARRIVAL_JITTER_NS = 0  # A: largest arrival delay in ns
CONFIDENCE_LEVEL = 0.95
# two-sided normal quantile of CONFIDENCE_LEVEL (the interval for the mean over iterations)
NORMAL_Z_95 = 1.959963984540054
NOISY_METRICS: tuple[str, ...] = ("latency", "queue_wait")
NOISE_DESCRIPTION = (
    "per iteration k, rng = numpy default_rng([seed, k]); per occurrence service *= 1 + j*u, "
    "u ~ U[-1, 1); arrival (issue and ready) delayed by d ~ U{0..A} ns; the same draws for "
    "every configuration"
)


@dataclass(frozen=True)
class NoiseSettings:
    """The declared noise protocol of a report (``protocol.noise``)."""

    iterations: int
    seed: int
    service_jitter: float
    arrival_jitter_ns: int

    def as_protocol(self) -> dict:
        return {
            "iterations": self.iterations,
            "seed": self.seed,
            "service_jitter": self.service_jitter,
            "arrival_jitter_ns": self.arrival_jitter_ns,
            "model": NOISE_DESCRIPTION,
        }


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def noise_settings(
    iterations,
    seed,
    service_jitter=DEFAULT_SERVICE_JITTER,
    arrival_jitter_ns=DEFAULT_ARRIVAL_JITTER_NS,
) -> NoiseSettings:
    """Validated settings; InputError naming the field for any bad value."""
    if not _is_int(iterations) or iterations < 1:
        raise InputError(
            f"iterations must be an integer >= 1, got {iterations!r}", field="iterations"
        )
    if not _is_int(seed) or not 0 <= seed < 2**63:
        raise InputError(f"seed must be an integer in [0, 2**63), got {seed!r}", field="seed")
    if (
        isinstance(service_jitter, bool)
        or not isinstance(service_jitter, int | float)
        or not math.isfinite(service_jitter)
        or not 0 <= service_jitter < 1
    ):
        raise InputError(
            f"service jitter must be in [0, 1), got {service_jitter!r}", field="service_jitter"
        )
    if not _is_int(arrival_jitter_ns) or not 0 <= arrival_jitter_ns < 2**53:
        raise InputError(
            f"arrival jitter must be an integer >= 0 ns, got {arrival_jitter_ns!r}",
            field="arrival_jitter_ns",
        )
    return NoiseSettings(iterations, seed, float(service_jitter), arrival_jitter_ns)


def draws(settings: NoiseSettings, iteration: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(service factor, arrival delay ns) of one iteration for n occurrences."""
    rng = np.random.default_rng([settings.seed, iteration])
    u = rng.uniform(-1.0, 1.0, n)
    d = rng.integers(0, settings.arrival_jitter_ns, n, endpoint=True, dtype=np.int64)
    return 1.0 + settings.service_jitter * u, d


def interval(values: list) -> dict:
    """Mean, sample standard deviation and the 95% normal interval of the mean, plus the
    empirical 2.5/97.5% percentiles (inverted CDF) of per-iteration values."""
    n = len(values)
    mean = math.fsum(values) / n
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    sd = math.sqrt(var)
    half = NORMAL_Z_95 * sd / math.sqrt(n)
    ordered = sorted(values)

    def pct(q: float):
        return ordered[max(0, math.ceil(q * n) - 1)]

    return {
        "mean": mean,
        "sd": sd,
        "ci_low": mean - half,
        "ci_high": mean + half,
        "p2_5": pct(0.025),
        "p97_5": pct(0.975),
    }


def noisy_block(prep: Prepared, configs, settings: NoiseSettings) -> dict:
    """``report.noise``: per configuration and metric, the per-iteration values (samples)
    and their interval summary."""
    per: dict[str, dict[str, dict[str, list]]] = {
        c.name: {f"{m}.{k}": [] for m in NOISY_METRICS for k in _KEYS} for c in configs
    }
    for k in range(settings.iterations):
        factor, delay = draws(settings, k, prep.n)
        for config in configs:
            result = simulate(prep, config, service_factor=factor, arrival_delay_ns=delay)
            for metric in NOISY_METRICS:
                dist = distribution(getattr(result, f"{metric}_ns"), prep.weight)
                for key in _KEYS:
                    per[config.name][f"{metric}.{key}"].append(dist[key])
    out: dict = {}
    for name, metrics in per.items():
        block = {}
        for label, values in metrics.items():
            if not values or values[0] is None:
                block[label] = None
                continue
            is_int = all(_is_int(v) for v in values)
            block[label] = {
                **interval([float(v) for v in values]),
                "samples": sample_codec.encode(
                    np.asarray(values, dtype=np.int64 if is_int else np.float64)
                ),
            }
        out[name] = block
    return {
        "confidence_level": CONFIDENCE_LEVEL,
        "interval": "mean over iterations +- z * sd / sqrt(iterations), z = 1.959963984540054",
        "configs": out,
    }


_KEYS: tuple[str, ...] = ("p50_ns", "p95_ns", "p99_ns", "max_ns", "mean_ns")
