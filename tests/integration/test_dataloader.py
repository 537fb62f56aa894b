"""The dataloader benchmark with real worker processes: files written and removed, and workers
started as in a fresh interpreter even inside a spawned rank."""

from __future__ import annotations

import multiprocessing
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from clusterbench.benchmarks.dataloader import measure as dl
from clusterbench.benchmarks.dataloader import workload as dataloader_workload
from clusterbench.benchmarks.dataloader.sweep import LoaderSetting
from clusterbench.benchmarks.dataloader.timing import make_loader, worker_start_method
from clusterbench.benchmarks.training.workload import Workload
from clusterbench.schema import Measurement
from tests.unit.test_dataloader import _RANK_STATE, _ctx, _decoder


def _workload(name: str, *, device: torch.device, seq_len: int | None = None) -> Workload:
    if name == dataloader_workload.SMALL_CNN:
        return dataloader_workload.small_cnn_workload(device=device)
    return _decoder(seq_len or 16)


def test_dataloader_writes_measures_and_cleans_up(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(dl, "load_workload", _workload)
    cfg = dl.DataloaderConfig.preset(suite="quick", device_type="cpu")
    cfg.data_dir = str(tmp_path)
    seen: set[Path] = set()
    ms = []
    for m in dl.dataloader(_ctx(), cfg):
        seen.update(tmp_path.rglob("*"))  # while the generator runs, the files exist
        if isinstance(m, Measurement):  # a stopped sweep also records its finding
            ms.append(m)
    assert any(p.suffix == ".jpg" for p in seen) and any(p.name == "tokens.bin" for p in seen)
    assert list(tmp_path.iterdir()) == []  # removed afterwards
    by_metric = {(m.metric, m.params["dataset"]) for m in ms}
    for dataset in ("images", "tokens"):
        for metric in ("loader_samples_per_s", "step_samples_per_s", "gpu_busy"):
            assert (metric, dataset) in by_metric
    assert all(m.value > 0 for m in ms)
    assert all(0 < m.value <= 100 for m in ms if m.metric == "gpu_busy")


class _SeesRankState(torch.utils.data.Dataset[torch.Tensor]):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.tensor(_RANK_STATE["set"])


def _rank(out: Any) -> None:
    _RANK_STATE["set"] = True
    setting = LoaderSetting(num_workers=2, pin_memory=False, prefetch_factor=2)
    loader = make_loader(_SeesRankState(), setting=setting, batch_size=2, num_batches=4)
    out.put([bool(b.all()) for b in loader])


def test_loader_workers_start_as_in_a_fresh_interpreter_even_in_a_spawned_rank() -> None:
    method = worker_start_method()
    if sys.platform.startswith("linux"):
        assert method == ("forkserver" if sys.version_info >= (3, 14) else "fork")
    if method != "fork":
        pytest.skip(f"workers start by {method} here: they re-import, as in a fresh interpreter")
    spawn = multiprocessing.get_context("spawn")  # as the benchmark's ranks start
    queue = spawn.Queue()
    rank = spawn.Process(target=_rank, args=(queue,))
    rank.start()
    seen = queue.get(timeout=120)
    rank.join(timeout=60)
    assert rank.exitcode == 0
    assert seen == [True] * 4  # every batch came from a forked worker
