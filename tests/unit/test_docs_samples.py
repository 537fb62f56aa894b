"""The console samples in the docs are of today's format.

A fenced block in the docs (or the README) that shows the summary a command prints is marked
on the line before it with the command it is of::

    <!-- console-sample: clusterbench run -->

Samples may be abridged (``...`` lines) and are wrapped at 80 columns, as a terminal shows
them.  Each fixed-form line of a marked sample (the header, the time line, the findings' count
or its absence, the notes' count, what was skipped or did not finish, where the results went)
must have the shape the console prints today.  Each shape is first matched against the summary
that today's code renders of a synthetic run, so that a shape the code no longer prints fails
here instead of passing the old samples.  Every block with a line of a summary is marked.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console

from clusterbench import catalog
from clusterbench.analyses.run import RunAnalysis, analyze
from clusterbench.report.console import render_summary
from clusterbench.schema import Results
from tests.synthetic_cluster import cluster_results

catalog.register_builtin()

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
MARK = re.compile(r"<!-- console-sample: (clusterbench [\w-]+(?: [^>]*?)?) -->")
HEADER = re.compile(r"^clusterbench run \S+ · suite ")
"""The first line of a run's summary (a command line starts alike)."""

SHAPES: dict[str, re.Pattern[str]] = {
    "clusterbench run ": re.compile(
        r"clusterbench run \S+ · suite [\w-]+ · world size \d+ · \d+ nodes? · "
        r"backend \w+ · status (completed|failed|interrupted|running)"
    ),
    "time: ": re.compile(r"time: .+ \(total [\d.,]+ s of an? [\d.,]+ s run\)"),
    "Findings: ": re.compile(r"Findings: \d+ (fail|warn)(, \d+ warn)?"),
    "Notes: ": re.compile(r"Notes: \d+ info"),
    "No findings": re.compile(r"No findings( to act on)?\."),
    "notes": re.compile(
        r"\d+ notes? that needs? no action: in summary\.md and report\.html "
        r"\(--verbose prints them\)"
    ),
    "Skipped: ": re.compile(r"Skipped: [\w.-]+: .+"),
    "Did not finish: ": re.compile(r"Did not finish: [\w.-]+(, [\w.-]+)*"),
    "results: ": re.compile(r"results: .+"),
    "compare ": re.compile(
        r"compare (run \S+ \([\w-]+(, [^)]+)?\)|fleet baseline \S+|the built-in baseline) -> "
        r"run \S+ \([\w-]+(, [^)]+)?\) · matched by (host and device|GPU index and model) · "
        r"\d+ earlier runs? in the history( \(the run-to-run noise needs \d+\))?"
    ),
    "Verdict: ": re.compile(
        r"Verdict: (no regression beyond the noise(, but \d+ change\(s\) beyond the practical "
        r"limit with the noise unknown, \d+ of them worse: 3 or more earlier runs in the "
        r"history judge them)?|(FAIL|WARN), \d+ regressions? \(\d+ fail\) in [\w, ]+)"
        r"(( \(|; )false alarms held at [\d.]+% over \d+ judged rows\)?)?"
    ),
    "Not listed: ": re.compile(r"Not listed: \d+ .+; --all lists them"),
}
"""The start of a fixed-form line -> the whole (unwrapped) line's shape today."""
_NOTES = re.compile(r"^\d+ notes? ")


@dataclass(frozen=True)
class Sample:
    path: Path
    line: int
    command: str
    lines: list[str]

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line} ({self.command})"


def blocks(path: Path) -> list[tuple[int, str | None, list[str]]]:
    """Each fenced block of ``path``: its first line's number, the command its mark names
    (None: unmarked) and its lines."""
    text = path.read_text(encoding="utf-8").splitlines()
    found: list[tuple[int, str | None, list[str]]] = []
    i = 0
    while i < len(text):
        if text[i].startswith("```"):
            end = next((j for j in range(i + 1, len(text)) if text[j].startswith("```")), None)
            assert end is not None, f"{path}:{i + 1}: a fence that is not closed"
            previous = text[i - 1].strip() if i else ""
            mark = MARK.fullmatch(previous)
            found.append((i + 1, mark.group(1) if mark else None, text[i + 1 : end]))
            i = end
        i += 1
    return found


def samples() -> list[Sample]:
    return [
        Sample(path, line, command, lines)
        for path in DOCS
        for line, command, lines in blocks(path)
        if command is not None
    ]


def kind_of(line: str) -> str | None:
    if _NOTES.match(line):
        return "notes"
    if line.startswith("clusterbench run ") and not HEADER.match(line):
        return None  # a command line, not the summary's header
    return next((start for start in SHAPES if line.startswith(start)), None)


def misplaced(lines: list[str]) -> list[str]:
    """The findings listed under the wrong heading: today 'Findings:' lists those to act on
    (fail, warn) and 'Notes:' (--verbose) the info ones."""
    heading, wrong = "", []
    for line in lines:
        if line.startswith(("Findings: ", "Notes: ")):
            heading = line.split(":")[0]
        severity = line.split(" ", 1)[0]
        listed = severity in ("FAIL", "WARN", "INFO") and heading
        if listed and (severity == "INFO") != (heading == "Notes"):
            wrong.append(f"{severity} under {heading}: {line}")
    return wrong


def fixed_lines(lines: list[str]) -> list[tuple[str, str]]:
    """(kind, the whole line) of each fixed-form line: a line wrapped at 80 columns is joined
    with the lines that continue it, until it has its shape (at most 3 lines)."""
    out: list[tuple[str, str]] = []
    for i, line in enumerate(lines):
        kind = kind_of(line)
        if kind is None:
            continue
        whole = line.rstrip()
        for more in lines[i + 1 : i + 3]:
            if SHAPES[kind].fullmatch(whole) or not more.strip() or kind_of(more):
                break
            whole = f"{whole} {more.strip()}"
        out.append((kind, whole))
    return out


def rendered(results: Results) -> list[str]:
    run = RunAnalysis(results)
    results.findings = [*results.findings, *analyze(run)]
    buf = io.StringIO()
    render_summary(run, Console(file=buf, width=80, color_system=None))
    return buf.getvalue().splitlines()


def today() -> list[tuple[str, str]]:
    """The fixed-form lines the console prints today: a synthetic 2-node run with findings to
    act on, and the same run with notes only, a benchmark skipped and one unfinished."""
    results = cluster_results(num_hosts=2, gpus_per_host=2)
    results.run.benchmark_seconds = {"gemm": 2.2, "memory": 0.15}
    acted = rendered(results.model_copy(deep=True))
    quiet = results.model_copy(deep=True)
    quiet.findings = [f for f in quiet.findings if f.severity == "info"]
    quiet.run.status = "interrupted"
    quiet.run.unfinished = ["training"]
    quiet.run.skipped = {"telemetry": "no NVML: CPU workers"}
    run = RunAnalysis(quiet)
    buf = io.StringIO()
    render_summary(run, Console(file=buf, width=80, color_system=None), verbose=True)
    verbose = buf.getvalue().splitlines()
    assert misplaced(acted) == [] and misplaced(verbose) == []
    buf = io.StringIO()
    render_summary(run, Console(file=buf, width=80, color_system=None))
    quiet_lines = [*buf.getvalue().splitlines(), "results: r.json"]
    return fixed_lines(acted) + fixed_lines(verbose) + fixed_lines(quiet_lines) + compared()


def compared() -> list[tuple[str, str]]:
    """The fixed-form lines of today's comparisons: no change with three earlier runs, a
    regression they judge, and changes whose noise is unknown."""
    from clusterbench.analyses.compare.comparison import compare
    from clusterbench.report.compare import render_comparison
    from clusterbench.thresholds import Thresholds
    from tests.unit.test_compare import meas, results, samples

    steady = [results(meas(v), run_id=f"p{i}") for i, v in enumerate((788.0, 792.0, 790.0))]
    base = results(meas(790.0, values=samples(790.0)))
    out: list[tuple[str, str]] = []
    for new, previous in (
        (790.0, steady),
        (600.0, steady),
        (600.0, []),
    ):
        c = compare(base, results(meas(new), run_id="n"), Thresholds(), previous=previous)
        buf = io.StringIO()
        render_comparison(c, Console(file=buf, width=80, color_system=None))
        out += fixed_lines(buf.getvalue().splitlines())
    return out


def test_every_shape_is_what_the_console_prints_today() -> None:
    seen = today()
    for kind, shape in SHAPES.items():
        lines = [whole for k, whole in seen if k == kind]
        assert lines, f"today's summary printed no {kind!r} line"
        assert all(shape.fullmatch(whole) for whole in lines), (kind, lines)


def test_every_summary_sample_in_the_docs_is_marked() -> None:
    """A block with a line of the summary (its header, time, findings, what was skipped or
    did not finish) is a sample of it, and marked."""
    unmarked = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in DOCS
        for line, command, lines in blocks(path)
        if command is None and any(kind_of(x) not in (None, "results: ") for x in lines)
    ]
    assert unmarked == []
    assert any(s.path.name == "getting-started.md" for s in samples())


@pytest.mark.parametrize("sample", samples(), ids=str)
def test_the_sample_is_of_todays_format(sample: Sample) -> None:
    fixed = fixed_lines(sample.lines)
    assert fixed, f"{sample}: no line of a summary"
    wrong = [whole for kind, whole in fixed if not SHAPES[kind].fullmatch(whole)]
    assert wrong + misplaced(sample.lines) == [], f"{sample}: not as the console prints today"
