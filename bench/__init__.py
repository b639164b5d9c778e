"""Benchmarks that print measured figures beside a comparator measured in the same run.

Each ``bench_*.py`` module defines ``run(quick: bool) -> list[dict]``; ``python -m bench``
runs them one process per module (so peak RSS is per module unless a case reports its
own) and prints one table. Rows: case, figure, unit, comparator, comparator_figure,
ratio, target, met, peak_rss_mb, notes.
"""
