"""The shipped default configurations, as package data: ``backends.yaml`` (the example
simulator configurations), ``tolerances.yaml`` (behaviour-verification tolerances) and
``physical.yaml`` (named physical replay configurations).

The repository's ``config/`` holds checked-equal copies for campaigns
(tests/test_package_data.py); commands fall back to these files, never to the current
directory, so a wheel installed anywhere finds them.
"""

from __future__ import annotations

from pathlib import Path

DEFAULT_FILES = ("backends.yaml", "tolerances.yaml", "physical.yaml")


def default_file(name: str) -> str:
    """The filesystem path of the shipped default ``name`` (one of DEFAULT_FILES)."""
    if name not in DEFAULT_FILES:
        raise ValueError(f"no shipped default named {name!r}")
    return str(Path(__file__).parent / name)
