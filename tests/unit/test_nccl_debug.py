from __future__ import annotations

from clusterbench.runtime.nccl_debug import debug_env, parse_nccl_log

# Lines in the form NCCL 2.2x prints at NCCL_DEBUG=INFO (INIT, GRAPH, NET, TUNING).
LOG = """\
node7:1234:1300 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.7<0>
node7:1234:1300 [0] NCCL INFO Using network Socket
node7:1234:1300 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
node7:1234:1300 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read
node7:1234:1300 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/Socket/0
node7:1234:1300 [0] NCCL INFO AllReduce: 8 Bytes -> Algo 1 proto 0 time 13.400000
node7:1234:1300 [0] NCCL INFO AllReduce: 8589934592 Bytes -> Algo 1 proto 2 time 25000.0
node7:1234:1300 [0] NCCL INFO AllGather: 1048576 Bytes -> Algo RING proto LL128 time 20.0
"""


def test_parse_transports_network_and_choices() -> None:
    info = parse_nccl_log(LOG)
    assert info["transports"] == {"P2P": 2, "NET/Socket": 1}
    assert info["networks"] == ["Socket"]
    assert info["algorithms"] == {
        "AllGather": ["RING/LL128"],
        "AllReduce": ["RING/LL", "RING/SIMPLE"],
    }


def test_shm_only_log_and_empty_log() -> None:
    info = parse_nccl_log("x [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct\n")
    assert info["transports"] == {"SHM": 1}
    assert parse_nccl_log("") == {"transports": {}, "networks": [], "algorithms": {}}


def test_debug_env_targets_a_file_per_rank() -> None:
    env0, env1 = debug_env(0), debug_env(1)
    assert env0["NCCL_DEBUG"] == "INFO" and "TUNING" in env0["NCCL_DEBUG_SUBSYS"]
    assert env0["NCCL_DEBUG_FILE"] != env1["NCCL_DEBUG_FILE"]
