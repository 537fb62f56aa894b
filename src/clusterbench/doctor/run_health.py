"""A run's own GPU health: the Xid events and the link-error growth from its start to its end.

The worker starts it once it has probed its node, before the first benchmark, and finishes it
after the last one.  Each GPU rank watches its own GPU (the probe's GPU of the rank): NVML's
Xid events as they come (:class:`~clusterbench.doctor.xid_watch.XidWatcher`) and the NVLink
and PCIe error counters read at both ends (``error_counters``).  What it finds is recorded as
measurements of the ``health`` kind (counts, dimensions in ``params``) and findings
(``health.gpu.xid``, ``health.gpu.link_errors_grew``).  CPU ranks watch nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from clusterbench.doctor._sources import Sources
from clusterbench.doctor.error_counters import (
    COUNTERS,
    PCIE_REPLAY,
    ErrorCounts,
    Growth,
    growth,
    growth_finding,
    read_counts,
)
from clusterbench.doctor.xid import xid_findings
from clusterbench.doctor.xid_watch import XidWatcher
from clusterbench.hardware.probe import AUTO, load_nvml
from clusterbench.hardware.topology import nvml_query
from clusterbench.metrics import Metric, MetricSet
from clusterbench.runtime.dist import DistContext
from clusterbench.schema import Finding, HostInfo, Measurement, ParamValue
from clusterbench.thresholds import Thresholds

__all__ = ["HealthMetrics", "RunHealth"]


class HealthMetrics(MetricSet, benchmark="health"):
    xid_events = Metric("count", "none", "Xid events NVML reported for the rank's GPU in the run")
    nvlink_errors_grown = Metric(
        "count", "none", "growth of one NVLink error counter over the GPU's active links in the "
        "run (params: counter)")  # fmt: skip
    nvlink_link_errors_grown = Metric(
        "count", "none", "growth of one NVLink error counter of one link (params: counter, link)",
        only_when="the counter of that link grew")  # fmt: skip
    pcie_replays_grown = Metric("count", "none", "growth of the GPU's PCIe replay counter")


@dataclass(kw_only=True)
class RunHealth:
    """What one rank watches; :meth:`start` it, then :meth:`finish` it once."""

    nvml: Any | None = None
    gpu: int | None = None
    handle: Any = None
    before: ErrorCounts | None = None
    started_s: float = 0.0
    watcher: XidWatcher | None = None
    problem: str | None = None
    """Why nothing is watched on a GPU rank (no NVML, no handle); None when it is."""
    owns_nvml: bool = False

    @classmethod
    def start(cls, ctx: DistContext, *, nvml: Any = AUTO) -> RunHealth:
        """Read the counters and start the Xid watcher for this rank's GPU (CPU ranks: idle).
        Never raises: what goes wrong is the ``problem``, reported at the end."""
        if not ctx.is_cuda or ctx.gpu is None:
            return cls()
        try:
            return cls._start(ctx.gpu.index, nvml=nvml)
        except Exception as exc:  # the run must not fail for its health watch
            return cls(problem=f"{type(exc).__name__}: {exc}")

    @classmethod
    def _start(cls, gpu: int, *, nvml: Any) -> RunHealth:
        lib = load_nvml() if nvml is AUTO else nvml
        if lib is None:
            return cls(problem="NVML is not available (nvidia-ml-py or the driver's libnvidia-ml)")
        handle = nvml_query(lib, "nvmlDeviceGetHandleByIndex", gpu)
        if handle is None:
            return cls(nvml=lib, owns_nvml=nvml is AUTO,
                       problem=f"NVML gives no handle for GPU {gpu}")  # fmt: skip
        watcher = XidWatcher(lib, {gpu: handle})
        watcher.start()
        return cls(nvml=lib, gpu=gpu, handle=handle, before=read_counts(lib, gpu, handle),
                   started_s=time.monotonic(), watcher=watcher, owns_nvml=nvml is AUTO)  # fmt: skip

    def finish(self, ctx: DistContext, *, thresholds: Thresholds) -> list[Measurement | Finding]:
        """Stop watching; the run's Xid events and counter growth as measurements and
        findings (and, on local rank 0, what could not be watched and why)."""
        try:
            return self._results(ctx, thresholds=thresholds)
        except Exception as exc:  # a broken watch must not cost the run's results
            return [self._not_watched(ctx, f"{type(exc).__name__}: {exc}")]
        finally:
            if self.owns_nvml and self.nvml is not None:
                nvml_query(self.nvml, "nvmlShutdown")

    def _results(self, ctx: DistContext, *, thresholds: Thresholds) -> list[Measurement | Finding]:
        if self.problem is not None:
            return [self._not_watched(ctx, self.problem)] if ctx.local_rank == 0 else []
        if self.gpu is None or self.before is None:
            return []  # a CPU rank
        events = self.watcher.stop() if self.watcher is not None else []
        after = read_counts(self.nvml, self.gpu, self.handle)
        seconds = time.monotonic() - self.started_s
        grown = growth(self.before, after)
        out = self._measurements(ctx, before=self.before, after=after, grown=grown)
        src = Sources(host=ctx.host_info or HostInfo(hostname=ctx.host))
        out += xid_findings(events, src=src, source="NVML Xid events", finding_id="health.gpu.xid",
                            during="during the run")  # fmt: skip
        found = growth_finding(grown, seconds=seconds, thresholds=thresholds,
                               scope=src.gpu_scope(self.gpu))  # fmt: skip
        out += [found] if found is not None else []
        watch_problem = self.watcher.problem if self.watcher is not None else None
        if watch_problem and ctx.local_rank == 0:
            out.append(self._not_watched(ctx, watch_problem))
        return out

    def _measurements(
        self, ctx: DistContext, *, before: ErrorCounts, after: ErrorCounts, grown: list[Growth]
    ) -> list[Measurement | Finding]:
        def m(metric: Metric, value: int, **params: ParamValue) -> Measurement:
            return Measurement(benchmark="health", metric=metric.name, value=float(value),
                               unit=metric.unit, params=params, rank=ctx.rank, host=ctx.host,
                               device=ctx.device_label)  # fmt: skip

        out: list[Measurement | Finding] = []
        if self.watcher is not None and self.watcher.problem is None:
            out.append(m(HealthMetrics.xid_events, len(self.watcher.events())))
        read = {name for _, name in after.nvlink} & {name for _, name in before.nvlink}
        for name in (n for n in COUNTERS if n in read):
            total = sum(g.delta for g in grown if g.counter == name)
            out.append(m(HealthMetrics.nvlink_errors_grown, total, counter=name))
        out += [m(HealthMetrics.nvlink_link_errors_grown, g.delta, counter=g.counter, link=g.link)
                for g in grown if g.link is not None]  # fmt: skip
        if after.pcie_replay is not None and before.pcie_replay is not None:
            pcie = sum(g.delta for g in grown if g.counter == PCIE_REPLAY)
            out.append(m(HealthMetrics.pcie_replays_grown, pcie))
        return out

    def _not_watched(self, ctx: DistContext, why: str) -> Finding:
        return Finding(
            id="health.not_watched",
            severity="info",
            scope=f"host:{ctx.host}",
            message=f"the run's GPU health (Xid events, NVLink/PCIe error counters) was not "
            f"fully watched on this node: {why}",
            evidence={"reason": why, "rank": ctx.rank},
            fix="install nvidia-ml-py with the NVIDIA driver's libnvidia-ml; in a container, "
            "expose the driver (NVIDIA container toolkit); clusterbench doctor still reads the "
            "kernel log for Xids",
        )
