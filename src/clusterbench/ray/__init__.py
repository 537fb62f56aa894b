"""Run clusterbench on a Ray cluster, through Ray Train's TorchTrainer.

    python -m clusterbench.ray --nodes N --gpus-per-node G [--cpu] [--address ADDR]
        [--suite quick] [--join-timeout T] [--env KEY=VALUE ...] [-- 'clusterbench run' args]

The driver connects to a running Ray cluster and asks Ray Train for N x G workers (one GPU
each; with ``--cpu`` one CPU each), gang-scheduled, waiting for them ``--join-timeout``
seconds.  In every worker Ray Train sets the variables of torch.distributed's env://
rendezvous (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT``) and joins the workers in a process group of its own.  Each worker then starts
``clusterbench run`` as a child process with those variables, which joins the run as it does
under torchrun, srun or mpirun (``runtime/launch.py``): its own process group (NCCL on GPUs),
rank 0 hosting the run's store, gathering every rank's records through it and writing
``results.json``.

Why a child process rather than clusterbench's worker inside the Ray worker: Ray Train runs
the training function in a thread of its worker actor, and clusterbench's worker needs the
main thread (its SIGTERM watcher sets a signal handler) and ends its process with
``os._exit`` once it has said how the run ended (a peer may be gone, and NCCL or gloo
teardown can block on it), which would end Ray's actor under it.  The one thing taken from
Ray's process group is a broadcast of the port rank 0's child hosts the run's store on: Ray's
own store holds ``MASTER_PORT``.  That group is gloo (``TorchConfig(backend="gloo")``) so that
it never opens NCCL communicators on the GPUs being measured.

Where results land: rank 0 makes the run folder at ``--out`` (made absolute against the
driver's working folder; default ``clusterbench-runs/<UTC time>-<driver host>``) on its own
node, which Ray Train does not promise is the driver's: use a folder every node shares, or
look on the node the driver's last line names.  The driver exits with rank 0's exit code
(0, 1, 2 or 3, as ``clusterbench run``'s), or 3 when Ray ended a worker (its last line names it,
whether rank 0 said how the run ended before Ray did or not).
"""

from __future__ import annotations

import inspect
import json
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterbench.exits import EXIT_RUN_ERROR, EXIT_USAGE
from clusterbench.job_scripts import LaunchSpec
from clusterbench.pipeline.spec import default_run_dir

__all__ = ["RankOutcome", "gcs_unreachable", "run_on_ray", "worker_argv"]

_CHILD = Path(__file__).with_name("_child.py")
"""Started by its path between each Ray worker and its ``clusterbench run`` (see there)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RankOutcome:
    """How one rank's ``clusterbench run`` ended, sent from its Ray worker to the driver."""

    rank: int
    host: str
    exit_code: int


_STARTED = "started"
"""What rank 0 sends the driver first: Ray Train has started every worker."""


def worker_argv(spec: LaunchSpec, *, cpu: bool) -> tuple[list[str], Path]:
    """The ``clusterbench run`` arguments every Ray worker runs, and the absolute run folder
    they write (each worker runs them with its own Python: ``python -m clusterbench run ...``).

    ``spec.run_args``' ``--out`` (the last one) is made absolute against this working folder,
    every other copy dropped; without one the run goes to clusterbench's default folder here.
    """
    out = Path(spec.user_out() or default_run_dir()).absolute()
    rest: list[str] = []
    args = iter(spec.run_args)
    for arg in args:
        if arg == "--out":
            next(args, None)
        elif not arg.startswith("--out="):
            rest.append(arg)
    device = ["--device", "cpu"] if cpu else []
    # --launcher ray: Ray Train sets torchrun's variables; the placement findings name Ray
    bare = LaunchSpec(nodes=spec.nodes, gpus_per_node=spec.gpus_per_node, suite=spec.suite,
                      run_args=(*device, "--launcher", "ray", *rest),
                      join_timeout_s=spec.join_timeout)  # fmt: skip
    return bare.run_argv(out=str(out))[1:], out


def _train_loop(config: dict[str, Any]) -> None:
    """One Ray Train worker: run ``clusterbench run`` with Ray's rank variables, say how it
    ended.  Runs in a thread of Ray's worker actor, in Ray's gloo process group."""
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    if rank == 0:
        config["outcomes"].put(_STARTED)
    port = [_free_port() if rank == 0 else 0]
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.broadcast_object_list(port, src=0)
    env = {**os.environ, **dict(config["env"]), "MASTER_PORT": str(port[0])}
    argv = [sys.executable, "-m", "clusterbench", *config["argv"]]
    child = [sys.executable, str(_CHILD), str(os.getpid()), *argv]
    code = subprocess.run(child, env=env, check=False).returncode
    config["outcomes"].put(RankOutcome(rank=rank, host=socket.gethostname(), exit_code=code))


def _free_port() -> int:
    """A TCP port free on this node now, for rank 0's child to host the run's store on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        port: int = sock.getsockname()[1]
        return port


def run_on_ray(spec: LaunchSpec, *, cpu: bool, address: str | None) -> int:
    """Run ``spec`` on the Ray cluster at ``address`` (None: ``RAY_ADDRESS`` or the cluster
    started on this node); print where results.json is; return the run's exit code."""
    try:
        import ray
        from ray.train import FailureConfig, RunConfig, ScalingConfig
        from ray.train.torch import TorchConfig, TorchTrainer
        from ray.util.queue import Queue
    except ImportError as exc:
        return _say(f"Ray is not installed ({exc}): pip install 'clusterbench[ray]'", EXIT_USAGE)
    argv, out = worker_argv(spec, cpu=cpu)
    unreachable = gcs_unreachable(address or os.environ.get("RAY_ADDRESS", ""))
    if unreachable:
        return _say(unreachable, EXIT_USAGE)
    try:
        ray.init(address=address or "auto")
    except ConnectionError as exc:
        return _say(f"no Ray cluster to join: {_first_line(exc)}", EXIT_USAGE)
    # no restarts, as under every other launcher; nor after a preemption (newer Ray Train
    # counts those apart, unlimited by default): a benchmark restarted halfway is another run
    no_restarts: dict[str, Any] = {"max_failures": 0}
    if "max_preemption_failures" in inspect.signature(FailureConfig).parameters:
        no_restarts["max_preemption_failures"] = 0
    outcomes = Queue(actor_options={"num_cpus": 0})
    trainer = TorchTrainer(
        _train_loop,
        train_loop_config={"argv": argv, "env": spec.env, "outcomes": outcomes},
        torch_config=TorchConfig(backend="gloo"),
        scaling_config=ScalingConfig(num_workers=spec.world_size, use_gpu=not cpu),
        run_config=RunConfig(name=out.name, failure_config=FailureConfig(**no_restarts)),
    )
    errors: list[str] = []
    fitting = threading.Thread(target=_fit, args=(trainer, errors), daemon=True)
    fitting.start()
    # Ray Train waits for its workers as long as it takes (an autoscaler may be adding
    # nodes); the run gives them --join-timeout, as every launcher does
    said = _await_start(outcomes, fitting, timeout_s=spec.join_timeout)
    if said is None:
        return _say(_not_started(spec, cpu=cpu, cluster=ray.cluster_resources()), EXIT_RUN_ERROR)
    fitting.join()
    said += [outcomes.get_nowait() for _ in range(outcomes.qsize())]
    ended = {o.rank: o for o in said if isinstance(o, RankOutcome)}
    return _report(ended, out=out, error=errors[0] if errors else None)


GCS_CONNECT_TIMEOUT_S = 5.0
"""How long the driver tries the Ray cluster's address before it gives up (Ray itself retries
a wrong address for minutes before it says so)."""


def gcs_unreachable(address: str, *, timeout_s: float = GCS_CONNECT_TIMEOUT_S) -> str | None:
    """Why nothing listens at ``address`` (``host:port``, ``ray://host:port``), None where
    something does, or where ``address`` names no port ('', ``auto``, ``local``: Ray finds the
    cluster itself and says so at once when there is none)."""
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return f"no Ray cluster at {address}: {reason} (is the head running: ray status?)"


def _fit(trainer: Any, errors: list[str]) -> None:
    from ray.train import TrainingFailedError

    try:
        trainer.fit()
    except TrainingFailedError as exc:
        errors.append(_ray_error(exc))


def _await_start(outcomes: Any, fitting: threading.Thread, *, timeout_s: float) -> list[Any] | None:
    """What the workers said once rank 0 has started (or Ray Train ended); None when it has
    not started within ``timeout_s``."""
    from ray.util.queue import Empty

    deadline = time.monotonic() + timeout_s
    while fitting.is_alive():
        try:
            return [outcomes.get(timeout=1.0)]
        except Empty:
            if time.monotonic() > deadline:
                return None
    return []


def _not_started(spec: LaunchSpec, *, cpu: bool, cluster: dict[str, float]) -> str:
    need = "1 CPU" if cpu else "1 GPU"
    has = f"{cluster.get('CPU', 0):g} CPU and {cluster.get('GPU', 0):g} GPU"
    return (
        f"run failed: Ray did not start the {spec.world_size} workers within {spec.join_timeout} "
        f"s (--join-timeout), {need} each; the cluster has {has} in all: add nodes, ask for "
        "fewer, or wait longer for an autoscaler"
    )


def _ray_error(exc: Exception) -> str:
    """Ray Train's failure in one line: each failed worker's first line, else the error's."""
    failures: dict[int, BaseException] = getattr(exc, "worker_failures", None) or {}
    if not failures:
        return _first_line(exc)
    return "; ".join(f"Ray worker of rank {rank}: {type(e).__name__}: {_first_line(e)}"
                     for rank, e in sorted(failures.items()))  # fmt: skip


def _report(ended: dict[int, RankOutcome], *, out: Path, error: str | None) -> int:
    """One line: how the run ended and where rank 0 wrote results.json; the exit code."""
    results = out / "results.json"
    first = ended.get(0)
    if first is None or error is not None:
        # Ray ended a worker, before rank 0 said how the run ended (rank 0's clusterbench run,
        # told, still writes) or after (rank 0 saw its peer go first): either way the line
        # names the worker Ray lost, then what rank 0 wrote
        error = error or "rank 0's Ray worker ended without a word"
        status, message = _final_results(results, wait_s=_RESULTS_WAIT_S)
        if status is None:
            return _say(f"run failed on Ray: {error}; whatever rank 0 wrote is in {out} on "
                        "its node", EXIT_RUN_ERROR)  # fmt: skip
        return _say(f"run failed on Ray: {error}; {results}: {status}: {message}",
                    EXIT_RUN_ERROR)  # fmt: skip
    code = first.exit_code if first.exit_code in range(4) else EXIT_RUN_ERROR
    where = f"{results}" if results.exists() else f"{results} on its node"
    return _say(f"exit code {code}; rank 0 (host {first.host}) wrote {where}", code)


_RESULTS_WAIT_S = 30.0
"""How long the driver waits for rank 0, ended by Ray, to finish results.json."""


def _final_results(path: Path, *, wait_s: float) -> tuple[str | None, str]:
    """The status (not ``running``) and first error of the results.json at ``path``, waiting
    up to ``wait_s`` for it; (None, "") when it does not come (or is on another node)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            run = json.loads(path.read_text(encoding="utf-8"))
            status = str(run["run"]["status"])
            if status != "running":
                errors = run.get("errors") or [{}]
                return status, str(errors[0].get("message", ""))
        except (OSError, ValueError, KeyError, TypeError):
            pass  # not there yet, or half written
        if time.monotonic() > deadline:
            return None, ""
        time.sleep(0.5)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _say(message: str, code: int) -> int:
    print(f"clusterbench: {message}", file=sys.stderr, flush=True)
    return code
