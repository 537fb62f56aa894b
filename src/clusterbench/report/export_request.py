"""What ``--export``/``--pushgateway`` ask for, checked before anything runs, and the exports
done one after the other (``clusterbench export``, and ``clusterbench run --export`` at the
run's finish)."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from clusterbench.report.export import (
    DEFAULT_NAMES,
    TEXT_FORMATS,
    ExportError,
    csv_text,
    jsonl_text,
    parse_formats,
    write_text_atomic,
)
from clusterbench.schema import Results

__all__ = ["ExportRequest", "do_exports", "export_request"]


@dataclass(frozen=True, slots=True)
class ExportRequest:
    formats: list[str]
    output: Path | None
    """None: the run folder; Path('-'): stdout; an existing folder: into it; else the file."""
    pushgateway: str | None
    wandb_project: str


def export_request(
    formats: list[str],
    *,
    output: Path | None = None,
    pushgateway: str | None = None,
    wandb_project: str | None = None,
) -> ExportRequest | None:
    """What to export, checked before anything runs; ValueError (one line) when it cannot be
    done: an unknown format, ``-o`` that fits none of them, wandb not installed.  None when
    nothing is asked for."""
    from clusterbench.report.export_wandb import INSTALL_HINT, available

    if not formats and pushgateway is None:
        return None
    chosen = parse_formats(formats) if formats else []
    if output is not None and chosen:
        to_stdout = str(output) == "-"
        if to_stdout and (len(chosen) > 1 or chosen[0] not in TEXT_FORMATS):
            raise ValueError(
                f"-o - writes one text format to stdout ({', '.join(TEXT_FORMATS)}), "
                f"not {','.join(chosen)}"
            )
        if not to_stdout and len(chosen) > 1 and not output.is_dir():
            raise ValueError(f"-o {output}: one file for {len(chosen)} formats; give an "
                             "existing folder to write them all into, or one format")  # fmt: skip
    if "wandb" in chosen and not available():
        raise ValueError(f"--format wandb: wandb is not installed: {INSTALL_HINT}")
    project = wandb_project or os.environ.get("WANDB_PROJECT") or "clusterbench"
    return ExportRequest(chosen, output, pushgateway, project)


def do_exports(
    results: Results,
    request: ExportRequest,
    *,
    run_dir: Path,
    say: Callable[[str], None] | None = None,
) -> list[str]:
    """Every export asked for, one after the other (one that fails does not stop the next);
    says where each went (``say``, default: a line on stdout, on stderr when the export itself
    goes to stdout) and returns one line per failure."""
    to_stdout = request.output is not None and str(request.output) == "-"
    if say is None:
        say = functools.partial(print, file=sys.stderr if to_stdout else sys.stdout)
    failures = []
    for fmt in request.formats:
        try:
            for line in _export_one(results, fmt, request=request, run_dir=run_dir):
                say(f"{fmt}: {line}")
        except ExportError as exc:
            failures.append(f"{fmt}: {exc}")
    if request.pushgateway is not None:
        from clusterbench.report.export_prometheus import PUSH_JOB, push

        try:
            grouping = push(results, request.pushgateway)
        except ExportError as exc:
            failures.append(f"pushgateway: {exc}")
        else:
            group = ",".join(f"{k}={v}" for k, v in grouping.items())
            say(f"pushgateway: {request.pushgateway} (job={PUSH_JOB},{group})")
    return failures


def _export_one(results: Results, fmt: str, *, request: ExportRequest, run_dir: Path) -> list[str]:
    """Write one format; the lines saying where it went."""
    from clusterbench.report import export_prometheus, export_wandb

    output = request.output
    if fmt == "wandb":
        # -o DIR, else wandb's own WANDB_DIR, else the run folder
        directory = output if output is not None or os.environ.get("WANDB_DIR") else run_dir
        done = export_wandb.export(results, directory=directory, project=request.wandb_project)
        lines = [str(done.folder) if done.folder is not None else "not written (WANDB_MODE)"]
        return lines + ([done.url] if done.url else [])
    if output is not None and str(output) == "-":
        texts = {"csv": csv_text, "json-lines": jsonl_text, "prometheus": export_prometheus.text}
        sys.stdout.write(texts[fmt](results))
        return []
    if output is None:
        path = run_dir / DEFAULT_NAMES[fmt]
    else:
        path = output / DEFAULT_NAMES[fmt] if output.is_dir() else output
    if fmt == "prometheus":
        export_prometheus.write_textfile(results, path)
    else:
        write_text_atomic(path, csv_text(results) if fmt == "csv" else jsonl_text(results))
    return [str(path)]
