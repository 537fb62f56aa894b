"""The drain list (:func:`clusterbench.analyses.drain.drain_list.drain_list`) for people and
tools: the console's last lines, a section of summary.md, and ``drain.json`` beside results.json.

Shown wherever node pairs among three or more nodes were judged; an empty list is said so
("Drain list: empty"), since no false alarm is an answer too.
"""

from __future__ import annotations

import dataclasses
import json
from html import escape
from typing import Any

from clusterbench.analyses.drain.drain_list import DrainEntry, DrainList, PairEvidence
from clusterbench.judging.node_pairs import format_pair_value

__all__ = [
    "DRAIN_FILE",
    "drain_json",
    "drain_lines",
    "drain_markdown",
]

DRAIN_FILE = "drain.json"
_HOSTS_LEFT = {
    "mpi": "hostfile for mpirun without the drained nodes:",
    "slurm": "nodes left (drained nodes are no longer allocated):",
    "kubernetes": "nodes left (cordoned nodes take no new pods):",
}


def _plans_text(dl: DrainList) -> str:
    parts = []
    for p in dl.plans:
        rounds = f"{p.get('rounds')} rounds"
        if p.get("strategy") == "sparse":
            rounds += f" where all pairs take {p.get('all_pairs_rounds')}"
        parts.append(f"{p.get('benchmark')}: {p.get('strategy')}, {rounds}, "
                     f"{float(p.get('seconds') or 0):.1f} s")  # fmt: skip
    return "; ".join(parts)


def _counts(dl: DrainList) -> str:
    nodes, links = len(dl.nodes), len(dl.links)
    out = []
    if nodes:
        out.append(f"{nodes} node{'s' if nodes > 1 else ''} to drain")
    if links:
        out.append(f"{links} link{'s' if links > 1 else ''} to check")
    return ", ".join(out)


def headline(dl: DrainList) -> str:
    """'Drain list: 1 node to drain (launcher torchrun; ...)' or 'Drain list: empty (...)'."""
    plans = _plans_text(dl)
    judged = f"{len(dl.hosts)} nodes judged" + (f"; node pairs: {plans}" if plans else "")
    if not dl.entries:
        return f"Drain list: empty: no bad node or link ({judged})."
    return f"Drain list: {_counts(dl)} (launcher {dl.launcher}; {judged})."


def _evidence_text(e: PairEvidence) -> str:
    pairs = ", ".join(f"{p} {format_pair_value(v)}" for p, v in e.slow_pairs.items())
    retests = f"; re-tests against nodes known good: {', '.join(e.retests)}" if e.retests else ""
    return (
        f"{e.measured}: {pairs} {e.unit} against the healthy pairs' "
        f"{format_pair_value(e.healthy_median)} {e.unit}{retests}"
    )


def _entry_lines(entry: DrainEntry, dl: DrainList) -> list[str]:
    if entry.kind == "node":
        head = f"node {entry.nodes[0]}: {entry.reason}"
    else:
        head = f"link {'-'.join(entry.nodes)}: {entry.reason} (neither node is drained)"
    lines = [head, *(f"  {_evidence_text(e)}" for e in entry.evidence)]
    lines += [f"  $ {c}" for c in entry.commands]
    if entry.kind == "link":
        lines.append(f"  check: {entry.check}")
    return lines


def _hosts_note(dl: DrainList) -> str:
    return _HOSTS_LEFT.get(dl.launcher, "start the run on the nodes left:")


def drain_lines(dl: DrainList) -> list[str]:
    """The console's drain list: a headline, each entry with its evidence and commands, and the
    hosts left when a node is drained."""
    if not dl.judged:
        return []
    lines = [headline(dl)]
    for entry in dl.entries:
        lines += [f"  {line}" for line in _entry_lines(entry, dl)]
    if dl.nodes:
        lines += [f"  {_hosts_note(dl)} {' '.join(dl.hostfile)}"]
    return lines


def drain_markdown(dl: DrainList) -> str:
    """summary.md's section ('' when no node pairs were judged)."""
    if not dl.judged:
        return ""
    parts = ["## Drain list", headline(dl)]
    for entry in dl.entries:
        head, *rest = _entry_lines(entry, dl)
        parts.append(
            f"- **{head}**\n" + "\n".join(f"  - {line.strip()}" for line in rest if line.strip())
        )
    if dl.nodes:
        parts.append(_hosts_note(dl) + "\n\n```\n" + "\n".join(dl.hostfile) + "\n```")
    return "\n\n".join(parts)


def drain_html(dl: DrainList) -> str:
    """report.html's block ('' when no node pairs were judged): the headline, each entry with
    its evidence, its commands in a code block, and the hosts left when a node is drained."""
    if not dl.judged:
        return ""
    parts = [f"<p>{escape(headline(dl))}</p>"]
    for entry in dl.entries:
        head, *rest = _entry_lines(entry, dl)
        facts = [r.strip() for r in rest if r.strip() and not r.strip().startswith("$ ")]
        items = "".join(f"<li>{escape(f)}</li>" for f in facts)
        cmds = "\n".join(escape(c) for c in entry.commands)
        code = f"<pre><code>{cmds}</code></pre>" if cmds else ""
        parts.append(
            f'<div class="drain-entry"><p><b>{escape(head)}</b></p><ul>{items}</ul>{code}</div>'
        )
    if dl.nodes:
        hosts = "\n".join(escape(h) for h in dl.hostfile)
        parts.append(f"<p>{escape(_hosts_note(dl))}</p><pre><code>{hosts}</code></pre>")
    return "".join(parts)


def drain_json(dl: DrainList) -> str:
    """drain.json: every entry with its evidence and commands, the hosts left, the plans."""
    body: dict[str, Any] = {
        "empty": not dl.entries,
        "summary": headline(dl),
        **dataclasses.asdict(dl),
    }
    return json.dumps(body, indent=2) + "\n"
