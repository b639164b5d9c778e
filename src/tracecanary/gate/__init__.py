"""The rollout gate: compare a candidate configuration against a baseline on simulator
reports (pass/warn/fail)."""
