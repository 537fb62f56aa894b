"""The NCCL tuning sweep's findings: what to export, or to keep NCCL's defaults (info), the
settings NCCL's log did not confirm (warn), and those that gave wrong results (fail).  The
rule is :mod:`.nccl_tune`'s."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from clusterbench.benchmarks.collectives.tune_analysis import (
    Recommendation,
    TuneRow,
    recommendations,
    run_min_gain,
    tune_rows,
)
from clusterbench.judging.advice import advice_evidence
from clusterbench.schema import Finding, Results
from clusterbench.units import format_bytes

__all__ = ["tune_findings"]


def _gain_text(r: TuneRow) -> str:
    assert r.gain is not None and r.gain_ci is not None
    low, high = r.gain_ci
    p = r.p_value if r.gain >= 1 else r.p_slower  # the one-sided test of its direction
    return f"{format_bytes(r.size_bytes)} ({r.gain:.2f}x, 95% CI {low:.2f}-{high:.2f}, p {p:.1g})"


def tune_findings(results: Results) -> list[Finding]:
    """What to export (or to keep the defaults), settings the log did not confirm (warn), and
    settings that gave wrong results (fail)."""
    min_gain = run_min_gain(results.measurements)
    rows = tune_rows(results.measurements, min_gain=min_gain)
    if not rows:
        return []
    recs = recommendations(rows)
    out = [_recommend(rec, recs, rows) for rec in recs] or [_keep_defaults(rows, min_gain=min_gain)]
    unconfirmed = [r for r in rows if r.verdict == "unconfirmed"]
    if unconfirmed:
        out.append(_unconfirmed(unconfirmed))
    out += [_wrong(r) for r in rows if r.verdict == "wrong"]
    return out


def _exports(env: dict[str, str]) -> str:
    return "export " + " ".join(f"{k}={v}" for k, v in env.items())


def _recommend(
    rec: Recommendation, recs: Sequence[Recommendation], rows: Sequence[TuneRow]
) -> Finding:
    ops = sorted({r.op for r in rec.rows})
    wins = "; ".join(f"{r.op} at {_gain_text(r)}" for r in rec.wins)
    rest = [f"{r.op} {format_bytes(r.size_bytes)}" for r in rec.rows if r.verdict != "better"]
    applies = (
        "every collective of the communicator"
        if "NCCL_MIN_CTAS" in rec.export or rec.rows[0].latency.params.get("per_function") is False
        else f"every {ops[0]} size"
    )
    torch_form = ""
    if "NCCL_MIN_CTAS" in rec.export:
        n = rec.export["NCCL_MIN_CTAS"]
        torch_form = (
            f" (per process group: ProcessGroupNCCL.Options().config.min_ctas = max_ctas = {n})"
        )
    message = (
        f"NCCL tuning: {_exports(rec.export)}{torch_form} beat NCCL's defaults on {wins}"
        + (f"; within the noise at {', '.join(rest)}" if rest else "")
        + f". It applies to {applies}, and was measured alone."
    )
    fix = _exports(rec.export)
    combined = _combined(recs)
    if len(recs) > 1 and combined:
        fix += f" (with the other recommendations: {_exports(combined)})"
    return Finding(
        id="collectives.tune.recommend", severity="info", scope="group:world", message=message,
        evidence={
            "setting": rec.setting, "export": rec.export,
            "rows": [_evidence(r) for r in rec.rows], **_advice(rec, rows),
        },
        fix=fix,
    )  # fmt: skip


def _geomean(values: Sequence[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def _advice(rec: Recommendation, rows: Sequence[TuneRow]) -> dict[str, Any]:
    """The recommendation as advice: the geometric mean of its wins' speed-ups s as less time
    (1 - 1/s), the noise the half-width of the same of their 95% intervals' ends."""
    wins = [r for r in rec.wins if r.gain is not None and r.gain_ci is not None]
    if not wins:
        return {}
    speedup = _geomean([r.gain for r in wins if r.gain is not None])
    if not speedup > 1:
        return {}
    low = _geomean([r.gain_ci[0] for r in wins if r.gain_ci is not None])
    high = _geomean([r.gain_ci[1] for r in wins if r.gain_ci is not None])
    by_op: dict[str, list[int]] = defaultdict(list)
    for r in wins:
        by_op[r.op].append(r.size_bytes)
    where = " and ".join(f"{op} time at {_sizes(sizes)}" for op, sizes in by_op.items())
    return advice_evidence(
        change=_exports(rec.export),
        gain=1 - 1 / speedup,
        gain_of=where + (" (geometric mean)" if len(wins) > 1 else ""),
        basis="measured",
        noise=(1 / low - 1 / high) / 2,
        evidence=_win_evidence(wins, rows),
    )


def _sizes(sizes: list[int]) -> str:
    sizes = sorted(set(sizes))
    if len(sizes) <= 2:
        return " and ".join(format_bytes(s) for s in sizes)
    return f"{len(sizes)} sizes, {format_bytes(sizes[0])}–{format_bytes(sizes[-1])}"


def _repeats(r: TuneRow) -> int:
    return r.latency.stats.samples if r.latency.stats is not None else 0


def _win_evidence(wins: Sequence[TuneRow], rows: Sequence[TuneRow]) -> str:
    """'7 vs 14 repeats, one-sided Mann-Whitney p 3e-04, 95% CI of the speed-up 1.38-1.45x'
    (one size); the largest p and the range of the intervals over several."""
    defaults = {(r.op, r.size_bytes): _repeats(r) for r in rows if r.verdict == "default"}
    mine = min(_repeats(r) for r in wins)
    base = min(defaults.get((r.op, r.size_bytes), 0) for r in wins)
    p = max(r.p_value for r in wins if r.p_value is not None)
    low = min(r.gain_ci[0] for r in wins if r.gain_ci is not None)
    high = max(r.gain_ci[1] for r in wins if r.gain_ci is not None)
    confirmed = "; NCCL's log confirmed the setting on every rank"
    if len(wins) == 1:
        return (
            f"{mine} vs {base} repeats of the default, one-sided Mann–Whitney p {p:.1g}, "
            f"95% CI of the speed-up {low:.2f}–{high:.2f}×{confirmed}"
        )
    return (
        f"{len(wins)} sizes, each beyond the noise: ≥ {mine} vs {base} repeats of the default, "
        f"one-sided Mann–Whitney p ≤ {p:.1g}, 95% CIs of the speed-up within "
        f"{low:.2f}–{high:.2f}×{confirmed}"
    )


def _combined(recs: Sequence[Recommendation]) -> dict[str, str]:
    """Every recommendation's exports together: per-function lists joined with ';'."""
    out: dict[str, list[str]] = defaultdict(list)
    for rec in recs:
        for key, value in rec.export.items():
            if value not in out[key]:
                out[key].append(value)
    if any(len(v) > 1 and not all(":" in x for x in v) for v in out.values()):
        return {}  # two values without a function prefix cannot be combined
    return {k: '"' + ";".join(v) + '"' if len(v) > 1 else v[0] for k, v in out.items()}


def _keep_defaults(rows: Sequence[TuneRow], *, min_gain: float) -> Finding:
    judged = [r for r in rows if r.verdict in ("better", "inside_noise", "slower")]
    slower = {r.setting for r in judged if r.verdict == "slower"}
    mixed = [r for r in judged if r.verdict == "better" and r.setting in slower]
    # what the settings that may be exported (slower nowhere) gained at the least, 95% sure
    lows = [r.gain_ci[0] for r in judged if r.gain_ci and r.setting not in slower]
    supported = max(0.0, max(lows, default=1.0) - 1)
    best = max(judged, key=lambda r: r.gain or 0.0, default=None)
    sizes = len({(r.op, r.size_bytes) for r in rows})
    message = (
        f"NCCL tuning: keep the defaults: no setting beat them by more than {supported:.0%} "
        f"(the best lower end of a 95% interval of the speed-up; a recommendation needs more "
        f"than {min_gain:.0%}), over {_count(len({r.setting for r in judged}), 'setting')} "
        f"at {_count(sizes, 'op size')}"
    )
    unconfirmed = {r.setting for r in rows if r.verdict == "unconfirmed"}
    message += f" ({len(unconfirmed)} more not confirmed by NCCL's log)." if unconfirmed else "."
    if mixed:
        message += (
            " Not counted, as an environment variable applies to every size of its collective: "
            + "; ".join(
                f"{r.setting}, faster on {r.op} at {_gain_text(r)} but slower at "
                + ", ".join(
                    _gain_text(o)
                    for o in judged
                    if o.setting == r.setting and o.verdict == "slower"
                )
                for r in mixed
            )
            + "."
        )
    return Finding(
        id="collectives.tune.keep_defaults", severity="info", scope="group:world",
        message=message,
        evidence={"best": _evidence(best) if best else None, "min_gain": min_gain,
                  "supported_gain": supported},
    )  # fmt: skip


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _unconfirmed(rows: Sequence[TuneRow]) -> Finding:
    names = sorted({f"{r.setting} ({r.op})" for r in rows})
    return Finding(
        id="collectives.tune.unconfirmed", severity="warn", scope="group:world",
        message=(
            "NCCL's log did not show that these settings took effect, so their timings are not "
            f"judged: {'; '.join(names)}."
        ),
        evidence={"rows": [_evidence(r) for r in rows]},
        fix=(
            "Check what the log said (each row's 'log'; the lines are in the run folder, "
            "nccl/tune-rank-*.log): an nccl.conf, NCCL_MIN_CTAS/NCCL_MAX_CTAS or a tuner plugin "
            "(NCCL_TUNER_PLUGIN) can override the setting."
        ),
    )  # fmt: skip


def _wrong(r: TuneRow) -> Finding:
    return Finding(
        id="collectives.tune.wrong_results", severity="fail", scope="group:world",
        message=(
            f"{r.op} of {format_bytes(r.size_bytes)} under {r.setting} produced "
            f"{r.latency.params.get('num_wrong')} wrong elements: do not export it."
        ),
        evidence=_evidence(r),
        fix="Rerun with NCCL_DEBUG=WARN; report the NCCL version and the setting to NVIDIA.",
    )  # fmt: skip


def _evidence(r: TuneRow) -> dict[str, Any]:
    p = r.latency.params
    return {
        "op": r.op, "size_bytes": r.size_bytes, "setting": r.setting, "verdict": r.verdict,
        "median_us": r.latency.value, "gain": r.gain, "gain_ci": r.gain_ci,
        "p_value": r.p_value, "confirmed": p.get("confirmed"), "log": p.get("log"),
    }  # fmt: skip
