"""Alpha/beta reporting: measured ladders -> bandwidth tables and fits that carry their trust.

Pipeline (each module one job):
    nccltests.py  nccl-tests stdout and ``-J`` JSON -> per-run tables
    sweep.py      TraceCanary sweep archives (``tracecanary.attempt/v1``) -> ladder rows
    tuning.py     NCCL ``NCCL_DEBUG_SUBSYS=TUNING`` logs -> per-size algorithm/protocol records
    load.py       detects each INPUT's kind and builds the one internal ladder table
    ladder.py     the ladder table contract, unit conversions, per-rung statistics
    fit.py        OLS ``T = alpha + bytes/beta`` and every trust gate
    analysis.py   per-ladder analysis: rungs, fits, saturation entry, plateau, tuner
    report.py     fit JSON (``tracecanary.alphabeta/v1``) and Markdown
    plots.py      deterministic PNG plots (matplotlib, Agg)
    pipeline.py   everything the CLI computes, as bytes in memory, then atomic writes
"""
