"""The deterministic scheduler simulator (a model, not hardware; docs/simulator.md).

Modules: ``backends`` (configurations), ``engine`` (vectorized replay), ``metrics``
(weighted summaries), ``ranking`` (tie-tolerant decisions), ``isolated`` (nccl-tests
style per-signature replay), ``samples`` (report sample codec), ``report`` (build and
verify ``tracecanary.report/v1``).
"""

SIM_VERSION = "1.0.0"
