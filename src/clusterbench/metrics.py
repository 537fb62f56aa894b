"""Metric declarations: the name, unit and better direction of every figure a benchmark emits.

A benchmark declares its metrics once, as a :class:`MetricSet`; its measurement code makes
measurements from those declarations and analysis and report select by them, so a renamed or
mistyped metric is an attribute error (caught by mypy), not a look-up that silently finds
nothing::

    class GemmMetrics(MetricSet, benchmark="gemm"):
        tflops = Metric("TFLOP/s", "higher", "throughput of one shape")

    GemmMetrics.tflops.name          # "tflops"
    GemmMetrics.tflops.select(results)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, Literal

from clusterbench.schema import Measurement, Results

__all__ = [
    "Better",
    "Direction",
    "Metric",
    "MetricSet",
    "better_direction",
    "declared",
    "declared_sets",
    "direction_of",
    "is_tail",
]

Better = Literal["higher", "lower", "none"]
"""Which way is better; "none" for figures with no better side among peers (a ratio with its own
tolerance, a PCIe gen judged against its maximum, a count, a share of the step time)."""
Direction = Literal["higher", "lower"]

# The unit rule, for metrics no loaded module declares (a declaration's ``better`` agrees with it).
_LOWER_IS_BETTER = frozenset({"s", "ms", "us", "µs", "ns"})
# Units with no "worse" direction among peers: a ratio (rel_error has its own tolerance check),
# PCIe gen and width (judged against their maximum in analysis.transfer).
_NOT_COMPARED = frozenset({"ratio", "gen", "lanes"})


@dataclass(frozen=True, slots=True)
class Metric:
    """One declared figure.  ``name`` and ``benchmark`` are filled in by :class:`MetricSet`."""

    unit: str
    better: Better
    description: str
    only_when: str = ""
    """Where the metric is emitted only under some condition ('a GPU with fp8', 'two or more
    nodes'), that condition; '' when every run of the benchmark emits it."""
    tail: bool = False
    """A tail of a distribution (a maximum, a 99th percentile): shown in comparisons, not
    judged there, since its noise is that of a few extreme samples."""
    name: str = ""
    benchmark: str = ""

    def matches(self, m: Measurement) -> bool:
        return m.benchmark == self.benchmark and m.metric == self.name

    def select(self, source: Results | Iterable[Measurement]) -> list[Measurement]:
        """The measurements of this metric, in the order they were recorded."""
        ms = source.measurements if isinstance(source, Results) else source
        return [m for m in ms if self.matches(m)]

    def __str__(self) -> str:
        return f"{self.benchmark}.{self.name}"


_DECLARED: dict[tuple[str, str], Metric] = {}


class MetricSet:
    """The metrics of one benchmark, one class attribute each (subclass it, see module doc)."""

    benchmark: ClassVar[str]
    _metrics: ClassVar[dict[str, Metric]]

    def __init_subclass__(cls, *, benchmark: str, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.benchmark = benchmark
        cls._metrics = {}
        for attr, value in list(vars(cls).items()):
            if isinstance(value, Metric):
                bound = dataclasses.replace(value, name=attr, benchmark=benchmark)
                setattr(cls, attr, bound)
                cls._metrics[attr] = bound
                _DECLARED[(benchmark, attr)] = bound

    @classmethod
    def all(cls) -> tuple[Metric, ...]:
        return tuple(cls._metrics.values())

    @classmethod
    def get(cls, name: str) -> Metric:
        """The metric called ``name`` (for names built from a parameter, e.g. ``f"{kind}_s"``)."""
        try:
            return cls._metrics[name]
        except KeyError:
            known = ", ".join(cls._metrics)
            message = f"{cls.benchmark} declares no metric {name!r} (it has: {known})"
            raise KeyError(message) from None


def is_tail(m: Measurement) -> bool:
    """Whether ``m`` is a tail figure (:attr:`Metric.tail`) of its declared metric."""
    metric = declared(m.benchmark, m.metric)
    return metric is not None and metric.tail


def declared(benchmark: str, metric: str) -> Metric | None:
    """The declaration of a recorded measurement's metric (None: no imported module declares
    it; the built-in benchmarks' are declared once the entry point has loaded the catalog)."""
    return _DECLARED.get((benchmark, metric))


def declared_sets() -> dict[str, tuple[Metric, ...]]:
    """Every declared metric by benchmark (of the modules imported so far: the catalog's once
    an entry point has loaded it)."""
    out: dict[str, list[Metric]] = {}
    for (benchmark, _), metric in _DECLARED.items():
        out.setdefault(benchmark, []).append(metric)
    return {b: tuple(ms) for b, ms in out.items()}


def better_direction(unit: str) -> Direction | None:
    """The unit rule: 'higher' for rates (GB/s, TFLOP/s, anything per second), 'lower' for times,
    else None."""
    if unit in _NOT_COMPARED:
        return None
    if unit in _LOWER_IS_BETTER:
        return "lower"
    if unit.endswith("/s"):
        return "higher"
    return None


def direction_of(m: Measurement) -> Direction | None:
    """Which way is better for ``m``: its metric's declaration ("none": no better side), or the
    unit rule for a metric no loaded module declares (or recorded in another unit than its
    declaration's, e.g. by an older version: the declaration does not describe it)."""
    metric = declared(m.benchmark, m.metric)
    if metric is None or metric.unit != m.unit:
        return better_direction(m.unit)
    return None if metric.better == "none" else metric.better
