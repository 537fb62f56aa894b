"""What a verdict is made of, shared by the benchmarks' findings and the run-wide analyses (which
never import each other): reading measurements for a verdict (:mod:`.measurements`: scope
labels, reference values, the best per key, the severity on CPU workers), the peer statistics
that find an outlier beyond the noise (:mod:`.peers`), the slow node pairs (:mod:`.node_pairs`)
and advice with its evidence (:mod:`.advice`).  Pure functions: no I/O, no rendering."""
