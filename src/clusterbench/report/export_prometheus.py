"""A run as Prometheus metrics: node_exporter's textfile format, or pushed to a Pushgateway.

One gauge family per benchmark and metric, named as Prometheus names metrics
(``clusterbench_<benchmark>_<metric>_<base unit>``) with the value converted to that base
unit: GB/s and Gb/s to ``bytes_per_second``, TFLOP/s to ``flop_per_second`` (floating-point
operations per second), ms/us/s to ``seconds``, GB to ``bytes``, a percentage to a ``ratio``
(0-1), samples/s and tokens/s to ``..._per_second``.  A unit already spelled in the metric's
name is dropped from it (``latency_us`` -> ``latency_seconds``, ``tflops_best`` ->
``best_flop_per_second``).  Labels: ``host``, ``gpu`` (the device index of ``cuda:N``, else
the device string), ``device``, ``benchmark``, ``rank``, ``suite`` and one label per param key
(the union within the family, "" where a measurement has no such param).  Beside them the
run itself: ``clusterbench_run_info`` (its version, backend, status as labels), its start and
end as timestamps, the findings per severity, the errors and each benchmark's wall time, each
labelled with the run's ``run_id`` and ``suite``.  With the ``suite`` on every measurement
too, the files of a quick and a standard run in one textfile folder hold no series twice.

Samples carry no timestamps (node_exporter's textfile collector refuses them); the values are
the run's, whenever Prometheus scrapes them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from urllib.error import HTTPError, URLError

from prometheus_client import CollectorRegistry, generate_latest, push_to_gateway, write_to_textfile
from prometheus_client.core import GaugeMetricFamily, Metric

from clusterbench.analyses.trend import param_text
from clusterbench.metrics import declared
from clusterbench.report.export import ExportError
from clusterbench.schema import Measurement, Results

__all__ = [
    "PUSH_JOB",
    "metric_name",
    "push",
    "registry_for",
    "text",
    "write_textfile",
]

PREFIX = "clusterbench"
PUSH_JOB = "clusterbench"
_FIXED_LABELS = ("host", "gpu", "device", "benchmark", "rank", "suite")


@dataclass(frozen=True, slots=True)
class _BaseUnit:
    suffix: str
    """The name's unit suffix ('' for a count)."""
    factor: float
    """Recorded value x factor = value in the base unit."""
    aliases: frozenset[str] = field(default_factory=frozenset)
    """Tokens of a metric's name that spell this unit, dropped from the exported name."""


def _unit(suffix: str, factor: float, *aliases: str) -> _BaseUnit:
    return _BaseUnit(suffix, factor, frozenset(aliases))


# Bandwidth in GB/s = 1e9 B/s and compute in TFLOP/s = 1e12 FLOP/s (DESIGN.md section 4);
# network rates in Gb/s are bits, / 8 for bytes (node_exporter's node_network_speed_bytes).
_UNITS: dict[str, _BaseUnit] = {
    "GB/s": _unit("bytes_per_second", 1e9, "gbps"),
    "MB/s": _unit("bytes_per_second", 1e6, "mbps"),
    "Gb/s": _unit("bytes_per_second", 1e9 / 8, "gbps", "gbits"),
    "TFLOP/s": _unit("flop_per_second", 1e12, "tflops"),
    "GFLOP/s": _unit("flop_per_second", 1e9, "gflops"),
    "s": _unit("seconds", 1.0, "s"),
    "ms": _unit("seconds", 1e-3, "ms"),
    "us": _unit("seconds", 1e-6, "us"),
    "µs": _unit("seconds", 1e-6, "us"),
    "ns": _unit("seconds", 1e-9, "ns"),
    "%": _unit("ratio", 1e-2, "pct", "percent", "fraction"),
    "ratio": _unit("ratio", 1.0),
    "GB": _unit("bytes", 1e9, "gb"),
    "MB": _unit("bytes", 1e6, "mb"),
    "B": _unit("bytes", 1.0),
    "bytes": _unit("bytes", 1.0),
    "count": _unit("", 1.0),
    "bool": _unit("", 1.0),
}
_THING_PER_SECOND = re.compile(r"^([A-Za-z]+)/s$")  # samples/s, tokens/s, img/s


def _sanitize(text: str) -> str:
    """Letters, digits and single underscores, lower case."""
    return re.sub(r"_+", "_", re.sub(r"[^a-z0-9_]", "_", text.lower())).strip("_")


def metric_name(benchmark: str, metric: str, unit: str) -> tuple[str, float]:
    """The family name of a recorded (benchmark, metric, unit) and the factor that converts a
    recorded value to the name's base unit."""
    tokens = [t for t in _sanitize(metric).split("_") if t]
    base = _UNITS.get(unit)
    thing = _THING_PER_SECOND.match(unit)
    if base is not None:
        tokens = [t for t in tokens if t not in base.aliases]
        suffix, factor = base.suffix, base.factor
    elif thing is not None:
        # tokens_per_s_per_gpu -> tokens_per_gpu_per_second
        what = _sanitize(thing[1])
        for i in range(len(tokens) - 1):
            if tokens[i : i + 2] == ["per", "s"]:
                del tokens[i : i + 2]
                break
        suffix = "per_second" if what in tokens else f"{what}_per_second"
        factor = 1.0
    else:  # a unit with no base unit (gen, lanes, nats): its name, unless the metric says it
        unit_name = _sanitize(unit)
        suffix = "" if tokens[-1:] == [unit_name] else unit_name
        factor = 1.0
    parts = [PREFIX, _sanitize(benchmark), *tokens, suffix]
    return "_".join(p for p in parts if p), factor


def _label_names(keys: list[str]) -> dict[str, str]:
    """A Prometheus label name per param key: sanitised, never a fixed label's name nor a
    reserved one (``__*``), each distinct."""
    names: dict[str, str] = {}
    taken = set(_FIXED_LABELS)
    for key in keys:
        name = re.sub(r"[^a-zA-Z0-9_]", "_", key)
        if not name or name[0].isdigit() or name.startswith("__") or name in taken:
            name = "param_" + name.lstrip("_")
        candidate, n = name, 2
        while candidate in taken:
            candidate, n = f"{name}_{n}", n + 1
        names[key] = candidate
        taken.add(candidate)
    return names


def _gpu_label(device: str) -> str:
    kind, _, index = device.partition(":")
    return index if kind == "cuda" and index.isdigit() else device


@dataclass
class _Family:
    name: str
    unit: str
    help: str
    members: list[tuple[Measurement, float]] = field(default_factory=list)
    """Each measurement with the factor to the base unit (units of one family may differ:
    ms and s are both seconds)."""


def _help(m: Measurement, unit_suffix: str) -> str:
    declaration = declared(m.benchmark, m.metric)
    what = declaration.description if declaration is not None else "a clusterbench figure"
    recorded = f"recorded in {m.unit}" if m.unit else "recorded without a unit"
    if unit_suffix:
        recorded += f", exported in {unit_suffix.replace('_', ' ')}"
    return f"{m.benchmark}.{m.metric}: {what} ({recorded})"


def _families(results: Results) -> list[_Family]:
    families: dict[str, _Family] = {}
    for m in results.measurements:
        name, factor = metric_name(m.benchmark, m.metric, m.unit)
        family = families.get(name)
        if family is None:
            suffix = _UNITS[m.unit].suffix if m.unit in _UNITS else ""
            family = _Family(name, suffix, _help(m, suffix))
            families[name] = family
        family.members.append((m, factor))
    return list(families.values())


def _measurement_metrics(family: _Family, *, suite: str) -> Metric:
    keys: dict[str, None] = {}
    for m, _ in family.members:
        keys.update(dict.fromkeys(m.params))
    label_of = _label_names(list(keys))
    rows = []
    for m, factor in family.members:
        fixed = [m.host, _gpu_label(m.device), m.device, m.benchmark, str(m.rank), suite]
        params = [param_text(m.params[k]) if k in m.params else "" for k in keys]
        # recorded value x factor: the base unit (nccl-tests GB/s = 1e9 B/s)
        rows.append((fixed + params, m.value * factor))
    names = [*_FIXED_LABELS, *label_of.values()]
    seen: Counter[tuple[str, ...]] = Counter(tuple(labels) for labels, _ in rows)
    # the same series recorded twice would make the file invalid (node_exporter and the
    # Pushgateway refuse it): a 'repeat' label keeps both
    repeated = any(n > 1 for n in seen.values())
    if repeated:
        names.append(_label_names([*keys, "repeat"])["repeat"])
    gauge = GaugeMetricFamily(family.name, family.help, labels=names, unit=family.unit)
    count: Counter[tuple[str, ...]] = Counter()
    for labels, value in rows:
        if repeated:
            key = tuple(labels)
            labels = [*labels, str(count[key])]
            count[key] += 1
        gauge.add_metric(labels, value)
    return gauge


def _timestamp(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _gauge(name: str, doc: str, labels: list[str], rows: list[tuple[list[str], float]]) -> Metric:
    gauge = GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=labels)
    for values, value in rows:
        gauge.add_metric(values, value)
    return gauge


def _run_metrics(results: Results) -> Iterator[Metric]:
    """The run itself; each series labelled with the run's id and suite, so that the files of
    two runs in one textfile folder never hold the same series."""
    run = results.run
    ids = ["run_id", "suite"]
    of_run = [run.id, run.suite]
    info = ["version", "backend", "status", "world_size", "num_nodes"]
    values = [results.tool.version, run.backend, run.status, str(run.world_size),
              str(run.num_nodes)]  # fmt: skip
    doc = "the clusterbench run these figures come from (1)"
    yield _gauge("run_info", doc, [*ids, *info], [([*of_run, *values], 1.0)])
    for what, stamp in (("started", run.started), ("finished", run.finished)):
        seconds = _timestamp(stamp)
        if seconds is not None:
            doc = f"when the run {what} (Unix time)"
            yield _gauge(f"run_{what}_timestamp_seconds", doc, ids, [(of_run, seconds)])
    counts = Counter(f.severity for f in results.findings)
    yield _gauge("run_findings", "the run's findings per severity", [*ids, "severity"],
                 [([*of_run, s], float(counts[s])) for s in ("fail", "warn", "info")])  # fmt: skip
    doc = "errors the run recorded (a rank raised, died or hung)"
    yield _gauge("run_errors", doc, ids, [(of_run, float(len(results.errors)))])
    if run.benchmark_seconds:
        yield _gauge("benchmark_duration_seconds", "wall time of each benchmark in the run",
                     [*ids, "benchmark"],
                     [([*of_run, b], t) for b, t in run.benchmark_seconds.items()])  # fmt: skip


class _ResultsCollector:
    """A prometheus_client collector of one run's results (a custom collector: the families
    are built from the results, not updated by instrumented code)."""

    def __init__(self, results: Results) -> None:
        self._results = results

    def collect(self) -> Iterator[Metric]:
        yield from _run_metrics(self._results)
        for family in _families(self._results):
            yield _measurement_metrics(family, suite=self._results.run.suite)


def registry_for(results: Results) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_ResultsCollector(results))
    return registry


def text(results: Results) -> str:
    """The Prometheus text exposition format (what a textfile or a scrape holds)."""
    return generate_latest(registry_for(results)).decode("utf-8")


def write_textfile(results: Results, path: Path) -> None:
    """Written for node_exporter's textfile collector: to a temporary file, then renamed, so it
    never reads half a file."""
    try:
        write_to_textfile(str(path), registry_for(results))
    except OSError as exc:
        raise ExportError(f"cannot write {path}: {exc.strerror or exc}") from None


def push(results: Results, url: str, *, timeout_s: float = 10.0) -> dict[str, str]:
    """PUT the run's metrics to the Pushgateway at ``url`` (job ``clusterbench``, grouped by
    the ``instance`` of the run's first host and its ``suite``, so a host's next run of a suite
    replaces that suite's figures); returns the grouping key.  ExportError (one line) when the
    gateway cannot be reached or refuses."""
    host = results.hosts[0].hostname if results.hosts else _first_host(results)
    grouping = {"instance": host, "suite": results.run.suite}
    try:
        push_to_gateway(
            url, job=PUSH_JOB, registry=registry_for(results), grouping_key=grouping,
            timeout=timeout_s,
        )  # fmt: skip
    except URLError as exc:  # HTTPError too: a gateway that refused the metrics
        raise ExportError(f"cannot push to {url}: {_reason(exc)}") from None
    except (OSError, ValueError) as exc:  # timeouts, connection resets, a malformed URL
        raise ExportError(f"cannot push to {url}: {exc}") from None
    return grouping


def _first_host(results: Results) -> str:
    return next((m.host for m in results.measurements), "unknown")


def _reason(exc: URLError) -> str:
    """Why a push failed: the gateway's status and the first line of its answer (it says which
    metric it refused), or why it could not be reached."""
    if isinstance(exc, HTTPError):
        lines = exc.read().decode("utf-8", "replace").strip().splitlines()
        return f"HTTP {exc.code} {exc.reason}" + (f": {lines[0]}" if lines else "")
    return str(exc.reason)
