"""torch.profiler's Kineto traces read without torch: the events and collectives of a trace
(:mod:`.trace`), the kernel families (:mod:`.kernels`), idle time (:mod:`.idle`), ranks on one
clock (:mod:`.ranks`) and what-if savings (:mod:`.whatif`).  The attribution benchmark reads
the traces it records with them and ``clusterbench analyze`` the traces of other jobs, so they
sit below both the benchmarks and the analyses."""
