"""A stated workload file read (:mod:`.stated_workload` predicts it): the assumptions written
``{assumed = X, ends = [A, B], why = "..."}`` collected and resolved, the points (GPU count,
layout, model, batch, published figure) and the stated links. No I/O here: the command parses
the TOML or YAML."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clusterbench.analyses.prediction.inputs import (
    ASSUMED_INTER_ALPHA_S,
    ASSUMED_INTRA_ALPHA_S,
    assumed_fit,
)
from clusterbench.analyses.prediction.parallel_model import (
    Layout,
    Overlap,
    Shape,
    megatron_flops_per_token,
)
from clusterbench.analyses.prediction.scaling_model import Links

__all__ = [
    "FABRIC_BUSBW_GBPS",
    "LINK_EFFICIENCY",
    "Assumption",
    "Point",
    "collect_assumptions",
    "number",
    "overlap_of",
    "read_points",
    "resolve",
    "stated_links",
    "table",
    "whole",
]

FABRIC_BUSBW_GBPS: dict[str, tuple[float, str]] = {
    "nvlink3": (235.0, "8x A100 NVSwitch all_reduce busbw, docs/reference.md known achievable"),
    "nvlink4": (342.0, "NVLink 4 all_reduce busbw of the H100/H200 spec (hardware/specs.py)"),
}
"""Intra-node all_reduce busbw, GB/s, of a named fabric."""
LINK_EFFICIENCY = (0.94, 0.92, 0.96)
"""(central, low, high) share of an inter-node line rate a large all_reduce reaches per rail:
NDR 400G moves 46-48 GB/s of its 50 (docs/reference.md, known achievable numbers)."""
_UNITS = ("tokens_per_s_per_gpu", "samples_per_s_per_gpu", "samples_per_s", "tflops_per_gpu",
          "mfu", "step_s")  # fmt: skip
_SHARDING = {"ddp": "ddp", "zero1": "zero1", "zero2": "zero2", "fsdp": "fsdp", "zero3": "fsdp"}


@dataclass(frozen=True, slots=True)
class Assumption:
    path: tuple[str | int, ...]
    value: Any
    ends: tuple[Any, ...]
    why: str

    @property
    def name(self) -> str:
        return ".".join(str(p) for p in self.path)


# --- assumptions ---------------------------------------------------------------------------


def collect_assumptions(doc: Any, path: tuple[str | int, ...] = ()) -> list[Assumption]:
    if isinstance(doc, Mapping):
        if "assumed" in doc:
            ends = doc.get("ends", [])
            if not isinstance(ends, list) or len(ends) not in (0, 2):
                raise ValueError(f"{_name(path)}: ends must be a list of two values")
            why = doc.get("why")
            if not isinstance(why, str) or not why:
                raise ValueError(f"{_name(path)}: an assumed value needs its why")
            return [Assumption(path, doc["assumed"], tuple(ends), why)]
        return [a for k, v in doc.items() for a in collect_assumptions(v, (*path, str(k)))]
    if isinstance(doc, list):
        return [a for i, v in enumerate(doc) for a in collect_assumptions(v, (*path, i))]
    return []


def _name(path: Sequence[str | int]) -> str:
    return ".".join(str(p) for p in path) or "the workload"


def resolve(doc: Any, picks: Mapping[tuple[str | int, ...], Any], path: tuple = ()) -> Any:
    if isinstance(doc, Mapping):
        if "assumed" in doc:
            return picks.get(path, doc["assumed"])
        return {k: resolve(v, picks, (*path, str(k))) for k, v in doc.items()}
    if isinstance(doc, list):
        return [resolve(v, picks, (*path, i)) for i, v in enumerate(doc)]
    return doc


# --- reading the resolved document ---------------------------------------------------------


def table(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = doc.get(key, {})
    if not isinstance(value, Mapping):
        raise ValueError(f"{key} must be a table")
    return value


def number(table: Mapping[str, Any], key: str, where: str, default: float | None = None) -> float:
    value = table.get(key, default)
    if value is None:
        raise ValueError(f"{where}.{key} is missing")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{where}.{key} must be a number, got {value!r}")
    if value <= 0:
        raise ValueError(f"{where}.{key} must be > 0, got {value!r}")
    return float(value)


def whole(table: Mapping[str, Any], key: str, where: str, default: int | None = None) -> int:
    value = number(table, key, where, default)
    if value != int(value):
        raise ValueError(f"{where}.{key} must be a whole number, got {value!r}")
    return int(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class Point:
    """One GPU count of the workload: its layout, model shape, batch and published figure."""

    gpus: int
    layout: Layout
    shape: Shape
    global_batch: float
    flops_per_token: float
    published: tuple[str, float] | None


def _flops_per_token(
    model: Mapping[str, Any], where: str, *, formula: str, recompute: bool
) -> float:
    """Training FLOP per token (per sample for models without layers) that the GPU runs."""
    if "flops_per_sample" in model:
        return number(model, "flops_per_sample", where)
    layers, hidden = whole(model, "layers", where), whole(model, "hidden", where)
    seq = whole(model, "seq_len", where)
    if formula == "megatron":
        vocab = whole(model, "vocab", where)
        return megatron_flops_per_token(layers=layers, hidden=hidden, vocab=vocab, seq_len=seq,
                                        recompute=recompute)  # fmt: skip
    if formula != "6n":
        raise ValueError(f"training.flops must be 6n or megatron, got {formula!r}")
    # PaLM appendix B: 6N + 12 L h s (the training benchmark's decoder_flops_per_token); the
    # recomputed forward adds a third
    per = 6 * number(model, "params", where) + 12 * layers * hidden * seq
    return per * 4 / 3 if recompute else per


def _model_of(defaults: Mapping[str, Any], point: Mapping[str, Any]) -> dict[str, Any]:
    model = dict(defaults)
    model.update({k: v for k, v in point.items() if k in _MODEL_KEYS})
    preset = model.pop("preset", None)
    if preset is not None:
        from clusterbench.model_shapes import DECODER_PRESETS

        cfg = DECODER_PRESETS.get(preset)
        if cfg is None:
            raise ValueError(f"model.preset {preset!r} is not a decoder of the training "
                             f"benchmark ({', '.join(DECODER_PRESETS)})")  # fmt: skip
        filled = {
            "params": cfg.num_params_without_embedding() + cfg.vocab_size * cfg.dim,
            "layers": cfg.num_layers, "hidden": cfg.dim, "seq_len": cfg.seq_len,
            "vocab": cfg.vocab_size, "kv_hidden": cfg.num_kv_heads * cfg.head_dim,
        }  # fmt: skip
        model = {**filled, **model}
    return model


_MODEL_KEYS = frozenset({"preset", "params", "layers", "hidden", "seq_len", "vocab", "kv_hidden",
                         "moe_layers", "top_k", "flops_per_sample"})  # fmt: skip
_LAYOUT_KEYS = frozenset({"gpus", "tp", "pp", "cp", "ep", "strategy", "schedule", "virtual_stages",
                          "global_batch", "micro_batch", "published"})  # fmt: skip


def read_points(doc: Mapping[str, Any], *, gpus_per_node: int) -> list[Point]:
    training, model_defaults = table(doc, "training"), table(doc, "model")
    unknown = set(model_defaults) - _MODEL_KEYS
    if unknown:
        raise ValueError(f"model: unknown key {sorted(unknown)[0]!r}")
    raw = doc.get("points")
    if not isinstance(raw, list) or not raw:
        raise ValueError("points: the workload needs at least one point (a GPU count)")
    recompute = bool(training.get("recompute", False))
    formula = str(training.get("flops", "6n"))
    grad_bytes = number(training, "grad_bytes", "training", _default_grad_bytes(training))
    act_bytes = number(training, "act_bytes", "training", 2.0)
    gather_bytes = number(training, "gather_bytes", "training", grad_bytes)
    out = []
    for i, p in enumerate(raw):
        where = f"points[{i}]"
        if not isinstance(p, Mapping):
            raise ValueError(f"{where} must be a table")
        unknown = set(p) - _MODEL_KEYS - _LAYOUT_KEYS
        if unknown:
            raise ValueError(f"{where}: unknown key {sorted(unknown)[0]!r}")
        model = _model_of(model_defaults, p)
        layers = whole(model, "layers", where, 1) if "layers" in model else 1
        strategy = str(p.get("strategy", training.get("strategy", "ddp")))
        if strategy not in _SHARDING:
            raise ValueError(f"{where}.strategy must be one of {', '.join(_SHARDING)}, "
                             f"got {strategy!r}")  # fmt: skip
        gpus = whole(p, "gpus", where)
        tp, pp, cp = (whole(p, k, where, 1) for k in ("tp", "pp", "cp"))
        micro_batch = number(p, "micro_batch", where, training.get("micro_batch"))
        dp = gpus // (tp * pp * cp) if gpus % (tp * pp * cp) == 0 else 0
        if not dp:
            raise ValueError(f"{where}: {gpus} GPUs do not split into TP x PP x CP")
        # without a global batch: one micro-batch per replica
        global_batch = number(p, "global_batch", where, micro_batch * dp)
        microbatches = global_batch / (micro_batch * dp)
        if microbatches < 1 - 1e-9:
            raise ValueError(f"{where}: global_batch {global_batch:g} is less than one micro-batch "
                             f"of {micro_batch:g} on each of {dp} replicas")  # fmt: skip
        schedule = str(p.get("schedule", training.get("schedule", "1f1b")))
        if schedule not in ("1f1b", "interleaved"):
            raise ValueError(f"{where}.schedule must be 1f1b or interleaved, got {schedule!r}")
        virtual = whole(p, "virtual_stages", where, 1)
        if virtual > 1:  # model chunks per GPU: the interleaved schedule
            schedule = "interleaved"
        layout = Layout(
            gpus=gpus, gpus_per_node=gpus_per_node, tp=tp, pp=pp, cp=cp,
            ep=whole(p, "ep", where, 1), sharding=_SHARDING[strategy],  # type: ignore[arg-type]
            schedule=schedule,  # type: ignore[arg-type]
            virtual_stages=virtual,
            microbatches=round(microbatches) if pp > 1 else max(1, round(microbatches)),
        )  # fmt: skip
        has_layers = "flops_per_sample" not in model
        shape = Shape(
            params=number(model, "params", where),
            layers=layers,
            hidden=whole(model, "hidden", where, 1) if has_layers else 1,
            seq_len=whole(model, "seq_len", where, 1) if has_layers else 1,
            micro_batch=micro_batch,
            kv_hidden=int(model["kv_hidden"]) if "kv_hidden" in model else None,
            moe_layers=int(model.get("moe_layers", 0)),
            top_k=int(model.get("top_k", 1)),
            grad_bytes=grad_bytes, gather_bytes=gather_bytes, act_bytes=act_bytes,
            recompute=recompute,
        )  # fmt: skip
        flops = _flops_per_token(model, where, formula=formula, recompute=recompute)
        out.append(Point(gpus=gpus, layout=layout, shape=shape, global_batch=global_batch,
                          flops_per_token=flops, published=_published(p, where)))  # fmt: skip
    return sorted(out, key=lambda q: q.gpus)


def _default_grad_bytes(training: Mapping[str, Any]) -> float:
    precision = str(training.get("precision", "bf16"))
    # mixed precision (amp) keeps fp32 gradients; pure bf16/fp16 reduces 2-byte ones
    return {"amp": 4.0, "fp32": 4.0, "tf32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 2.0}.get(
        precision, 2.0
    )


def _published(p: Mapping[str, Any], where: str) -> tuple[str, float] | None:
    pub = p.get("published")
    if pub is None:
        return None
    if not isinstance(pub, Mapping) or len(pub) != 1:
        raise ValueError(f"{where}.published must name one figure: one of {', '.join(_UNITS)}")
    unit = next(iter(pub))
    if unit not in _UNITS:
        raise ValueError(f"{where}.published: unknown unit {unit!r} (one of {', '.join(_UNITS)})")
    return unit, number(pub, unit, f"{where}.published")


# --- the cluster ---------------------------------------------------------------------------


def stated_links(cluster: Mapping[str, Any], efficiency: float) -> tuple[Links, list[str]]:
    g = whole(cluster, "gpus_per_node", "cluster")
    notes = [
        f"latency per ring step: {ASSUMED_INTRA_ALPHA_S * 1e6:g} us within a node, "
        f"{ASSUMED_INTER_ALPHA_S * 1e6:g} us across nodes (the run prediction's defaults)"
    ]
    intra = None
    if g > 1:
        if "intra_busbw_gbps" in cluster:
            busbw = number(cluster, "intra_busbw_gbps", "cluster")
        else:
            fabric = str(cluster.get("fabric", ""))
            if fabric not in FABRIC_BUSBW_GBPS:
                raise ValueError("cluster needs intra_busbw_gbps (GB/s) or fabric (one of "
                                 f"{', '.join(FABRIC_BUSBW_GBPS)})")  # fmt: skip
            busbw, source = FABRIC_BUSBW_GBPS[fabric]
            notes.append(f"intra-node busbw {busbw:g} GB/s: {source}")
        intra = assumed_fit(ASSUMED_INTRA_ALPHA_S, 1 / (busbw * 1e9))
    if "inter_gbps_per_gpu" in cluster:
        per_gpu = number(cluster, "inter_gbps_per_gpu", "cluster")
    elif "inter_gbps_per_node" in cluster:
        per_gpu = number(cluster, "inter_gbps_per_node", "cluster") / g
    else:
        per_gpu = None
    inter = None
    if per_gpu is not None:
        inter = assumed_fit(ASSUMED_INTER_ALPHA_S, 8 / (per_gpu * 1e9 * efficiency))
    return Links(gpus_per_node=g, intra=intra, inter=inter), notes


def overlap_of(value: Any) -> Overlap:
    if value in ("auto", "none"):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1:
        return float(value)
    raise ValueError(f"training.overlap must be auto, none or a fraction 0..1, got {value!r}")
