"""Alpha/beta reporting: measured ladders -> bandwidth tables and fits that carry their trust.

Pipeline (each module one job):
    nccltests.py  the per-run table of nccl-tests output and the checks both layouts share
    nccltests_text.py
                  nccl-tests ``*_perf`` stdout -> per-run tables
    nccltests_json.py
                  nccl-tests ``-J`` JSON -> a per-run table
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
