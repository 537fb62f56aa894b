"""The verdict of a run, one line per node: healthy, or what falls short of known-good and by
how much (pure functions).

A node is **healthy** when none of its figures falls short of the built-in baseline's
known-good figure for its GPU model (the rule of ``--baseline builtin``: more than the practical
limit below it), no finding about the node is a warning or a failure, and none of its ranks
failed.  The line gives each known-good figure as a share of it, the worst device's:
``node gpu-17: healthy: GEMM bf16 101%, HBM copy 100%, H2D 99% of a known-good NVIDIA H200``.
Where the baseline holds no figure for the node's devices (CPU workers, a GPU it does not
know), the line says so and judges the findings alone.  Findings about no one node (``run``, a
pair of nodes) are counted on a line of their own.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from clusterbench import registry
from clusterbench.analyses.baseline import Baseline, compare_baseline
from clusterbench.analyses.compare.comparison import ComparisonRow
from clusterbench.schema import Finding, Results
from clusterbench.thresholds import run_thresholds

__all__ = [
    "NodeVerdict",
    "Share",
    "node_verdicts",
    "other_findings_line",
    "several_judgement",
    "share_label",
]

ACT_ON = ("fail", "warn")
"""Severities a user acts on; a node with findings of these is not healthy."""


@dataclass(frozen=True, slots=True)
class Share:
    """One known-good figure of a node: the worst device's value as a share of it."""

    group: str
    """What is measured, e.g. 'GEMM', 'HBM', 'H2D'."""
    detail: str
    """Which of it, e.g. 'bf16', 'copy' ('' where the group says it all)."""
    percent: float
    device: str
    short: bool
    """More than the practical limit below the known-good figure (a regression against it)."""

    @property
    def label(self) -> str:
        return _label(self.group, self.detail)


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    host: str
    model: str | None
    """The known-good GPU model the figures were held against (None: no figure known)."""
    shares: tuple[Share, ...] = ()
    findings: tuple[Finding, ...] = ()
    """The node's findings to act on (warn, fail), failures first."""
    failed_ranks: tuple[int, ...] = ()
    device_kinds: tuple[str, ...] = field(default=())
    """The node's device kinds or GPU models, for the line without known-good figures."""

    @property
    def healthy(self) -> bool:
        return not (self.findings or self.failed_ranks or any(s.short for s in self.shares))

    def alike(self) -> tuple[object, ...]:
        """Nodes with equal keys share a verdict line: healthy nodes held against the same
        known-good figures of one model (:func:`several_judgement` gives their shares as
        ranges), any other node with those whose judgement reads the same."""
        if self.healthy and self.model is not None and self.shares:
            return ("healthy", self.model, tuple(s.label for s in self.shares))
        return ("as judged", self.judgement())

    def line(self) -> str:
        """``node H: healthy: ...`` or ``node H: short of known-good: ...``, one line."""
        return f"node {self.host}: {self.judgement()}"

    def judgement(self, *, several: bool = False) -> str:
        """What :meth:`line` says of the node, without its name (``several``: worded for a line
        that speaks for several nodes judged alike)."""
        parts: list[str] = []
        short = [s for s in self.shares if s.short]
        if short:
            parts.append(
                "short of known-good: "
                + ", ".join(f"{s.label} {_pct(s.percent)} on {s.device}" for s in short)
            )
        if self.failed_ranks:
            ranks = ", ".join(str(r) for r in self.failed_ranks)
            parts.append(f"rank{'s' if len(self.failed_ranks) > 1 else ''} {ranks} failed")
        if self.findings:
            parts.append(_findings_text(self.findings))
        head = "healthy" if self.healthy else "; ".join(parts)
        rest = [s for s in self.shares if not s.short]
        if self.model is not None:
            figures = _grouped(rest)
            if figures:
                tail = f"{figures} of a known-good {self.model}"
                head = f"{head}: {tail}" if self.healthy else f"{head}; {tail}"
            elif short:
                head = f"{head} (of a known-good {self.model})"
        else:
            kinds = ", ".join(_kind_name(k) for k in self.device_kinds) or "no devices"
            whose, did = ("their", "they") if several else ("its", "it")
            head += (
                f" (by {whose} findings: no known-good figures for what {did} measured on {kinds})"
            )
        return head


def node_verdicts(results: Results, baseline: Baseline) -> list[NodeVerdict]:
    """One verdict per host of the run, in the order of ``results.hosts`` (then any host only
    a measurement names)."""
    comparison = compare_baseline(baseline, results, run_thresholds(results))
    shares: dict[str, list[tuple[_Place, Share]]] = defaultdict(list)
    models: dict[str, str] = {}
    for (host, label, place), rows in _by_figure(comparison.rows).items():
        worst = min(rows, key=_ratio)
        shares[host].append(
            (
                place,
                Share(
                    group=label[0],
                    detail=label[1],
                    percent=100 * _ratio(worst),
                    device=worst.device,
                    short=any(r.verdict == "regression" for r in rows),
                ),
            )
        )
        models.setdefault(host, worst.gpu or "")
    hosts = [h.hostname for h in results.hosts]
    hosts += sorted({m.host for m in results.measurements} - set(hosts))
    failed = _failed_ranks(results)
    out = []
    for host in hosts:
        kinds = sorted(
            {gpu.name for h in results.hosts if h.hostname == host for gpu in h.gpus}
            or {m.device.partition(":")[0] for m in results.measurements if m.host == host}
        )
        mine = [s for _, s in sorted(shares.get(host, []), key=lambda ps: (ps[0], ps[1].label))]
        out.append(
            NodeVerdict(
                host=host,
                model=models.get(host) if mine else None,
                shares=tuple(mine),
                findings=tuple(_to_act_on(results.findings, host)),
                failed_ranks=failed.get(host, ()),
                device_kinds=tuple(kinds),
            )
        )
    return out


def several_judgement(verdicts: Sequence[NodeVerdict]) -> str:
    """What a line that speaks for ``verdicts`` (all with one :meth:`NodeVerdict.alike` key)
    says of them: healthy nodes' shares of known-good as the lowest and highest of them
    (``GEMM bf16 98-104%``), else the first node's judgement, worded for several."""
    first = verdicts[0]
    if first.alike()[0] != "healthy":
        return first.judgement(several=True)
    ranges = [
        _Range(s.group, s.detail, min(v.shares[i].percent for v in verdicts),
               max(v.shares[i].percent for v in verdicts))
        for i, s in enumerate(first.shares)
    ]  # fmt: skip
    return f"healthy: {_grouped(ranges)} of a known-good {first.model}"


def other_findings_line(results: Results) -> str:
    """The findings to act on that are about no one node (the run, a pair of nodes), as one
    line, or '' when there are none."""
    hosts = {h.hostname for h in results.hosts} | {m.host for m in results.measurements}
    rest = [
        f for f in results.findings if f.severity in ACT_ON and _scope_host(f.scope) not in hosts
    ]
    return f"across nodes: {_findings_text(_worst_first(rest))}" if rest else ""


def share_label(benchmark: str, metric: str, params: dict[str, object]) -> tuple[str, str] | None:
    """(group, detail) naming a known-good figure, as its benchmark's ``verdict_labels`` name
    it, or None for one the verdict leaves out."""
    found = _declared_label(benchmark, metric, params)
    return found[0] if found is not None else None


# ----------------------------------------------------------------------------- helpers


_Place = tuple[int, int]
"""Where a figure stands in the line (:meth:`VerdictLabel.sort_key`)."""


def _declared_label(
    benchmark: str, metric: str, params: dict[str, object]
) -> tuple[tuple[str, str], _Place] | None:
    """((group, detail), its place in the line) of the first of the benchmark's labels that
    names the figure."""
    declared = registry.find(benchmark)
    for label in declared.verdict_labels if declared is not None else ():
        named = label.label(benchmark, metric, params)
        if named is not None:
            return named, label.sort_key(named[1])
    return None


def _by_figure(
    rows: Iterable[ComparisonRow],
) -> dict[tuple[str, tuple[str, str], _Place], list[ComparisonRow]]:
    """The judged rows by (host, figure label, its place); rows the verdict leaves out are
    dropped."""
    out: dict[tuple[str, tuple[str, str], _Place], list[ComparisonRow]] = defaultdict(list)
    for row in rows:
        if row.base is None or row.new is None or not row.base:
            continue
        found = _declared_label(row.benchmark, row.metric, dict(row.params))
        if found is not None:
            out[(row.host, *found)].append(row)
    return out


def _ratio(row: ComparisonRow) -> float:
    assert row.base is not None and row.new is not None
    if row.direction == "lower":
        return row.base / row.new if row.new else 0.0
    return row.new / row.base


def _kind_name(kind: str) -> str:
    return {"cpu": "CPU workers", "cuda": "an unnamed GPU"}.get(kind, kind)


def _label(group: str, detail: str) -> str:
    return f"{group} {detail}".strip()


def _pct(percent: float) -> str:
    return f"{percent:.0f}%"


@dataclass(frozen=True, slots=True)
class _Range:
    """One known-good figure over several nodes: the lowest and highest share of it."""

    group: str
    detail: str
    low: float
    high: float

    @property
    def label(self) -> str:
        return _label(self.group, self.detail)

    @property
    def text(self) -> str:
        low, high = _pct(self.low), _pct(self.high)
        return low if low == high else f"{low.removesuffix('%')}-{high}"


def _grouped(shares: Sequence[Share | _Range]) -> str:
    """'GEMM bf16 101%, fp8 98%, HBM copy 100%': a group named once, before its first (a range
    of shares reads '98-104%')."""
    parts, last = [], None
    for s in shares:
        name = s.label if s.group != last else s.detail
        parts.append(f"{name} {s.text if isinstance(s, _Range) else _pct(s.percent)}")
        last = s.group
    return ", ".join(parts)


def _scope_host(scope: str) -> str | None:
    """The host a finding's scope names ('host:h' or 'host:h/gpu:0'), else None."""
    if not scope.startswith("host:"):
        return None
    return scope.removeprefix("host:").split("/", 1)[0]


def _worst_first(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (ACT_ON.index(f.severity), f.id))


def _to_act_on(findings: Iterable[Finding], host: str) -> list[Finding]:
    return _worst_first(
        f for f in findings if f.severity in ACT_ON and _scope_host(f.scope) == host
    )


def _findings_text(findings: Sequence[Finding]) -> str:
    """'1 fail (sdc.mismatch), 2 warn (pcie.link_below_max, ...)'."""
    parts = []
    for severity in ACT_ON:
        ids = sorted({f.id for f in findings if f.severity == severity})
        if ids:
            n = sum(1 for f in findings if f.severity == severity)
            parts.append(f"{n} {severity} ({', '.join(ids)})")
    return ", ".join(parts)


def _failed_ranks(results: Results) -> dict[str, tuple[int, ...]]:
    """host -> the ranks there that failed (the culprits, not the ranks that only waited)."""
    out: dict[str, set[int]] = defaultdict(set)
    for err in results.errors:
        if err.host is not None and err.rank is not None and "was waiting for" not in err.message:
            out[err.host].add(err.rank)
    return {host: tuple(sorted(ranks)) for host, ranks in out.items()}
