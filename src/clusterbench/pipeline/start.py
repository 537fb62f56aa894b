"""``run()``: check the input, plan, then start the run or join it.

Started by hand, the run launches local workers (:func:`~clusterbench.runtime.launch.launch_local`)
and finishes from their partial files when they end, however they end; this process imports no
torch then (the workers' fork server does).  Under torchrun/srun/mpirun every process is a
rank; rank 0 gathers each benchmark's records as the run goes and finishes the run at its end
(:mod:`.finish`, once, in either case).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import os
import shlex
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterbench import catalog, registry
from clusterbench.analyses.budget.plan import finish_reserve_s
from clusterbench.config import ConfigError, RunConfig, build_run_config
from clusterbench.exits import EXIT_OK, EXIT_RUN_ERROR
from clusterbench.pipeline.finish import Finished, ResultsWriteError, finish, prepare_finish
from clusterbench.pipeline.options import RunOptions
from clusterbench.pipeline.plan import (
    NodeHistory,
    RunPlan,
    apply_plan,
    expected_times,
    node_facts,
    plan_info,
    plan_run,
    read_history,
    run_plan,
    timing_tables,
)
from clusterbench.pipeline.spec import (
    RunSpec,
    finish_options,
    now_utc,
    prepare_run_dir,
    run_id_for,
)
from clusterbench.pipeline.workers import (
    check_before_torch,
    resolve_device,
    visible_gpus,
    visible_gpus_torch_unimported,
    worker_count,
)
from clusterbench.runtime.launch import (
    Interrupted,
    WorkerFailure,
    detect_launcher,
    export_dist_env,
    launch_local,
    start_fork_server,
)
from clusterbench.runtime.phases import process_age_s
from clusterbench.runtime.records import describe_write_error, read_records
from clusterbench.schema import Results

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from clusterbench.analyses.run import RunAnalysis

__all__ = ["RunOutcome", "run"]


@dataclass(kw_only=True)
class RunOutcome:
    results: Results | None
    """None on ranks other than 0 under an external launcher."""
    run_dir: Path
    exit_code: int
    error: str | None = None
    """Why results.json could not be written (one line, e.g. ``cannot write results: no space
    left on <path>``); ``results`` are then the run's results from memory and the exit code 3."""
    analysis: RunAnalysis | None = None
    """The finished run as its pages show it (its comparison with ``baseline`` among them);
    None where ``results`` are None or were not written."""
    history: Path | None = None
    """The history database the run was recorded in; None when it was not."""
    exported: list[str] = dataclasses.field(default_factory=list)
    """Where each ``exports`` format went (``csv: <path>``)."""

    @property
    def comparison(self) -> Any:
        """The run against ``baseline``
        (a :class:`~clusterbench.analyses.compare.comparison.Comparison`), or None."""
        return None if self.analysis is None else self.analysis.comparison


def run(
    options: RunOptions | None = None,
    /,
    *,
    announce: Callable[[RunPlan], None] | None = None,
    **keywords: Any,
) -> RunOutcome:
    """Run a suite and return its outcome: the library form of ``clusterbench run``.

    ``options`` (:class:`~clusterbench.pipeline.options.RunOptions`, also
    ``clusterbench.RunOptions``) says what to run and how, as the command's flags do; without
    it, the keywords build one (``run(device="cpu")``).  At the end the run is finished once, by
    the process that finishes it (rank 0 under a launcher): the comparison with
    ``options.baseline``, the history, the exports.

    ``announce`` is called with the :class:`RunPlan` by the process that starts the run (rank
    0 under a launcher), before the first benchmark, e.g. to print how long it should take.

    Raises :class:`ConfigError` (a ValueError) for bad input before anything is written: the
    device, the config, the worker count, the baseline and the exports are all checked before
    the run folder is made.
    """
    options = _options(options, keywords)
    entered, started_s = time.monotonic(), process_age_s()
    count_gpus: Callable[[], int] = visible_gpus
    if detect_launcher() is None:  # own workers: torch is theirs, imported by their fork server
        check_before_torch(options.device, nproc=options.nproc, oversubscribe=options.oversubscribe)
        if not options.plan_only:
            start_fork_server()
        count_gpus = functools.cache(visible_gpus_torch_unimported)
    device_type = resolve_device(options.device, count_gpus=count_gpus)
    phases = {"imports": time.monotonic() - entered}
    entered = time.monotonic()
    config = build_run_config(
        suite=options.suite,
        device_type=device_type,
        config_file=options.config_file,
        sets=list(options.sets),
        only=list(options.only),
        skip=list(options.skip),
        timeout_s=options.timeout_s,
        soak=options.soak,
        repeat=options.repeat,
        telemetry=options.telemetry,
        telemetry_interval_s=options.telemetry_interval_s,
        budget=options.budget,
    )
    launcher_env = detect_launcher()
    finishes = launcher_env is None or launcher_env.rank == 0
    spec = RunSpec(
        run_id="",
        run_dir="",
        config=config,
        device_type=device_type,
        started=now_utc(),
        command=shlex.join(["clusterbench", *sys.argv[1:]]),
        self_launched=launcher_env is None,
        out=None if options.out is None else str(options.out),
        nccl_debug=options.nccl_debug,
        plugin_modules=_plugin_modules(config),
        expect_nodes=_expect_nodes(options.expect_nodes),
        join_timeout_s=_join_timeout(options.join_timeout_s, timeout_s=config.timeout_s),
        launcher=options.launcher or ("clusterbench" if launcher_env is None else None),
        finish=finish_options(
            options.baseline,
            options.exports,
            options.pushgateway,
            history=options.history,
            use_history=options.use_history,
            finishes=finishes,
        ),
    )
    if launcher_env is not None:
        try:
            export_dist_env(launcher_env)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        local = int(os.environ.get("LOCAL_WORLD_SIZE", launcher_env.world_size))
        # every rank plans by itself: no history, so that they all fit the same settings
        plan = _plan_fitted_to_budget(spec, world_size=launcher_env.world_size,
                                      local_world_size=local, history=False)  # fmt: skip
        if announce is not None and launcher_env.rank == 0:
            announce(plan)
        if options.plan_only:
            return RunOutcome(results=None, run_dir=Path(options.out or "."), exit_code=0)
        spec.phases = {**phases, **_phases_so_far(started_s, entered)}
        return _join(spec, rank=launcher_env.rank)
    num_workers = worker_count(options.nproc, device_type, oversubscribe=options.oversubscribe,
                               count_gpus=count_gpus)  # fmt: skip
    run_dir = None if options.plan_only else prepare_run_dir(options.out, workers=num_workers)
    if run_dir is not None:
        spec.run_dir, spec.run_id = str(run_dir), run_id_for(run_dir, spec.started)
    plan = _plan_fitted_to_budget(spec, world_size=num_workers, local_world_size=num_workers,
                    history=options.history if options.use_history else False)  # fmt: skip
    if announce is not None:
        announce(plan)
    if run_dir is None:
        return RunOutcome(results=None, run_dir=Path(options.out or "."), exit_code=0)
    spec.phases = {**phases, **_phases_so_far(started_s, entered)}
    return _launch(spec, num_workers=num_workers)


def _options(options: RunOptions | None, keywords: dict[str, Any]) -> RunOptions:
    if options is None:
        return RunOptions(**keywords)  # an unknown name is a TypeError naming it
    if keywords:
        raise TypeError(f"run() takes RunOptions or keywords, not both: {', '.join(keywords)}")
    return options


def _plan_fitted_to_budget(
    spec: RunSpec, *, world_size: int, local_world_size: int, history: Path | bool | None
) -> RunPlan:
    """The run's plan (``history``: the history's path, None its default, False none): the
    expected seconds, the fit to the budget; the fitted settings replace the config's."""
    config = spec.config
    plan = run_plan(config, device_type=spec.device_type, world_size=world_size)
    queries = [q for b in registry.all_benchmarks() if b.durations for q in b.durations.facts]
    past = NodeHistory()
    if history is not False:
        past = read_history(history if isinstance(history, Path) else None, suite=plan.suite,
                            backend=plan.backend, world_size=world_size, host=plan.host,
                            queries=queries)  # fmt: skip
    facts = node_facts(
        device_type=spec.device_type, world_size=world_size,
        local_world_size=local_world_size, gpu=plan.gpu, measured=past.facts,
    )  # fmt: skip
    budget = plan_run(
        config, device_type=spec.device_type, facts=facts, history=past,
        tables=timing_tables(), expected=expected_times(plan, past.timings),
    )  # fmt: skip
    apply_plan(config, budget)
    spec.plan = plan_info(budget)
    if config.budget_s is not None:  # from the command's start: importing torch counts too
        finish = finish_reserve_s(spec.device_type, config.budget_s)
        spec.budget_ends_at = _process_started() + config.budget_s - finish
    return dataclasses.replace(plan, budget=budget)


def _process_started() -> float:
    """When this process started (s since the epoch)."""
    import psutil

    return float(psutil.Process(os.getpid()).create_time())


DEFAULT_JOIN_TIMEOUT_S = 300.0
"""How long the ranks have to join, unless --join-timeout (or a shorter --timeout) says."""


def _expect_nodes(value: int | None) -> int | None:
    if value is not None and value < 1:
        raise ConfigError(f"--expect-nodes must be at least 1, got {value}")
    return value


def _join_timeout(value: float | None, *, timeout_s: float) -> float:
    if value is None:
        return min(DEFAULT_JOIN_TIMEOUT_S, timeout_s)
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"--join-timeout must be a positive number of seconds, got {value}")
    return value


def _plugin_modules(config: RunConfig) -> tuple[str, ...]:
    """Modules of the selected benchmarks that are not built in: each worker imports them."""
    extra = [name for name in config.benchmarks if not catalog.builtin(name)]
    return tuple(sorted({registry.get(name).module for name in extra}))


# ----------------------------------------------------------------------------- self-launched


def _phases_so_far(started_s: float | None, entered: float) -> dict[str, float]:
    """start (the process up to ``run()``) and plan (from ``entered`` to the workers' start)."""
    plan = {"plan": time.monotonic() - entered}
    return plan if started_s is None else {"start": started_s, **plan}


_WORKER_MAIN = "clusterbench.pipeline.rank:worker_main"
"""The workers' entry point, by name: this process does not import it (nor torch with it)."""


def _launch(spec: RunSpec, *, num_workers: int) -> RunOutcome:
    run_dir = Path(spec.run_dir)
    failures: list[WorkerFailure] = []
    interrupted = False
    spec.launched_at = time.time()
    ahead = threading.Thread(target=_prepare_finish, name="clusterbench-finish-ahead",
                             daemon=True)  # fmt: skip
    ahead.start()
    try:
        failures = launch_local(_WORKER_MAIN, spec, nproc=num_workers, log_dir=run_dir / "logs")
    except (Interrupted, KeyboardInterrupt):  # Ctrl-C (twice), SIGTERM: keep what ranks wrote
        interrupted = True
    except OSError as exc:  # the workers' log folders could not be made: nothing ran
        reason = describe_write_error(exc, run_dir / "logs")
        return RunOutcome(
            results=None,
            run_dir=run_dir,
            exit_code=EXIT_RUN_ERROR,
            error=f"cannot start the workers: {reason}",
        )
    ahead.join()  # its imports done before the finish's own
    try:
        done = finish(
            spec,
            records=read_records(run_dir),
            failures=failures,
            world_size=num_workers,
            interrupted=interrupted,
        )
    except ResultsWriteError as exc:  # a full or failing disk: the results live on in memory
        return _outcome_of_unwritten_results(exc, run_dir)
    return _outcome(done, run_dir)


def _prepare_finish() -> None:
    """:func:`prepare_finish`, in a thread: whatever goes wrong, the finish does it again and
    says so."""
    try:
        prepare_finish()
    except Exception as exc:  # the finish meets the same and reports it
        log.debug("preparing the finish ahead: %s: %s", type(exc).__name__, exc)


def _outcome(done: Finished, run_dir: Path) -> RunOutcome:
    return RunOutcome(results=done.results, run_dir=run_dir, exit_code=done.exit_code,
                      analysis=done.run, history=done.history, exported=done.exported)  # fmt: skip


def _outcome_of_unwritten_results(exc: ResultsWriteError, run_dir: Path) -> RunOutcome:
    return RunOutcome(
        results=exc.results, run_dir=run_dir, exit_code=EXIT_RUN_ERROR, error=str(exc)
    )


# ----------------------------------------------------------------------------- joined


def _join(spec: RunSpec, *, rank: int) -> RunOutcome:
    """This process is one rank of a launcher's run: the same per-rank loop as a spawned worker,
    with rank 0 gathering records and writing results.json as it goes."""
    from clusterbench.pipeline.rank import worker_main

    try:
        done = worker_main(spec)
    except ResultsWriteError as exc:  # rank 0 could not write the final results.json
        return _outcome_of_unwritten_results(exc, Path(spec.run_dir))
    run_dir = Path(spec.run_dir)
    if rank != 0 or done is None:
        return RunOutcome(results=None, run_dir=run_dir, exit_code=EXIT_OK)
    return _outcome(done, run_dir)
