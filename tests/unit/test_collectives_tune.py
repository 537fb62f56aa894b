"""The NCCL tuning sweep's pure parts: the plan of settings, the environment applied and put
back, NCCL's log (in the line formats NCCL prints) as proof per setting, the settings, and the
skip on CPU workers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch

from clusterbench.benchmarks.collectives import CollectivesConfig
from clusterbench.benchmarks.collectives.tune import skip_reason, tune_sweep
from clusterbench.benchmarks.collectives.tune_setting import (
    TUNE_VARS,
    TunePlan,
    TuneSetting,
    applied_env,
    nccl_bytes,
    plan_settings,
    prove,
)
from clusterbench.config import ConfigError, build_run_config
from clusterbench.runtime.dist import DistContext
from clusterbench.runtime.nccl_debug import (
    debug_env,
    log_offset,
    parse_comm_log,
    read_log_from,
    tune_log_problem,
)
from clusterbench.schema import Finding

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
ALGOS = ("ring", "tree", "pat")
PROTOS = ("LL", "LL128", "Simple")


def plan(**kw: Any) -> TunePlan:
    args: dict[str, Any] = {
        "ops": OPS, "algos": ALGOS, "protos": PROTOS, "channels": (),
        "nccl_version": (2, 28, 9), "one_gpu_per_node": False, **kw,
    }  # fmt: skip
    return plan_settings(**args)


# --- the plan -------------------------------------------------------------------------------


def test_the_plan_offers_each_ops_own_algorithms_with_every_protocol() -> None:
    p = plan(channels=(8, 16))
    labels = [(s.ops, s.label) for s in p.settings]
    ar = [label for ops, label in labels if ops == ("all_reduce",)]
    assert ar == [
        f"NCCL_ALGO=allreduce:{a} NCCL_PROTO=allreduce:{p}"
        for a in ("Ring", "Tree")
        for p in ("LL", "LL128", "Simple")
    ]
    ag = [label for ops, label in labels if ops == ("all_gather",)]
    assert ag == [f"NCCL_ALGO=allgather:Ring NCCL_PROTO=allgather:{p}" for p in PROTOS]
    rs = [label for ops, label in labels if ops == ("reduce_scatter",)]
    assert rs == [f"NCCL_ALGO=reducescatter:Ring NCCL_PROTO=reducescatter:{p}" for p in PROTOS]
    # all_to_all is send/recv to NCCL: it is timed under the channel counts only
    assert not [ops for ops, _ in labels if ops == ("all_to_all",)]
    channels = [s for s in p.settings if s.kind == "channels"]
    assert [(s.label, s.ops) for s in channels] == [("channels=8", OPS), ("channels=16", OPS)]
    assert all(s.env == {} for s in channels)
    # PAT needs one GPU per node: said, not tried
    assert p.not_tried == [
        f"PAT for {op}: NCCL runs PAT only with one GPU per node (tuning.cc ncclPatEnable)"
        for op in ("all_gather", "reduce_scatter")
    ]


def test_pat_with_one_gpu_per_node_runs_simple_only() -> None:
    p = plan(one_gpu_per_node=True, ops=("all_gather",))
    assert [s.label for s in p.settings][-1] == (
        "NCCL_ALGO=allgather:PAT NCCL_PROTO=allgather:Simple"
    )
    assert sum(s.algo == "PAT" for s in p.settings) == 1 and p.not_tried == []


def test_old_nccl_gets_one_list_for_every_collective_no_pat_and_32_channels() -> None:
    p = plan(nccl_version=(2, 21, 5), one_gpu_per_node=True, channels=(16, 64))
    ar = next(s for s in p.settings if s.ops == ("all_reduce",))
    assert ar.env == {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"} and not ar.per_function
    assert not [s for s in p.settings if s.algo == "PAT"]
    assert "PAT for all_gather: NCCL has no PAT before 2.23.4" in p.not_tried
    assert "channels=64: NCCL before 2.25.1 has at most 32 channels" in p.not_tried
    assert [s.label for s in p.settings if s.kind == "channels"] == ["channels=16"]


def test_nothing_but_ring_tree_and_pat_is_ever_offered() -> None:
    p = plan(one_gpu_per_node=True, channels=(4,))
    assert {s.algo for s in p.settings} <= {"Ring", "Tree", "PAT", None}
    assert all(set(s.env) <= set(TUNE_VARS) for s in p.settings)
    with pytest.raises(ConfigError, match="tune_algos"):
        build_run_config(suite="full", device_type="cuda", sets=["collectives.tune_algos=nvls"])


# --- the environment ------------------------------------------------------------------------


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in TUNE_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")


@pytest.mark.usefixtures("clean_env")
def test_the_setting_is_exported_for_the_block_then_put_back_exactly() -> None:
    os.environ["NCCL_PROTO"] = "^LL128"  # the user's own, kept
    setting = TuneSetting(("all_reduce",), algo="Tree", proto="LL")
    with applied_env(setting.env):
        assert os.environ["NCCL_ALGO"] == "allreduce:Tree"
        assert os.environ["NCCL_PROTO"] == "allreduce:LL"
        assert os.environ["NCCL_NVLS_ENABLE"] == "0"
    assert "NCCL_ALGO" not in os.environ
    assert os.environ["NCCL_PROTO"] == "^LL128"
    assert os.environ["NCCL_NVLS_ENABLE"] == "0"


@pytest.mark.usefixtures("clean_env")
def test_the_environment_is_put_back_when_the_block_raises() -> None:
    with pytest.raises(RuntimeError, match="boom"), applied_env({"NCCL_ALGO": "allgather:Ring"}):
        raise RuntimeError("boom")
    assert not {v for v in TUNE_VARS if v in os.environ}


def test_only_nccl_algo_and_proto_may_be_set() -> None:
    with pytest.raises(AssertionError), applied_env({"NCCL_NVLS_ENABLE": "1"}):
        pass
    assert os.environ.get("NCCL_NVLS_ENABLE") != "1"


# --- NCCL's log as proof ------------------------------------------------------------------------

# Lines as NCCL 2.30 prints them at NCCL_DEBUG=INFO (src/graph/tuning.cc, src/init.cc,
# src/enqueue.cc, src/misc/param.cc), around the start of one communicator.
TREE_LL = """\
gpu7:4242:4250 [0] NCCL INFO Comm config Blocking set to 1
gpu7:4242:4251 [0] NCCL INFO ncclCommSplit comm 0x5555 rank 0 nranks 2 cudaDev 0 nvmlDev 0 \
busId 18000 parent 0x4444 splitCount 3 color 1 key 0 - Init START
gpu7:4242:4251 [0] NCCL INFO NCCL_PROTO set by environment to allreduce:LL
gpu7:4242:4251 [0] NCCL INFO NCCL_ALGO set by environment to allreduce:Tree
gpu7:4242:4251 [0] NCCL INFO Enabled NCCL Func/Proto/Algo Matrix:
     Function |       LL     LL128    Simple   |          Tree           Ring
    AllReduce |        1         0         0   |             1              0
gpu7:4242:4251 [0] NCCL INFO 16 coll channels, 16 collnet channels, 0 nvls channels, \
32 p2p channels, 32 p2p channels per peer
gpu7:4242:4251 [0] NCCL INFO ncclCommSplit comm 0x5555 rank 0 nranks 2 - Init COMPLETE
gpu7:4242:4242 [0] NCCL INFO AllReduce: 32768 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..1}
gpu7:4242:4242 [0] NCCL INFO AllReduce: 4194304 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..15}
gpu7:4242:4242 [0] NCCL INFO AllReduce: 4 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}
"""
DEFAULT = """\
gpu7:4242:4251 [0] NCCL INFO NCCL_NVLS_ENABLE set by environment to 0.
gpu7:4242:4251 [0] NCCL INFO 24 coll channels, 0 nvls channels, 32 p2p channels, 2 p2p channels \
per peer
gpu7:4242:4242 [0] NCCL INFO AllGather: 16384 Bytes -> Algo 1 proto 0 time 9.500000
"""


def test_one_communicators_lines_parsed() -> None:
    log = parse_comm_log(TREE_LL)
    assert log.env == {"NCCL_PROTO": ["allreduce:LL"], "NCCL_ALGO": ["allreduce:Tree"]}
    assert log.coll_channels == [16] and log.p2p_channels == [32]
    assert [(c.func, c.nbytes, c.algo, c.proto, c.channels) for c in log.choices] == [
        ("AllReduce", 32768, "TREE", "LL", 2),
        ("AllReduce", 4194304, "TREE", "LL", 16),
        ("AllReduce", 4, "RING", "LL", 1),
    ]
    # the 2.17 form of the channels line, and 2.23's numbered algorithms without a range
    old = parse_comm_log(DEFAULT)
    assert old.env == {} and old.coll_channels == [24] and old.p2p_channels == [32]
    (choice,) = old.choices
    assert (choice.func, choice.algo, choice.proto, choice.channels) == (
        "AllGather", "RING", "LL", None,
    )  # fmt: skip


def test_the_setting_shown_by_its_log_is_confirmed() -> None:
    setting = TuneSetting(("all_reduce",), algo="Tree", proto="LL")
    ok, said = prove(setting, parse_comm_log(TREE_LL), inherited={})
    assert ok
    assert said == ("NCCL_ALGO allreduce:Tree; NCCL_PROTO allreduce:LL; 16 coll channels")


def test_a_setting_its_log_does_not_show_is_not_confirmed() -> None:
    asked = TuneSetting(("all_reduce",), algo="Ring", proto="Simple")
    ok, said = prove(asked, parse_comm_log(TREE_LL), inherited={})
    assert not ok and "allreduce:Tree" in said
    no_env = TREE_LL.replace("set by environment", "was ignored")  # ENV lines not there
    ok, said = prove(TuneSetting(("all_reduce",), algo="Tree", proto="LL"),
                     parse_comm_log(no_env), inherited={})  # fmt: skip
    assert not ok and said == "16 coll channels"
    ok, said = prove(TuneSetting(("all_reduce",), algo="Tree", proto="LL"), parse_comm_log(""),
                     inherited={})  # fmt: skip
    assert not ok and said == "no line of its communicator's start"


def test_channel_counts_are_proven_by_the_communicators_init_line() -> None:
    log = parse_comm_log(DEFAULT)
    assert prove(TuneSetting(OPS, channels=24), log, inherited={})[0]
    assert not prove(TuneSetting(OPS, channels=32), log, inherited={})[0]


def test_the_default_is_confirmed_only_without_a_forced_algorithm() -> None:
    default = TuneSetting(OPS)
    assert prove(default, parse_comm_log(DEFAULT), inherited={}) == (True, "24 coll channels")
    assert not prove(default, parse_comm_log(TREE_LL), inherited={})[0]
    # the run's own NCCL_PROTO (inherited) is what the default's communicator must show
    user = DEFAULT + "gpu7:4242:4251 [0] NCCL INFO NCCL_PROTO set by environment to ^LL128\n"
    assert prove(default, parse_comm_log(user), inherited={"NCCL_PROTO": "^LL128"})[0]
    assert not prove(default, parse_comm_log(DEFAULT), inherited={"NCCL_PROTO": "^LL128"})[0]


def test_the_bytes_nccl_names_per_op() -> None:
    assert nccl_bytes("all_reduce", 4 * 2**20, 8) == 4 * 2**20
    assert nccl_bytes("all_gather", 4 * 2**20, 8) == 2**19  # one rank's chunk (sendcount)
    assert nccl_bytes("reduce_scatter", 4 * 2**20, 8) == 2**19  # (recvcount)
    assert nccl_bytes("all_to_all", 4 * 2**20, 8) is None  # send/recv: no such line


def test_a_communicators_lines_are_what_was_appended_after_the_offset(tmp_path: Path) -> None:
    path = tmp_path / "nccl.log"
    assert log_offset(path) == 0 and read_log_from(path, 0) == ""
    path.write_text(DEFAULT)
    start = log_offset(path)
    with open(path, "a") as f:
        f.write(TREE_LL)
    assert read_log_from(path, start) == TREE_LL


def test_the_sweep_switches_on_init_and_env_only_unless_nccl_debug_asks_for_more(
    tmp_path: Path,
) -> None:
    sweep, full = debug_env(3, per_op=False), debug_env(3)
    assert sweep["NCCL_DEBUG_SUBSYS"] == "INIT,ENV"
    assert "TUNING" in full["NCCL_DEBUG_SUBSYS"] and "ENV" in full["NCCL_DEBUG_SUBSYS"]
    assert sweep["NCCL_DEBUG_FILE"] == full["NCCL_DEBUG_FILE"]
    log = tmp_path / "rank3.log"
    env = {**sweep, "NCCL_DEBUG_FILE": str(log)}
    assert tune_log_problem(env) == f"NCCL's log {log} does not exist"
    log.write_text("")
    assert tune_log_problem(env) is None
    assert tune_log_problem({**env, "NCCL_DEBUG": "WARN"}) == "NCCL_DEBUG is not INFO"
    assert "leaves out ENV" in str(tune_log_problem({**env, "NCCL_DEBUG_SUBSYS": "INIT,NET"}))
    assert "one file" in str(tune_log_problem({**env, "NCCL_DEBUG_FILE": "nccl.%h.%p"}))


# --- settings and the skip -----------------------------------------------------------------------


def test_tuning_settings_are_checked() -> None:
    assert CollectivesConfig.preset(suite="full", device_type="cuda").tune
    assert CollectivesConfig.preset(suite="full", device_type="cuda").tune_channels
    assert not CollectivesConfig.preset(suite="standard", device_type="cuda").tune
    assert not CollectivesConfig.preset(suite="full", device_type="cpu").tune
    for bad, message in [
        ("collectives.tune_repeats=3", "cannot go below 0.01"),
        ("collectives.tune_channels=0", "tune_channels must each be in 1..64"),
        ("collectives.tune_min_gain=1", "tune_min_gain must be in"),
        ("collectives.tune_sizes=", "tune_sizes must not be empty"),
    ]:
        with pytest.raises(ConfigError, match=message):
            build_run_config(suite="quick", device_type="cpu", sets=[bad])
    run = build_run_config(suite="quick", device_type="cpu", sets=["collectives.tune=true"])
    assert run.benchmarks["collectives"].tune is True


def _ctx(world_size: int, backend: str) -> DistContext:
    return DistContext(
        rank=0, world_size=world_size, local_rank=0, local_world_size=world_size, node_rank=0,
        num_nodes=1, host="h", device=torch.device("cpu"), backend=backend,
        benchmark="collectives",
    )  # fmt: skip


def test_on_cpu_the_sweep_skips_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    (skipped,) = tune_sweep(_ctx(2, "gloo"), CollectivesConfig(tune=True), memory_limit_bytes=1e9)
    assert isinstance(skipped, Finding) and skipped.id == "collectives.tune_skipped"
    assert skipped.severity == "info"
    assert skipped.message == (
        "NCCL tuning sweep skipped: gloo has no NCCL algorithms or protocols to choose."
    )
    assert skip_reason(_ctx(1, "nccl")) == "a communicator of one rank runs no NCCL algorithm"
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    assert "without NCCL's INFO log (NCCL_DEBUG is not INFO)" in str(skip_reason(_ctx(2, "nccl")))
