"""A benchmark may name its measurement as ``"module:function"``: the declaration then imports
nothing of it, the rank that runs it imports it, and the declaration must carry its own
description (there is no docstring to take it from)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from clusterbench.metrics import Metric, MetricSet
from clusterbench.registry import Benchmark, get


class _Metrics(MetricSet, benchmark="lazy"):
    value = Metric("s", "lower", "a figure")


@dataclass
class _Settings:
    size: int = 1


def measure_here(ctx: object, cfg: _Settings) -> Iterator[object]:
    """One line from the docstring."""
    yield cfg.size


def _declare(**kw: object) -> Benchmark:
    return Benchmark(name="lazy", level=1, scope="per_device", settings=_Settings,
                     metrics=_Metrics, **kw)  # type: ignore[arg-type]  # fmt: skip


def test_a_named_measurement_is_imported_when_asked_for() -> None:
    bench = _declare(run=f"{__name__}:measure_here", description="named by a string")
    assert bench.description == "named by a string"
    assert bench.measure() is measure_here
    assert list(bench.measure()(None, _Settings(size=3))) == [3]


def test_a_function_still_gives_its_docstring_as_description() -> None:
    bench = _declare(run=measure_here)
    assert bench.measure() is measure_here
    assert bench.description == "One line from the docstring."


@pytest.mark.parametrize(
    ("run", "description", "message"),
    [
        ("no_colon_here", "d", "is not 'module:function'"),
        (":measure_here", "d", "is not 'module:function'"),
        (f"{__name__}:", "d", "is not 'module:function'"),
        (f"{__name__}:measure_here", "", "give a description"),
    ],
)
def test_a_bad_measurement_name_is_refused(run: str, description: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _declare(run=run, description=description)


FOLDERS = ["doctor", "gemm", "sdc", "memory", "transfer", "collectives", "network", "dataloader",
           "checkpoint", "weight_update", "attribution"]  # fmt: skip


@pytest.mark.parametrize("name", FOLDERS)
def test_built_in_folders_name_their_measurement_and_leave_it_unimported(name: str) -> None:
    """Each built-in benchmark has a folder, benchmarks/<name>/: its declaration names the
    measurement (measure.py) by string, and its settings live in settings.py, with its metrics
    or, where the run-wide analyses read them too, re-exporting them from declared/<name>.py."""
    bench = get(name)
    module = f"clusterbench.benchmarks.{name}.measure"
    assert bench.run == f"{module}:{name}"
    assert bench.module == module
    assert bench.description and not bench.description.endswith(" ")
    settings = importlib.import_module(f"clusterbench.benchmarks.{name}.settings")
    assert bench.settings.__module__ == settings.__name__
    assert bench.metrics.__module__ in (settings.__name__, f"clusterbench.declared.{name}")
    assert getattr(settings, bench.metrics.__name__) is bench.metrics
    assert callable(bench.measure()) and module in sys.modules


def test_training_names_its_measurement_too() -> None:
    bench = get("training")
    assert bench.run == "clusterbench.benchmarks.training.bench:training"
    assert bench.settings.__module__ == "clusterbench.benchmarks.training.settings"
