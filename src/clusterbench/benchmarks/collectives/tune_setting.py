"""One setting of the NCCL tuning sweep (:mod:`.tune`): the plan of settings, the
environment applied and put back, the communicator it is timed in, and the proof from NCCL's
log that it took effect.

- NCCL_ALGO and NCCL_PROTO are read, not cached, at every communicator's start (``ncclGetEnv``
  in ``ncclTopoTuneModel``, NCCL src/graph/tuning.cc): they are set in this process's
  environment, the group is created (torch splits it from the world's communicator at once:
  the world's device is bound), checked and timed, destroyed, and the environment put back as
  it was, also on error.
- Channel counts are set per communicator, min_ctas = max_ctas in torch's
  ``ProcessGroupNCCL.Options`` (ncclConfig_t minCTAs/maxCTAs): NCCL_MIN/MAX_NCHANNELS are read
  once per process.
- Every tuning group is a blocking communicator: a refusal ("No algorithm/protocol available",
  ncclInvalidUsage, src/enqueue.cc) stays an error of the one call (NCCL marks only
  non-blocking communicators as failed, src/group.cc).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from clusterbench.benchmarks.collectives.groups import GroupHandle, GroupSpec
from clusterbench.benchmarks.collectives.ops import make_op
from clusterbench.benchmarks.collectives.timing import time_mode
from clusterbench.runtime.dist import DistContext
from clusterbench.runtime.nccl_debug import CommLog, log_offset, read_log_from
from clusterbench.units import format_bytes

__all__ = [
    "NCCL_FUNC",
    "TUNE_VARS",
    "SettingRun",
    "TunePlan",
    "TuneSetting",
    "applied_env",
    "measure_setting",
    "nccl_bytes",
    "plan_settings",
    "prove",
]

TUNE_VARS = ("NCCL_ALGO", "NCCL_PROTO")
"""The only variables the sweep sets (and puts back)."""
NCCL_FUNC = {
    "all_reduce": "AllReduce",
    "all_gather": "AllGather",
    "reduce_scatter": "ReduceScatter",
}
"""ncclFuncStr (src/init.cc): the prefixes of per-function lists, and the TUNING lines' names."""
_ALGO_NAMES = {"ring": "Ring", "tree": "Tree", "pat": "PAT"}  # ncclAlgoStr, src/init.cc
_ALGOS_OF = {"all_reduce": ("ring", "tree"), "all_gather": ("ring", "pat"),
             "reduce_scatter": ("ring", "pat")}  # fmt: skip
_PER_FUNCTION, _PAT, _CONFIG_CTAS, _64_CHANNELS = (2, 24, 3), (2, 23, 4), (2, 17, 1), (2, 25, 1)
_REFUSED = ("no algorithm/protocol available", "invalid usage")
_EMPTY_CACHE_BYTES = 64 * 2**20


@dataclass(frozen=True, slots=True)
class TuneSetting:
    """One communicator's NCCL setting and the ops timed in it (the default: none set)."""

    ops: tuple[str, ...]
    algo: str | None = None
    """NCCL's name (Ring, Tree, PAT), with ``proto``; None: NCCL chooses."""
    proto: str | None = None
    channels: int | None = None
    """min_ctas = max_ctas of the communicator; None: NCCL chooses."""
    per_function: bool = True
    """NCCL_ALGO/NCCL_PROTO as a list for the op's function only (NCCL 2.24.3+)."""

    @property
    def kind(self) -> str:
        if self.channels is not None:
            return "channels"
        return "default" if self.algo is None else "algo_proto"

    @property
    def env(self) -> dict[str, str]:
        """The variables this setting exports, exactly as NCCL reads them."""
        if self.algo is None or self.proto is None:
            return {}
        prefix = f"{NCCL_FUNC[self.ops[0]].lower()}:" if self.per_function else ""
        return {"NCCL_ALGO": prefix + self.algo, "NCCL_PROTO": prefix + self.proto}

    @property
    def label(self) -> str:
        if self.channels is not None:
            return f"channels={self.channels}"
        return " ".join(f"{k}={v}" for k, v in self.env.items()) or "default"


@dataclass(frozen=True, slots=True)
class TunePlan:
    settings: list[TuneSetting]
    """Every setting but the default (which is timed before and after them all)."""
    not_tried: list[str]
    """What NCCL cannot run here and why, one line each."""


def plan_settings(
    *,
    ops: Sequence[str],
    algos: Sequence[str],
    protos: Sequence[str],
    channels: Sequence[int],
    nccl_version: tuple[int, ...] | None,
    one_gpu_per_node: bool,
) -> TunePlan:
    """The settings to time, in order: each op's algorithm x protocol, then channel counts
    (each over every op).  ``nccl_version`` None: taken as a recent NCCL."""
    version = nccl_version or (99,)
    per_function = version >= _PER_FUNCTION
    settings, not_tried = [], []
    for op in ops:
        for algo in [a for a in _ALGOS_OF.get(op, ()) if a in algos]:
            usable = [p for p in protos if algo != "pat" or p == "Simple"]
            if algo == "pat" and usable and (version < _PAT or not one_gpu_per_node):
                why = (
                    "NCCL has no PAT before 2.23.4"
                    if version < _PAT
                    else "NCCL runs PAT only with one GPU per node (tuning.cc ncclPatEnable)"
                )
                not_tried.append(f"PAT for {op}: {why}")
                continue
            settings += [
                TuneSetting((op,), algo=_ALGO_NAMES[algo], proto=p, per_function=per_function)
                for p in usable
            ]
    if channels and version < _CONFIG_CTAS:
        not_tried.append("channel counts: per-communicator minCTAs/maxCTAs need NCCL 2.17.1")
    elif channels:
        for c in channels:
            if c > 32 and version < _64_CHANNELS:
                not_tried.append(f"channels={c}: NCCL before 2.25.1 has at most 32 channels")
            else:
                settings.append(TuneSetting(tuple(ops), channels=c))
    return TunePlan(settings, not_tried)


@contextlib.contextmanager
def applied_env(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` (NCCL_ALGO / NCCL_PROTO only) in os.environ for the block, then the two
    variables exactly as they were (unset stays unset), whatever the block raises."""
    assert set(values) <= set(TUNE_VARS), values
    saved = {k: os.environ.get(k) for k in TUNE_VARS}
    try:
        os.environ.update(values)
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# --- one setting on every rank ----------------------------------------------------------------


@dataclass(slots=True)
class SettingRun:
    """What one setting gave this rank."""

    samples: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    """(op, size) -> seconds per op, one per repeat."""
    wrong: dict[tuple[str, int], int] = field(default_factory=dict)
    refused: str | None = None
    """NCCL's refusal of the setting (it cannot run it here)."""
    log: str = ""
    """What NCCL logged while the setting's communicator lived."""


def measure_setting(
    ctx: DistContext,
    setting: TuneSetting,
    *,
    sizes: Mapping[str, list[int]],
    dtype: str,
    warmup: int,
    iters: int,
    repeats: int,
    log_path: Path | None,
) -> SettingRun:
    """Create the world-ranks group under ``setting``, check and time each op and size in it,
    destroy it; the environment is restored before this returns or raises."""
    run = SettingRun()
    start = log_offset(log_path) if log_path is not None else 0
    ranks = tuple(range(ctx.world_size))
    with applied_env(setting.env), ctx.doing(f"NCCL tuning: {setting.label}"):
        try:
            group = dist.new_group(list(ranks), pg_options=_pg_options(ctx, setting.channels))
        except RuntimeError as exc:
            run.refused, group = _refusal(exc), None
        if group is not None:
            h = GroupHandle(GroupSpec("world", "world", ranks), group, ctx.rank)
            try:
                for op in setting.ops:
                    for size in sizes.get(op, []):
                        where = f"in {op} of {format_bytes(size)} ({setting.label})"
                        run.samples[(op, size)], run.wrong[(op, size)] = _time_size(
                            ctx, h, op=op, size=size, dtype=dtype, warmup=warmup, iters=iters,
                            repeats=repeats, where=where,
                        )  # fmt: skip
                        ctx.progress.advance()
                ctx.barrier()  # every rank is done with the group before it is destroyed
            except RuntimeError as exc:
                run.refused = _refusal(exc)
            finally:
                dist.destroy_process_group(group)
    if log_path is not None:
        run.log = read_log_from(log_path, start)
    return run


def _pg_options(ctx: DistContext, channels: int | None) -> Any:
    """A blocking communicator, ``channels`` as min_ctas = max_ctas (None on gloo)."""
    if ctx.backend != "nccl":
        return None
    options = dist.ProcessGroupNCCL.Options()  # absent from CPU-only torch builds
    options.is_high_priority_stream = False  # as torch's own default for new groups
    options.config.blocking = 1
    if channels is not None:
        options.config.min_ctas = options.config.max_ctas = channels
    return options


def _refusal(exc: RuntimeError) -> str:
    """NCCL's refusal of a setting as one line; any other error is raised again."""
    text = str(exc)
    if not any(r in text.lower() for r in _REFUSED):
        raise exc
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    said = [line for line in lines if "no algorithm/protocol" in line.lower()]
    return (said or lines or [type(exc).__name__])[0]


def _time_size(
    ctx: DistContext, h: GroupHandle, *, op: str, size: int, dtype: str, warmup: int,
    iters: int, repeats: int, where: str,
) -> tuple[list[float], int]:  # fmt: skip
    built = make_op(op, size_bytes=size, h=h, dtype=dtype, device=ctx.device, emulate=False)
    with ctx.doing(where, collective=True):
        built.prepare()
        built.run()
        if ctx.is_cuda:
            torch.cuda.synchronize(ctx.device)
        wrong = built.count_wrong()
        for _ in range(warmup):
            built.run()
        samples = []
        for _ in range(repeats):
            timed = time_mode(ctx, mode="back_to_back", op=built, h=h, iters=iters)
            assert timed is not None  # back-to-back always times
            samples += timed
    del built
    if ctx.is_cuda and size >= _EMPTY_CACHE_BYTES:
        torch.cuda.empty_cache()
    return samples, wrong


# --- the proof --------------------------------------------------------------------------------


def prove(setting: TuneSetting, log: CommLog, *, inherited: Mapping[str, str]) -> tuple[bool, str]:
    """Whether this rank's log shows ``setting`` took effect in its communicator, and what the
    log said.  ``inherited``: NCCL_ALGO/NCCL_PROTO as the run's environment had them (the
    default's, unless the setting replaces them)."""
    expected = {**inherited, **setting.env}
    said = [f"{v} {value}" for v in TUNE_VARS for value in log.env.get(v, [])]
    said += [f"{c} coll channels" for c in log.coll_channels]
    if not log.coll_channels:
        return False, "; ".join(said) or "no line of its communicator's start"
    ok = all(
        set(log.env.get(v, [])) == ({expected[v]} if v in expected else set()) for v in TUNE_VARS
    )
    if setting.channels is not None:
        ok = ok and all(c == setting.channels for c in log.coll_channels)
    return ok, "; ".join(said)


def nccl_bytes(op: str, size_bytes: int, n: int) -> int | None:
    """The bytes NCCL's TUNING line names for ``op`` of ``size_bytes`` (S) over ``n`` ranks:
    count x element size, one rank's chunk for all_gather and reduce_scatter; None for ops
    NCCL runs as send/recv."""
    if op == "all_reduce":
        return size_bytes
    return size_bytes // n if op in ("all_gather", "reduce_scatter") else None
