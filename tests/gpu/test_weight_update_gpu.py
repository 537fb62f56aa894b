"""weight_update on cuda:0 with the 125m model: the reference check passes for every optimizer
and layout, and the figures are physically sane.

Speed targets belong to scripts/gpu_validate.sh and docs/results/; these bounds only catch a
broken measurement (bytes counted wrong, a step not timed, a fused path that is not fused).
"""

from __future__ import annotations

import pytest
import torch

from clusterbench.benchmarks.weight_update import WeightUpdateConfig
from clusterbench.benchmarks.weight_update.measure import weight_update
from clusterbench.benchmarks.weight_update.optimizers import LAYOUTS, OPTIMIZERS
from clusterbench.schema import Measurement
from tests.helpers import gpu_ctx

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def value(ms: list[Measurement], metric: str, optimizer: str, layout: str) -> Measurement:
    (m,) = [
        m
        for m in ms
        if m.metric == metric and (m.params["optimizer"], m.params["layout"]) == (optimizer, layout)
    ]
    return m


def test_weight_update_gpu() -> None:
    torch.cuda.set_device(0)
    cfg = WeightUpdateConfig(model="125m", warmup=3, repeats=10)
    ms = list(weight_update(gpu_ctx("weight_update"), cfg))
    for optimizer in OPTIMIZERS:
        for layout in LAYOUTS:
            err = value(ms, "update_rel_error", optimizer, layout)
            assert err.value < float(err.params["tolerance"])  # type: ignore[arg-type]
            bw = value(ms, "bandwidth", optimizer, layout)
            assert bw.value > 0
            if bw.reference is not None:  # a known GPU: never above its HBM spec
                assert bw.value < bw.reference.value
    for family in ("adamw", "sgd"):
        for layout in LAYOUTS:
            fused = value(ms, "step_time_ms", f"{family}_fused", layout).value
            foreach = value(ms, "step_time_ms", f"{family}_foreach", layout).value
            assert fused < foreach, (family, layout)  # one pass against several
    fp32 = value(ms, "bandwidth", "adamw_fused", "fp32")
    if fp32.reference is not None:
        assert fp32.value > 0.3 * fp32.reference.value  # 125m: ~3.5 GB of state per update
