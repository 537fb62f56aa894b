"""``clusterbench.run`` takes one ``RunOptions``; keywords still build one.  Every case here is
refused before anything is checked, planned or started."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import clusterbench
from clusterbench import RunOptions


def test_the_options_keep_their_lists_as_tuples_and_are_frozen() -> None:
    options = RunOptions(only=["gemm", "memory"], sets=["gemm.repeats=3"], out=Path("run"))
    assert options.only == ("gemm", "memory") and options.sets == ("gemm.repeats=3",)
    assert options.skip == () and options.exports == () and options.device == "auto"
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.device = "cpu"  # type: ignore[misc]
    assert dataclasses.replace(options, device="cpu").only == ("gemm", "memory")


def test_a_lone_string_is_no_list_of_names() -> None:
    with pytest.raises(TypeError, match=r"RunOptions\.only takes a sequence"):
        RunOptions(only="gemm")


def test_the_defaults_are_the_commands() -> None:
    """Each field's default is what ``clusterbench run`` passes when its flag is not given."""
    assert RunOptions() == RunOptions(
        suite=None, only=(), skip=(), config_file=None, sets=(), out=None, nproc=None,
        oversubscribe=False, device="auto", nccl_debug=False, telemetry=None,
        telemetry_interval_s=None, timeout_s=None, soak=None, repeat=None, budget=None,
        plan_only=False, baseline=None, expect_nodes=None, join_timeout_s=None, history=None,
        use_history=True, exports=(), pushgateway=None, launcher=None,
    )  # fmt: skip


def test_run_takes_options_or_keywords_not_both() -> None:
    with pytest.raises(TypeError, match="not both: device"):
        clusterbench.run(RunOptions(only=["gemm"]), device="cpu")
    with pytest.raises(TypeError, match="nosuch"):
        clusterbench.run(nosuch=1)
