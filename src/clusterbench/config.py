"""Suites, per-benchmark settings, thresholds; TOML files and ``--set`` overrides.

A suite is the benchmarks whose registration names it (:mod:`clusterbench.registry`), each with
its settings preset for the suite and device type.  A TOML file and ``--set key=value`` change
them; unknown keys and bad values raise :class:`ConfigError` with one clear line (the CLI turns
it into exit code 2).  Every section and ``--set`` is checked, whether or not its benchmark runs;
no number anywhere may be NaN or infinite.

This module builds the run's config: the suite, the file's top-level keys and the flags; each
benchmark section, ``[thresholds]`` and ``--set`` are set through
:mod:`clusterbench.config_sections`.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterbench import registry
from clusterbench.config_sections import (
    Setting,
    apply_section,
    check_unselected,
    coerce,
    did_you_mean,
    is_benchmark,
    mirror,
    parse_set,
    time_budget,
    unknown_benchmark,
)
from clusterbench.exits import ConfigError
from clusterbench.suites import SUITE_NAMES, SuiteName
from clusterbench.thresholds import Thresholds
from clusterbench.units import parse_duration

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "SUITE_NAMES",
    "ConfigError",
    "RunConfig",
    "Thresholds",
    "build_run_config",
    "check_run_config",
    "check_suite_name",
]


@dataclass(kw_only=True)
class RunConfig:
    suite: str
    benchmarks: dict[str, Any]
    """Benchmark name -> its settings dataclass, in run order."""
    thresholds: Thresholds = field(default_factory=Thresholds)
    timeout_s: float = 900.0
    """Limit for one benchmark on one rank, in seconds."""
    soak_s: float | None = None
    """``--soak``: repeat the benchmarks round after round for this many seconds."""
    repeat: int | None = None
    """``--repeat``: run the benchmarks this many rounds (a soak of a number of rounds)."""
    telemetry: bool = True
    """Sample each GPU's clocks, power, temperature and throttle reasons while the benchmarks
    run (``--no-telemetry``: off); CPU workers have none."""
    telemetry_interval_s: float = 0.1
    """``--telemetry-interval``: seconds between two telemetry samples of a GPU."""
    budget_s: float | None = None
    """``--budget``: seconds the whole run should take; the benchmarks are cut to fit it."""
    time_budgets: dict[str, float] = field(default_factory=dict)
    """Benchmark -> its ``time_budget_s`` setting: seconds it may take."""

    def to_dict(self) -> dict[str, Any]:
        soak = {"duration_s": self.soak_s, "repeat": self.repeat}
        budget = {"total_s": self.budget_s, "benchmarks": dict(self.time_budgets)}
        return {
            "suite": self.suite,
            "timeout_s": self.timeout_s,
            **({"soak": soak} if self.soak_s is not None or self.repeat is not None else {}),
            **({"budget": budget} if self.budget_s is not None or self.time_budgets else {}),
            "telemetry": {"enabled": self.telemetry, "interval_s": self.telemetry_interval_s},
            "benchmarks": {k: dataclasses.asdict(v) for k, v in self.benchmarks.items()},
            "thresholds": thresholds_dict(self.thresholds),
        }


def thresholds_dict(thresholds: Thresholds) -> dict[str, Any]:
    """Every limit by its key, as the ``[thresholds]`` table names it: each registered
    benchmark's own (``Benchmark.thresholds``), in run order, then the run-wide ones."""
    out: dict[str, Any] = {}
    for bench in registry.all_benchmarks():
        if bench.thresholds is not None:
            out.update(dataclasses.asdict(thresholds.of(bench.thresholds)))
    out.update({k: v for k, v in dataclasses.asdict(thresholds).items() if k != "given"})
    return out


def check_suite_name(suite: str) -> SuiteName:
    """``suite`` as a suite name, or one clear line naming the choices."""
    if suite not in SUITE_NAMES:
        raise ConfigError(f"unknown suite {suite!r} (choose from {', '.join(SUITE_NAMES)})")
    return typing.cast(SuiteName, suite)


def check_run_config(*, device: str = "auto", **options: Any) -> None:
    """ConfigError where :func:`build_run_config` (given ``options``, all but ``device_type``)
    refuses the command line with the same line on every device type ``device`` may turn out
    to be: what a run can be told before torch is imported, which says the device.  A mistake
    on one device type alone (no CPU form of the selected benchmarks) is left to the build once
    the device is known; an unknown ``device`` is left to the check that names the choices."""
    device_types = {"auto": ("cpu", "cuda"), "cpu": ("cpu",), "cuda": ("cuda",)}.get(device, ())
    refusals = set()
    for device_type in device_types:
        try:
            build_run_config(device_type=device_type, **options)
        except ConfigError as exc:
            refusals.add(str(exc))
        else:
            return
    if len(refusals) == 1:
        raise ConfigError(refusals.pop())


def build_run_config(
    *,
    suite: str | None = None,
    device_type: str,
    config_file: Path | None = None,
    sets: Iterable[str] = (),
    only: Iterable[str] = (),
    skip: Iterable[str] = (),
    timeout_s: float | None = None,
    soak: str | None = None,
    repeat: int | None = None,
    telemetry: bool | None = None,
    telemetry_interval_s: float | None = None,
    budget: str | None = None,
) -> RunConfig:
    """Suite preset, then the TOML file, then ``--set`` overrides, then CLI flags.

    ``soak`` (a duration: ``2h``, ``30m``, ``90s``) and ``repeat`` (rounds) make it a soak;
    either one given here replaces the file's ``soak`` and ``repeat`` keys.  ``telemetry`` and
    ``telemetry_interval_s`` (None: the file's keys of those names, else on, every 0.1 s).
    ``budget`` (a duration: ``10m``) replaces the file's ``budget`` key; a benchmark section's
    ``time_budget_s`` key (``--set gemm.time_budget_s=30``) is that benchmark's own budget.

    ``suite`` None takes the file's ``suite`` key, else ``quick``.  Settings of a benchmark the
    run does not select are checked on a preset of their own, then dropped.
    """
    table = _read_toml(config_file) if config_file else {}
    top = _split_top_level(table, source=str(config_file))
    suite = check_suite_name(suite or str(top.get("suite", "quick")))
    names = _select(
        registry.suite_benchmarks(suite),
        only=list(only) or list(top.get("only", [])),
        skip=[*top.get("skip", []), *skip],
        suite=suite,
        device_type=device_type,
    )
    benchmarks = {n: registry.get(n).preset(suite=suite, device_type=device_type) for n in names}
    soak_s, rounds = _soak(top, soak=soak, repeat=repeat, source=str(config_file))
    if soak_s is not None or rounds is not None:
        _whole_sweeps(benchmarks)
    thresholds = Thresholds()
    budgets: dict[str, float] = {}
    applied: list[Setting] = []
    for section, values in table.items():
        if section in _TOP_LEVEL_KEYS:
            continue
        applied += apply_section(
            section, values, benchmarks=benchmarks, thresholds=thresholds, source=str(config_file),
            time_budgets=budgets,
        )  # fmt: skip
    for item in sets:
        section, key, value = parse_set(item)
        applied += apply_section(
            section, {key: value}, benchmarks=benchmarks, thresholds=thresholds, strings=True,
            time_budgets=budgets,
        )  # fmt: skip
    mirror(applied, benchmarks=benchmarks)
    check_unselected(applied, benchmarks=benchmarks, suite=suite, device_type=device_type)
    timeout, where = (
        (timeout_s, "--timeout")
        if timeout_s is not None
        else (float(top.get("timeout_s", 900.0)), f"{config_file}: timeout_s")
    )
    if not math.isfinite(timeout) or timeout <= 0:
        raise ConfigError(f"{where} must be a positive number of seconds, got {timeout}")
    sampled, interval = _telemetry(top, telemetry, telemetry_interval_s, source=str(config_file))
    budget_s = _budget(top, budget, source=str(config_file))
    if budget_s is not None and (soak_s is not None or rounds is not None):
        raise ConfigError("--budget with a soak (--soak, --repeat): choose one")
    return RunConfig(suite=suite, benchmarks=benchmarks, thresholds=thresholds, timeout_s=timeout,
                     soak_s=soak_s, repeat=rounds, telemetry=sampled,
                     telemetry_interval_s=interval, budget_s=budget_s,
                     time_budgets={n: budgets[n] for n in benchmarks if n in budgets})  # fmt: skip


def _whole_sweeps(benchmarks: dict[str, Any]) -> None:
    """A soak compares its rounds figure by figure: every sweep runs all its points (the stop
    rules of gemm, collectives and the dataloader off; ``--set NAME.sweep_stop=true`` still
    turns one on)."""
    for settings in benchmarks.values():
        if hasattr(settings, "sweep_stop"):
            settings.sweep_stop = False


_TOP_LEVEL_KEYS = {
    "suite": str,
    "only": list[str],
    "skip": list[str],
    "timeout_s": float,
    "soak": str,
    "repeat": int,
    "telemetry": bool,
    "telemetry_interval_s": float,
    "budget": str | float,
}


def _budget(top: Mapping[str, Any], budget: str | None, *, source: str) -> float | None:
    """Seconds of ``--budget`` (a duration), else of the file's ``budget`` key, else None."""
    where = "--budget"
    if budget is None:
        value = top.get("budget")
        if value is None:
            return None
        if not isinstance(value, str):
            return time_budget(value, where=f"{source}: budget")
        budget, where = value, f"{source}: budget"
    try:
        return parse_duration(budget)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


TELEMETRY_INTERVAL_RANGE_S = (0.01, 60.0)
"""``--telemetry-interval`` bounds: NVML's clocks and power change no faster than every 10 ms
or so, and a minute between samples says nothing of a benchmark's window."""


def _telemetry(
    top: Mapping[str, Any], enabled: bool | None, interval_s: float | None, *, source: str
) -> tuple[bool, float]:
    """(on, seconds between samples): the flags, else the file's keys, else on every 0.1 s."""
    where = "--telemetry-interval"
    if interval_s is None:
        interval_s, where = float(top.get("telemetry_interval_s", 0.1)), f"{source}: "
        where += "telemetry_interval_s"
    low, high = TELEMETRY_INTERVAL_RANGE_S
    if not math.isfinite(interval_s) or not low <= interval_s <= high:
        raise ConfigError(f"{where} must be {low:g} to {high:g} seconds, got {interval_s:g}")
    return bool(top.get("telemetry", True)) if enabled is None else enabled, interval_s


def _soak(
    top: Mapping[str, Any], *, soak: str | None, repeat: int | None, source: str
) -> tuple[float | None, int | None]:
    """(seconds, rounds) of a soak, at most one of them set; the flags replace the file."""
    if soak is not None and repeat is not None:
        raise ConfigError("--soak and --repeat together: choose one (a duration or a count)")
    where = ("--soak", "--repeat")
    if soak is None and repeat is None:
        soak, repeat = top.get("soak"), top.get("repeat")
        where = (f"{source}: soak", f"{source}: repeat")
        if soak is not None and repeat is not None:
            raise ConfigError(f"{source}: soak and repeat together: choose one")
    if repeat is not None and repeat < 1:
        raise ConfigError(f"{where[1]} must be at least 1, got {repeat}")
    if soak is None:
        return None, repeat
    try:
        return parse_duration(soak), None
    except ValueError as exc:
        raise ConfigError(f"{where[0]}: {exc}") from None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a UTF-8 TOML file") from None
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: malformed TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None


def _split_top_level(table: Mapping[str, Any], *, source: str) -> dict[str, Any]:
    known_sections = {s.name for s in registry.all_benchmarks()} | {"thresholds"}
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key in _TOP_LEVEL_KEYS:
            out[key] = coerce(_TOP_LEVEL_KEYS[key], value, where=f"{source}: {key}")
        elif key not in known_sections:
            raise ConfigError(f"{source}: unknown key {key!r}{did_you_mean(key, known_sections)}")
        elif not isinstance(value, dict):
            raise ConfigError(f"{source}: {key} must be a table ([{key}])")
    return out


def _select(
    names: list[str], *, only: list[str], skip: list[str], suite: str, device_type: str
) -> list[str]:
    for name in [*only, *skip]:
        if not is_benchmark(name):
            unknown_benchmark(name)
    both = [n for n in dict.fromkeys(only) if n in skip]
    if both:
        raise ConfigError(f"--only and --skip both name {', '.join(both)}: nothing of it would run")
    selected = [n for n in (list(dict.fromkeys(only)) if only else names) if n not in set(skip)]
    if not selected:
        raise ConfigError(f"nothing to run: --skip leaves no benchmark of the {suite} suite")
    if not any(registry.get(n).supports(device_type) for n in selected):
        raise ConfigError(f"nothing to run: no {device_type} form of {', '.join(selected)}")
    return selected


def check_benchmark_names(names: Iterable[str]) -> None:
    """ConfigError (one line, with the closest name) for a name that is no benchmark: what
    the command line can be told before anything that measures is imported."""
    for name in names:
        if not is_benchmark(name):
            unknown_benchmark(name)
