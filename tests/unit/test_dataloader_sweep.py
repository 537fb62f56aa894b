"""The dataloader's adaptive worker sweep: the ladder, the stopping rule, a planted slow step."""

from __future__ import annotations

import time

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from clusterbench.benchmarks.dataloader import measure as dl
from clusterbench.benchmarks.dataloader.kinds import SERIAL_MARGIN, worker_counts
from clusterbench.benchmarks.dataloader.sweep import loader_stop
from clusterbench.benchmarks.sweep_stop import PlateauRule, SweepStop
from clusterbench.benchmarks.training.workload import Batch, Workload
from clusterbench.config import ConfigError, build_run_config

# more workers than this machine's cores: the planted samples sleep, they do not compute
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")

PLATEAU = PlateauRule(tolerance=0.10, patience=2)
SAMPLE_S = 0.0125
"""Each sample of the planted dataset sleeps this long: the loader's rate is set by the sleep
(1 / SAMPLE_S samples/s per worker), not by how loaded the machine's cores are."""


class _SleepyTokens(torch.utils.data.Dataset[Batch]):
    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> Batch:
        time.sleep(SAMPLE_S)
        x = torch.randint(0, 100, (16,))
        return x, x


def _decoder() -> Workload:
    model = nn.Sequential(nn.Embedding(100, 16), nn.Linear(16, 100))

    def make_batch(n: int) -> Batch:
        x = torch.randint(0, 100, (n, 16))
        return x, x

    def loss_fn(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.flatten(0, 1), y.flatten())

    return Workload(name="toy", kind="decoder", model=model, make_batch=make_batch,
                    loss_fn=loss_fn, flops_per_sample=1.0, tokens_per_sample=16)  # fmt: skip


def test_worker_ladder_goes_up_to_the_cores() -> None:
    assert worker_counts([], cores=1) == [0, 1]
    assert worker_counts([], cores=2) == [0, 1, 2]
    assert worker_counts([], cores=12) == [0, 1, 2, 4, 8, 12]
    assert worker_counts([], cores=16) == [0, 1, 2, 4, 8, 16]
    assert worker_counts([8, 0, 2, 4], cores=3) == [0, 2, 3]


def test_stop_rule() -> None:
    def stop(counts: list[tuple[int, float]], *, demand: float) -> SweepStop | None:
        return loader_stop(counts, remaining=[99], demand=demand, margin=1.5, plateau=PLATEAU,
                           dataset="images")  # fmt: skip

    # with workers, 1.5x the step's demand is enough; without, loading and the step take turns
    assert stop([(0, 100.0), (1, 160.0)], demand=100.0) is not None
    assert stop([(0, 100.0), (1, 140.0)], demand=100.0) is None
    assert stop([(0, 1000.0)], demand=100.0) is None
    found = stop([(0, SERIAL_MARGIN * 100.0)], demand=100.0)
    assert found is not None and found.reason == "sufficient" and found.last == "0 workers"
    # flat: two counts in a row within 10% of the best before them, counted from 1 worker on
    # (1 worker slower than 0 is no plateau)
    assert stop([(0, 100.0), (1, 50.0), (2, 100.0), (4, 200.0)], demand=1e6) is None
    flat = stop([(0, 10.0), (1, 100.0), (2, 105.0), (4, 108.0)], demand=1e6)
    assert flat is not None and flat.reason == "plateau" and flat.best == 108.0
    assert stop([(0, 10.0), (1, 100.0), (2, 105.0), (4, 120.0)], demand=1e6) is None
    # nothing left to skip: no stop to record
    assert loader_stop([(0, 1e9)], remaining=[], demand=1.0, margin=1.5, plateau=PLATEAU,
                       dataset="images") is None  # fmt: skip


def test_settings() -> None:
    standard = dl.DataloaderConfig.preset(suite="standard", device_type="cuda")
    assert standard.sweep_stop and standard.num_workers == []  # the ladder
    assert not dl.DataloaderConfig.preset(suite="full", device_type="cuda").sweep_stop
    for setting, message in (
        ("dataloader.step_s=-1", "step_s must be >= 0"),
        ("dataloader.plateau_patience=0", "plateau_patience must be >= 1"),
        ("dataloader.plateau_tolerance=1.5", r"plateau_tolerance must be in \[0, 1\)"),
    ):
        with pytest.raises(ConfigError, match=message):
            build_run_config(device_type="cpu", suite="standard", sets=[setting])
