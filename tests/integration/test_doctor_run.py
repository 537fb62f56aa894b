"""doctor through the CLI: on this machine, and with planted pitfalls."""

from __future__ import annotations

import json
import subprocess

from clusterbench.schema import Finding
from tests.helpers import cli


def _cli(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return cli("doctor", "--json", timeout=60, env=env)


def test_cli_doctor_on_this_machine() -> None:
    clean = {k: "" for k in ("NCCL_P2P_DISABLE", "NCCL_SOCKET_IFNAME")}
    proc = _cli(clean)
    assert proc.returncode in (0, 1), proc.stderr
    findings = [Finding.model_validate(f) for f in json.loads(proc.stdout)]
    assert proc.returncode == (1 if any(f.severity == "fail" for f in findings) else 0)
    assert "doctor.storage.checkpoint_dir" in {f.id for f in findings}


def test_cli_doctor_finds_planted_pitfalls() -> None:
    proc = _cli({"NCCL_P2P_DISABLE": "1", "NCCL_SOCKET_IFNAME": "nosuch0"})
    assert proc.returncode == 1, proc.stderr
    ids = {f["id"] for f in json.loads(proc.stdout)}
    assert {"doctor.nccl.p2p_disable", "doctor.nccl.socket_ifname"} <= ids
