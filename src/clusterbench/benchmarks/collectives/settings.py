"""The collectives benchmark's settings and metrics (the size sweep's and the NCCL tuning sweep's).

They live apart from the measurement (:mod:`.collectives`, which re-exports them) so that the
tuning sweep (:mod:`.tune`) can read the settings and emit the metrics without an
import circle.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from clusterbench.benchmarks.pair_plan import DEFAULT_PARTNERS, PairStrategy
from clusterbench.benchmarks.sweep_stop import PlateauRule
from clusterbench.collective_facts import (
    GROUP_KINDS,
    OPS,
    Dtype,
    GroupKind,
    Mode,
    OpName,
)
from clusterbench.declared.collectives import CollectivesMetrics
from clusterbench.suites import check_suite

if TYPE_CHECKING:
    from typing import Self

__all__ = [
    "MODES",
    "TUNE_ALGOS",
    "TUNE_OPS",
    "TUNE_PROTOS",
    "CollectivesConfig",
    "CollectivesMetrics",
    "DtypeAlias",
    "TuneAlgo",
    "TuneOp",
    "TuneProto",
]

MODES: tuple[Mode, ...] = typing.get_args(Mode)
DtypeAlias = Literal["float32", "bfloat16", "float16"]
"""torch's names of the element types, accepted for ``dtype`` and recorded as the short name."""
_DTYPE_ALIASES: dict[str, Dtype] = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
_KIB, _MIB, _GIB = 2**10, 2**20, 2**30

TuneOp = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]
"""The collectives training uses (all_to_all: mixture-of-experts), the ones the sweep tunes."""
TUNE_OPS: tuple[TuneOp, ...] = typing.get_args(TuneOp)
TuneAlgo = Literal["ring", "tree", "pat"]
"""NCCL_ALGO values offered (never NVLS, NVLS_TREE or CollNet: in-network reduction)."""
TUNE_ALGOS: tuple[TuneAlgo, ...] = typing.get_args(TuneAlgo)
TuneProto = Literal["LL", "LL128", "Simple"]
TUNE_PROTOS: tuple[TuneProto, ...] = typing.get_args(TuneProto)
_MAX_TUNE_CHANNELS = 64  # MAXCHANNELS of NCCL 2.30 (src/include/device.h)
_MIN_TUNE_REPEATS = 4
"""With 3 repeats against the pooled 6 of the default, Mann-Whitney's smallest one-sided p is
1 / C(9, 3) = 0.012: it could never reach 0.01.  With 4: 1 / C(12, 4) = 0.002."""
_MAX_TUNE_REPEATS = 32  # the default's 2 x 32 repeats are all kept (Stats.values holds 64)


@dataclass(kw_only=True, slots=True)
class CollectivesConfig:
    """Settings of the ``collectives`` benchmark."""

    ops: list[OpName] = field(default_factory=lambda: list(OPS))
    """Collectives: all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, send_recv."""
    groups: list[GroupKind] = field(default_factory=lambda: list(GROUP_KINDS))
    """Groups: world, intra_node (one per node), inter_node (one per local rank across nodes),
    node_pairs (pairs of nodes as ``node_pairs`` plans them; largest size only).  Multi-node
    kinds are skipped on one node, node pairs on two."""
    node_pairs: PairStrategy = "auto"
    """Which node pairs to test: all (k - 1 rounds for k nodes), sparse (each node against
    ``pair_partners`` partners, then the suspects against nodes known good: at most
    ``pair_partners`` + 3 rounds whatever k), auto (all up to 8 nodes, sparse above)."""
    pair_partners: int = DEFAULT_PARTNERS
    """Survey partners per node of the sparse node-pair plan (2 or more)."""
    modes: list[Mode] = field(default_factory=lambda: list(MODES))
    """Timing modes: back_to_back, blocking, graph (CUDA only)."""
    min_bytes: int = 8
    """Smallest message (nccl-tests -b)."""
    max_bytes: int = 512 * _MIB
    """Largest message (nccl-tests -e); capped by free memory."""
    factor: int = 2
    """Size multiplier between steps (nccl-tests -f)."""
    dtype: Dtype | DtypeAlias = "fp32"
    """Element type: fp32, bf16, fp16 (float32, bfloat16, float16 accepted)."""
    warmup: int = 5
    """Untimed ops per size (nccl-tests -w)."""
    iters: int = 20
    """Timed ops per size and mode (nccl-tests -n)."""
    graph_iters: int = 20
    """Ops captured in one CUDA graph."""
    graph_replays: int = 10
    """Timed replays of the graph."""
    graph_max_bytes: int = 1 * _MIB
    """Largest size timed in graph mode (it is for small-message latency)."""
    memory_fraction: float = 0.7
    """Share of the free memory (the least over ranks) the largest buffers may take."""
    sweep_stop: bool = True
    """Stop growing the sizes of an op and group at the busbw plateau (``plateau_*``;
    :mod:`.stop`); False: every size (the full suite, and CPU workers)."""
    plateau_tolerance: float = 0.05
    """A size adding less than this fraction to the best busbw before it is flat."""
    plateau_patience: int = 2
    """Flat sizes in a row that end the sweep of an op and group."""
    plateau_min_bytes: int = 1 * _MIB
    """Sizes below this always run (latency-bound: their busbw climbs with the size)."""
    tune: bool = False
    """After the size sweep, time NCCL's defaults against each NCCL_ALGO x NCCL_PROTO (and
    channel count) on the world, each in a communicator of its own, proven from NCCL's log;
    needs NCCL and 2 or more GPUs (skipped on gloo, with the reason)."""
    tune_ops: list[TuneOp] = field(default_factory=lambda: list(TUNE_OPS))
    """Ops the tuning sweep measures: all_reduce, all_gather, reduce_scatter, all_to_all
    (all_to_all is send/recv to NCCL: only channel counts apply to it)."""
    tune_sizes: list[int] = field(default_factory=lambda: [32 * _KIB, 4 * _MIB, 256 * _MIB])
    """Message sizes (bytes, S as nccl-tests counts it) of the tuning sweep: latency-bound,
    middle, bandwidth-bound; capped by free memory like the size sweep."""
    tune_algos: list[TuneAlgo] = field(default_factory=lambda: list(TUNE_ALGOS))
    """NCCL_ALGO values tried where the op has them: all_reduce ring, tree; all_gather and
    reduce_scatter ring, pat (pat: with one GPU per node, protocol Simple)."""
    tune_protos: list[TuneProto] = field(default_factory=lambda: list(TUNE_PROTOS))
    """NCCL_PROTO values tried with each algorithm: LL, LL128, Simple."""
    tune_channels: list[int] = field(default_factory=list)
    """Channel counts tried, each as min_ctas = max_ctas of a communicator of its own (torch's
    ProcessGroupNCCL.Options); empty: channels are not swept."""
    tune_repeats: int = 7
    """Timed repeats per setting and size, each ``iters`` ops back to back (4 to 32: with
    fewer the Mann-Whitney test cannot reach p < 0.01)."""
    tune_min_gain: float = 0.05
    """A setting is recommended only where the 95% confidence interval of its speed-up over
    the default lies wholly above 1 + this."""

    def __post_init__(self) -> None:
        self.dtype = _DTYPE_ALIASES.get(self.dtype, self.dtype)
        for name in ("ops", "groups", "modes", "tune_ops", "tune_sizes"):
            if not getattr(self, name):
                raise ValueError(f"{name} must not be empty")
        if not 0 < self.min_bytes <= self.max_bytes:
            raise ValueError(
                f"need 0 < min_bytes <= max_bytes, got {self.min_bytes}, {self.max_bytes}"
            )
        if self.factor < 2:
            raise ValueError(f"factor must be >= 2, got {self.factor}")
        for name in ("iters", "graph_iters", "graph_replays"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("warmup", "graph_max_bytes"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not 0 < self.memory_fraction <= 1:
            raise ValueError(f"memory_fraction must be in (0, 1], got {self.memory_fraction}")
        if self.pair_partners < 2:
            raise ValueError(f"pair_partners must be >= 2, got {self.pair_partners}")
        self._check_tune()
        self.plateau()  # checks plateau_tolerance and plateau_patience
        if self.plateau_min_bytes < 0:
            raise ValueError(f"plateau_min_bytes must be >= 0, got {self.plateau_min_bytes}")

    def plateau(self) -> PlateauRule:
        """The rule that stops the size sweep of an op and group."""
        return PlateauRule(tolerance=self.plateau_tolerance, patience=self.plateau_patience)

    def _check_tune(self) -> None:
        for name in ("tune_ops", "tune_sizes", "tune_algos", "tune_protos", "tune_channels"):
            setattr(self, name, list(dict.fromkeys(getattr(self, name))))  # each once
        if any(size < 1 for size in self.tune_sizes):
            raise ValueError(f"tune_sizes must be >= 1 byte each, got {self.tune_sizes}")
        if any(not 1 <= c <= _MAX_TUNE_CHANNELS for c in self.tune_channels):
            raise ValueError(
                f"tune_channels must each be in 1..{_MAX_TUNE_CHANNELS}, got {self.tune_channels}"
            )
        if not _MIN_TUNE_REPEATS <= self.tune_repeats <= _MAX_TUNE_REPEATS:
            raise ValueError(
                f"tune_repeats must be in {_MIN_TUNE_REPEATS}..{_MAX_TUNE_REPEATS} (with fewer "
                f"than {_MIN_TUNE_REPEATS} Mann-Whitney's p cannot go below 0.01), got "
                f"{self.tune_repeats}"
            )
        if not 0 <= self.tune_min_gain < 1:
            raise ValueError(f"tune_min_gain must be in [0, 1), got {self.tune_min_gain}")

    @classmethod
    def preset(cls, *, suite: str, device_type: str) -> Self:
        """Settings of ``suite`` (quick, standard, full) on ``device_type`` (cuda, cpu)."""
        check_suite(suite, device_type)
        if device_type == "cpu":
            cpu_max = {"quick": 4 * _MIB, "standard": 16 * _MIB, "full": 64 * _MIB}[suite]
            return cls(
                modes=["back_to_back", "blocking"],
                max_bytes=cpu_max,
                factor=4 if suite == "quick" else 2,
                warmup=2,
                iters=10 if suite == "quick" else 20,
                sweep_stop=False,  # a short sweep, the same sizes every run (the CPU tests)
            )
        # 8 GiB: docs/reference.md's measured 2x H200 busbw (342 GB/s all_reduce) is at 8 GiB.
        gpu_max = {"quick": 512 * _MIB, "standard": 8 * _GIB, "full": 8 * _GIB}[suite]
        full = suite == "full"
        return cls(
            max_bytes=gpu_max,
            factor=4 if suite == "standard" else 2,
            iters=50 if full else 20,
            tune=full,
            sweep_stop=not full,
            tune_channels=[8, 16, 32, 64] if full else [],
        )
