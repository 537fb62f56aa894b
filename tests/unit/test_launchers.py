"""`clusterbench launch`: the generated commands and scripts, and the CLI's checks."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from clusterbench.cli import app
from clusterbench.job_scripts import (
    RESULTS_MOUNT,
    LaunchSpec,
    k8s_manifest,
    mpi_command,
    ray_commands,
    slurm_script,
    to_yaml,
    torchrun_command,
)

IMAGE = "registry.example/clusterbench:0.1"
SPEC = LaunchSpec(
    nodes=4, gpus_per_node=8, suite="standard", run_args=("--only", "network"), image=IMAGE
)
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
    # the rendezvous starts with the nodes that came within the join timeout (300 s) ...
    assert _after(argv, "--nnodes") == "1:4" and _after(argv, "--nproc-per-node") == "8"
    assert _after(argv, "--rdzv-conf") == "join_timeout=600,last_call_timeout=300"
    assert _after(argv, "--max-restarts") == "0"
    assert _after(argv, "--rdzv-backend") == "c10d"
    assert _after(argv, "--rdzv-endpoint") == "FIRST_NODE_ADDRESS:29500"
    # ... and the run, told how many to expect, stops naming them when one is missing
    assert argv[argv.index("-m") :] == [
        *("-m", "clusterbench", "run", "--suite", "standard", "--expect-nodes", "4"),
        *("--join-timeout", "300", "--only", "network"),
    ]
    text = torchrun_command(LaunchSpec(nodes=2, gpus_per_node=1, master_addr="10.0.0.1"))
    assert "every" in text.splitlines()[0] or "each" in text.splitlines()[0]
    assert _after(_command_line(text), "--rdzv-endpoint") == "10.0.0.1:29500"


def test_mpi_command() -> None:
    argv = _command_line(mpi_command(SPEC))
    assert argv[0] == "mpirun" and _after(argv, "-np") == "32"
    assert _after(argv, "--map-by") == "ppr:8:node" and _after(argv, "--hostfile") == "hosts.txt"
    exported = [argv[i + 1] for i, a in enumerate(argv) if a == "-x"]
    assert "MASTER_PORT=29500" in exported
    assert any(x.startswith("MASTER_ADDR=") for x in exported)
    assert argv[-10:] == [
        *("clusterbench", "run", "--suite", "standard", "--expect-nodes", "4"),
        *("--join-timeout", "300", "--only", "network"),
    ]


def test_k8s_manifest_yaml_structure() -> None:
    spec = LaunchSpec(
        nodes=4,
        gpus_per_node=8,
        suite="standard",
        run_args=("--only", "network"),
        env=(("NCCL_SOCKET_IFNAME", "eth0"), ("NCCL_DEBUG", "INFO"), ("FLAG", "true")),
        image=IMAGE,
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
        assert container["name"] == "pytorch" and container["image"] == IMAGE
        assert container["command"] == ["torchrun"]
        assert container["args"] == [
            "--nnodes=4",
            "--nproc-per-node=8",
            "--node-rank=$(RANK)",
            "--master-addr=$(MASTER_ADDR)",
            "--master-port=$(MASTER_PORT)",
            "--max-restarts=0",
            "--rdzv-conf=timeout=300",
            *("-m", "clusterbench", "run", "--suite", "standard", "--expect-nodes", "4"),
            *("--join-timeout", "300", "--only", "network"),
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
    for spec in (
        SPEC,
        LaunchSpec(nodes=1, gpus_per_node=2, port=1234, name="one-node", image=IMAGE),
    ):
        assert yaml.safe_load(k8s_manifest(spec)) == json.loads(k8s_manifest(spec, fmt="json"))


def test_k8s_manifest_single_node_has_no_worker_and_no_env() -> None:
    manifest = yaml.safe_load(k8s_manifest(LaunchSpec(nodes=1, gpus_per_node=2, image=IMAGE)))
    replicas = manifest["spec"]["pytorchReplicaSpecs"]
    assert list(replicas) == ["Master"] and replicas["Master"]["replicas"] == 1
    (container,) = replicas["Master"]["template"]["spec"]["containers"]
    assert "env" not in container
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 2


def test_k8s_manifest_yaml_writes_both_templates_in_full() -> None:
    # a dict shared between Master and Worker would be dumped as an anchor and an alias
    events = yaml.parse(k8s_manifest(SPEC))
    assert not any(isinstance(e, yaml.AliasEvent) or getattr(e, "anchor", None) for e in events)


def _pods(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        role: replica["template"]["spec"]
        for role, replica in manifest["spec"]["pytorchReplicaSpecs"].items()
    }


@pytest.mark.parametrize(
    ("option", "volume"),
    [
        (
            {"results_pvc": "bench-results"},
            {"name": "results", "persistentVolumeClaim": {"claimName": "bench-results"}},
        ),
        (
            {"results_host_path": "/data/clusterbench"},
            {
                "name": "results",
                "hostPath": {"path": "/data/clusterbench", "type": "DirectoryOrCreate"},
            },
        ),
    ],
)
def test_k8s_results_volume_is_mounted_and_out_points_into_it(
    option: dict[str, str], volume: dict[str, Any]
) -> None:
    spec = LaunchSpec(
        nodes=3,
        gpus_per_node=8,
        name="llama-bench",
        run_args=SPEC.run_args,
        image=IMAGE,
        **option,
    )
    text = k8s_manifest(spec)
    pods = _pods(yaml.safe_load(text))
    assert list(pods) == ["Master", "Worker"]
    dshm = {"name": "dshm", "emptyDir": {"medium": "Memory"}}
    # the Master pod (rank 0 writes the run folder there) has the volume; the Workers, whose
    # ranks only make the same path, an empty folder (a ReadWriteOnce claim attaches to one node)
    assert pods["Master"]["volumes"] == [dshm, volume]
    assert pods["Worker"]["volumes"] == [dshm, {"name": "results", "emptyDir": {}}]
    for pod in pods.values():
        (container,) = pod["containers"]
        assert container["volumeMounts"] == [
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "results", "mountPath": "/results"},
        ]
        run = container["args"][container["args"].index("-m") + 1 :]
        assert run == [
            *("clusterbench", "run", "--suite", "quick", "--expect-nodes", "3"),
            *("--join-timeout", "300", "--out", "/results/llama-bench", "--only", "network"),
        ]
    # the printed text says where the results land; JSON (no comments) is the same manifest
    assert text.startswith("# results land in /results/llama-bench in the Master pod: ")
    assert yaml.safe_load(text) == json.loads(k8s_manifest(spec, fmt="json"))


def test_k8s_results_volume_keeps_an_out_given_under_it() -> None:
    out = f"{RESULTS_MOUNT}/nightly/run-7"
    for run_args in (("--out", out), (f"--out={out}",)):
        spec = LaunchSpec(nodes=1, gpus_per_node=2, results_pvc="r", run_args=run_args, image=IMAGE)
        (container,) = _pods(yaml.safe_load(k8s_manifest(spec)))["Master"]["containers"]
        assert container["args"][-len(run_args) :] == list(run_args)
        assert container["args"].count("--out") + container["args"].count(f"--out={out}") == 1
        assert spec.run_out() == out
    with pytest.raises(ValueError, match="outside the results volume mounted at /results"):
        LaunchSpec(
            nodes=1, gpus_per_node=2, results_pvc="r", run_args=("--out", "runs/a"), image=IMAGE
        )


def test_k8s_without_a_results_volume_says_results_vanish_with_the_pod() -> None:
    text = k8s_manifest(SPEC)
    assert text.startswith("# results stay inside the Master pod (clusterbench-runs/")
    assert "vanish with it" in text.splitlines()[0]
    for pod in _pods(yaml.safe_load(text)).values():
        assert [v["name"] for v in pod["volumes"]] == ["dshm"]
        assert "--out" not in pod["containers"][0]["args"]


def test_ray_commands_run_the_driver_on_the_head_or_as_a_job() -> None:
    text = ray_commands(SPEC)
    direct, job = (shlex.split(line) for line in text.splitlines() if not line.startswith("#"))
    assert direct == [
        *("python", "-m", "clusterbench.ray", "--nodes", "4", "--gpus-per-node", "8"),
        *("--suite", "standard", "--join-timeout", "300", "--", "--only", "network"),
    ]
    assert job == ["ray", "job", "submit", "--address", "http://HEAD_NODE_ADDRESS:8265", "--",
                   *direct]  # fmt: skip
    comments = [line for line in text.splitlines() if line.startswith("#")]
    assert "#   on the head node:    ray start --head --port=6379" in comments
    assert "#   on each other node:  ray start --address=HEAD_NODE_ADDRESS:6379" in comments
    spec = LaunchSpec(nodes=2, gpus_per_node=8, master_addr="10.0.0.1", join_timeout_s=600,
                      env=(("NCCL_SOCKET_IFNAME", "eth0"),))  # fmt: skip
    text = ray_commands(spec)
    assert "HEAD_NODE_ADDRESS" not in text and "ray start --address=10.0.0.1:6379" in text
    direct, job = (shlex.split(line) for line in text.splitlines() if not line.startswith("#"))
    assert direct[-4:] == ["--join-timeout", "600", "--env", "NCCL_SOCKET_IFNAME=eth0"]
    assert job[4] == "http://10.0.0.1:8265"


def test_the_printed_ray_command_is_what_the_driver_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver's own command line reads the printed one back into the same launch."""
    from clusterbench.ray import _cli

    seen: list[LaunchSpec] = []
    monkeypatch.setattr("clusterbench.ray.run_on_ray",
                        lambda spec, **kw: seen.append(spec) or 0)  # fmt: skip
    spec = LaunchSpec(nodes=2, gpus_per_node=8, suite="standard", join_timeout_s=600,
                      env=(("NCCL_DEBUG", "WARN"),), run_args=("--only", "gemm"))  # fmt: skip
    direct = next(shlex.split(line) for line in ray_commands(spec).splitlines()
                  if line.startswith("python"))  # fmt: skip
    result = runner.invoke(_cli.app, direct[3:])
    assert result.exit_code == 0, result.output
    assert seen == [spec]


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
    with pytest.raises(ValueError, match="--results-pvc must be"):
        LaunchSpec(nodes=1, gpus_per_node=1, results_pvc="Bad_Name")
    with pytest.raises(ValueError, match="--results-host-path must be an absolute path"):
        LaunchSpec(nodes=1, gpus_per_node=1, results_host_path="data/runs")
    with pytest.raises(ValueError, match="--results-host-path must be an absolute path"):
        LaunchSpec(nodes=1, gpus_per_node=1, results_host_path="/data/../etc")


def test_cli_launch_slurm_and_out_file(tmp_path: Path) -> None:
    result = runner.invoke(app, ["launch", "--slurm", "--nodes", "4", "--gpus-per-node", "8"])
    assert result.exit_code == 0, result.output
    assert "#SBATCH --nodes=4" in result.stdout
    out = tmp_path / "k8s.yaml"
    args = ["launch", "--k8s", "--nodes", "2", "--gpus-per-node", "8", "--image", "r/cb:1",
            "--out", str(out)]  # fmt: skip
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
        (["--k8s", "--nodes", "2", "--gpus-per-node", "8"], "--k8s needs --image IMAGE"),
        (["--mpi", "--nodes", "2", "--gpus-per-node", "8", "--env", "NOEQUALS"], "KEY=VALUE"),
        (
            [
                *("--k8s", "--nodes", "2", "--gpus-per-node", "8", "--image", "r/cb:1"),
                *("--results-pvc", "r", "--results-host-path", "/data"),
            ],
            "--results-pvc and --results-host-path: choose one",
        ),
        (
            ["--slurm", "--nodes", "2", "--gpus-per-node", "8", "--results-pvc", "r"],
            "apply to --k8s only",
        ),
        (
            [
                *("--k8s", "--nodes", "2", "--gpus-per-node", "8", "--results-pvc", "r"),
                *("--image", "r/cb:1", "--", "--out", "runs/a"),
            ],
            "--out runs/a: outside the results volume",
        ),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(args: list[str], text: str) -> None:
    result = runner.invoke(app, ["launch", *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("clusterbench: error:") and text in lines[0]


def test_cli_launch_k8s_says_on_stderr_where_results_land(tmp_path: Path) -> None:
    base = ["launch", "--k8s", "--nodes", "2", "--gpus-per-node", "8", "--image", "r/cb:1"]
    result = runner.invoke(app, base)
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "clusterbench: note: results stay inside the Master pod (clusterbench-runs/<UTC time>-"
        "<host> under its working folder) and vanish with it; add --results-pvc NAME or "
        "--results-host-path PATH to keep them"
    ]
    out = tmp_path / "job.json"
    args = [*base, "--results-host-path", "/data/cb", "--format", "json", "--out", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        f"wrote {out}",
        "clusterbench: note: results land in /results/clusterbench in the Master pod: "
        "/data/cb/clusterbench on the node that runs it (hostPath /data/cb), mounted at /results",
    ]
    master = _pods(json.loads(out.read_text(encoding="utf-8")))["Master"]
    assert master["volumes"][-1]["hostPath"]["path"] == "/data/cb"
    result = runner.invoke(app, ["launch", "--torchrun", "--nodes", "2", "--gpus-per-node", "8"])
    assert result.exit_code == 0 and result.stderr == ""


def test_cli_launch_ray_says_results_are_on_rank_0s_node() -> None:
    args = ["launch", "--ray", "--nodes", "2", "--gpus-per-node", "8"]
    result = runner.invoke(app, [*args, "--", "--out", "/shared/cb/a"])
    assert result.exit_code == 0, result.output
    assert "python -m clusterbench.ray --nodes 2 --gpus-per-node 8" in result.stdout
    assert result.stderr.startswith(
        "clusterbench: note: rank 0 writes the run folder (--out /shared/cb/a, "
    )
    assert "give an absolute --out on storage every node shares" in result.stderr
    result = runner.invoke(app, [*args, "--k8s"])
    assert result.exit_code == 2 and "--k8s, --ray" in result.stderr


def test_the_join_timeout_comes_from_the_option_or_the_runs_timeout() -> None:
    def conf(spec: LaunchSpec) -> tuple[str, str]:
        argv = _command_line(torchrun_command(spec))
        return _after(argv, "--rdzv-conf"), _after(argv, "--join-timeout")

    assert conf(LaunchSpec(nodes=2, gpus_per_node=1, join_timeout_s=20)) == (
        "join_timeout=40,last_call_timeout=20",
        "20",
    )
    short = LaunchSpec(nodes=2, gpus_per_node=1, run_args=("--timeout", "59.5"))
    assert conf(short) == ("join_timeout=120,last_call_timeout=60", "60")
    one = _command_line(torchrun_command(LaunchSpec(nodes=1, gpus_per_node=2)))
    assert _after(one, "--nnodes") == "1" and "--rdzv-conf" not in one
    assert "--expect-nodes" not in one
    assert "--join-timeout 300" in slurm_script(SPEC) and "--join-timeout 300" in mpi_command(SPEC)
    with pytest.raises(ValueError, match="--join-timeout must be at least 1 s"):
        LaunchSpec(nodes=2, gpus_per_node=1, join_timeout_s=0)
    with pytest.raises(ValueError, match="--expect-nodes: set by the launch command itself"):
        LaunchSpec(nodes=2, gpus_per_node=1, run_args=("--expect-nodes", "3"))


def test_a_manifest_without_an_image_is_refused() -> None:
    with pytest.raises(ValueError, match="needs a container image"):
        k8s_manifest(LaunchSpec(nodes=2, gpus_per_node=8))
