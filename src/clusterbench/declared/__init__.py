"""What a benchmark declares that the run-wide analyses read too, one module per benchmark:
the figures it records (its metric set) and the few defaults, limits and finding ids an
analysis applies to them.  It sits below the benchmarks and the analyses, so that neither
imports the other; each benchmark's settings module re-exports its own.

Metric sets register on class creation (:func:`clusterbench.metrics.declared`): a benchmark's
settings module imports its module here, so loading the catalog declares them all.
"""
