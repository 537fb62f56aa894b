"""The scheduler recipes under examples/: the Kubernetes manifests parse and run doctor --fast
where they say; the Slurm scripts pass ``bash -n`` and, with stand-ins for clusterbench, logger
and scontrol on PATH, exit (Prolog) or drain (HealthCheckProgram) as their comments promise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
_DOCTOR = ["clusterbench", "doctor", "--fast"]
_FAIL_LINE = "FAIL doctor.gpu.ecc host:n0/cuda:3: uncorrected ECC errors since the driver loaded"


def _manifest(name: str) -> dict[str, Any]:
    [doc] = list(yaml.safe_load_all((EXAMPLES / "k8s" / name).read_text()))
    assert isinstance(doc, dict)
    return doc


def test_init_container_checks_the_node_with_the_apps_gpus() -> None:
    pod = _manifest("doctor-init-container.yaml")
    assert (pod["apiVersion"], pod["kind"]) == ("v1", "Pod")
    spec = pod["spec"]
    [check] = spec["initContainers"]
    [app] = spec["containers"]
    assert check["command"] == _DOCTOR and spec["restartPolicy"] == "Never"
    gpus = check["resources"]["limits"]["nvidia.com/gpu"]
    assert gpus == app["resources"]["limits"]["nvidia.com/gpu"] == 8


def test_daemonset_readiness_is_doctor_fast_with_time_for_it() -> None:
    ds = _manifest("doctor-daemonset.yaml")
    assert (ds["apiVersion"], ds["kind"]) == ("apps/v1", "DaemonSet")
    template = ds["spec"]["template"]
    assert ds["spec"]["selector"]["matchLabels"] == template["metadata"]["labels"]
    [agent] = template["spec"]["containers"]
    probe = agent["readinessProbe"]
    assert probe["exec"]["command"] == _DOCTOR
    assert probe["timeoutSeconds"] >= 10  # doctor --fast ends in under 10 s; the default is 1
    assert "nvidia.com/gpu" not in agent["resources"].get("limits", {})  # takes no GPU
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"} in agent["env"]
