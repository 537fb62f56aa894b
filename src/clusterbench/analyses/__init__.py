"""Analysis: pure functions from results to findings (no I/O, no printing).

A benchmark's verdicts live in its folder (``benchmarks/<name>/findings.py``); here live the
analyses of the run as a whole, declared as run parts in :mod:`clusterbench.catalog` (the host
inventory, NCCL's own log, the scaling prediction, placement, telemetry, the time budget, each
device against its peers, cost, soak), and what they share.  Errors recorded in
``results.errors`` are reported separately and not repeated as findings.
"""
