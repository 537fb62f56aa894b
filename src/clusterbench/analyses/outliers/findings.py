"""Peer comparison: the device (or GPU pair) that falls behind its identical peers.

Measurements are grouped by (benchmark, metric, unit, params); within a group every device ran
the same work, so the peers' median is the reference.  A member is an outlier when it is worse
than the median by all of: ``mads`` scaled MADs (the spread between the peers), ``min_rel`` of
the median (no alarm on statistically clear but practically tiny gaps: a MAD of near-identical
GPUs can be minute) and ``sigmas`` times the measurements' own repeat spread (no alarm on a gap
inside the noise of the repeats, see :func:`noise_limit`).

Groups of fewer than :data:`MIN_PEERS` members are never judged: the MAD of two values is half
their distance, so each of the two is exactly 0.67 scaled MADs from their median whatever the
gap, and "which one is slow" has no answer.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from clusterbench import registry
from clusterbench.judging.measurements import dev_label, shared_cpu_hosts
from clusterbench.judging.peers import (
    MIN_PEERS,
    SCALED_MAD,
    SPREAD_SIGMAS,
    log_spread,
    noise_limit,
    outside_noise,
    pooled_cv,
    repeat_cv,
    robust_outliers,
    robust_zscores,
    worse_log_ratio,
    zscore,
)
from clusterbench.metrics import direction_of
from clusterbench.rules import PeerRules
from clusterbench.schema import Finding, Measurement, ParamValue, Results

if TYPE_CHECKING:
    from clusterbench.analyses.view import RunView

__all__ = [
    "MIN_PEERS",
    "SCALED_MAD",
    "SPREAD_SIGMAS",
    "log_spread",
    "noise_limit",
    "outlier_findings",
    "outside_noise",
    "peer_outliers",
    "pooled_cv",
    "repeat_cv",
    "robust_outliers",
    "robust_zscores",
    "worse_log_ratio",
]

K = TypeVar("K", bound=Hashable)
_NO_RULES = PeerRules()
"""The rules of a benchmark that declares none (or that no module registered)."""
_PAIR_FIX = (
    "Check the NVLinks of this pair (`nvidia-smi nvlink --status`, error counters with "
    "`nvidia-smi nvlink -e`) and `nvidia-smi topo -m` against its peers."
)
_DEFAULT_FIX = (
    "Compare this device's clocks, temperature and errors with its peers (`nvidia-smi -q -i "
    "{index}`, `dmesg | grep -i xid`); drain it if it stays slow."
)
_CPU_FIX = (
    "Check CPU frequency scaling (`cpupower frequency-info`), other load on the host (`top`) "
    "and the rank's CPU binding."
)


def _rules(benchmark: str) -> PeerRules:
    """The benchmark's own peer rules (``Benchmark.peers``)."""
    declared = registry.find(benchmark)
    return declared.peers if declared is not None else _NO_RULES


def _is_pair(m: Measurement) -> bool:
    return any(metric.matches(m) for metric in _rules(m.benchmark).pairs)


def _noise_factor(own_cv: float | None, peers_cv: float | None, *, sigmas: float) -> float | None:
    limit = noise_limit(own_cv, peers_cv, sigmas=sigmas)
    return math.exp(limit) if limit > 0 else None


@dataclass(frozen=True, slots=True)
class _Outlier:
    benchmark: str
    metric: str
    unit: str
    params: dict[str, ParamValue]
    host: str
    member: str
    """Device label, or 'src-dst' for a GPU pair."""
    is_pair: bool
    value: float
    median: float
    scaled_mad: float
    robust_z: float
    num_peers: int
    repeat_cv: float | None
    """The CV of the member's own repeats (None: fewer than two)."""
    peers_cv: float | None
    """The members' :func:`pooled_cv`."""
    noise_factor: float | None
    """How many times worse than the median the noise band reaches (None: no spread known)."""

    @property
    def rel_gap(self) -> float:
        return abs(self.value - self.median) / abs(self.median)


def peer_outliers(
    measurements: Iterable[Measurement],
    *,
    mads: float,
    min_rel: float,
    sigmas: float = SPREAD_SIGMAS,
) -> list[Finding]:
    """Devices (pairs for p2p) worse than their peers -> fail, one finding per device and metric.
    CPU ranks that share a host are only reported (info): their spread is the OS scheduler's.
    A member must be worse beyond ``sigmas`` spreads of the repeats (``stats.cv``: its own and
    the peers' pooled one), :func:`robust_outliers`.

    Worse is the side the metric's declaration calls worse (lower for rates, higher for times;
    metrics declared "none" are not compared).  When a device is an outlier in several
    parameter sets of one metric (e.g. every GEMM shape), one finding names the worst and counts
    the others.
    """
    measurements = list(measurements)
    groups: dict[tuple[object, ...], list[Measurement]] = defaultdict(list)
    for m in measurements:
        if _rules(m.benchmark).judged and direction_of(m) is not None:
            groups[_group_key(m)].append(m)
    outliers = [
        o
        for group in groups.values()
        for o in _group_outliers(group, mads=mads, min_rel=min_rel, sigmas=sigmas)
    ]
    return _collapse(outliers, shared=shared_cpu_hosts(measurements))


def _group_key(m: Measurement) -> tuple[object, ...]:
    params = _group_params(m)
    # The spec peak stands in for the GPU model: different SKUs in one run are not peers.
    spec = m.reference.value if m.reference and m.reference.kind == "spec_peak" else None
    return (m.benchmark, m.metric, m.unit, tuple(sorted(params.items())), spec)


def _group_params(m: Measurement) -> dict[str, ParamValue]:
    """The params every peer shares: without the pair (src, dst) or outcomes (best shape)."""
    # Params that name an outcome (the best shape of a sweep differs between healthy GPUs) or a
    # placement (``PeerRules.placement_params``) rather than the work asked for.
    declared = registry.find(m.benchmark)
    drop = (
        declared.winners(m.metric) | declared.placement(m.metric)
        if declared is not None
        else frozenset()
    )
    if _is_pair(m):
        drop = drop | {"src", "dst"}
    return {k: v for k, v in m.params.items() if k not in drop}


def _member(m: Measurement) -> tuple[str, str]:
    if _is_pair(m):
        return (m.host, f"{dev_label(m.params.get('src'))}-{dev_label(m.params.get('dst'))}")
    return (m.host, m.device)


def _group_outliers(
    group: list[Measurement], *, mads: float, min_rel: float, sigmas: float
) -> list[_Outlier]:
    per_member: dict[tuple[str, str], list[Measurement]] = defaultdict(list)
    for m in group:
        per_member[_member(m)].append(m)
    values = {k: statistics.median(m.value for m in ms) for k, ms in per_member.items()}
    spread = {k: pooled_cv(map(repeat_cv, ms)) for k, ms in per_member.items()}
    first = group[0]
    better = direction_of(first)
    assert better is not None  # peer_outliers groups only metrics with a better direction
    worse = robust_outliers(
        values, mads=mads, min_rel=min_rel, better=better, spread=spread, sigmas=sigmas
    )
    if not worse:
        return []
    median = statistics.median(values.values())
    scaled_mad = SCALED_MAD * statistics.median(abs(v - median) for v in values.values())
    peers_cv = pooled_cv(spread.values())
    return [
        _Outlier(
            benchmark=first.benchmark,
            metric=first.metric,
            unit=first.unit,
            params=_group_params(first),
            host=host,
            member=member,
            is_pair=_is_pair(first),
            value=values[(host, member)],
            median=median,
            scaled_mad=scaled_mad,
            robust_z=zscore(values[(host, member)] - median, scaled_mad),
            num_peers=len(values),
            repeat_cv=spread[(host, member)],
            peers_cv=peers_cv,
            noise_factor=_noise_factor(spread[(host, member)], peers_cv, sigmas=sigmas),
        )
        for host, member in worse
    ]


def _collapse(outliers: list[_Outlier], *, shared: dict[str, int]) -> list[Finding]:
    by_subject: dict[tuple[str, str, str, str], list[_Outlier]] = defaultdict(list)
    for o in outliers:
        by_subject[(o.benchmark, o.metric, o.host, o.member)].append(o)
    findings = []
    for items in by_subject.values():
        worst = max(items, key=lambda o: o.rel_gap)
        shares_cores = worst.member.startswith("cpu") and worst.host in shared
        findings.append(_finding(worst, num_flagged=len(items), shares_cores=shares_cores))
    return findings


def _finding(o: _Outlier, *, num_flagged: int, shares_cores: bool) -> Finding:
    params = ", ".join(f"{k}={v}" for k, v in o.params.items())
    where = "below" if o.value < o.median else "above"
    what = "pairs" if o.is_pair else "devices"
    message = (
        f"{o.host} {o.member}: {o.benchmark} {o.metric}{f' ({params})' if params else ''} "
        f"{o.value:.4g} {o.unit} is {o.rel_gap:.0%} {where} the median {o.median:.4g} {o.unit} "
        f"of {o.num_peers} {what}"
    )
    if o.noise_factor is not None:
        message += f", beyond the noise of the repeats ({_spread_text(o.repeat_cv, o.peers_cv)})"
    if num_flagged > 1:
        message += f"; {num_flagged} parameter sets of this metric are outliers"
    if shares_cores:
        message += " (CPU ranks of one host share its cores: not a faulty device, not judged)"
    return Finding(
        id=f"outlier.{o.benchmark}.{o.metric}",
        severity="info" if shares_cores else "fail",
        scope=f"host:{o.host}/{o.member}",
        message=message + ".",
        evidence={
            "value": o.value,
            "unit": o.unit,
            "params": o.params,
            "median": o.median,
            "scaled_mad": o.scaled_mad,
            "robust_z": o.robust_z if math.isfinite(o.robust_z) else str(o.robust_z),
            "rel_gap": round(o.rel_gap, 4),
            "num_peers": o.num_peers,
            "num_param_sets_flagged": num_flagged,
            "repeat_cv": o.repeat_cv,
            "peers_cv": o.peers_cv,
            "noise_factor": round(o.noise_factor, 4) if o.noise_factor is not None else None,
        },
        fix=_fix(o),
    )


def _spread_text(own_cv: float | None, peers_cv: float | None) -> str:
    own = f"CV {own_cv:.1%}" if own_cv is not None else "no repeats"
    return f"{own}, peers' pooled CV {peers_cv:.1%}" if peers_cv is not None else own


def _fix(o: _Outlier) -> str:
    if o.is_pair:
        return _PAIR_FIX
    kind, _, index = o.member.partition(":")
    if kind == "cpu":
        return _CPU_FIX
    return (_rules(o.benchmark).fix or _DEFAULT_FIX).format(index=index or "N")


def outlier_findings(results: Results, run: RunView) -> list[Finding]:
    """Each device against its peers (:func:`peer_outliers`) at ``thresholds``' limits."""
    thresholds = run.thresholds
    return peer_outliers(
        results.measurements,
        mads=thresholds.outlier_mads,
        min_rel=thresholds.outlier_min_rel,
        sigmas=thresholds.outlier_spread_sigmas,
    )
