"""A run's measurements for the tools teams already run: CSV, JSON lines, Prometheus, W&B.

Every format carries the same facts per measurement (:data:`COLUMNS`, then its params): the
run, what was measured and in which unit, where (host, rank, device), its statistics and what
it is compared with.  CSV flattens the params into one column per key (``params.<key>``, the
union over the run's measurements in the order they first appear, empty where a measurement
has none); JSON lines keeps them as one nested ``params`` object with their JSON types.
Prometheus (:mod:`clusterbench.report.export_prometheus`) and Weights & Biases
(:mod:`clusterbench.report.export_wandb`) have modules of their own.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

from clusterbench.analyses.trend import param_text
from clusterbench.runtime import atomic
from clusterbench.schema import Measurement, Results

__all__ = [
    "COLUMNS",
    "DEFAULT_NAMES",
    "FORMATS",
    "TEXT_FORMATS",
    "ExportError",
    "csv_text",
    "jsonl_text",
    "param_keys",
    "parse_formats",
    "record",
    "records",
    "write_text_atomic",
]

FORMATS = ("csv", "json-lines", "prometheus", "wandb")
TEXT_FORMATS = ("csv", "json-lines", "prometheus")
"""The formats that are text, which ``-o -`` can write to stdout."""
DEFAULT_NAMES = {
    "csv": "results.csv",
    "json-lines": "measurements.jsonl",
    "prometheus": "metrics.prom",
    "wandb": "wandb",
}
"""What each format writes in the run folder (for W&B: the folder its local run goes in)."""

COLUMNS = (
    "run_id",
    "suite",
    "started",
    "benchmark",
    "metric",
    "value",
    "unit",
    "host",
    "rank",
    "device",
    "round",
    "time",
    "samples",
    "median",
    "min",
    "max",
    "mean",
    "cv",
    "reference_value",
    "reference_kind",
    "reference_source",
)
"""The fields of every exported measurement, in order; CSV adds ``params.<key>`` columns.
``round`` is the soak round (empty outside a soak), ``time`` when it was recorded (unix s)."""


class ExportError(Exception):
    """An export that could not be done (a file not written, a server not reached): one line."""


def parse_formats(items: Iterable[str]) -> list[str]:
    """The formats asked for, each once in the order given; ValueError (one line) naming the
    choices for an unknown one or for none."""
    chosen: list[str] = []
    for item in items:
        name = item.strip().lower()
        if name not in FORMATS:
            raise ValueError(f"unknown export format {item.strip()!r}: choose {', '.join(FORMATS)}")
        if name not in chosen:
            chosen.append(name)
    if not chosen:
        raise ValueError(f"no export format given: choose {', '.join(FORMATS)}")
    return chosen


def record(results: Results, m: Measurement) -> dict[str, Any]:
    """One measurement as :data:`COLUMNS` (None where it has no such field) plus ``params``."""
    stats, ref = m.stats, m.reference
    return {
        "run_id": results.run.id,
        "suite": results.run.suite,
        "started": results.run.started,
        "benchmark": m.benchmark,
        "metric": m.metric,
        "value": m.value,
        "unit": m.unit,
        "host": m.host,
        "rank": m.rank,
        "device": m.device,
        "round": m.round,
        "time": m.time,
        "samples": stats.samples if stats else None,
        "median": stats.median if stats else None,
        "min": stats.min if stats else None,
        "max": stats.max if stats else None,
        "mean": stats.mean if stats else None,
        "cv": stats.cv if stats else None,
        "reference_value": ref.value if ref else None,
        "reference_kind": ref.kind if ref else None,
        "reference_source": ref.source if ref else None,
        "params": dict(m.params),
    }


def records(results: Results) -> Iterator[dict[str, Any]]:
    """Every measurement as :func:`record`, in the order recorded."""
    for m in results.measurements:
        yield record(results, m)


def param_keys(measurements: Iterable[Measurement]) -> list[str]:
    """The union of the measurements' param keys, in the order they first appear."""
    keys: dict[str, None] = {}
    for m in measurements:
        keys.update(dict.fromkeys(m.params))
    return list(keys)


def write_csv(results: Results, stream: TextIO) -> None:
    """One row per measurement: :data:`COLUMNS`, then ``params.<key>`` per param key (a value
    as a selector writes it: strings bare, the rest as JSON; empty where the key is absent)."""
    keys = param_keys(results.measurements)
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow([*COLUMNS, *(f"params.{k}" for k in keys)])
    for row in records(results):
        params = row["params"]
        cells = ["" if row[c] is None else row[c] for c in COLUMNS]
        cells += [param_text(params[k]) if k in params else "" for k in keys]
        writer.writerow(cells)


def csv_text(results: Results) -> str:
    stream = io.StringIO()
    write_csv(results, stream)
    return stream.getvalue()


def jsonl_text(results: Results) -> str:
    """One JSON object per line and measurement: :data:`COLUMNS` (null where absent) and
    ``params`` as a nested object."""
    return "".join(json.dumps(_json_safe(row), allow_nan=False) + "\n" for row in records(results))


def _json_safe(row: dict[str, Any]) -> dict[str, Any]:
    """NaN and infinities as null, as results.json writes them (JSON has no such numbers)."""
    return {k: _json_safe(v) if isinstance(v, dict) else _finite(v) for k, v in row.items()}


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def write_text_atomic(path: Path, text: str) -> None:
    """``text`` to a temporary file beside ``path``, then renamed over it: a reader (or
    node_exporter) never sees half a file.  ExportError (one line) when it cannot be written."""
    try:
        atomic.write_text_atomic(path, text)
    except OSError as exc:
        raise ExportError(f"cannot write {path}: {exc.strerror or exc}") from None
