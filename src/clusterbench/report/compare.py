"""A comparison of two runs (or a run and a baseline): console and markdown.

In the terminal: the verdict in one line, the regressions grouped by benchmark (at most ten
rows each, worst first) and the rest counted; ``show_all`` lists every row with its noise and
the regression findings.  Then what changed in the runs' metadata.  The markdown lists every
changed row.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from clusterbench.analyses.compare.comparison import Comparison, ComparisonRow, RunRef
from clusterbench.analyses.compare.rule import MIN_RUNS
from clusterbench.report.console import print_findings, severity_counts
from clusterbench.schema import ParamValue
from clusterbench.units import format_bytes
from clusterbench.views.cells import format_value, sorted_findings

__all__ = ["comparison_markdown", "render_comparison", "rest_line", "row_cells", "verdict_line"]

HEADER = ("figure", "params", "where", "unit", "base", "new", "change", "verdict", "noise")
_ORDER = {"regression": 0, "improvement": 1, "new": 2, "missing": 3, "unchanged": 4}
_VERDICT_STYLE = {
    "regression": "bold red",
    "improvement": "green",
    "new": "cyan",
    "missing": "yellow",
    "unchanged": "dim",
}


def _side(ref: RunRef) -> str:
    if ref.kind == "builtin":
        return "the built-in baseline"
    if ref.kind == "baseline":
        return f"fleet baseline {ref.id}"
    when = f", {ref.started}" if ref.started else ""
    return f"run {ref.id} ({ref.suite}{when})"


def header_line(c: Comparison) -> str:
    match = "GPU index and model" if c.match == "gpu" else "host and device"
    runs = "run" if c.num_previous == 1 else "runs"
    noise = f" · {c.num_previous} earlier {runs} in the history"
    if c.num_previous < MIN_RUNS:
        noise += f" (the run-to-run noise needs {MIN_RUNS})"
    return f"compare {_side(c.base)} -> {_side(c.new)} · matched by {match}{noise}"


_REASONS = {
    "within_limit": "within the practical limit",
    "inside_noise": "beyond it but inside the noise",
    "noise_unknown": "beyond it with the noise unknown",
    "not_judged": "not judged (no better side, or a tail)",
}


def _unknown(r: ComparisonRow) -> bool:
    """A change beyond the practical limit whose noise is unknown: not judged, so not
    'unchanged' either."""
    return r.verdict == "unchanged" and r.reason == "noise_unknown"


def counts_line(c: Comparison) -> str:
    """'0 regression, 1 improvement, ..., 40 unchanged, 2 noise unknown': changes beyond the
    practical limit whose noise is unknown are counted apart from the unchanged rows."""
    counts = c.counts()
    unknown = sum(_unknown(r) for r in c.rows)
    counts["unchanged"] -= unknown
    parts = [f"{n} {verdict}" for verdict, n in counts.items()]
    return ", ".join([*parts, f"{unknown} noise unknown"] if unknown else parts)


def unchanged_line(c: Comparison) -> str:
    """'571 unchanged: 320 within the practical limit, ...' ('' when none is unchanged); the
    changes whose noise is unknown are not among them."""
    unchanged = [r for r in c.rows if r.verdict == "unchanged" and not _unknown(r)]
    if not unchanged:
        return ""
    parts = []
    for reason, text in _REASONS.items():
        n = sum(r.reason == reason for r in unchanged)
        if n:
            parts.append(f"{n} {text}")
    return f"{len(unchanged)} unchanged: " + ", ".join(parts)


def _unknown_and_worse(c: Comparison) -> tuple[int, int]:
    """How many changes beyond the practical limit have their noise unknown, and how many of
    those are worse."""
    unknown = [r for r in c.rows if _unknown(r)]
    worse = sum(1 for r in unknown if r.change and (r.change < 0) == (r.direction != "lower"))
    return len(unknown), worse


def no_regressions_line(c: Comparison, *, show_all: bool = False) -> str:
    """'No regressions.', or, with changes whose noise is unknown, how many (and how many of
    them are worse) and how to judge them."""
    unknown, worse = _unknown_and_worse(c)
    if not unknown:
        return "No regressions."
    listed = "listed above" if show_all else "--all lists them"
    return (
        f"No regressions beyond the noise, but {unknown} change(s) beyond the practical "
        f"limit with the noise unknown, {worse} of them worse ({listed}): 3 or more earlier "
        "runs in the history, or repeats in each run, judge them"
    )


def shown_rows(c: Comparison, *, show_all: bool) -> list[ComparisonRow]:
    """The rows a comparison lists: every changed, new or missing row (``show_all``: the
    unchanged ones and those whose noise is unknown too)."""
    rows = [r for r in c.rows if show_all or r.verdict != "unchanged"]
    fail_first = {"fail": 0, "warn": 1, None: 2}
    return sorted(rows, key=lambda r: (_ORDER[r.verdict], fail_first[r.severity]))


def _params_text(params: dict[str, ParamValue]) -> str:
    parts = []
    for key, value in params.items():
        if value is None:
            continue
        if key.endswith("_bytes") and isinstance(value, int) and not isinstance(value, bool):
            parts.append(f"{key.removesuffix('_bytes')}={format_bytes(value)}")
        else:
            parts.append(f"{key}={value}")
    return " ".join(parts)


def _where(r: ComparisonRow, c: Comparison) -> str:
    if c.match == "gpu" and r.gpu:
        return f"{r.device} {r.gpu}".strip()
    if not r.host:
        return r.gpu or ""
    where = f"{r.host}/{r.device}"
    return f"{r.base_host} -> {where}" if r.base_host else where


def _verdict(r: ComparisonRow) -> str:
    if _unknown(r):
        return "noise unknown"
    return f"{r.verdict} ({r.severity})" if r.severity else r.verdict


def row_cells(r: ComparisonRow, c: Comparison) -> tuple[str, ...]:
    change = f"{r.change:+.1%}" if r.change is not None else "-"
    return (
        r.name,
        _params_text(r.params),
        _where(r, c),
        r.unit,
        format_value(r.base, r.unit),
        format_value(r.new, r.unit),
        change,
        _verdict(r),
        r.noise,
    )


_CONSOLE_HEADER = ("figure", "where", "base", "new", "change", "verdict", "noise")


GROUP_ROWS = 10
"""Regressions listed per benchmark by default (worst first; ``--all`` lists every row)."""


def verdict_line(c: Comparison) -> str:
    """One sentence: the regressions (how many fail, in which benchmarks), or none, and how
    the false alarms were held."""
    regressions = [r for r in c.rows if r.verdict == "regression"]
    judged = sum(r.p_value is not None for r in c.rows)
    level = f"{c.false_alarms * 100:g}%" if c.false_alarms is not None else ""
    held = f"false alarms held at {level} over {judged} judged rows" if judged and level else ""
    if not regressions:
        text = "no regression beyond the noise"
        unknown, worse = _unknown_and_worse(c)
        if unknown:
            text += (
                f", but {unknown} change(s) beyond the practical limit with the noise "
                f"unknown, {worse} of them worse: 3 or more earlier runs in the history judge them"
            )
        return f"Verdict: {text} ({held})" if held else f"Verdict: {text}"
    fail = sum(r.severity == "fail" for r in regressions)
    benchmarks = sorted({r.benchmark for r in regressions})
    word = "FAIL" if fail else "WARN"
    count = f"{len(regressions)} regression" + ("s" if len(regressions) > 1 else "")
    return f"Verdict: {word}, {count} ({fail} fail) in {', '.join(benchmarks)}" + (
        f"; {held}" if held else ""
    )


def rest_line(c: Comparison) -> str:
    """The rows a default listing leaves out, counted: 'Not listed: 3 improvement, 1 new,
    575 unchanged (...)' ('' when it leaves out none)."""
    counts = c.counts()
    unknown = sum(_unknown(r) for r in c.rows)
    counts["unchanged"] -= unknown
    parts = []
    for verdict, n in counts.items():
        if verdict == "regression" or not n:
            continue
        if verdict == "unchanged":
            parts.append(unchanged_line(c).replace(" unchanged: ", " unchanged (", 1) + ")")
        else:
            parts.append(f"{n} {verdict}")
    if unknown:
        parts.append(f"{unknown} noise unknown")
    return "Not listed: " + ", ".join(parts) + "; --all lists them" if parts else ""


def render_comparison(
    c: Comparison, console: Console, *, show_all: bool = False, findings: bool = True
) -> None:
    """The comparison in the terminal: the header and the verdict; then by default the
    regressions grouped by benchmark (at most :data:`GROUP_ROWS` each, worst first) and a
    count of the rest; ``show_all`` lists every row with its noise and the findings
    (``findings`` False: the regression findings are printed elsewhere, e.g. with the run's)."""
    console.print(Text(header_line(c), style="bold"), soft_wrap=True)
    if c.note:
        console.print(c.note, soft_wrap=True)
    if not c.rows:
        return
    console.print(Text(verdict_line(c), style="bold"), soft_wrap=True)
    if show_all:
        console.print(_console_table(shown_rows(c, show_all=True), c, noise=True))
        console.print(Text("rows: ", style="bold") + Text(counts_line(c)))
        if findings:
            print_findings(c.findings, console, title="Regressions",
                           none=no_regressions_line(c, show_all=True))  # fmt: skip
    else:
        _print_groups(c, console)
        rest = rest_line(c)
        if rest:
            console.print(rest, soft_wrap=True)
        fixes = dict.fromkeys(f.fix for f in c.findings if f.fix)
        for fix in fixes if findings else ():
            console.print(Text("fix: ", style="bold") + Text(fix), soft_wrap=True)
    if not findings and c.findings:
        console.print(f"Regressions: {severity_counts(c.findings)} (with the findings above)")
    _print_metadata(c, console)


def _print_groups(c: Comparison, console: Console) -> None:
    """The regressions by benchmark, worst benchmark first, at most :data:`GROUP_ROWS` rows
    each (fail before warn, then the largest change), 'and N more' below."""
    groups: dict[str, list[ComparisonRow]] = {}
    for r in c.rows:
        if r.verdict == "regression":
            groups.setdefault(r.benchmark, []).append(r)

    def worst(r: ComparisonRow) -> tuple[int, float]:
        return (0 if r.severity == "fail" else 1, -abs(r.change or 0.0))

    for benchmark, rows in sorted(groups.items(), key=lambda g: min(map(worst, g[1]))):
        rows.sort(key=worst)
        fail = sum(r.severity == "fail" for r in rows)
        title = f"{benchmark}: {len(rows)} regression" + ("s" if len(rows) > 1 else "")
        console.print(Text(f"{title} ({fail} fail)", style="bold red"))
        console.print(_console_table(rows[:GROUP_ROWS], c, noise=False))
        if len(rows) > GROUP_ROWS:
            console.print(f"  and {len(rows) - GROUP_ROWS} more (--all lists them)")


def _console_table(rows: list[ComparisonRow], c: Comparison, *, noise: bool) -> Table:
    # The figure and its params share a cell (unit in brackets), the noise note wraps: the
    # numbers and the verdict stay on one line each.
    table = Table(header_style="bold", box=box.SIMPLE_HEAD)
    header = _CONSOLE_HEADER if noise else _CONSOLE_HEADER[:-1]
    for name in header:
        wraps = name in ("figure", "noise")
        justify: Literal["left", "right"] = "right" if name in ("base", "new", "change") else "left"
        table.add_column(name, justify=justify, no_wrap=not wraps, ratio=3 if wraps else None)
    for r in rows:
        name, params, where, unit, base, new, change, verdict, note = row_cells(r, c)
        figure = f"{name} [{unit}]" + (f" {params}" if params else "")
        verdict_text = Text(verdict, style=_VERDICT_STYLE[r.verdict])
        cells: list[Text | str] = [Text(figure), Text(where), base, new, change, verdict_text]
        table.add_row(*cells, *([Text(note)] if noise else []))
    return table


def _print_metadata(c: Comparison, console: Console) -> None:
    if c.base.kind != "run":
        return
    if not c.metadata:
        console.print("Run metadata: nothing changed (versions, GPUs, nodes, config).")
        return
    console.print(Text("What changed between the runs:", style="bold"))
    for change in c.metadata:
        console.print(Text(f"  {change}"), soft_wrap=True)


def _md_cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_md_cell(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def comparison_markdown(c: Comparison, *, show_all: bool = False) -> str:
    """The comparison as GitHub-flavoured markdown."""
    parts = ["## Comparison", header_line(c)]
    if c.note:
        parts.append(c.note)
    rows = shown_rows(c, show_all=show_all)
    if rows:
        parts.append(_md_table(HEADER, (row_cells(r, c) for r in rows)))
    parts.append(f"Rows: {counts_line(c)}")
    if c.count("unchanged"):
        parts.append(unchanged_line(c) + ("" if show_all else " (not listed)"))
    findings = sorted_findings(c.findings)
    if findings:
        lines = [
            f"- **{f.severity}** `{f.id}` {f.scope}: {f.message} Fix: {f.fix}" for f in findings
        ]
        parts.append("### Regressions\n\n" + "\n".join(lines))
    else:
        parts.append(no_regressions_line(c, show_all=show_all))
    if c.base.kind == "run":
        changed = "\n".join(f"- {m}" for m in c.metadata) or "Nothing changed."
        parts.append("### What changed between the runs\n\n" + changed)
    return "\n\n".join(parts) + "\n"
