"""The NCCL tuning sweep on two GPUs: every setting either ran, proven by NCCL's own log, or was
refused by NCCL and said so; outputs exact; one verdict (export or keep the defaults).

No speed is asserted: which setting wins is the machine's to say.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from clusterbench import load_results

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs"),
]


def test_tuning_sweep_two_gpus(tmp_path: Path) -> None:
    out = tmp_path / "run"
    sets = [
        "collectives.ops=all_reduce", "collectives.modes=back_to_back",
        "collectives.max_bytes=1048576", "collectives.tune=true",
        "collectives.tune_ops=all_reduce,all_gather", "collectives.tune_sizes=32768,4194304",
        "collectives.tune_channels=8", "collectives.tune_repeats=4",
    ]  # fmt: skip
    args = ["run", "--device", "cuda", "--nproc", "2", "--only", "collectives", "--nccl-debug"]
    args += [item for s in sets for item in ("--set", s)] + ["--out", str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "clusterbench", *args],
        capture_output=True, text=True, timeout=600, env={**os.environ}, check=False,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    results = load_results(out)
    assert results.run.status == "completed" and results.errors == [], results.errors
    tune = [m for m in results.measurements if m.metric == "tune_latency_us"]
    refused = {f.evidence["setting"] for f in results.findings if f.id.endswith("not_supported")}
    ran = {str(m.params["setting"]) for m in tune}
    planned = {"default", "channels=8"} | {
        f"NCCL_ALGO=allreduce:{a} NCCL_PROTO=allreduce:{p}"
        for a in ("Ring", "Tree")
        for p in ("LL", "LL128", "Simple")
    }
    planned |= {
        f"NCCL_ALGO=allgather:Ring NCCL_PROTO=allgather:{p}" for p in ("LL", "LL128", "Simple")
    }
    assert ran | refused == planned and not ran & refused, (ran, refused)
    assert "default" in ran
    for m in tune:
        p = m.params
        assert p["num_wrong"] == 0, p
        assert p["confirmed"] is True, p  # NCCL's log showed the setting on every rank
        if p["setting_kind"] == "algo_proto":  # --nccl-debug: rank 0's per-op lines too
            assert (p["log_algo"], p["log_proto"]) == (
                str(p["algo"]).upper(), str(p["proto"]).upper(),
            ), p  # fmt: skip
        if p["setting_kind"] == "channels":
            assert p["log_channels"] == 8, p
    verdicts = [f.id for f in results.findings if f.id.startswith("collectives.tune.")]
    assert ("collectives.tune.keep_defaults" in verdicts) != (
        "collectives.tune.recommend" in verdicts
    ), verdicts
    assert (out / "nccl" / "tune-rank-00000.log").read_text().count("# NCCL tuning: ") >= 3
