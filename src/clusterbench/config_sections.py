"""A config file's sections and ``--set``: each benchmark's settings and ``[thresholds]``.

Each key is checked against the settings class (or limits class) that takes it, each value
coerced to the field's type and the whole class checked again; a mistake is one
:class:`ConfigError` line naming where it was given and, for a misspelt name, the closest one.
A benchmark that takes its settings from another's section (``settings_from``) gets them too;
the settings of a benchmark the run does not select are checked on a preset of their own.
:mod:`clusterbench.config` builds the run's config through these.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from clusterbench import registry
from clusterbench.exits import ConfigError
from clusterbench.thresholds import Thresholds
from clusterbench.units import parse_duration

__all__ = [
    "TIME_BUDGET_KEY",
    "Setting",
    "apply_section",
    "check_unselected",
    "coerce",
    "did_you_mean",
    "is_benchmark",
    "mirror",
    "parse_set",
    "time_budget",
    "unknown_benchmark",
]

TIME_BUDGET_KEY = "time_budget_s"
"""The key every benchmark section takes beside its settings: seconds that benchmark may take."""


def time_budget(value: Any, *, where: str) -> float:
    """A ``time_budget_s`` (or a file's numeric ``budget``): a positive, finite number of
    seconds, or a duration string (``90s``, ``2m``)."""
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    seconds = coerce(float, value, where=where)
    if seconds <= 0:
        raise ConfigError(f"{where}: must be more than 0 s (got {value!r})")
    return float(seconds)


def is_benchmark(name: str) -> bool:
    """Whether ``name`` is a registered benchmark."""
    return name in {s.name for s in registry.all_benchmarks()}


def unknown_benchmark(name: str) -> None:
    """Raise the ConfigError for ``name``, no benchmark, with the closest name."""
    known = [s.name for s in registry.all_benchmarks()]
    raise ConfigError(f"unknown benchmark {name!r}{did_you_mean(name, known)}")


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest choice, else the choices."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(sorted(choices))})"


def parse_set(item: str) -> tuple[str, str, str]:
    """``--set SECTION.KEY=VALUE`` as (section, key, value)."""
    key, sep, value = item.partition("=")
    section, dot, name = key.strip().partition(".")
    if not sep or not dot or not section or not name:
        raise ConfigError(f"--set {item!r}: expected SECTION.KEY=VALUE, e.g. gemm.dtypes=bf16,fp8")
    return section, name, value.strip()


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting a file or ``--set`` gave a benchmark section."""

    section: str
    key: str
    value: Any
    source: str
    strings: bool


def _mirrored(applied: list[Setting], *, benchmarks: dict[str, Any]) -> list[tuple[str, Setting]]:
    """(selected benchmark, setting of the section it takes its settings from) for each setting
    :func:`mirror` copies: keys both settings classes have that the target was not given
    itself (whatever their order)."""
    out: list[tuple[str, Setting]] = []
    for bench in registry.all_benchmarks():
        section, other = bench.settings_from, bench.name
        if section is None or other not in benchmarks:
            continue
        shared = {f.name for f in dataclasses.fields(benchmarks[other])} & {
            f.name for f in dataclasses.fields(registry.get(section).settings)
        }
        names = shared - {s.key for s in applied if s.section == other}
        out += [(other, s) for s in applied if s.section == section and s.key in names]
    return out


def mirror(applied: list[Setting], *, benchmarks: dict[str, Any]) -> None:
    """Copy each mirrored section's settings to its target, once every setting is known."""
    for other, s in _mirrored(applied, benchmarks=benchmarks):
        _set_field(
            benchmarks[other], section=other, key=s.key, value=s.value, source=s.source,
            strings=s.strings,
        )  # fmt: skip


def check_unselected(
    applied: list[Setting], *, benchmarks: dict[str, Any], suite: str, device_type: str
) -> None:
    """Apply the settings of benchmarks this run does not select to a preset of their own (run
    its checks, then drop it), so that a mistake there is refused too.  A setting a selected
    benchmark takes over (``settings_from``) was checked there instead: attribution alone may
    take ``training.model=gemm_heavy``, which training itself does not run."""
    taken = {id(s) for _, s in _mirrored(applied, benchmarks=benchmarks)}
    scratch: dict[str, Any] = {}
    for s in applied:
        if s.section == "thresholds" or s.section in benchmarks or id(s) in taken:
            continue
        if s.section not in scratch:
            scratch[s.section] = registry.get(s.section).preset(
                suite=suite, device_type=device_type
            )
        _set_field(
            scratch[s.section], section=s.section, key=s.key, value=s.value, source=s.source,
            strings=s.strings,
        )  # fmt: skip


def apply_section(
    section: str,
    values: Any,
    *,
    benchmarks: dict[str, Any],
    thresholds: Thresholds,
    source: str = "--set",
    strings: bool = False,
    time_budgets: dict[str, float] | None = None,
) -> list[Setting]:
    """Apply one section's settings; what it set (or, for a benchmark this run does not
    select, would have set), for :func:`mirror` and :func:`check_unselected`."""
    if not is_benchmark(section) and section != "thresholds":
        unknown_benchmark(section)
    if not isinstance(values, dict):
        raise ConfigError(f"{source}: {section} must be a table ([{section}])")
    target: Any = thresholds if section == "thresholds" else benchmarks.get(section)
    if section != "thresholds" and TIME_BUDGET_KEY in values:
        where = f"{source}: {section}.{TIME_BUDGET_KEY}"
        seconds = time_budget(values[TIME_BUDGET_KEY], where=where)
        if time_budgets is not None:
            time_budgets[section] = seconds
        values = {k: v for k, v in values.items() if k != TIME_BUDGET_KEY}
    for key, value in values.items():
        if section == "thresholds":
            _set_threshold(thresholds, key=key, value=value, source=source, strings=strings)
        elif target is not None:  # None: a benchmark this run does not select
            _set_field(target, section=section, key=key, value=value, source=source,
                       strings=strings)  # fmt: skip
    return [Setting(section, key, value, source, strings) for key, value in values.items()]


def _set_threshold(
    thresholds: Thresholds, *, key: str, value: Any, source: str, strings: bool
) -> None:
    """Set one key of the ``[thresholds]`` table: a run-wide limit, or one a registered
    benchmark declares (kept in ``thresholds.given``, checked by its limits class)."""
    declared = registry.threshold_keys()
    kind = declared.get(key)
    if kind is None:
        names = [f.name for f in dataclasses.fields(thresholds) if f.name != "given"]
        if key not in names:
            where = f"{source}: thresholds.{key}"
            raise ConfigError(f"{where}: unknown key{did_you_mean(key, [*names, *declared])}")
        _set_field(thresholds, section="thresholds", key=key, value=value, source=source,
                   strings=strings)  # fmt: skip
        return
    where = f"{source}: thresholds.{key}"
    new = coerce(typing.get_type_hints(kind)[key], value, where=where)
    try:  # the class's own checks, on its limits as set so far
        checked = kind(**{**dataclasses.asdict(thresholds.of(kind)), key: new})
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    thresholds.given[key] = getattr(checked, key)


def _set_field(
    target: Any, *, section: str, key: str, value: Any, source: str, strings: bool
) -> None:
    hints = typing.get_type_hints(type(target))
    names = [f.name for f in dataclasses.fields(target)]
    where = f"{source}: {section}.{key}"
    if key not in names:
        raise ConfigError(f"{where}: unknown key{did_you_mean(key, names)}")
    kind = hints[key]
    if strings and isinstance(value, str) and typing.get_origin(kind) in (list, tuple):
        value = [v.strip() for v in value.split(",") if v.strip()]
    new = coerce(kind, value, where=where)
    try:
        fields = {f.name: getattr(target, f.name) for f in dataclasses.fields(target)}
        checked = type(target)(**{**fields, key: new})  # re-run the class's own checks
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    setattr(target, key, getattr(checked, key))  # as the class keeps it (an alias resolved)


def coerce(kind: Any, value: Any, *, where: str) -> Any:
    """``value`` as type ``kind`` (pydantic's lax rules), finite, or one ConfigError line."""
    try:
        new = TypeAdapter(kind).validate_python(value)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ConfigError(f"{where}: {err['msg'].lower()} (got {value!r})") from None
    _check_finite(new, where=where, given=value)
    return new


def _check_finite(value: Any, *, where: str, given: Any) -> None:
    """No setting anywhere is NaN or infinite (TOML and ``--set`` both spell them)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}: must be a finite number (got {given!r})")
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_finite(item, where=where, given=given)
