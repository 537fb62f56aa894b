"""Whether an NCCL setting beats NCCL's defaults (``collectives.tune``), and what to export.

Per op and size, a setting beats the default only if

1. NCCL's own log proved on every rank that the setting took effect (``confirmed``) and the
   op's output under it was exact (``num_wrong`` 0);
2. a one-sided Mann-Whitney U test of its repeats against the default's (measured before and
   after every setting, pooled) gives p < :data:`ALPHA` (``scipy.stats.mannwhitneyu``);
3. the 95% bootstrap confidence interval of the speed-up, default median / setting median
   (``scipy.stats.bootstrap``, percentile method, fixed seed), lies wholly above
   1 + ``tune_min_gain``.

It is slower where the test the other way gives p < :data:`ALPHA` and the interval lies wholly
below 1.  NCCL_ALGO and NCCL_PROTO apply to every size of their collective (and a list without
a function prefix, like NCCL_MIN_CTAS / NCCL_MAX_CTAS, to every collective), so a setting is
recommended only where it beats the default at one size or more and is slower at none measured;
of several for the same op (or several channel counts) the one of the largest geometric-mean
speed-up over its sizes is named.  The findings that say so are :mod:`.nccl_tune_findings`'.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from clusterbench.benchmarks.collectives import CollectivesConfig, CollectivesMetrics
from clusterbench.schema import Measurement

__all__ = [
    "ALPHA",
    "CONFIDENCE",
    "Recommendation",
    "TuneRow",
    "Verdict",
    "export_line",
    "recommendations",
    "run_min_gain",
    "tune_rows",
]

ALPHA = 0.01
CONFIDENCE = 0.95
_RESAMPLES = 2000
_SEED = 0
_MIN_SAMPLES = 4
_DEFAULT_MIN_GAIN = CollectivesConfig().tune_min_gain

Verdict = Literal["default", "better", "inside_noise", "slower", "unconfirmed", "wrong", "unjudged"]
"""``unjudged``: too few repeats, or no default at that op and size."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TuneRow:
    """One op, size and setting of the sweep, judged against the default's."""

    latency: Measurement
    """Its ``tune_latency_us`` measurement (value: the median over repeats)."""
    busbw: float | None
    gain: float | None
    """default median / this median: above 1 is faster than NCCL's default."""
    gain_ci: tuple[float, float] | None
    latency_ci: tuple[float, float] | None
    """95% bootstrap interval of this setting's median latency (us)."""
    p_value: float | None
    """One-sided Mann-Whitney p that this setting is faster than the default."""
    p_slower: float | None
    """The same, that it is slower."""
    verdict: Verdict

    @property
    def op(self) -> str:
        return str(self.latency.params.get("op"))

    @property
    def size_bytes(self) -> int:
        size = self.latency.params.get("size_bytes")
        return size if isinstance(size, int) else 0

    @property
    def setting(self) -> str:
        return str(self.latency.params.get("setting"))

    @property
    def kind(self) -> str:
        return str(self.latency.params.get("setting_kind"))


def _samples(m: Measurement) -> list[float]:
    return list(m.stats.values or []) if m.stats is not None else []


def _ratio(d: Any, s: Any, axis: int = -1) -> Any:
    import numpy as np

    return np.median(d, axis=axis) / np.median(s, axis=axis)


def _median(x: Any, axis: int = -1) -> Any:
    import numpy as np

    return np.median(x, axis=axis)


def _interval(data: tuple[Sequence[float], ...], statistic: Any) -> tuple[float, float]:
    import numpy as np
    from scipy.stats import bootstrap

    result = bootstrap(
        tuple(np.asarray(d, dtype=float) for d in data), statistic, vectorized=True,
        n_resamples=_RESAMPLES, confidence_level=CONFIDENCE, method="percentile",
        random_state=np.random.default_rng(_SEED),
    )  # fmt: skip
    ci = result.confidence_interval
    return float(ci.low), float(ci.high)


def _judge(
    m: Measurement, default: Measurement | None, *, busbw: float | None, min_gain: float
) -> TuneRow:
    from scipy.stats import mannwhitneyu

    mine = _samples(m)
    base = _samples(default) if default is not None else []
    latency_ci = _interval((mine,), _median) if len(mine) >= 2 else None
    gain, ci, faster, slower, verdict = None, None, None, None, _verdict(m, mine, base)
    if verdict == "default":
        gain = 1.0
    elif verdict != "unjudged":
        gain = statistics.median(base) / statistics.median(mine)
        ci = _interval((base, mine), _ratio)
        faster = float(mannwhitneyu(mine, base, alternative="less").pvalue)
        slower = float(mannwhitneyu(mine, base, alternative="greater").pvalue)
        if verdict == "inside_noise" and faster < ALPHA and ci[0] > 1 + min_gain:
            verdict = "better"
        elif verdict == "inside_noise" and slower < ALPHA and ci[1] < 1:
            verdict = "slower"
    return TuneRow(
        latency=m, busbw=busbw, gain=gain, gain_ci=ci, latency_ci=latency_ci, p_value=faster,
        p_slower=slower, verdict=verdict,
    )  # fmt: skip


def _verdict(m: Measurement, mine: Sequence[float], base: Sequence[float]) -> Verdict:
    """What ``m`` is before its timings are compared (inside_noise: to be compared)."""
    if m.params.get("setting_kind") == "default":
        return "default"
    if len(mine) < _MIN_SAMPLES or len(base) < _MIN_SAMPLES:
        return "unjudged"
    if int(m.params.get("num_wrong") or 0) > 0:
        return "wrong"
    return "inside_noise" if m.params.get("confirmed") is True else "unconfirmed"


def tune_rows(ms: Iterable[Measurement], *, min_gain: float | None = None) -> list[TuneRow]:
    """Every setting at every op and size, judged against the default there (order kept).

    ``min_gain`` None: the run's own ``tune_min_gain``, recorded on the default's rows."""
    ms = list(ms)
    lat = CollectivesMetrics.tune_latency_us.select(ms)
    bus = {_key(m, with_setting=True): m.value for m in CollectivesMetrics.tune_busbw.select(ms)}
    defaults = {_key(m): m for m in lat if m.params.get("setting_kind") == "default"}
    if min_gain is None:
        min_gain = run_min_gain(ms)
    return [
        _judge(m, defaults.get(_key(m)), busbw=bus.get(_key(m, with_setting=True)),
               min_gain=min_gain)
        for m in lat
    ]  # fmt: skip


def run_min_gain(ms: Iterable[Measurement]) -> float:
    """The ``tune_min_gain`` the run was made with (its default rows say), else the default."""
    for m in CollectivesMetrics.tune_latency_us.select(ms):
        gain = m.params.get("min_gain")
        if isinstance(gain, (int, float)) and not isinstance(gain, bool):
            return float(gain)
    return _DEFAULT_MIN_GAIN


def _key(m: Measurement, *, with_setting: bool = False) -> tuple[Any, ...]:
    p = m.params
    key = (p.get("op"), p.get("size_bytes"), p.get("dtype"), p.get("group"), p.get("group_size"))
    return (*key, p.get("setting")) if with_setting else key


# --- recommendations -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Recommendation:
    """A setting to export: better than the default at some sizes, slower at none measured."""

    setting: str
    rows: list[TuneRow]
    """Its rows at every op and size measured."""
    export: dict[str, str]

    @property
    def wins(self) -> list[TuneRow]:
        return [r for r in self.rows if r.verdict == "better"]


def export_line(row: Measurement) -> dict[str, str]:
    """The variables that make NCCL run ``row``'s setting, as NCCL reads them."""
    p = row.params
    if p.get("setting_kind") == "channels":
        return {"NCCL_MIN_CTAS": str(p.get("channels")), "NCCL_MAX_CTAS": str(p.get("channels"))}
    if p.get("setting_kind") != "algo_proto":
        return {}
    # the label is the exports themselves: "NCCL_ALGO=allreduce:Tree NCCL_PROTO=allreduce:LL"
    return dict(part.split("=", 1) for part in str(p.get("setting")).split())


def recommendations(rows: Sequence[TuneRow]) -> list[Recommendation]:
    """Per op (and for channel counts overall), the best setting that may be exported."""
    ops = {r.op for r in rows}
    by_setting: dict[str, list[TuneRow]] = defaultdict(list)
    for r in rows:
        if r.kind != "default":
            by_setting[r.setting].append(r)
    best: dict[str, tuple[float, Recommendation]] = {}
    for setting, group in by_setting.items():
        if not _exportable(group, ops=ops):
            continue
        scope = "channels" if group[0].kind == "channels" else _scope(group)
        score = _geomean([r.gain for r in group if r.gain])
        if scope not in best or score > best[scope][0]:
            best[scope] = (score, Recommendation(setting, group, export_line(group[0].latency)))
    return [rec for _, rec in best.values()]


def _exportable(group: Sequence[TuneRow], *, ops: set[str]) -> bool:
    if not any(r.verdict == "better" for r in group):
        return False
    if any(r.verdict in ("slower", "wrong", "unconfirmed", "unjudged") for r in group):
        return False
    per_function = group[0].latency.params.get("per_function", True) is not False
    # a list without a function prefix applies to every collective: it must have run on each
    return per_function or {r.op for r in group} == ops


def _scope(group: Sequence[TuneRow]) -> str:
    per_function = group[0].latency.params.get("per_function", True) is not False
    return group[0].op if per_function else "every collective"


def _geomean(values: Sequence[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else 0.0
