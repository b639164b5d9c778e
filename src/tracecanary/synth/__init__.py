"""Deterministic synthetic workloads (decode, training, adversarial)."""
