"""Which partition of the global batch to train with (``training.partition``): the candidates
the run measured, the ones past its world that the scaling model predicts, and whether any
measured one beat the default beyond the noise.

- Measured rows: each candidate's time to batch (``partition_time_to_batch_ms``, the optimizer
  step) and throughput, or why it did not run (``fits`` 0).
- The rule: a measured candidate beats the default partition (the workload's batch_size at the
  largest world size) when its step-time samples beat the default's beyond the noise
  (:func:`clusterbench.judging.advice.compare_samples`: one-sided Mann-Whitney p below
  ``regression_alpha``, 0.01, and the 95% bootstrap interval of the speed-up wholly above 1)
  and the time it saves is above the practical limit (``regression_min_rel``, 5%; on CPU
  workers ``regression_min_rel_cpu``: :func:`clusterbench.thresholds.practical_floor`).  The
  fastest candidate that does is recommended; with none, the default stays.
- Predicted rows: data-parallel sizes past the run's (its largest world size times 2, 4, ...
  dividing the global batch, up to ``training.partition_predict_up_to``), each micro-batch m
  whose step the run measured on one rank.  The compute of one micro-step c(m) is that step
  / its k micro-steps; the time to batch of d x m x k is

      (k - 1) c(m) + predict_step(compute c(m), the run's links, gradient bytes, overlap, d)

  (the gradients are synchronised on the last micro-step only, its communication hidden under
  that micro-step at most), with the band of the link fits.  The inputs are the scaling
  prediction's (:func:`clusterbench.analyses.prediction.predict.predict`): links, gradient bytes,
  overlap, GPUs per node, and which of them are assumed.
- The model's own error: every measured candidate at d > 1 predicted the same way from its
  one-rank twin, against what it measured (and the scaling prediction's validation).
  Predicted rows are never recommended: they come with that error.

Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from clusterbench.analyses.prediction import inputs
from clusterbench.analyses.prediction.predict import Prediction, predict
from clusterbench.analyses.prediction.scaling_model import Links, Validation, Workload, predict_step
from clusterbench.declared.training import PARTITION_PREDICT_UP_TO
from clusterbench.declared.training import TrainingMetrics as T
from clusterbench.judging.advice import compare_samples
from clusterbench.schema import Measurement, Results
from clusterbench.thresholds import Thresholds, practical_floor

__all__ = [
    "DEFAULT_PREDICT_UP_TO",
    "Check",
    "Partition",
    "Row",
    "analyse",
    "judged",
    "measured_rows",
    "predicted_rows",
]

DEFAULT_PREDICT_UP_TO = PARTITION_PREDICT_UP_TO
Basis = Literal["measured", "predicted"]
Verdict = Literal["default", "better", "not_better", "unjudged", "not_run", "predicted"]
"""``better``: beat the default beyond the noise and the practical limit; ``not_better``:
judged, did not (slower, or faster inside the noise or the limit); ``unjudged``: too few steps
for the test (or no default to compare with)."""
Key = tuple[int, int, int, bool]
"""(d, micro_batch, accum, activation_checkpointing)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One partition: measured (or not run), or predicted."""

    d: int
    micro_batch: int
    accum: int
    activation_checkpointing: bool
    basis: Basis
    time_ms: float | None
    """Time to batch (the optimizer step): the measured median, or predicted; None: it did
    not run."""
    low_ms: float | None = None
    """Predicted: the band's low end; measured: the fastest step."""
    high_ms: float | None = None
    throughput: float | None = None
    """Global batch (x tokens per sample for decoders) / time to batch."""
    default: bool = False
    verdict: Verdict = "unjudged"
    reason: str = ""
    """Not run: why; unjudged or inside the noise: what the test said."""
    samples_ms: tuple[float, ...] = ()
    gain: float | None = None
    """Measured: the time it saves against the default, 1 - this / default."""
    p_value: float | None = None
    noise: float | None = None
    """Half-width of the gain's 95% interval (measured, judged)."""
    assumed: tuple[str, ...] = ()
    """Predicted: the assumed inputs it rests on."""
    compute_s: float | None = None
    """Predicted: the compute of one micro-step, c(m)."""

    @property
    def key(self) -> Key:
        return (self.d, self.micro_batch, self.accum, self.activation_checkpointing)

    @property
    def label(self) -> str:
        """d×m×k, "+ckpt" with activation checkpointing."""
        ckpt = " +ckpt" if self.activation_checkpointing else ""
        return f"{self.d}×{self.micro_batch}×{self.accum}{ckpt}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    """One measured candidate at d > 1 predicted from its one-rank twin."""

    row: Row
    predicted_ms: float

    @property
    def rel_error(self) -> float:
        """(predicted - measured) / measured."""
        assert self.row.time_ms is not None
        return (self.predicted_ms - self.row.time_ms) / self.row.time_ms


@dataclass(frozen=True, slots=True, kw_only=True)
class Partition:
    """The run's partition search, judged."""

    model: str
    strategy: str
    global_batch: int
    unit: str
    """Of the throughput: tokens/s or samples/s."""
    on_cpu: bool
    rows: tuple[Row, ...]
    """Measured and predicted, fastest first; those that did not run last."""
    alpha: float
    min_gain: float
    checks: tuple[Check, ...] = ()
    validation: Validation | None = None
    """The scaling prediction's own check on the training series."""
    prediction_note: str = ""
    """Why there are no predicted rows, or notes on them ('' when there is nothing to say)."""

    @property
    def default(self) -> Row | None:
        return next((r for r in self.rows if r.default), None)

    @property
    def recommended(self) -> Row | None:
        """The fastest measured row that beat the default beyond the noise."""
        return next((r for r in self.rows if r.verdict == "better"), None)

    @property
    def model_error(self) -> float | None:
        """The largest |error| the run measured of the model: the partition's own checks,
        else the scaling prediction's validation; None when neither was made."""
        if self.checks:
            return max(abs(c.rel_error) for c in self.checks)
        return self.validation.max_abs_rel_error if self.validation else None

    def runner_ups(self, n: int = 3) -> list[Row]:
        """The ``n`` fastest rows after the recommended one (or the default), any basis."""
        top = self.recommended or self.default
        return [r for r in self.rows if r.time_ms is not None and r is not top][:n]


def _int(m: Measurement, key: str) -> int:
    value = m.params.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _key(m: Measurement) -> Key:
    p = m.params
    ckpt = p.get("activation_checkpointing") is True
    return (_int(m, "d"), _int(m, "micro_batch"), _int(m, "accum"), ckpt)


def _of_series(results: Results) -> list[Measurement]:
    return [
        m
        for m in results.measurements
        if m.benchmark == "training" and m.params.get("series") == "partition"
    ]


def measured_rows(ms: Sequence[Measurement]) -> list[Row]:
    """A row per candidate of the search (order kept), not yet judged."""
    times = {_key(m): m for m in T.partition_time_to_batch_ms.select(ms)}
    rates = {
        _key(m): m.value
        for metric in (T.partition_tokens_per_s, T.partition_samples_per_s)
        for m in metric.select(ms)
    }
    rows = []
    for m in T.fits.select(ms):
        d, micro, accum, ckpt = key = _key(m)
        t = times.get(key)
        samples = tuple(t.stats.values or ()) if t is not None and t.stats else ()
        rows.append(
            Row(
                d=d, micro_batch=micro, accum=accum, activation_checkpointing=ckpt,
                basis="measured", time_ms=t.value if t is not None else None,
                low_ms=min(samples) if samples else None,
                high_ms=max(samples) if samples else None, throughput=rates.get(key),
                default=m.params.get("default") is True,
                verdict="unjudged" if m.value and t is not None else "not_run",
                reason=str(m.params.get("reason") or ""), samples_ms=samples,
            )
        )  # fmt: skip
    return rows


def judged(rows: Sequence[Row], *, alpha: float, min_gain: float) -> list[Row]:
    """Each measured row that ran against the default's samples (the module docstring's rule)."""
    default = next((r for r in rows if r.default and r.time_ms is not None), None)
    out = []
    for r in rows:
        if r.basis != "measured" or r.time_ms is None:
            out.append(r)
        elif default is None:
            out.append(replace(r, reason="the default partition did not run"))
        elif r is default:
            out.append(replace(r, verdict="default", gain=0.0))
        else:
            out.append(_judge(r, default, alpha=alpha, min_gain=min_gain))
    return out


def _judge(r: Row, default: Row, *, alpha: float, min_gain: float) -> Row:
    assert r.time_ms is not None and default.time_ms is not None
    gain = 1 - r.time_ms / default.time_ms
    got = compare_samples(default.samples_ms, r.samples_ms, better="lower", alpha=alpha)
    n = f"{len(r.samples_ms)} vs {len(default.samples_ms)} steps"
    if got is None:
        return replace(r, gain=gain, reason=f"{n}: too few for p < {alpha:g}")
    lo, hi = got.interval
    test = f"{n}, Mann-Whitney p {got.p_value:.2g}, speed-up 95% CI {lo:.3g}–{hi:.3g}x"
    better = got.beyond_noise and got.gain > min_gain
    return replace(
        r, verdict="better" if better else "not_better", gain=got.gain, p_value=got.p_value,
        noise=got.noise, reason=test,
    )  # fmt: skip


def _predict_up_to(results: Results) -> int:
    benchmarks = results.run.config.get("benchmarks") or {}
    value = (benchmarks.get("training") or {}).get("partition_predict_up_to")
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    return value if ok else DEFAULT_PREDICT_UP_TO  # type: ignore[return-value]


def _predicted_sizes(batch: int, *, world: int, up_to: int, gpus_per_node: int) -> list[int]:
    """world x 2, x 4, ... up to ``up_to``, dividing ``batch``, whole nodes past one node."""
    out, d = [], 2 * world
    while d <= min(up_to, batch):
        if batch % d == 0 and (d <= gpus_per_node or d % gpus_per_node == 0):
            out.append(d)
        d *= 2
    return out


def _links(p: Prediction) -> Links:
    """The links the scaling prediction predicts with (the same construction as its own)."""
    g = p.gpus_per_node
    return Links(gpus_per_node=g, intra=p.intra.fit if p.intra and g > 1 else None,
                 inter=p.inter.fit)  # fmt: skip


def _time_ms(p: Prediction, *, compute_s: float, d: int, accum: int) -> tuple[float, float, float]:
    """(time to batch, band low, band high) in ms of d ranks, k micro-steps of compute c each."""
    w = Workload(compute_s=compute_s, grad_bytes=p.grad_bytes.value, overlap=p.overlap.value)
    step = predict_step(w, _links(p), world_size=d, strategy=p.strategies[0],
                        confidence=p.confidence)  # fmt: skip
    before = (accum - 1) * compute_s  # the micro-steps before the synchronised one
    low, high = before + step.step_low_s, before + step.step_high_s
    return 1e3 * (before + step.step_s), 1e3 * low, 1e3 * high


def _compute(rows: Sequence[Row]) -> dict[tuple[int, bool], float]:
    """c(m) per (micro-batch, checkpointing): the one-rank time to batch / its micro-steps."""
    return {
        (r.micro_batch, r.activation_checkpointing): r.time_ms / 1e3 / r.accum
        for r in rows
        if r.basis == "measured" and r.d == 1 and r.time_ms is not None
    }


def predicted_rows(
    rows: Sequence[Row], p: Prediction, *, batch: int, sizes: Sequence[int], unit_work: float
) -> tuple[list[Row], list[Check]]:
    """The predicted rows at ``sizes`` and the model's checks on the measured rows at d > 1
    (``unit_work``: tokens per sample for decoders, else 1).  The checks need the run's own
    links: made when the prediction is for the run's ranks per node."""
    compute = _compute(rows)
    assumed = {r.world_size: r.assumed for r in p.rows if r.strategy == p.strategies[0]}
    out = []
    for d in sizes:
        for (m, ckpt), c in sorted(compute.items()):
            if (batch // d) % m:
                continue
            k = batch // (d * m)
            t, low, high = _time_ms(p, compute_s=c, d=d, accum=k)
            out.append(Row(
                d=d, micro_batch=m, accum=k, activation_checkpointing=ckpt, basis="predicted",
                time_ms=t, low_ms=low, high_ms=high, throughput=batch * unit_work / (t / 1e3),
                verdict="predicted", assumed=assumed.get(d, ()), compute_s=c,
            ))  # fmt: skip
    checks = []
    for r in rows:
        twin = compute.get((r.micro_batch, r.activation_checkpointing))
        if r.basis == "measured" and r.d > 1 and r.time_ms is not None and twin is not None:
            predicted_ms = _time_ms(p, compute_s=twin, d=r.d, accum=r.accum)[0]
            checks.append(Check(row=r, predicted_ms=predicted_ms))
    return out, checks


def _prediction(
    results: Results, rows: Sequence[Row], *, batch: int, thresholds: Thresholds
) -> tuple[list[Row], list[Check], Validation | None, str]:
    world = max((r.d for r in rows), default=1)
    g = inputs.gpus_per_node(results, None, "GPU")[0]
    sizes = _predicted_sizes(batch, world=world, up_to=_predict_up_to(results), gpus_per_node=g)
    if not _compute(rows):
        return (
            [],
            [],
            None,
            "no candidate ran on one rank, so no compute per micro-step is known",
        )
    try:
        p = predict(results, gpu_counts=sizes or [world],
                    target=thresholds.prediction_target_efficiency)  # fmt: skip
    except (ValueError, ArithmeticError) as exc:  # NoPrediction, or inputs the model refuses
        return [], [], None, f"no prediction: {exc}"
    tokens = _tokens_per_sample(_of_series(results))
    predicted, checks = predicted_rows(rows, p, batch=batch, sizes=sizes, unit_work=tokens)
    notes = [] if sizes else [f"no data-parallel size past {world} divides the global batch "
                              f"{batch} (up to {_predict_up_to(results)})"]  # fmt: skip
    if inputs.ranks_per_node(results) != p.gpus_per_node:
        checks = []
        notes.append(f"the model is not checked on the partition: predicted at {g} per node, "
                     "the run had one")  # fmt: skip
    return predicted, checks, p.validation, "; ".join(notes)


def _tokens_per_sample(ms: Sequence[Measurement]) -> int:
    """A decoder's tokens per sample (the candidates' seq_len), else 1."""
    seq_len = ms[0].params.get("seq_len") if ms else None
    return seq_len if isinstance(seq_len, int) and not isinstance(seq_len, bool) else 1


def analyse(results: Results, thresholds: Thresholds) -> Partition | None:
    """The run's partition search judged, with its predicted rows (None: no search ran)."""
    ms = _of_series(results)
    if not ms:
        return None
    first = ms[0]
    device = first.device
    min_gain = practical_floor("ms", thresholds, device=device)[0]
    alpha = thresholds.regression_alpha
    batch = _int(first, "global_batch")
    rows = judged(measured_rows(ms), alpha=alpha, min_gain=min_gain)
    predicted, checks, validation, note = _prediction(results, rows, batch=batch,
                                                      thresholds=thresholds)  # fmt: skip
    ranked = sorted([*rows, *predicted], key=_rank)
    decoder = any(T.partition_tokens_per_s.matches(m) for m in ms)
    return Partition(
        model=str(first.params.get("model")), strategy=str(first.params.get("strategy")),
        global_batch=batch, unit="tokens/s" if decoder else "samples/s",
        on_cpu=device.startswith("cpu"), rows=tuple(ranked), alpha=alpha, min_gain=min_gain,
        checks=tuple(checks), validation=validation, prediction_note=note,
    )  # fmt: skip


def _rank(r: Row) -> tuple[bool, float, int]:
    """Fastest first; measured before predicted at an equal time; not run last."""
    t = r.time_ms if r.time_ms is not None and math.isfinite(r.time_ms) else math.inf
    return (r.time_ms is None, t, 0 if r.basis == "measured" else 1)
