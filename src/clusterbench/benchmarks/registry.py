"""One registry of benchmarks: plain functions registered by a decorator."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from clusterbench.runtime.dist import DistContext
from clusterbench.schema import Finding, Measurement

__all__ = ["BenchmarkSpec", "Scope", "all_benchmarks", "get", "register"]

Scope = Literal["per_device", "collective", "workload"]
DeviceType = Literal["cuda", "cpu"]
BenchmarkFn = Callable[[DistContext, Any], Iterable[Measurement | Finding]]
"""A benchmark yields measurements, and may yield findings of its own (checks such as doctor's)."""

# Modules whose import registers the built-in benchmarks.
_BUILTIN_MODULES = (
    "clusterbench.benchmarks.doctor",
    "clusterbench.benchmarks.gemm",
    "clusterbench.benchmarks.memory",
    "clusterbench.benchmarks.transfer",
    "clusterbench.benchmarks.selftest",
    "clusterbench.benchmarks.network",
    "clusterbench.benchmarks.collectives",
    "clusterbench.benchmarks.dataloader",
    "clusterbench.benchmarks.checkpoint",
    "clusterbench.benchmarks.training.bench",
    "clusterbench.benchmarks.attribution",
)


@dataclass(frozen=True, slots=True)
class BenchmarkSpec:
    name: str
    level: int
    """0 self-test, 1 one node, 2 network, 3 training."""
    scope: Scope
    description: str
    fn: BenchmarkFn
    config_cls: type
    """The settings dataclass; its fields are what a TOML table or --set may change."""
    devices: frozenset[str]
    """Device types the benchmark has a form for ('cuda', 'cpu')."""

    def supports(self, device_type: str) -> bool:
        return device_type in self.devices


_REGISTRY: dict[str, BenchmarkSpec] = {}


def register(
    name: str,
    *,
    level: int,
    scope: Scope,
    config: type,
    devices: Iterable[DeviceType] = ("cuda", "cpu"),
    description: str | None = None,
) -> Callable[[BenchmarkFn], BenchmarkFn]:
    """Register ``fn(ctx, cfg) -> Iterable[Measurement | Finding]`` under ``name``.

    The one-line description defaults to the first line of the function's docstring.
    """

    def wrap(fn: BenchmarkFn) -> BenchmarkFn:
        if name in _REGISTRY and _REGISTRY[name].fn is not fn:
            raise ValueError(f"benchmark {name!r} registered twice")
        lines = (fn.__doc__ or "").strip().splitlines()
        text = description or (lines[0] if lines else name)
        _REGISTRY[name] = BenchmarkSpec(
            name=name,
            level=level,
            scope=scope,
            description=text,
            fn=fn,
            config_cls=config,
            devices=frozenset(devices),
        )
        return fn

    return wrap


def load_builtin() -> None:
    for module in _BUILTIN_MODULES:
        importlib.import_module(module)


def get(name: str) -> BenchmarkSpec:
    load_builtin()
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise ValueError(f"unknown benchmark {name!r} (known: {known})") from None


def all_benchmarks() -> list[BenchmarkSpec]:
    load_builtin()
    return sorted(_REGISTRY.values(), key=lambda s: (s.level, s.name))
