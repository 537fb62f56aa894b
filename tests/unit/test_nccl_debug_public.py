"""The NCCL log reader on NCCL INFO logs that others recorded and published.

The logs and their sources are in tests/data/nccl-logs/README.md; the EFA log of two p5 nodes
is the nccl-tests output kept in tests/data/nccl-tests/public/.  Every expected count below was
counted in the log itself (its ``via ...`` lines, its ``Using network`` lines), not copied from
the reader's output.
"""

from __future__ import annotations

from pathlib import Path

from clusterbench.analyses.nccl.findings import nccl_findings
from clusterbench.runtime.nccl_debug import parse_comm_log, parse_nccl_log
from clusterbench.schema import GpuInfo, HostInfo, NcclRankInfo, Results, RunInfo, ToolInfo
from tests.pages import analysed

DATA = Path(__file__).resolve().parents[1] / "data"
LOGS = DATA / "nccl-logs"
P5_EFA = DATA / "nccl-tests" / "public" / "p5_all_reduce_16ranks_2nodes_tag_output.txt"


def _read(name: str) -> str:
    return (LOGS / name).read_text(encoding="utf-8")


def _message(info: dict, num_gpus: int = 8) -> str:
    """The nccl.transport finding a user reads for a rank whose log said ``info``."""
    results = Results(
        tool=ToolInfo(version="0"),
        run=RunInfo(id="r", started="t", suite="quick", world_size=2, num_nodes=1,
                    backend="nccl", command="c"),
        hosts=[HostInfo(hostname="h", gpus=[GpuInfo(index=i, name="NVIDIA H100")
                                            for i in range(num_gpus)])],
        nccl=[NcclRankInfo(rank=0, host="h", log="nccl/rank-00000.log", **info)],
    )  # fmt: skip
    findings = nccl_findings(results, analysed(results))
    return next(f.message for f in findings if f.id == "nccl.transport")


def test_efa_p5_log_names_aws_libfabric_whole() -> None:
    # 16 ranks, every line behind an mpirun tag "[1,N]<stdout>:": 448 "via P2P/CUMEM" lines,
    # 64 "via NET/AWS Libfabric/<d>/GDRDMA" lines for each of the 8 devices, 16 "Using network
    # AWS Libfabric" lines, 16 "16 coll channels, ..., 16 p2p channels" lines.
    text = P5_EFA.read_text(encoding="utf-8")
    info = parse_nccl_log(text)
    assert info["transports"] == {"P2P": 448, "NET/AWS Libfabric": 512}
    assert info["networks"] == ["AWS Libfabric"]
    assert info["algorithms"] == {}
    comm = parse_comm_log(text)
    assert comm.coll_channels == [16] * 16 and comm.p2p_channels == [16] * 16
    message = _message(info)
    assert "NET/AWS Libfabric on 512 channel(s)" in message
    assert "network AWS Libfabric" in message
    assert "Socket" not in message and "NET/IB" not in message


def test_ib_gdrdma_a100_log() -> None:
    # 12 lines, all "via NET/IB/<d>/GDRDMA" (devices 0, 2, 4, 5); no "Using network" line.
    info = parse_nccl_log(_read("ib_gdrdma_4gpu_a100_nccl_issue707.txt"))
    assert info == {"transports": {"NET/IB": 12}, "networks": [], "algorithms": {}}
    message = _message(info, num_gpus=1)
    assert "NET/IB on 12 channel(s)" in message and "Socket" not in message


def test_ib_gdrdma_and_p2p_ipc_log() -> None:
    # 12 "via P2P/IPC" lines between a node's GPUs, 5 "via NET/IB/<d>/GDRDMA" lines.
    info = parse_nccl_log(_read("ib_gdrdma_p2p_ipc_8gpu_sglang_issue4289.txt"))
    assert info["transports"] == {"P2P": 12, "NET/IB": 5}
    results_message = _message(info)
    assert "NET/IB on 5 channel(s), P2P on 12 channel(s)" in results_message


def test_ib_plugin_name_with_version_suffix_is_kept_whole() -> None:
    # 12 "via NET/IBext_v8/<d>" lines (the HPC-X IB plugin): the name is IBext_v8, not IBext.
    info = parse_nccl_log(_read("ibext_v8_plugin_channels_nccl_issue1814.txt"))
    assert info["transports"] == {"NET/IBext_v8": 12}


def test_roce_init_lines_give_the_network() -> None:
    # NCCL 2.19.3: two "Using network IB" lines (RoCE HCAs are NCCL's IB network), no channels.
    text = _read("roce_init_nccl_2.19.3_nccl_tests_issue185.txt")
    assert "NCCL version 2.19.3+cuda12.3" in text
    info = parse_nccl_log(text)
    assert info == {"transports": {}, "networks": ["IB"], "algorithms": {}}
    assert _message(info).endswith("no transport lines; network IB.")


def test_shm_only_node_warns_no_p2p() -> None:
    # 11 "via SHM/direct/direct" lines between GPUs of one 8-GPU node, nothing else.
    info = parse_nccl_log(_read("shm_only_8gpu_one_node_nccl_issue1817.txt"))
    assert info["transports"] == {"SHM": 11}
    results = Results(
        tool=ToolInfo(version="0"),
        run=RunInfo(id="r", started="t", suite="quick", world_size=8, num_nodes=1,
                    backend="nccl", command="c"),
        hosts=[HostInfo(hostname="h", gpus=[GpuInfo(index=i, name="GPU") for i in range(8)])],
        nccl=[NcclRankInfo(rank=0, host="h", log="nccl/rank-00000.log", **info)],
    )  # fmt: skip
    warn = [f for f in nccl_findings(results, analysed(results)) if f.severity == "warn"]
    assert [f.id for f in warn] == ["nccl.no_p2p"]
    assert "SHM on 11 channel(s)" in warn[0].message


def test_socket_and_shm_log_behind_mpirun_rank_prefixes() -> None:
    # Lines prefixed "[N] " by mpirun: 9 "via NET/Socket/0", 2 "via SHM/direct/direct", and
    # one "2 coll channels, 0 nvls channels, 2 p2p channels" line.
    text = _read("socket_shm_2nodes_mpirun_prefix_nccl_issue690.txt")
    info = parse_nccl_log(text)
    assert info["transports"] == {"NET/Socket": 9, "SHM": 2}
    comm = parse_comm_log(text)
    assert comm.coll_channels == [2] and comm.p2p_channels == [2]
    message = _message(info)
    assert "NET/Socket on 9 channel(s)" in message
    assert "IB" not in message and "Libfabric" not in message


def test_tuning_lines_without_a_collective_name() -> None:
    # 13 TUNING lines "NNN Bytes -> Algo 0 proto 0" (Tree/LL) with no collective before the
    # size, one of them after an nccl-tests row on the same line.
    text = _read("tuning_unnamed_ops_mpirun_prefix_nccl_issue1453.txt")
    assert parse_nccl_log(text)["algorithms"] == {"(op not named)": ["TREE/LL"]}
    shared = next(line for line in text.splitlines() if "float     sum" in line)
    assert parse_nccl_log(shared)["algorithms"] == {"(op not named)": ["TREE/LL"]}
    assert "algorithm/protocol (op not named): TREE/LL" in _message(parse_nccl_log(text))
