"""torch.profiler's kineto lines stay off stderr; real errors written meanwhile still show."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clusterbench.runtime.quiet import KINETO_CHATTER, quiet_profiler

STAGE = (
    "STAGE:2026-12-01 14:58:06 27418:27418 SyncActivityProfilerHandler.cpp:51] Completed Stage: "
    "Warm Up\n"
)
USDT = "USDT:2026-12-01 14:58:06 27418:27418 SyncActivityProfilerHandler.cpp:52] profiler_start\n"
ERROR = "ERROR:2026-12-01 14:58:06 27418:27418 CuptiActivityApi.cpp:99] CUPTI failed\n"


def test_chatter_pattern() -> None:
    assert KINETO_CHATTER.match(STAGE) and KINETO_CHATTER.match(USDT)
    assert not KINETO_CHATTER.match(ERROR)
    assert not KINETO_CHATTER.match("RuntimeError: STAGE:2026-12-01 ... not at the start\n")


def test_lines_written_to_fd2_are_filtered_and_passed_on(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KINETO_LOG_LEVEL", raising=False)
    spill = tmp_path / "traces" / "rank-0.stderr"
    with quiet_profiler(spill):
        os.write(2, STAGE.encode())
        os.write(2, b"a C++ warning of its own\n")
        os.write(2, USDT.encode())
        os.write(2, ERROR.encode())
        assert spill.exists()
    err = capfd.readouterr().err
    assert "a C++ warning of its own" in err and "CUPTI failed" in err
    assert "Completed Stage" not in err and "profiler_start" not in err
    assert not spill.exists()


PROFILE = """
    import os, sys
    from pathlib import Path
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule
    from clusterbench.runtime.quiet import quiet_profiler

    spill = Path({spill!r})
    with quiet_profiler(spill), profile(activities=[ProfilerActivity.CPU],
                                        schedule=schedule(wait=0, warmup=1, active=1)) as p:
        for _ in range(3):
            torch.ones(64, 64) @ torch.ones(64, 64)
            p.step()
        print("python says hello", file=sys.stderr)
        os.write(2, b"a real error from C\\n")
        {last}
    print("done")
"""
