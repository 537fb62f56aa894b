"""The top of the HTML report, readable in a few seconds: the verdict (the run's status, its
findings most severe first with their fixes, its errors, what did not finish), what to change
(the run's advice ranked by gain, :mod:`.advice`), the hardware (hosts grouped by what they
have in common), the run's meta and where its time went."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Sequence
from html import escape

from clusterbench.analyses.run import RunAnalysis
from clusterbench.report.advice import ADVICE_HEADER, advice_table
from clusterbench.report.html_tables import Cell, findings_table, table
from clusterbench.report.verdict import verdict_lines
from clusterbench.schema import CpuInfo, ErrorRecord, Finding, GpuInfo, HostInfo, NicInfo, Results
from clusterbench.views.cells import error_where, findings_and_notes

__all__ = [
    "advice_block",
    "hardware_block",
    "meta_block",
    "severity_counts",
    "verdict_block",
    "wall_time_block",
]

_SEVERITIES = ("fail", "warn", "info")
_VERSION_ORDER = ("driver", "nvml_cuda", "cuda", "hip", "torch", "nccl", "python", "kernel")
_HOSTS_LISTED = 4
"""A group of more hosts names its first and last and lists the rest under a fold."""


def severity_counts(findings: Iterable[Finding]) -> str:
    """'2 fail, 1 info' ('' when there are none)."""
    counts: Counter[str] = Counter(f.severity for f in findings)
    return ", ".join(f"{counts[s]} {s}" for s in _SEVERITIES if counts[s])


def _level(results: Results) -> str:
    severities = {f.severity for f in results.findings}
    if results.run.status in ("failed", "interrupted") or results.errors or "fail" in severities:
        return "fail"
    if results.run.status == "running" or results.run.unfinished or "warn" in severities:
        return "warn"
    return "ok"


def verdict_block(analysis: RunAnalysis) -> str:
    """The verdict line, one line per node (healthy, or short of known-good), then the
    findings, errors, and what did not finish or was skipped."""
    results = analysis.results
    run = results.run
    parts = [f"run {run.status}"]
    counts = severity_counts(results.findings)
    parts.append(f"findings: {counts}" if counts else "no findings")
    if results.errors:
        parts.append(f"{len(results.errors)} error{'s' if len(results.errors) != 1 else ''}")
    if run.unfinished:
        parts.append(f"did not finish: {', '.join(run.unfinished)}")
    level = _level(results)
    html = [f'<div class="verdict {level}">{escape(" · ".join(parts))}</div>']
    nodes = verdict_lines(analysis)
    if nodes:
        items = "".join(
            f'<li class="{"healthy" if line.healthy else "short"}">{escape(line.text)}</li>'
            for line in nodes
        )
        html.append(f'<ul class="node-verdicts">{items}</ul>')
    act_on, notes = findings_and_notes(results.findings)
    if act_on:
        html.append(findings_table(act_on))
    elif notes:
        html.append('<p class="no-findings">No findings to act on.</p>')
    if notes:
        n = len(notes)
        html.append(
            f'<details class="notes"><summary>Notes: {n} that need{"s" if n == 1 else ""} no '
            f"action</summary>{findings_table(notes)}</details>"
        )
    if results.errors:
        items = "".join(
            f'<li><span class="err">error</span> {escape(_error_text(e))}</li>'
            for e in results.errors
        )
        html.append(f"<h3>Errors</h3><ul>{items}</ul>")
    lines = [f"did not finish: {', '.join(run.unfinished)}"] if run.unfinished else []
    lines += [f"skipped {name}: {why}" for name, why in run.skipped.items()]
    if lines:
        items = "".join(f"<li>{escape(line)}</li>" for line in lines)
        html.append(f"<h3>Not finished or skipped</h3><ul>{items}</ul>")
    return "".join(html)


def advice_block(run: RunAnalysis) -> str:
    """The ranked advice as a sortable table (the change as code, the gain sorting by the
    speed-up it amounts to), the sentence that none beat the defaults, or '' (left out)."""
    advice = advice_table(run.results, run.advice)
    if not advice.shown:
        return ""
    if not advice.rows:
        return f'<p class="advice-none">{escape(advice.empty)}</p>'
    body = []
    for a, (n, change, gain, basis, evidence, source) in zip(
        advice.advice, advice.rows, strict=True
    ):
        # sorts by the speed-up; a sentence, so not the numbers' right-aligned single line
        speedup = (
            f' data-v="{a.speedup!r}" style="text-align:left;white-space:normal"'
            if a.speedup is not None
            else ""
        )
        body.append(
            f'<tr><td data-v="{n}">{n}</td><td style="min-width:18rem">'
            f'<code style="word-break:normal;overflow-wrap:anywhere">{escape(change)}</code></td>'
            f"<td{speedup}>{escape(gain)}</td><td>{escape(basis)}</td>"
            f"<td>{escape(evidence)}</td><td>{escape(source)}</td></tr>"
        )
    head = "".join(f'<th scope="col">{escape(h)}</th>' for h in ADVICE_HEADER)
    return (
        f'<div class="tbl"><table class="sortable advice"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _error_text(err: ErrorRecord) -> str:
    where = error_where(err)
    return f"{where}: {err.message}" if where else err.message


# --- hardware ---------------------------------------------------------------------------------


def _gpus_text(gpus: Sequence[GpuInfo]) -> str:
    if not gpus:
        return "none"
    counts = Counter(
        f"{g.name} ({g.memory_bytes / (1 << 30):.0f} GiB)" if g.memory_bytes else g.name
        for g in gpus
    )
    return ", ".join(f"{n} × {name}" for name, n in counts.items())


def _cpu_text(cpu: CpuInfo) -> str:
    parts = [cpu.model or "unknown CPU"]
    for count, what in ((cpu.sockets, "socket"), (cpu.cores, "core"), (cpu.threads, "thread")):
        if count:
            parts.append(f"{count} {what}{'s' if count != 1 else ''}")
    if cpu.numa_nodes:
        n = len(cpu.numa_nodes)
        parts.append(f"{n} NUMA node{'s' if n != 1 else ''}")
    return ", ".join(parts)


def _nic_text(nic: NicInfo) -> str:
    rate = f" {nic.rate_gbps:g} Gb/s" if nic.rate_gbps else ""
    state = f" ({nic.state})" if nic.state else ""
    return f"{nic.kind}{rate}{state}"


def _nics_text(nics: Sequence[NicInfo]) -> str:
    if not nics:
        return "none found"
    counts = Counter(_nic_text(n) for n in nics)
    return ", ".join(f"{n} × {what}" for what, n in counts.items())


def _versions_text(versions: dict[str, str]) -> str:
    known = [k for k in _VERSION_ORDER if k in versions]
    rest = sorted(k for k in versions if k not in _VERSION_ORDER)
    names = {"nvml_cuda": "driver CUDA"}
    return " · ".join(f"{names.get(k, k)} {versions[k]}" for k in [*known, *rest])


def _hosts_text(names: list[str]) -> str:
    if len(names) <= _HOSTS_LISTED:
        return ", ".join(names)
    return f"{len(names)} hosts: {names[0]} … {names[-1]}"


def hardware_block(hosts: Sequence[HostInfo]) -> str:
    """One block per group of hosts alike in GPUs, CPU, NICs and versions: a uniform cluster
    is one block, and a host unlike the others stands out as a block of its own, with what
    differs from the first block marked."""
    if not hosts:
        return "<p>No host inventory was recorded.</p>"
    groups: dict[tuple[str, str, str, str], list[str]] = {}
    for h in hosts:
        key = (_gpus_text(h.gpus), _cpu_text(h.cpu), _nics_text(h.nics), _versions_text(h.versions))
        groups.setdefault(key, []).append(h.hostname)
    html = []
    first = next(iter(groups))
    for key, names in groups.items():
        gpus, cpu, nics, versions = key
        rows = [("GPUs", gpus), ("CPU", cpu), ("NICs", nics), ("versions", versions or "none")]
        items = f"<dt>hosts</dt><dd>{escape(_hosts_text(names))}</dd>"
        for n, (k, v) in enumerate(rows):  # what sets a group apart from the first is marked
            css = ' class="differs"' if key[n] != first[n] else ""
            items += f"<dt>{escape(k)}</dt><dd{css}>{escape(v)}</dd>"
        html.append(f'<dl class="meta">{items}</dl>')
        if len(names) > _HOSTS_LISTED:
            listed = escape(", ".join(names))
            html.append(f"<details><summary>all {len(names)} hosts</summary>{listed}</details>")
    return "".join(html)


# --- meta and time ----------------------------------------------------------------------------


def _duration(started: str, finished: str | None) -> str | None:
    if not finished:
        return None
    try:
        seconds = dt.datetime.fromisoformat(finished) - dt.datetime.fromisoformat(started)
    except ValueError:
        return None
    return f"{seconds.total_seconds():,.0f} s"


def meta_block(results: Results) -> str:
    run = results.run
    rows: list[tuple[str, str]] = [
        ("run", run.id),
        ("suite", run.suite),
        ("status", run.status),
        ("started", run.started),
        ("finished", run.finished or "-"),
    ]
    duration = _duration(run.started, run.finished)
    if duration:
        rows.append(("wall time", duration))
    nodes = "node" if run.num_nodes == 1 else "nodes"
    ranks = "rank" if run.world_size == 1 else "ranks"
    rows += [
        ("world size", f"{run.world_size} {ranks} on {run.num_nodes} {nodes}, {run.backend}"),
        ("tool", f"{results.tool.name} {results.tool.version}"),
    ]
    items = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in rows)
    command = f"<dt>command</dt><dd><code>{escape(run.command)}</code></dd>"
    return f'<dl class="meta">{items}{command}</dl>'


def wall_time_block(results: Results) -> str:
    """Each benchmark's wall time (``run.benchmark_seconds``), slowest first; '' when the run
    recorded none."""
    seconds = results.run.benchmark_seconds
    if not seconds:
        return ""
    total = sum(seconds.values())
    rows: list[list[Cell]] = [
        [
            name,
            (f"{s:,.1f}", s),
            (f"{s / total:.0%}" if total else "-", s / total if total else None),
        ]
        for name, s in sorted(seconds.items(), key=lambda item: -item[1])
    ]
    title = f"Where the time went: {total:,.1f} s in {len(seconds)} benchmarks"
    return table(("benchmark", "wall time, s", "share"), rows, title=title)
