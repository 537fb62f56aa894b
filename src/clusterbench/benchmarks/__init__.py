"""Benchmarks: the measurements, one module each (with its settings and metrics); the built-in
ones are declared in :mod:`clusterbench.catalog`."""
