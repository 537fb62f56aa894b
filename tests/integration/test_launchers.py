"""The Slurm script that ``clusterbench launch`` writes passes ``bash -n``."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from clusterbench.job_scripts import (
    LaunchSpec,
    slurm_script,
)

SPEC = LaunchSpec(nodes=4, gpus_per_node=8, suite="standard", run_args=("--only", "network"))


def test_slurm_script_has_the_numbers_and_passes_bash_n(tmp_path: Path) -> None:
    text = slurm_script(SPEC)
    for line in (
        "#SBATCH --nodes=4",
        "#SBATCH --ntasks-per-node=8",
        "#SBATCH --gpus-per-node=8",
        "#SBATCH --exclusive",
        "export MASTER_PORT=29500",
    ):
        assert line in text.splitlines()
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1' in text
    assert text.splitlines()[-1].startswith("srun ") and "clusterbench run --suite standard" in text
    if shutil.which("bash") is None:
        pytest.skip("bash not installed")
    script = tmp_path / "job.sbatch"
    script.write_text(text)
    proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
