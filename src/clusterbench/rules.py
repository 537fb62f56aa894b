"""A benchmark's own rules, named in its :class:`~clusterbench.registry.Benchmark` so that the
analyses of a whole run (peers, comparisons, the verdict per node) name no benchmark.

- :class:`PeerRules`: how the peer comparison (:mod:`clusterbench.analyses.outliers.findings`)
  groups its figures and what it advises for a device that falls behind its peers.
- :class:`VerdictLabel`: one of its figures in a node's verdict line
  (:mod:`clusterbench.analyses.verdict.nodes`), named as the line names it.
- ``Benchmark.winner_params``: params that name the case that won rather than what was measured
  (:func:`winner_params_of`), left out where comparisons and peers match figures.

Standard library and the metric declarations only: the declarations import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from clusterbench.metrics import Metric

__all__ = ["DEFAULT_DETAIL_ORDER", "PeerRules", "VerdictLabel", "params_of"]

DEFAULT_DETAIL_ORDER: tuple[str, ...] = ()


def params_of(
    rules: Mapping[Metric, frozenset[str]], benchmark: str, metric: str
) -> frozenset[str]:
    """The params ``rules`` names for ``benchmark``'s ``metric`` (none where it names none)."""
    return next(
        (p for m, p in rules.items() if m.benchmark == benchmark and m.name == metric),
        frozenset(),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class PeerRules:
    """How the run's peer comparison treats a benchmark's figures (each device against its
    identical peers: :mod:`clusterbench.analyses.outliers.findings`)."""

    judged: bool = True
    """False: its figures are never compared across devices (a barrier's wait is longest on the
    fastest rank; a profile's figures are per step, not per device)."""
    pairs: frozenset[Metric] = frozenset()
    """Metrics measured between two devices (params ``src`` and ``dst``): the member is the
    pair, and the pair's params do not split the peers."""
    placement_params: Mapping[Metric, frozenset[str]] = field(default_factory=dict)
    """Params that say where a figure was measured rather than what work was asked for (a GPU's
    NUMA node): devices that differ only in them are still peers."""
    fix: str | None = None
    """The fix of a device slower than its peers, ``{index}`` its GPU index (None: the general
    one, clocks, temperature and errors)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class VerdictLabel:
    """One figure of a benchmark in a node's verdict line, held against a known-good figure:
    ``GEMM bf16 101%``.  ``group`` and ``detail`` are templates of the figure's params
    (``"{op} busbw"``, ``"{group_size} GPUs"``)."""

    metric: Metric
    group: str
    """What is measured: 'GEMM', 'HBM', '{op} busbw'."""
    detail: str = ""
    """Which of it: '{dtype}', '{op}' ('' where the group says it all)."""
    when: Mapping[str, str] = field(default_factory=dict)
    """Only figures whose params have these values ({'memory': 'pinned'})."""
    order: int = 100
    """Where its figures stand in the line: lower first; figures of one order by their detail's
    place in ``detail_order``, then by name."""
    detail_order: tuple[str, ...] = DEFAULT_DETAIL_ORDER
    """Details in the order the line gives them (dtypes: bf16 before fp32); others after."""

    def label(
        self, benchmark: str, metric: str, params: Mapping[str, object]
    ) -> tuple[str, str] | None:
        """(group, detail) of a figure of this label, or None for a figure it does not name."""
        if not (self.metric.benchmark == benchmark and self.metric.name == metric):
            return None
        if any(str(params.get(k)) != v for k, v in self.when.items()):
            return None
        values = _Params({k: str(v) for k, v in params.items()})
        return self.group.format_map(values), self.detail.format_map(values)

    def sort_key(self, detail: str) -> tuple[int, int]:
        """(order, the detail's place) of one of its figures."""
        order = self.detail_order
        return self.order, order.index(detail) if detail in order else len(order)


class _Params(dict[str, str]):
    """A figure's params for a template: a param the figure lacks is '' (as the line had it)."""

    def __missing__(self, key: str) -> str:
        return ""
