"""A run as one Weights & Biases run, through the ``wandb`` package (the optional extra
``clusterbench[wandb]``).

The W&B run is named after the clusterbench run.  Its config is the run's (suite, settings,
thresholds, command, status) with a summary of the hardware; its summary holds one key per
measurement, ``BENCHMARK/METRIC[KEY=VALUE,...]@HOST/DEVICE`` (W&B groups the keys by
benchmark), and ``findings/<severity>`` counts; two tables hold every measurement (the
columns of the CSV export) and every finding.  wandb's own settings apply: ``WANDB_MODE``
(``offline`` writes the run locally with no account; ``wandb sync`` uploads it later),
``WANDB_ENTITY``, ``WANDB_API_KEY``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterbench.analyses.trend import param_text
from clusterbench.report.export import COLUMNS, ExportError, param_keys, records
from clusterbench.schema import Measurement, Results

__all__ = ["INSTALL_HINT", "WandbRun", "available", "export", "hardware_summary", "summary_key"]

INSTALL_HINT = "pip install 'clusterbench[wandb]'"


@dataclass(frozen=True, slots=True)
class WandbRun:
    folder: Path | None
    """The local run folder (``.../wandb/offline-run-...`` or ``run-...``), its ``.wandb`` file
    inside; None with ``WANDB_MODE=disabled``."""
    url: str | None
    """The run's page when it went online; None offline."""


def available() -> bool:
    """Whether the ``wandb`` package imports (asked before a run, so that a missing or broken
    install is said at once, not after the run)."""
    try:
        import wandb  # noqa: F401
    except ImportError:
        return False
    return True


def summary_key(m: Measurement) -> str:
    """``benchmark/metric[key=value,...]@host/device``: the selector syntax of 'clusterbench
    history', with a slash after the benchmark so that W&B groups its keys."""
    params = ",".join(f"{k}={param_text(v)}" for k, v in m.params.items())
    return f"{m.benchmark}/{m.metric}" + (f"[{params}]" if params else "") + f"@{m.host}/{m.device}"


def hardware_summary(results: Results) -> dict[str, Any]:
    """Hosts, GPU models and counts, CPU model and the software versions of the first host."""
    gpus = Counter(g.name for h in results.hosts for g in h.gpus)
    first = results.hosts[0] if results.hosts else None
    return {
        "hosts": [h.hostname for h in results.hosts],
        "num_hosts": len(results.hosts),
        "num_gpus": sum(gpus.values()),
        "gpu_models": dict(gpus),
        "cpu": first.cpu.model if first else None,
        "versions": dict(first.versions) if first else {},
    }


def _config(results: Results) -> dict[str, Any]:
    run = results.run.model_dump(mode="json")
    return {
        "run": run,
        "tool": results.tool.model_dump(mode="json"),
        "hardware": hardware_summary(results),
    }


def _summary(results: Results) -> dict[str, Any]:
    summary: dict[str, Any] = {summary_key(m): m.value for m in results.measurements}
    by_severity = Counter(f.severity for f in results.findings)
    summary.update({f"findings/{s}": by_severity[s] for s in ("fail", "warn", "info")})
    summary["errors"] = len(results.errors)
    return summary


def _measurement_rows(results: Results) -> tuple[list[str | int], list[list[Any]]]:
    keys = param_keys(results.measurements)
    columns: list[str | int] = [*COLUMNS, *(f"params.{k}" for k in keys)]
    rows = []
    for row in records(results):
        params = row["params"]
        cells = [row[c] for c in COLUMNS]
        rows.append(cells + [param_text(params[k]) if k in params else None for k in keys])
    return columns, rows


def export(results: Results, *, directory: Path | None, project: str) -> WandbRun:
    """Log ``results`` as one W&B run, its local files under ``directory``/wandb (None: where
    wandb puts them, ``$WANDB_DIR``); ExportError (one line) when wandb is missing or the run
    cannot be made (online with no account, say)."""
    try:
        import wandb
    except ImportError:
        raise ExportError(f"wandb is not installed: {INSTALL_HINT}") from None
    try:
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
        with wandb.init(
            project=project,
            name=results.run.id,
            dir=str(directory) if directory is not None else None,
            config=_config(results),
            tags=[results.run.suite, results.run.backend],
            job_type="benchmark",
            # what the exporting process does is not part of the run: no console capture, no
            # system metrics of this machine, no banner beside clusterbench's own lines
            settings=wandb.Settings(console="off", x_disable_stats=True, silent=True),
        ) as run:
            run.summary.update(_summary(results))
            columns, rows = _measurement_rows(results)
            findings = [[f.id, f.severity, f.scope, f.message, f.fix] for f in results.findings]
            run.log({
                "measurements": wandb.Table(columns=columns, data=rows, allow_mixed_types=True),
                "findings": wandb.Table(
                    columns=["id", "severity", "scope", "message", "fix"], data=findings
                ),
            })  # fmt: skip
            # run.dir is the run folder's files/; WANDB_MODE=disabled writes nothing
            folder = None if run.disabled else Path(run.dir).parent
            url = None if run.offline or run.disabled else run.url
    except wandb.errors.Error as exc:
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        hint = "WANDB_MODE=offline writes the run locally, no account"
        raise ExportError(f"{why} ({hint})") from None
    except OSError as exc:
        raise ExportError(f"cannot write under {directory}: {exc.strerror or exc}") from None
    return WandbRun(folder=folder, url=url)
