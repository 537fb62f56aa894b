"""The run's scaling prediction in the summary (and beside its curves in report.html), when
training and collectives both ran: the predictions at the default GPU counts, the model's
check on the run's own larger world sizes, the links and the workload it rests on, and what
was assumed.  Every row resting on an assumption is marked ``*``.

The prediction belongs to no one benchmark: :func:`clusterbench.analyses.run.summary_sections`
appends this section after the benchmarks' own (``section(results)``, not measurements).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusterbench.analyses.prediction.findings import signed_pct, sizes_text
from clusterbench.analyses.prediction.inputs import Link
from clusterbench.analyses.prediction.predict import (
    NIC_CEILING_GBPS,
    OUT_OF_REACH,
    Prediction,
)
from clusterbench.schema import Results
from clusterbench.views.cells import Grid, Section, format_value

if TYPE_CHECKING:
    from clusterbench.analyses.view import RunView

__all__ = [
    "NAME",
    "assumptions_grid",
    "links_grid",
    "predictions_grid",
    "section",
    "validation_grid",
    "workload_grid",
]

NAME = "prediction"
"""The section's (and its plots') name in the summary and report.html."""
_MISSING = "-"


def section(results: Results, run: RunView) -> Section | None:
    """The tables of the run's one prediction (None: it does not apply)."""
    got = run.prediction
    if got is None:
        return None
    if isinstance(got, str):
        reason = Grid(title="prediction: not made", header=("why",), rows=[(got,)])
        return Section(NAME, grids=[reason])
    grids = [predictions_grid(got), validation_grid(got), links_grid(got), workload_grid(got)]
    assumed = assumptions_grid(got)
    return Section(NAME, grids=grids + ([assumed] if assumed is not None else []))


def _pct(value: float) -> str:
    return format_value(100 * value)


def _range(low: float, high: float) -> str:
    return f"{format_value(low)}–{format_value(high)}"


def predictions_grid(p: Prediction) -> Grid:
    s, unit = p.series, p.series.unit
    title = (
        f"prediction: weak scaling of {s.model} {s.strategy} at {p.gpus_per_node} {unit}s per "
        f"node ({p.gpus_per_node_source}), inter-node {p.inter_node_gbps:,.0f} Gb/s per node "
        f"({p.inter.kind}); band: {p.confidence:.0%} prediction interval of the link fits; "
        "comm.: exposed communication, share of the step; Gb/s for "
        f"{p.target_efficiency:.0%}: the inter-node bandwidth per node that keeps the "
        "efficiency there; * rests on an assumption"
    )
    if any(r.needed_gbps is None and r.needed_note == OUT_OF_REACH for r in p.rows):
        title += f"; {OUT_OF_REACH}"
    if any(r.beyond_nics for r in p.rows):
        title += f"; beyond NICs: more than {NIC_CEILING_GBPS:,.0f} Gb/s per node (8 x 800 Gb/s)"
    target = f"{p.target_efficiency:.0%}"
    header = (f"{unit}s", "strategy", "step ms", "band ms", "comm. %", "eff. %", "band %",
              f"Gb/s for {target}")  # fmt: skip
    rows: list[tuple[str, ...]] = []
    for r in p.rows:
        st = r.step
        needed = f"{r.needed_gbps:,.0f}" if r.needed_gbps is not None else r.needed_note
        needed = "out of reach" if needed == OUT_OF_REACH else needed
        needed += " (beyond NICs)" if r.beyond_nics else ""
        rows.append((
            f"{r.world_size}{'*' if r.assumed else ''}", r.strategy, format_value(1e3 * st.step_s),
            _range(1e3 * st.step_low_s, 1e3 * st.step_high_s), _pct(st.comm_share),
            _pct(st.efficiency), _range(100 * st.efficiency_low, 100 * st.efficiency_high),
            needed,
        ))  # fmt: skip
    return Grid(title=title, header=header, rows=rows)


def validation_grid(p: Prediction) -> Grid:
    unit = p.series.unit
    v = p.validation
    if v is None:
        return Grid(
            title="prediction: validation on the run's world sizes",
            header=("not checked",),
            rows=[(p.validation_reason,)],
        )
    title = (
        f"prediction: validation, the model ({p.series.modelled}) fitted on "
        f"{sizes_text(list(v.fit_sizes))} {unit}s (compute {format_value(1e3 * v.compute_s)} "
        "ms), the larger sizes the run measured predicted; error: (predicted - measured) / "
        "measured"
    )
    rows: list[tuple[str, ...]] = [
        (str(pt.world_size), format_value(1e3 * pt.measured_s), format_value(1e3 * pt.predicted_s),
         signed_pct(pt.rel_error))
        for pt in v.points
    ]  # fmt: skip
    header = (f"{unit}s", "measured ms", "predicted ms", "error")
    return Grid(title=title, header=header, rows=rows)


def _link_row(link: Link, used: bool) -> tuple[str, ...]:
    f = link.fit
    measured = link.kind == "measured"
    busbw_se = f.busbw_gbps * f.beta_stderr_s_per_byte / f.beta_s_per_byte
    return (
        f"{link.level}-node" + (f" {link.group}" if link.group else ""),
        link.kind,
        str(f.p) if measured else _MISSING,
        format_value(1e6 * f.alpha_s),
        format_value(1e6 * f.alpha_stderr_s) if measured else _MISSING,
        format_value(f.busbw_gbps),
        format_value(busbw_se) if measured else _MISSING,
        format_value(100 * f.rel_sigma) if measured else _MISSING,
        "yes" if used else "no",
    )


def links_grid(p: Prediction) -> Grid:
    used = [link for link in (p.intra, p.inter) if link is not None]
    rows = [_link_row(link, any(link is u for u in used)) for link in p.fits]
    rows += [_link_row(link, True) for link in used if link.kind != "measured"]
    title = (
        "prediction: links, alpha-beta fits of the back-to-back all_reduce sweeps (the slowest "
        "of each level is used); busbw = 1/beta; ±: standard error; resid. σ: the fit's "
        "relative residual; inter-node: one rail of a node"
    )
    header = ("link", "from", "ranks", "α us", "± us", "busbw GB/s", "± GB/s", "resid. σ %",
              "used")  # fmt: skip
    return Grid(title=title, header=header, rows=rows)


def workload_grid(p: Prediction) -> Grid:
    rows: list[tuple[str, ...]] = [
        ("compute per step", f"{format_value(1e3 * p.compute.value)} ms", p.compute.source),
        ("gradient bytes", f"{format_value(p.grad_bytes.value / 1e6)} MB", p.grad_bytes.source),
        ("overlap", f"{_pct(p.overlap.value)} %", p.overlap.source),
    ]
    return Grid(
        title="prediction: the workload, per GPU and step (weak scaling: it stays)",
        header=("input", "value", "from"),
        rows=rows,
    )


def assumptions_grid(p: Prediction) -> Grid | None:
    lines = p.assumptions() + [f"note: {n}" for n in p.notes]
    if not lines:
        return None
    rows = [tuple(line.split(": ", 1)) if ": " in line else (line, "") for line in lines]
    return Grid(
        title="prediction: assumed (the rows marked * rest on these) and notes",
        header=("what", "value and source"),
        rows=[(r[0], r[1] if len(r) > 1 else "") for r in rows],
    )
