"""Level 3: real distributed training workloads, and what costs hide outside the step.

The ``training`` benchmark, from the top down: :mod:`.bench` (the registered run function:
world sizes, groups, the series), :mod:`.sweeps` (the combination and accumulation sweeps),
:mod:`.partition` (the batch-size partition search),
:mod:`.cases` (one case: build, warm up, time, check), :mod:`.record` (its measurements),
:mod:`.strategies` / :mod:`.pipeline` / :mod:`.blocks` (wrapping a model for a strategy),
:mod:`.models` / :mod:`.decoder` / :mod:`.encoder` / :mod:`.workload` (the workloads),
:mod:`.formulas` (MFU, scaling efficiency), and :mod:`.settings` (``TrainingConfig``, the
cases and ``TrainingMetrics``).
"""
