"""What many tests need: the CLI in a subprocess, a CPU run through the real launcher, and a
one-rank context for calling a benchmark directly."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from clusterbench import load_results
from clusterbench.runtime.dist import DistContext
from clusterbench.schema import Results

QUICK_RUN = "quick-run"
"""The ``xdist_group`` of the tests that read the session's ``quick_run`` (tests/dist)."""


@dataclass(frozen=True)
class Run:
    """A ``clusterbench run`` made by a test: the process, its run folder, its results."""

    proc: subprocess.CompletedProcess[str]
    out: Path
    results: Results


def cli(
    *args: str, timeout: float = 240, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m clusterbench ARGS``, output captured (unbuffered, so nothing is lost)."""
    return subprocess.run(
        [sys.executable, "-m", "clusterbench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        check=False,
    )


def cpu_run(
    out: Path, only: str, sets: Iterable[str] = (), *, nproc: int = 2, timeout: float = 240,
    returncodes: tuple[int, ...] = (0,),
) -> Results:  # fmt: skip
    """``clusterbench run --device cpu --nproc N --only ONLY --set ...`` into ``out``; the exit
    status must be one of ``returncodes`` and the run complete without errors.  With
    ``--oversubscribe``: CI's 2 cores run the 4-rank tests too."""
    args = ["run", "--device", "cpu", "--nproc", str(nproc), "--only", only, "--out", str(out)]
    args.append("--oversubscribe")
    for item in sets:
        args += ["--set", item]
    proc = cli(*args, timeout=timeout)
    assert proc.returncode in returncodes, proc.stderr[-3000:]
    results = load_results(out)
    assert results.run.status == "completed" and results.errors == []
    return results


def one_rank_ctx(
    benchmark: str, *, device: torch.device | None = None, **fields: Any
) -> DistContext:
    """A world of one rank on ``device`` (the CPU by default, gloo; nccl on a GPU)."""
    device = device or torch.device("cpu")
    return DistContext(
        rank=0, world_size=1, local_rank=0, local_world_size=1, node_rank=0, num_nodes=1,
        host=fields.pop("host", "h"), device=device,
        backend="nccl" if device.type == "cuda" else "gloo", benchmark=benchmark, **fields,
    )  # fmt: skip


def gpu_ctx(benchmark: str) -> DistContext:
    """A world of one rank on cuda:0, with the GPU as the probe sees it (for its spec)."""
    from clusterbench.hardware.probe import nvml_session, probe_gpus

    with nvml_session() as nvml:
        gpus = probe_gpus(nvml)
    return one_rank_ctx(benchmark, device=torch.device("cuda", 0), gpu=gpus[0] if gpus else None)


def wait_for_activity(out: Path, rank: int, prefix: str, *, timeout: float = 180) -> dict[str, Any]:
    """``rank``'s flight record in the run folder ``out`` once its activity starts with
    ``prefix`` (e.g. 'in all_reduce'); its ``pid`` is the rank's process."""
    path = out / "ranks" / f"rank-{rank:05d}.flight.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state: dict[str, Any] = json.loads(path.read_text())
        except (OSError, ValueError):
            state = {}
        if str(state.get("activity", "")).startswith(prefix):
            return state
        time.sleep(0.2)
    raise AssertionError(f"rank {rank} never reached {prefix!r} within {timeout:g} s")


@contextlib.contextmanager
def busy_core(core: int, num_spinners: int) -> Iterator[None]:
    """``num_spinners`` processes that spin on CPU core ``core`` for as long as the block runs
    (a planted slowdown: a process pinned there gets about 1 / (num_spinners + its peers) of
    the core)."""
    spin = f"import os; os.sched_setaffinity(0, {{{core}}})\nwhile True: pass"
    procs = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(num_spinners)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
