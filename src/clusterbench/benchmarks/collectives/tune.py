"""NCCL's algorithms, protocols and channel counts against its defaults (``collectives.tune``).

For the ops training uses and a few sizes (latency-bound, middle, bandwidth-bound) the sweep
times NCCL's default and each allowed setting on the world's ranks, each in a communicator of
its own created after the setting was made:

- NCCL_ALGO and NCCL_PROTO are read, not cached, at every communicator's start (``ncclGetEnv``
  in ``ncclTopoTuneModel``, NCCL src/graph/tuning.cc).  The sweep sets them in this process's
  environment, creates the group (torch splits it from the world's communicator at once: the
  world's device is bound), checks and times, destroys it, and puts the environment back as
  it was, also on error.  Per-function lists (``allreduce:Tree``, NCCL 2.24.3 and later) keep
  a setting to the op it is measured on; older NCCL reads one list for every collective.
- Channel counts: NCCL_MIN/MAX_NCHANNELS are read once per process, so channels are set per
  communicator instead, min_ctas = max_ctas = n in torch's ``ProcessGroupNCCL.Options``
  (ncclConfig_t minCTAs/maxCTAs, NCCL 2.17.1 and later; more than 32 from NCCL 2.25.1).
- Allowed (tuning.cc): all_reduce Ring and Tree; all_gather and reduce_scatter Ring and PAT
  (PAT with Simple only, one GPU per node, NCCL 2.23.4 and later: ``ncclPatEnable``);
  protocols LL, LL128, Simple.  all_to_all is send/recv to NCCL: channel counts only.  Never
  NVLS, NVLS_TREE or CollNet (in-network reduction); NCCL_NVLS_ENABLE is never touched.
- A forced algorithm/protocol cannot fall back: with nothing enabled that fits, NCCL returns
  ncclInvalidUsage ("No algorithm/protocol available ... NCCL_ALGO was set to ...",
  src/enqueue.cc ``topoGetAlgoInfo``); such a setting is recorded as not supported, not as an
  error of the run.  Every tuning group is a blocking communicator, so such a refusal stays
  an error of the one call (NCCL marks only non-blocking communicators as failed).
- Proof, per setting and rank, from NCCL's own log (:mod:`clusterbench.runtime.nccl_debug`):
  the ENV lines say what NCCL read, the INIT line how many channels the communicator got; with
  ``--nccl-debug`` rank 0's TUNING lines also say which algorithm and protocol each op ran.
  Each setting's lines are kept in the run folder, ``nccl/tune-rank-NNNNN.log``.
- The default is measured before and after every setting and the two are pooled, so drift
  counts as the default's noise.  Each op's output is checked (``num_wrong``) before timing.

Rank 0 records per op, size and setting ``tune_latency_us`` (the median over repeats of the
per-repeat mean over ranks; each repeat ``iters`` ops back to back; ``stats.values`` the
repeats, the default's before then after) and ``tune_busbw``, with the setting, whether the log
confirmed it and what the log said in params; whether a setting beats the default is
:mod:`clusterbench.benchmarks.collectives.tune_analysis`'s to say.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from clusterbench.benchmarks.collectives.ops import DTYPES
from clusterbench.benchmarks.collectives.settings import CollectivesConfig, CollectivesMetrics
from clusterbench.benchmarks.collectives.tune_setting import (
    NCCL_FUNC,
    TUNE_VARS,
    SettingRun,
    TuneSetting,
    measure_setting,
    nccl_bytes,
    plan_settings,
    prove,
)
from clusterbench.collective_facts import algbw_gbps, bus_factor, usable_sizes
from clusterbench.runtime.dist import DistContext
from clusterbench.runtime.nccl_debug import parse_comm_log, tune_log_problem
from clusterbench.runtime.timing import rate_stats
from clusterbench.schema import Finding, Measurement, ParamValue, Stats
from clusterbench.units import format_bytes

__all__ = ["NOT_SUPPORTED", "NOT_TRIED", "SKIPPED", "skip_reason", "tune_sweep"]

SKIPPED = "collectives.tune_skipped"
NOT_TRIED = "collectives.tune.not_tried"
NOT_SUPPORTED = "collectives.tune.not_supported"
_LOG_CHARS = 300
"""At most this much of what the log said is kept in a measurement's params."""


def skip_reason(ctx: DistContext) -> str | None:
    """Why the sweep cannot run here (None: it can)."""
    if ctx.backend != "nccl":
        return f"{ctx.backend} has no NCCL algorithms or protocols to choose"
    if ctx.world_size < 2:
        return "a communicator of one rank runs no NCCL algorithm"
    problem = tune_log_problem(os.environ)
    if problem is not None:
        return f"no setting could be proven to take effect without NCCL's INFO log ({problem})"
    return None


def tune_sweep(
    ctx: DistContext, cfg: CollectivesConfig, *, memory_limit_bytes: float
) -> Iterator[Measurement | Finding]:
    """NCCL's default against each allowed setting, per op and size (module docstring)."""
    # every rank must agree: one rank's missing log must not leave the others in the sweep
    reason = next((r for r in ctx.all_gather(skip_reason(ctx)) if r), None)
    if reason is not None:
        if ctx.rank == 0:
            yield _finding(
                SKIPPED,
                f"NCCL tuning sweep skipped: {reason}.",
                {"reason": reason},
                fix="Run on two or more GPUs with NCCL to tune its settings.",
            )
        return
    plan = plan_settings(
        ops=cfg.tune_ops,
        algos=cfg.tune_algos,
        protos=cfg.tune_protos,
        channels=cfg.tune_channels,
        nccl_version=_nccl_version(),
        one_gpu_per_node=ctx.num_nodes == ctx.world_size,
    )
    sizes, too_big = _sizes(cfg, n=ctx.world_size, memory_limit_bytes=memory_limit_bytes)
    if ctx.rank == 0 and plan.not_tried + too_big:
        lines = plan.not_tried + too_big
        yield _finding(
            NOT_TRIED,
            "NCCL tuning sweep: not tried: " + "; ".join(lines) + ".",
            {"not_tried": lines},
        )
    default = TuneSetting(tuple(cfg.tune_ops))
    order = [default, *plan.settings, default]
    ctx.progress.start(sum(len(sizes[op]) for s in order for op in s.ops) or 1)
    sweep = _Sweep(
        ctx,
        cfg,
        sizes=sizes,
        log_path=Path(os.environ["NCCL_DEBUG_FILE"]),
        inherited={k: os.environ[k] for k in TUNE_VARS if k in os.environ},
    )
    before = sweep.run(default)
    for setting in plan.settings:
        yield from sweep.emit(sweep.run(setting))
    yield from sweep.emit(before, after=sweep.run(default))


def _nccl_version() -> tuple[int, ...] | None:
    try:
        version = torch.cuda.nccl.version()
    except (AttributeError, RuntimeError):
        return None
    return tuple(version) if isinstance(version, tuple) else None


def _sizes(
    cfg: CollectivesConfig, *, n: int, memory_limit_bytes: float
) -> tuple[dict[str, list[int]], list[str]]:
    """Each op's sizes, rounded as the size sweep rounds them and only those whose buffers fit;
    and a line for each size that does not."""
    element_bytes = torch.empty((), dtype=DTYPES[cfg.dtype]).element_size()
    wanted = sorted(set(cfg.tune_sizes))
    out: dict[str, list[int]] = {}
    too_big: list[str] = []
    for op in cfg.tune_ops:
        out[op] = usable_sizes(
            op, wanted, n=n, element_bytes=element_bytes, memory_limit_bytes=memory_limit_bytes
        )
        if len(out[op]) < len(wanted):
            too_big.append(
                f"{op} above {format_bytes(out[op][-1]) if out[op] else '0 B'}: "
                "its buffers do not fit in free memory"
            )
    return out, too_big


def _finding(finding_id: str, message: str, evidence: dict[str, Any], fix: str = "") -> Finding:
    return Finding(
        id=finding_id,
        severity="info",
        scope="group:world",
        message=message,
        evidence=evidence,
        fix=fix,
    )


@dataclass(frozen=True, slots=True)
class _View:
    """One rank's outcome of one setting, as gathered to rank 0 (plain data: it is pickled)."""

    samples: dict[tuple[str, int], list[float]]
    wrong: dict[tuple[str, int], int]
    refused: str | None
    confirmed: bool
    said: str
    coll_channels: list[int]
    choices: list[tuple[str, int, str, str, int | None]]
    """Rank 0's TUNING lines: (function, bytes, algo, proto, channels used)."""


@dataclass(frozen=True, slots=True)
class _Outcome:
    setting: TuneSetting
    views: list[_View]
    """Every rank's, rank 0 first."""


class _Sweep:
    """The settings of one sweep, each run on every rank and gathered to rank 0."""

    def __init__(
        self,
        ctx: DistContext,
        cfg: CollectivesConfig,
        *,
        sizes: dict[str, list[int]],
        log_path: Path,
        inherited: dict[str, str],
    ) -> None:
        self.ctx, self.cfg, self.sizes = ctx, cfg, sizes
        self.log_path, self.inherited = log_path, inherited

    def run(self, setting: TuneSetting) -> _Outcome:
        cfg = self.cfg
        run: SettingRun = measure_setting(
            self.ctx,
            setting,
            sizes=self.sizes,
            dtype=cfg.dtype,
            warmup=cfg.warmup,
            iters=cfg.iters,
            repeats=cfg.tune_repeats,
            log_path=self.log_path,
        )
        self._keep(setting, run.log)
        log = parse_comm_log(run.log)
        confirmed, said = prove(setting, log, inherited=self.inherited)
        choices = [(c.func, c.nbytes, c.algo, c.proto, c.channels) for c in log.choices]
        mine = _View(
            run.samples,
            run.wrong,
            run.refused,
            confirmed,
            said,
            log.coll_channels,
            choices if self.ctx.rank == 0 else [],
        )
        views = self.ctx.gather_to_root(mine)
        return _Outcome(setting, views or [mine])

    def _keep(self, setting: TuneSetting, text: str) -> None:
        """The setting's log lines, in the run folder: the proof, for anyone to read."""
        if self.ctx.run_dir is None:
            return
        path = self.ctx.run_dir / "nccl" / f"tune-rank-{self.ctx.rank:05d}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"# NCCL tuning: {setting.label} ({', '.join(setting.ops)})\n{text}")

    def emit(
        self, outcome: _Outcome, *, after: _Outcome | None = None
    ) -> Iterator[Finding | Measurement]:
        """Rank 0: the setting's rows (the default's pooled with ``after``), or its refusal."""
        if self.ctx.rank != 0:
            return
        refused = next((v.refused for v in outcome.views if v.refused), None)
        if refused is not None:
            s = outcome.setting
            yield _finding(
                NOT_SUPPORTED,
                f"NCCL cannot run {s.label} for {', '.join(s.ops)} here: {refused}",
                {"setting": s.label, "ops": list(s.ops), "nccl": refused},
            )
            return
        for op in outcome.setting.ops:
            for size in self.sizes[op]:
                yield from self._rows(outcome, op=op, size=size, after=after)

    def _rows(
        self, outcome: _Outcome, *, op: str, size: int, after: _Outcome | None
    ) -> Iterator[Measurement]:
        n, setting, key = self.ctx.world_size, outcome.setting, (op, size)
        series = _series(outcome.views, key)
        confirmed = all(v.confirmed for v in outcome.views)
        params = self._params(outcome, op=op, size=size)
        if after is not None and all(key in v.samples for v in after.views):
            # params stay what identifies the figure (runs are compared by them): the drift
            # between the two halves is in stats.values, before then after
            later = _series(after.views, key)
            series, confirmed = series + later, confirmed and all(v.confirmed for v in after.views)
            params["num_wrong"] = int(params["num_wrong"] or 0) + sum(
                v.wrong[key] for v in after.views
            )
        line = (NCCL_FUNC.get(op), nccl_bytes(op, size, n))
        chosen = [c for c in outcome.views[0].choices if c[:2] == line]
        if chosen:
            params["log_algo"] = ",".join(sorted({c[2] for c in chosen}))
            params["log_proto"] = ",".join(sorted({c[3] for c in chosen}))
            used = sorted({c[4] for c in chosen if c[4] is not None})
            if used:
                params["log_op_channels"] = ",".join(map(str, used))
            if setting.algo is not None:
                confirmed = confirmed and {(c[2], c[3]) for c in chosen} == {
                    (setting.algo.upper(), str(setting.proto).upper())
                }
        params["confirmed"] = confirmed
        t = statistics.median(series)
        factor = bus_factor(op, n)
        yield self.ctx.measurement(
            CollectivesMetrics.tune_latency_us,
            value=t * 1e6,
            params=params,
            stats=Stats.from_samples([s * 1e6 for s in series]),
        )
        # busbw = algbw x F (nccl-tests), at the median time
        yield self.ctx.measurement(
            CollectivesMetrics.tune_busbw,
            value=algbw_gbps(size, t) * factor,
            params=params,
            stats=rate_stats(series, work=size * factor, scale=1e9),
        )

    def _params(self, outcome: _Outcome, *, op: str, size: int) -> dict[str, ParamValue]:
        s, first = outcome.setting, outcome.views[0]
        params: dict[str, ParamValue] = {
            "op": op,
            "size_bytes": size,
            "group": "world",
            "group_kind": "world",
            "group_size": self.ctx.world_size,
            "dtype": self.cfg.dtype,
            "setting": s.label,
            "setting_kind": s.kind,
            "num_wrong": sum(v.wrong[(op, size)] for v in outcome.views),
            "log": first.said[:_LOG_CHARS],
        }
        if s.algo is not None:
            params.update(algo=s.algo, proto=s.proto, per_function=s.per_function)
        if s.channels is not None:
            params["channels"] = s.channels
        if first.coll_channels:
            params["log_channels"] = first.coll_channels[0]
        if s.kind == "default":
            params["min_gain"] = self.cfg.tune_min_gain  # what analysis judges the others by
        if s.kind == "default" and self.inherited:
            params["inherited"] = " ".join(f"{k}={v}" for k, v in self.inherited.items())
        return params


def _series(views: Sequence[_View], key: tuple[str, int]) -> list[float]:
    """Per repeat, the mean over ranks of the per-op seconds."""
    per_rank = [v.samples[key] for v in views]
    return [statistics.fmean(r[i] for r in per_rank) for i in range(len(per_rank[0]))]
