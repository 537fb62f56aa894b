"""The ``transfer`` benchmark: its measurement (:mod:`.measure`), its settings and metrics
(:mod:`.settings`, no torch) and its duration model (:mod:`.duration`)."""

from clusterbench.benchmarks.transfer.duration import MODEL
from clusterbench.benchmarks.transfer.settings import (
    DIRECTIONS,
    MEMORY_KINDS,
    Direction,
    MemoryKind,
    TransferConfig,
    TransferMetrics,
)
from clusterbench.benchmarks.transfer.thresholds import TransferThresholds
from clusterbench.registry import ALL_SUITES, Benchmark
from clusterbench.rules import PeerRules, VerdictLabel

__all__ = [
    "BENCHMARK",
    "DIRECTIONS",
    "MEMORY_KINDS",
    "Direction",
    "MemoryKind",
    "TransferConfig",
    "TransferMetrics",
]

BENCHMARK = Benchmark(
    name="transfer",
    level=1,
    scope="per_device",
    suites=ALL_SUITES,
    devices=frozenset({"cuda"}),
    run="clusterbench.benchmarks.transfer.measure:transfer",
    description=(
        "Host<->device (pinned, pageable, NUMA local/remote) and GPU<->GPU copy bandwidth."
    ),
    settings=TransferConfig,
    metrics=TransferMetrics,
    thresholds=TransferThresholds,
    durations=MODEL,
    findings="clusterbench.benchmarks.transfer.findings:findings",
    section="clusterbench.benchmarks.transfer.section:section",
    figures="clusterbench.benchmarks.transfer.figures:figures",
    peers=PeerRules(
        pairs=frozenset({TransferMetrics.p2p_bandwidth}),
        # GPUs on different NUMA nodes are still peers ("numa": local/remote stays in the key)
        placement_params={TransferMetrics.bandwidth: frozenset({"numa_node"})},
        fix=(
            "Check this GPU's PCIe link under load (`nvidia-smi -q -d PCIE -i {index}`) and that "
            "its rank is bound to the GPU's NUMA node (`numactl --cpunodebind=N --membind=N`)."
        ),
    ),
    verdict_labels=(
        VerdictLabel(
            metric=TransferMetrics.bandwidth,
            group="H2D",
            when={"direction": "h2d", "memory": "pinned"},
            order=2,
        ),
        VerdictLabel(
            metric=TransferMetrics.bandwidth,
            group="D2H",
            when={"direction": "d2h", "memory": "pinned"},
            order=3,
        ),
        VerdictLabel(metric=TransferMetrics.p2p_bandwidth, group="P2P", detail="{mode}", order=4),
    ),
)
