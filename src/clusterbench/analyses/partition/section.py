"""The training partition search's part of the summary (a run part: its predicted rows need the
run's collectives too, the links, which the training measurements alone do not hold): the
candidates ranked, measured and predicted, and the model's check on the measured ones."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusterbench.analyses.partition.search import Partition, Row, analyse
from clusterbench.schema import Results
from clusterbench.thresholds import run_thresholds
from clusterbench.views.cells import Grid, Section, format_value

if TYPE_CHECKING:
    from clusterbench.analyses.view import RunView

__all__ = ["PARTITION", "partition_grids", "run_partition", "section"]

PARTITION = "training partition"
"""The partition search's part (and its plots') name in the summary and report.html."""


def run_partition(results: Results) -> Partition | None:
    """The run's partition search judged by its own thresholds (None: it did not search)."""
    return analyse(results, run_thresholds(results))


def section(results: Results, run: RunView) -> Section | None:
    """The partition search's tables (None: the run did not search)."""
    p = run_partition(results)
    return None if p is None else Section(PARTITION, grids=partition_grids(p))


def _range(r: Row) -> str:
    if r.low_ms is None or r.high_ms is None:
        return "-"
    return f"{format_value(r.low_ms)}–{format_value(r.high_ms)}"


def _versus(r: Row) -> str:
    if r.verdict == "default":
        return "default"
    if r.basis != "measured" or r.gain is None:
        return "-"
    return f"{-100 * r.gain:+.1f}%".replace("-", "−")


def _verdict(r: Row, recommended: Row | None) -> str:
    if r is recommended:
        return "better: recommended"
    if r.verdict == "not_run":
        return r.reason or "not run"
    if r.verdict == "predicted":
        return "predicted" + (f"; assumes {', '.join(r.assumed)}" if r.assumed else "")
    words = {"default": "the default", "better": "better", "not_better": "not better",
             "unjudged": "not judged"}  # fmt: skip
    text = words.get(r.verdict, r.verdict)
    return f"{text}: {r.reason}" if r.reason and r.verdict != "default" else text


def partition_grids(p: Partition) -> list[Grid]:
    """The candidates ranked (measured and predicted, the default marked), and the model's
    check on the measured candidates when it was made."""
    rec = p.recommended
    error = p.model_error
    err = f"±{100 * error:.0f}% measured" if error is not None else "not measured here"
    title = (
        f"training partition of the global batch {p.global_batch} ({p.model} {p.strategy}): "
        "d ranks × micro-batch × accumulation steps, fastest first; ms: time to batch (the "
        "optimizer step), range: fastest–slowest step (measured) or the link fits' band "
        f"(predicted, model error {err}); vs default: time against the default's; better: "
        f"Mann-Whitney p < {p.alpha:g}, speed-up interval above 1 and {p.min_gain:.0%} less "
        "time; predicted rows are never recommended"
    )
    header = ("#", "d×m×k", "basis", "ms", "range ms", p.unit, "vs default", "verdict")
    rows: list[tuple[str, ...]] = [
        (str(i), r.label + (" (default)" if r.default else ""), r.basis,
         format_value(r.time_ms), _range(r), format_value(r.throughput), _versus(r),
         _verdict(r, rec))
        for i, r in enumerate(p.rows, start=1)
    ]  # fmt: skip
    grids = [Grid(title=title, header=header, rows=rows)]
    if p.checks:
        check_rows: list[tuple[str, ...]] = [
            (c.row.label, format_value(c.row.time_ms), format_value(c.predicted_ms),
             f"{100 * c.rel_error:+.1f}%".replace("-", "−"))
            for c in p.checks
        ]  # fmt: skip
        grids.append(Grid(
            title="training partition: the model's check, each measured candidate at d > 1 "
            "predicted from its 1-rank twin's compute; error: (predicted - measured) / measured",
            header=("d×m×k", "measured ms", "predicted ms", "error"), rows=check_rows,
        ))  # fmt: skip
    if p.prediction_note:
        grids.append(Grid(title="training partition: notes", header=("note",),
                          rows=[(p.prediction_note,)]))  # fmt: skip
    return grids
