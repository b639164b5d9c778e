"""The workload zoo: small real PyTorch code paths captured live on CPU (4 gloo ranks,
``torch.profiler``, deterministic seeds) by ``tracecanary capture --workload NAME``.

Each workload is ordinary user code (no group probe, no TraceCanary hooks): process
groups come from the traces' own evidence at merge (``tracecanary.kineto.crossrank``).
``WORKLOADS`` maps a name to its program; ``tracecanary.zoo.runner`` runs one.
"""

from __future__ import annotations

from tracecanary.zoo.programs import WORKLOADS, Workload

__all__ = ["WORKLOADS", "Workload"]
