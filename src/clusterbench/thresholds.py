"""The limits the verdicts apply: :class:`Thresholds`, one field a limit of the run as a whole,
with its default, and the limits each benchmark declares itself.

A benchmark's own limits are a frozen dataclass in its folder (``Benchmark.thresholds``), whose
fields are keys of the same ``[thresholds]`` table; ``Thresholds.given`` holds those set for
the run and :meth:`Thresholds.of` gives a benchmark's limits with them.  One definition for the
config (which reads the ``[thresholds]`` table and ``--set`` overrides into it) and the analysis
modules (which apply it); standard library only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from clusterbench.schema import Results

__all__ = ["Thresholds", "check_positive", "practical_floor", "run_thresholds"]

L = TypeVar("L")


def check_positive(limits: Any) -> None:
    """ValueError for a limit of ``limits`` (a dataclass) that is zero or negative."""
    for f in dataclasses.fields(limits):
        value = getattr(limits, f.name)
        if isinstance(value, int | float) and value <= 0:
            raise ValueError(f"{f.name} must be positive, got {value}")


@dataclass(kw_only=True, slots=True)
class Thresholds:
    """Limits the verdicts apply; each one can be changed in a ``[thresholds]`` table."""

    prediction_target_efficiency: float = 0.90
    """The weak-scaling efficiency the run's prediction at larger GPU counts aims for: the
    inter-node bandwidth per node it needs is stated, and a predicted efficiency below it at
    the largest count (1024 GPUs) -> warn (cluster-benchmarking guide: >= 90%); at most 1."""
    telemetry_throttle_min_fraction: float = 0.1
    """A limiting clocks-event reason (SW power cap, HW slowdown, SW/HW thermal slowdown, power
    brake) active in at least this fraction of a measurement's telemetry samples -> a
    ``telemetry.throttled`` finding (a reason seen in a sample or two of a window is noise)."""
    telemetry_hot_margin_c: float = 5.0
    """A GPU whose temperature came within this many degrees C of its own slowdown temperature
    (NVML's threshold) during a benchmark -> warn (``telemetry.hot``)."""
    nvlink_crc_fail_per_s: float = 100.0
    """NVLink CRC errors (flit or data) that grow during a run -> warn; at this many per second
    on one link -> fail (DCGM's health watch: "CRC errors only matter at rates of 100+ per
    second", dcgm_gpu_hardware_limits.h).  Doctor warns when even the average since boot
    reaches it."""
    nvlink_recovery_fail_count: int = 1
    """NVLink replay or recovery errors: this many on one link during a run -> fail (DCGM's
    health watch fails on one)."""
    pcie_replay_fail_per_min: float = 8.0
    """PCIe replays that grow during a run -> warn; at this many per minute -> fail ("8 replays
    per minute is the maximum recommended", dcgm_gpu_hardware_limits.h).  Doctor warns when even
    the average since boot reaches it."""
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

    regression_min_rel: float = 0.05
    """A run compared with another (``compare``, ``--baseline``, history) changed only when the
    figure moved more than this fraction (bandwidth, throughput, FLOP/s, MFU, rates): a
    practical limit, smaller changes are not worth chasing; on one H200 the bf16 best GEMM of
    five quick-suite runs stayed within 0.4% (790.4-793.0 TFLOP/s), single shapes by up to
    11.5% between two runs (docs/results/H200-results-over-time.md)..."""
    regression_min_rel_cpu: float = 0.3
    """...on CPU workers (device ``cpu:N``) more than this fraction instead, and there only when
    the run-to-run noise is known (3 or more earlier comparable runs in the history, or a fleet
    baseline of 3 or more figures): on a shared CPU the repeats inside one run say little
    about how much the next run differs.  Measured on a 2-core machine, 2 CPU workers, honest
    reruns of the quick suite minutes apart: fp32 GEMM TFLOP/s ranged over 0.076-0.103 (26%
    below the best) with a CV of 1-9% inside each run, and bf16 once halved (0.11 against
    0.21) while other work shared the cores; memory bandwidth up to 2x (CV 2-34%); gloo
    collectives' latency and busbw by 2-16x, with Mann-Whitney p down to 2e-4 between runs.
    Two workers sharing one core (``taskset -c 0``) lost 46-63% of their GEMM TFLOP/s."""
    regression_min_rel_unknown: float = 0.15
    """...and, on GPUs, more than this fraction while the run-to-run noise is unknown (fewer
    than 3 earlier comparable runs in the history, no fleet baseline): the repeats inside one
    run miss how much the next run differs.  Measured on one H200, two quick-suite runs 19 s
    apart (2026-12-01, docs/results/H200-results-over-time.md): bf16/fp8/tf32 GEMM TFLOP/s
    7-11.5% apart at four shapes with Mann-Whitney p < 1e-4, pageable d2h 11.5% (p=0.002)."""
    regression_min_abs_us: float = 5.0
    """...and latencies (us) also by more than this many microseconds (small-message latencies
    of a few us jitter by a few us between runs)."""
    regression_min_abs_s: float = 0.05
    """...and durations in seconds (checkpoint save/load, step times) by more than this."""
    regression_fail_rel: float = 0.20
    """A regression this large (fraction) is ``fail``; smaller ones beyond the limits above are
    ``warn``."""
    regression_alpha: float = 0.01
    """A change is beyond the within-run noise when a two-sided Mann-Whitney U test of the two
    runs' repeat samples gives p below this (both with at least 3 samples, and enough that p
    can reach it: the smallest p of n1 against n2 samples is 2 / C(n1 + n2, n1))."""
    regression_noise_sigmas: float = 3.0
    """A metric's trend in ``history`` moved only beyond this many robust standard deviations
    (1.4826 x MAD) of its run-to-run noise."""
    regression_false_alarms: float = 0.01
    """The false alarms one comparison may raise: the p-values of all its rows (the run-to-run
    Student t test where the history holds 3 or more earlier runs, else the repeats'
    Mann-Whitney test) pass the Benjamini-Hochberg procedure at this level, so that with
    nothing changed the chance of any regression or improvement in a comparison is at most
    this (Benjamini and Hochberg 1995)."""

    soak_drift_min_rel: float = 0.05
    """A soak's figure drifted only when its last rounds are worse than its first rounds by
    more than this fraction (a practical limit, as ``regression_min_rel``)..."""
    soak_drift_alpha: float = 0.05
    """...its trend over the rounds is monotone beyond chance: Mann-Kendall (Kendall's tau of
    the figure against time) p below this, which takes 5 rounds at least (the smallest
    two-sided p of n rounds is 2 / n!: 0.083 for 4, 0.017 for 5)..."""
    soak_drift_noise_sigmas: float = 3.0
    """...and the change from the first to the last rounds is more than this many times the
    rounds' noise (1.4826 x the MAD of the change from one round to the next / sqrt 2, which a
    steady trend or one step does not inflate)."""

    given: dict[str, Any] = field(default_factory=dict)
    """The limits benchmarks declare themselves (``Benchmark.thresholds``) that were set for the
    run, by key; the others keep their declared defaults (:meth:`of`)."""

    def __post_init__(self) -> None:
        check_positive(self)
        if self.prediction_target_efficiency > 1:
            raise ValueError(
                f"prediction_target_efficiency must be at most 1, got "
                f"{self.prediction_target_efficiency}"
            )

    def of(self, kind: type[L]) -> L:
        """A benchmark's limits (``kind``, its ``Benchmark.thresholds``): those set for the run,
        the declared defaults for the rest."""
        names = {f.name for f in dataclasses.fields(kind)}  # type: ignore[arg-type]
        return kind(**{k: v for k, v in self.given.items() if k in names})


def practical_floor(unit: str, thresholds: Thresholds, *, device: str = "") -> tuple[float, float]:
    """The practical change limit for a figure in ``unit``: (relative, absolute in ``unit``).

    A change counts only beyond both: the relative limit for every unit, and for latencies and
    durations an absolute floor too (0 where none applies).  ``device``: the measurement's
    device; CPU workers (``cpu:N``) get :attr:`Thresholds.regression_min_rel_cpu`."""
    rel = (
        thresholds.regression_min_rel_cpu
        if device.startswith("cpu")
        else thresholds.regression_min_rel
    )
    if unit in ("us", "µs"):
        return rel, thresholds.regression_min_abs_us
    if unit == "ns":
        return rel, thresholds.regression_min_abs_us * 1e3
    if unit in ("s", "ms"):
        scale = 1e3 if unit == "ms" else 1.0
        return rel, thresholds.regression_min_abs_s * scale
    return rel, 0.0


def run_thresholds(results: Results) -> Thresholds:
    """The thresholds the run was made with (``run.config.thresholds``); keys this version does
    not know are left out (no benchmark's limits name them), those it misses keep their
    defaults."""
    recorded = results.run.config.get("thresholds")
    if not isinstance(recorded, dict):
        return Thresholds()
    names = {f.name for f in dataclasses.fields(Thresholds)} - {"given"}
    given = {k: v for k, v in recorded.items() if k not in names}
    try:
        return Thresholds(given=given, **{k: v for k, v in recorded.items() if k in names})
    except (TypeError, ValueError):
        return Thresholds()
