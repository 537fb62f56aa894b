"""Primitives the benchmarks use: launching, the distributed context, timing."""
