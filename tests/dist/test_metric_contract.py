"""The metric contract, checked on real CPU runs of the quick and standard suites.

- every metric a run records is declared by its benchmark, with the declared unit;
- every metric analysis, a benchmark's findings, section or figures, or report reads (a
  ``XMetrics.name`` reference in their modules) is
  produced by the standard suite, unless its declaration says when it is not (``only_when``) or
  its benchmark has no CPU form; what is produced but read by neither is printed;
- both suites record exactly the (benchmark, metric, unit, param keys) they recorded before the
  contract was introduced (tests/data/cpu_suite_metrics.json).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from clusterbench import load_results, metrics, registry
from clusterbench.metrics import Metric, MetricSet
from clusterbench.schema import Results
from tests.helpers import QUICK_RUN, Run, cli

pytestmark = [pytest.mark.dist, pytest.mark.xdist_group(QUICK_RUN)]

BASELINE = Path(__file__).parents[1] / "data" / "cpu_suite_metrics.json"
READERS = (
    "clusterbench.analyses",
    "clusterbench.judging",
    "clusterbench.report",
    "clusterbench.views",
)
"""Packages that read metrics; with them each benchmark folder's findings, section and figures
and the folder's modules those import (not its settings, duration model or measurement)."""
READING_PARTS = ("findings", "section", "figures")


@pytest.fixture(scope="module")
def suite_results(tmp_path_factory: pytest.TempPathFactory, quick_run: Run) -> dict[str, Results]:
    folder = tmp_path_factory.mktemp("standard") / "run"
    proc = cli("run", "--suite", "standard", "--device", "cpu", "--out", str(folder), timeout=600)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    out = {"quick": quick_run.results, "standard": load_results(folder)}
    for results in out.values():
        assert results.run.status == "completed" and not results.errors
    return out


def _modules(package: str) -> list[ModuleType]:
    root = importlib.import_module(package)
    names = [m.name for m in pkgutil.walk_packages(root.__path__, prefix=f"{package}.")]
    return [root, *(importlib.import_module(n) for n in names)]


def _resolve(node: ast.expr, scope: dict[str, Any]) -> Any:
    """The object a dotted name (``a``, ``a.b.c``) refers to in a module, or None."""
    if isinstance(node, ast.Name):
        return scope.get(node.id)
    if isinstance(node, ast.Attribute):
        return getattr(_resolve(node.value, scope), node.attr, None)
    return None


def _benchmark_readers() -> list[ModuleType]:
    """Each benchmark folder's findings, section and figures, and the modules of
    ``clusterbench.benchmarks`` they take names from (but settings, duration models,
    measurements)."""
    parts = [
        m for m in _modules("clusterbench.benchmarks")
        if m.__name__.rsplit(".", 1)[-1] in READING_PARTS
    ]  # fmt: skip
    names = {m.__name__ for m in parts}
    for part in parts:
        for value in vars(part).values():
            where = (
                value.__name__
                if isinstance(value, ModuleType)
                else getattr(value, "__module__", None)
            )
            if (
                isinstance(where, str) and where.startswith("clusterbench.benchmarks.")
                and where.rsplit(".", 1)[-1] not in ("settings", "duration", "measure")
            ):  # fmt: skip
                names.add(where)
    return [importlib.import_module(n) for n in sorted(names)]


def metrics_read() -> dict[Metric, set[str]]:
    """Each metric analysis, a benchmark's findings, section or figures, or report refers to ->
    the modules that do."""
    read: dict[Metric, set[str]] = {}
    readers = [m for package in READERS for m in _modules(package)] + _benchmark_readers()
    for module in readers:
        scope = vars(module)
        for node in ast.walk(ast.parse(inspect.getsource(module))):
            metric = None
            if isinstance(node, ast.Attribute):
                metric = _resolve(node, scope)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                owner = _resolve(node.func.value, scope)
                if isinstance(owner, type) and issubclass(owner, MetricSet):
                    metric = owner.get(str(node.args[0].value))
            if isinstance(metric, Metric):
                read.setdefault(metric, set()).add(module.__name__)
    return read


def _signature(results: Results) -> set[tuple[str, str, str, str]]:
    return {
        (m.benchmark, m.metric, m.unit, ",".join(sorted(m.params))) for m in results.measurements
    }


def test_every_recorded_metric_is_declared_with_its_unit(suite_results):
    for results in suite_results.values():
        for m in results.measurements:
            declared = metrics.declared(m.benchmark, m.metric)
            assert declared is not None, f"{m.benchmark}.{m.metric} is not declared"
            assert declared.unit == m.unit, (
                f"{declared}: {m.unit} recorded, {declared.unit} declared"
            )


def test_every_metric_read_is_produced(suite_results, capsys):
    produced = {(m.benchmark, m.metric) for m in suite_results["standard"].measurements}
    read = metrics_read()
    assert len(read) > 40  # the scan sees the declarations analysis and report use
    missing = [
        f"{metric} (read by {', '.join(sorted(where))})"
        for metric, where in sorted(read.items(), key=lambda kv: str(kv[0]))
        if (metric.benchmark, metric.name) not in produced
        and not metric.only_when
        and registry.get(metric.benchmark).supports("cpu")
    ]
    assert not missing, "read but never produced by the CPU standard suite:\n" + "\n".join(missing)
    unread = sorted(f"{b}.{name}" for b, name in produced if metrics.declared(b, name) not in read)
    with capsys.disabled():
        print(f"\nproduced but read by neither analysis nor report: {', '.join(unread)}")


def test_suites_record_the_metrics_they_recorded_before(suite_results):
    baseline = json.loads(BASELINE.read_text(encoding="utf-8"))["suites"]
    for suite, results in suite_results.items():
        expected = {tuple(row) for row in baseline[suite]}
        got = _signature(results)
        assert got == expected, (
            f"{suite}: new {sorted(got - expected)}, gone {sorted(expected - got)}"
        )
