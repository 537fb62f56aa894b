"""`clusterbench launch`: the generated commands and scripts, and the CLI's checks."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from clusterbench.cli import app
from clusterbench.launchers import (
    DEFAULT_IMAGE,
    LaunchSpec,
    k8s_manifest,
    mpi_command,
    slurm_script,
    to_yaml,
    torchrun_command,
)

SPEC = LaunchSpec(nodes=4, gpus_per_node=8, suite="standard", run_args=("--only", "network"))
runner = CliRunner()


def _command_line(text: str) -> list[str]:
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert len(lines) == 1, text
    return shlex.split(lines[0])


def _after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_torchrun_command() -> None:
    argv = _command_line(torchrun_command(SPEC))
    assert argv[0] == "torchrun"
    assert _after(argv, "--nnodes") == "4" and _after(argv, "--nproc-per-node") == "8"
    assert _after(argv, "--rdzv-backend") == "c10d"
    assert _after(argv, "--rdzv-endpoint") == "FIRST_NODE_ADDRESS:29500"
    assert argv[argv.index("-m") :] == [
        *("-m", "clusterbench", "run", "--suite", "standard", "--only", "network")
    ]
    text = torchrun_command(LaunchSpec(nodes=2, gpus_per_node=1, master_addr="10.0.0.1"))
    assert "every" in text.splitlines()[0] or "each" in text.splitlines()[0]
    assert _after(_command_line(text), "--rdzv-endpoint") == "10.0.0.1:29500"


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


def test_mpi_command() -> None:
    argv = _command_line(mpi_command(SPEC))
    assert argv[0] == "mpirun" and _after(argv, "-np") == "32"
    assert _after(argv, "--map-by") == "ppr:8:node" and _after(argv, "--hostfile") == "hosts.txt"
    exported = [argv[i + 1] for i, a in enumerate(argv) if a == "-x"]
    assert "MASTER_PORT=29500" in exported
    assert any(x.startswith("MASTER_ADDR=") for x in exported)
    assert argv[-6:] == ["clusterbench", "run", "--suite", "standard", "--only", "network"]


def test_k8s_manifest_yaml_structure() -> None:
    spec = LaunchSpec(
        nodes=4,
        gpus_per_node=8,
        suite="standard",
        run_args=("--only", "network"),
        env=(("NCCL_SOCKET_IFNAME", "eth0"), ("NCCL_DEBUG", "INFO"), ("FLAG", "true")),
    )
    manifest = yaml.safe_load(k8s_manifest(spec))
    assert list(manifest) == ["apiVersion", "kind", "metadata", "spec"]  # sort_keys=False
    assert manifest["apiVersion"] == "kubeflow.org/v1" and manifest["kind"] == "PyTorchJob"
    assert manifest["metadata"] == {"name": "clusterbench"}
    replicas = manifest["spec"]["pytorchReplicaSpecs"]
    assert list(replicas) == ["Master", "Worker"]
    assert replicas["Master"]["replicas"] == 1 and replicas["Worker"]["replicas"] == 3
    for replica in replicas.values():
        assert replica["restartPolicy"] == "Never"
        pod = replica["template"]["spec"]
        assert pod["volumes"] == [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
        (container,) = pod["containers"]
        assert container["name"] == "pytorch" and container["image"] == DEFAULT_IMAGE
        assert container["command"] == ["torchrun"]
        assert container["args"] == [
            "--nnodes=4",
            "--nproc-per-node=8",
            "--node-rank=$(RANK)",
            "--master-addr=$(MASTER_ADDR)",
            "--master-port=$(MASTER_PORT)",
            *("-m", "clusterbench", "run", "--suite", "standard", "--only", "network"),
        ]
        assert container["ports"] == [{"name": "pytorchjob-port", "containerPort": 29500}]
        assert container["resources"] == {"limits": {"nvidia.com/gpu": 8}}
        assert container["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]
        # values stay strings, "true" included
        assert container["env"] == [
            {"name": "NCCL_SOCKET_IFNAME", "value": "eth0"},
            {"name": "NCCL_DEBUG", "value": "INFO"},
            {"name": "FLAG", "value": "true"},
        ]
    assert replicas["Master"]["template"] == replicas["Worker"]["template"]


def test_k8s_manifest_yaml_matches_json() -> None:
    for spec in (SPEC, LaunchSpec(nodes=1, gpus_per_node=2, port=1234, name="one-node")):
        assert yaml.safe_load(k8s_manifest(spec)) == json.loads(k8s_manifest(spec, fmt="json"))


def test_k8s_manifest_single_node_has_no_worker_and_no_env() -> None:
    manifest = yaml.safe_load(k8s_manifest(LaunchSpec(nodes=1, gpus_per_node=2)))
    replicas = manifest["spec"]["pytorchReplicaSpecs"]
    assert list(replicas) == ["Master"] and replicas["Master"]["replicas"] == 1
    (container,) = replicas["Master"]["template"]["spec"]["containers"]
    assert "env" not in container
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 2


def test_k8s_manifest_yaml_writes_both_templates_in_full() -> None:
    # a dict shared between Master and Worker would be dumped as an anchor and an alias
    events = yaml.parse(k8s_manifest(SPEC))
    assert not any(isinstance(e, yaml.AliasEvent) or getattr(e, "anchor", None) for e in events)


def test_to_yaml_round_trips_odd_values_in_order() -> None:
    odd = {
        "z": ["x: y", "#z", "", 'q"', "8", "yes", "null", "ünï", "a " * 60],
        "b": {},
        "c": [],
        "d": [[1, 2], {"e": True, "f": None, "g": 1.5}],
    }
    loaded = yaml.safe_load(to_yaml(odd))
    assert loaded == odd and list(loaded) == ["z", "b", "c", "d"]


def test_spec_checks() -> None:
    with pytest.raises(ValueError, match="--nodes"):
        LaunchSpec(nodes=0, gpus_per_node=8)
    with pytest.raises(ValueError, match="--gpus-per-node"):
        LaunchSpec(nodes=1, gpus_per_node=0)
    with pytest.raises(ValueError, match="--name"):
        LaunchSpec(nodes=1, gpus_per_node=1, name="Bad_Name")


def test_cli_launch_slurm_and_out_file(tmp_path: Path) -> None:
    result = runner.invoke(app, ["launch", "--slurm", "--nodes", "4", "--gpus-per-node", "8"])
    assert result.exit_code == 0, result.output
    assert "#SBATCH --nodes=4" in result.stdout
    out = tmp_path / "k8s.yaml"
    args = ["launch", "--k8s", "--nodes", "2", "--gpus-per-node", "8", "--out", str(out)]
    result = runner.invoke(app, [*args, "--", "--only", "network"])
    assert result.exit_code == 0, result.output
    manifest = yaml.safe_load(out.read_text(encoding="utf-8"))
    assert manifest["kind"] == "PyTorchJob"
    replicas = manifest["spec"]["pytorchReplicaSpecs"]
    assert replicas["Master"]["replicas"] == 1 and replicas["Worker"]["replicas"] == 1
    args = replicas["Worker"]["template"]["spec"]["containers"][0]["args"]
    assert "--nnodes=2" in args and args[-2:] == ["--only", "network"]


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--nodes", "2", "--gpus-per-node", "8"], "exactly one of"),
        (["--slurm", "--mpi", "--nodes", "2", "--gpus-per-node", "8"], "exactly one of"),
        (["--slurm", "--nodes", "0", "--gpus-per-node", "8"], "--nodes must be at least 1"),
        (["--slurm", "--nodes", "2", "--gpus-per-node", "0"], "--gpus-per-node"),
        (["--slurm", "--gpus-per-node", "8"], "required"),
        (["--slurm", "--nodes", "2", "--gpus-per-node", "8", "--suite", "huge"], "unknown suite"),
        (["--k8s", "--nodes", "2", "--gpus-per-node", "8", "--format", "xml"], "--format"),
        (["--mpi", "--nodes", "2", "--gpus-per-node", "8", "--env", "NOEQUALS"], "KEY=VALUE"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(args: list[str], text: str) -> None:
    result = runner.invoke(app, ["launch", *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("clusterbench: error:") and text in lines[0]
