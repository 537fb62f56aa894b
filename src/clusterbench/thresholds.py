"""The limits the verdicts apply: :class:`Thresholds`, one field a limit, with its default.

One definition for the config (which reads the ``[thresholds]`` table and ``--set`` overrides
into it) and the analysis modules (which apply it); standard library only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

__all__ = ["Thresholds"]


@dataclass(kw_only=True, slots=True)
class Thresholds:
    """Limits the verdicts apply; each one can be changed in a ``[thresholds]`` table."""

    gemm_min_efficiency: float = 0.65
    """Best GEMM below this fraction of the dense peak -> warn (seed guide: >65%)."""
    mixed_precision_min_speedup: float = 2.0
    """BF16/FP16 GEMM below this multiple of FP32 -> warn (seed guide: 2-3x)."""
    hbm_min_efficiency: float = 0.80
    """Device memory copy below this fraction of the spec bandwidth -> warn."""
    host_device_min_efficiency: float = 0.80
    """Pinned host<->device below this fraction of the PCIe link rate -> warn."""
    p2p_min_efficiency: float = 0.80
    """GPU<->GPU copy below this fraction of the NVLink spec -> warn (seed: links >= 80%)."""
    remote_numa_max_loss: float = 0.20
    """Host<->device from another NUMA node more than this fraction slower -> info."""
    busbw_min_efficiency: float = 0.80
    """Collective busbw at the largest size below this fraction of the link's peak (within a
    node what healthy NVLink of the SKU reaches, else its spec; the node's NICs across nodes)
    -> warn (seed: links >= 80%)."""
    network_min_efficiency: float = 0.80
    """Node-to-node TCP/RDMA below this fraction of the slower link rate -> warn (seed: "less
    than 80% of theoretical, start debugging")."""
    min_internode_gbps_large_model: float = 400.0
    """Per-node inter-node Gb/s needed for models above 7B parameters (seed: 400, prefer 800)."""
    model_params_b: float | None = None
    """Model size in billions of parameters; enables the large-model network check."""
    scaling_min_efficiency_warn: float = 0.90
    """Training scaling efficiency below this -> warn (seed: >= 90%)."""
    scaling_min_efficiency_fail: float = 0.80
    """...and below this -> fail (seed: below 80% there is a bottleneck)."""
    mfu_min: float = 0.40
    """MFU below this for models of 1.3B parameters and more -> warn.  The seed names 50-60% on
    H100; public large runs reach 41-48% (Megatron-LM) and 33-39% (torchtitan 8B FSDP),
    docs/reference.md."""
    gpu_busy_min: float = 0.90
    """GPU busy below this fraction while training with the real data loader -> input-bound
    (seed: utilisation under 90% means the input pipeline or coordination holds it back)."""
    checkpoint_min_save_gbps: float = 0.5
    """Checkpoint save below this many GB/s (checkpoints of 1 GB and more) -> info.  torch.save
    of the 125m model's 1.81 GiB state reached 0.639 GB/s on the H200 machine's local disk,
    docs/results/H200-level3.md."""
    checkpoint_stall_max_pct: float = 10.0
    """Training slowed by more than this % during an asynchronous checkpoint save -> warn."""
    checkpoint_min_free_ratio: float = 2.0
    """Free space in the checkpoint directory below this many checkpoints -> warn (keep the last
    good one while the next is written)."""
    straggler_min_spread_pct: float = 5.0
    """A rank whose collectives start later than the others by more than this % of the step
    (and at least 1 ms) is the straggler -> fail."""
    outlier_mads: float = 3.0
    """A device this many scaled MADs below its peers is an outlier -> fail."""
    outlier_min_rel: float = 0.05
    """...and at least this fraction below the peers' median (no alarms on tiny spreads)."""
    node_pair_min_rel: float = 0.4
    """A node pair (collective busbw, TCP, RDMA between two nodes) is slow only at least this
    fraction below the healthy pairs' median.  Between-node figures swing more between tests
    than within one: healthy simulated nodes on one shared machine gave pairs 8% and 25% below
    their median with 1-6% spread inside each test (tests/multinode, 2026-12), while a link
    that trained low, is shaped or congested sits far below (40 Mbit/s against ~10 Gbit/s)."""
    outlier_spread_sigmas: float = 3.0
    """...and worse than the peers' median by more than this many of the measurements' own
    repeat spreads: the factor ``exp(N x sqrt(s_own^2 + s_peers^2))``, ``s = sqrt(ln(1 + CV^2))``
    of the CV of its repeats (at least the peers') and of the peers' pooled CV, ``sqrt(mean
    CV^2)``: no alarm on a gap inside the noise.  Measurements without repeats are judged by
    the two limits above.  Applies to ``outlier.*`` and the slow node pairs."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None and value <= 0:
                raise ValueError(f"{f.name} must be positive, got {value}")
