"""What the ``attribution`` benchmark records (:class:`AttributionMetrics`): declared below the
benchmarks and the run-wide analyses, which both select by it; its settings module re-exports it."""

from __future__ import annotations

from clusterbench.metrics import Metric, MetricSet

__all__ = ["AttributionMetrics"]


class AttributionMetrics(MetricSet, benchmark="attribution"):
    """Per rank.  The four classes (in % of the step, summing to 100) and the split of
    communication come for the mean over the profiled steps (rank_step=mean) and for each step
    (rank_step=N)."""

    compute = Metric("%", "none", "compute-bound device work (GEMM, convolution, attention)")
    memory = Metric("%", "none", "other device work (elementwise, norms, copies, optimizer)")
    communication = Metric("%", "none", "exposed: collectives while no other device work runs")
    coordination = Metric("%", "none", "device idle: launch gaps, waiting for input or ranks")
    communication_exposed = Metric("%", "none", "communication again, beside the overlapped part")
    communication_overlapped = Metric("%", "none", "collectives under compute or memory work")
    step_time_ms = Metric("ms", "lower", "median profiled step time")
    profiler_overhead_pct = Metric("%", "none", "(profiled - plain median step) / plain step")
    collective_start_spread_ms = Metric(
        "ms", "lower", "latest - earliest rank's start of each matched collective (rank 0)",
        only_when="the profiled steps run collectives",
    )  # fmt: skip
    collective_start_lateness_ms = Metric(
        "ms", "lower", "how far behind the earliest rank this rank starts its collectives",
        only_when="the profiled steps run collectives",
    )  # fmt: skip
    kernel_time_ms = Metric(
        "ms", "lower", "a top kernel's own time inside the profiled steps (params kernel, class)",
        only_when="clusterbench analyze reads a team's own traces",
    )  # fmt: skip
    unclassified = Metric(
        "%", "none", "device work of kernels the table of kernel families does not know",
        only_when="clusterbench analyze reads a team's own traces",
    )  # fmt: skip
    whatif_saving_ms = Metric(
        "ms", "lower", "per step, what a fix would save, read from the trace's own timeline "
        "(params whatif: straggler, input_wait, launch_gaps, exposed_communication, "
        "fused_elementwise)",
        only_when="clusterbench analyze reads a team's own traces",
    )  # fmt: skip
    # the accumulation sweep, per accum_steps: per iteration (rank_step=N) and their mean
    idle_ms = Metric(
        "ms", "lower", "device idle per iteration: no device activity (host and launch gaps)",
        only_when="attribution.accum_sweep is set",
    )  # fmt: skip
    collective_wait_ms = Metric(
        "ms", "lower", "per iteration, inside collectives until the latest rank starts them",
        only_when="attribution.accum_sweep is set",
    )  # fmt: skip
    idle_pct = Metric(
        "%", "lower", "idle_ms in % of the iteration", only_when="attribution.accum_sweep is set"
    )
    wait_pct = Metric(
        "%", "lower", "collective_wait_ms in % of the iteration",
        only_when="attribution.accum_sweep is set",
    )  # fmt: skip
