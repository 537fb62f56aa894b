"""Benchmarks: one module each, registered in :mod:`clusterbench.benchmarks.registry`."""
