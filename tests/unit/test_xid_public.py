"""Kernel logs with NVIDIA Xid and NVSwitch SXid lines that others recorded and published
(tests/data/kernel-logs, each file's source in its README), read through the parsers and
findings doctor uses; every expected value is what the file itself prints."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from clusterbench.doctor import Sources, xid, xid_table
from clusterbench.schema import Finding, GpuInfo, HostInfo, Severity

LOGS = Path(__file__).resolve().parents[1] / "data" / "kernel-logs"


def _lines(name: str) -> list[str]:
    return (LOGS / name).read_text(encoding="utf-8").splitlines()


def _parse(name: str) -> tuple[list[xid.XidEvent], list[xid.SxidEvent]]:
    return xid.parse_kernel_log(_lines(name))


def _src(buses: Sequence[str] = (), log: str | None = None) -> Sources:
    gpus = [GpuInfo(index=i, name="NVIDIA H100", pci_bus_id=b) for i, b in enumerate(buses)]
    return Sources(host=HostInfo(hostname="n0", gpus=gpus), run=lambda cmd: log,
                   root=Path("/nonexistent"))  # fmt: skip


def _findings(events: Sequence[xid.XidEvent], buses: Sequence[str] = ()) -> list[Finding]:
    return xid.xid_findings(events, src=_src(buses), source="dmesg", finding_id="doctor.gpu.xid",
                            during="since boot")  # fmt: skip


def _severity(code: int) -> Severity:
    """The severity the project's table gives the code (its immediate action)."""
    return xid_table.severity_of(xid_table.lookup(code))


def test_published_codes_are_all_in_the_table() -> None:
    for code in (13, 31, 32, 43, 45, 79, 109, 119):
        assert xid_table.lookup(code) is not None, code


def test_dmesg_ctime_gsp_rpc_timeouts_on_an_h100() -> None:
    """dmesg -T of a Dell PowerEdge XE9680: five Xid 119 (GSP RPC timeout) on GPU4 at
    0000:9b:00, from three processes, among 38 lines of RPC history and a stack trace."""
    name = "h100_xe9680_dmesg_ctime_xid119.log"
    xids, sxids = _parse(name)
    assert len(_lines(name)) == 43 and sxids == []
    assert [(e.code, e.pci_bus_id) for e in xids] == [(119, "0000:9b:00")] * 5
    assert [e.when for e in xids] == [
        "Sun Feb 23 16:24:18 2025", "Sun Feb 23 16:24:24 2025", "Sun Feb 23 16:24:30 2025",
        "Sun Feb 23 16:27:12 2025", "Sun Feb 23 16:30:13 2025",
    ]  # fmt: skip
    assert [(e.pid, e.process) for e in xids] == [
        ("2024380", "nvidia-smi"), ("2024380", "nvidia-smi"), ("2024380", "nvidia-smi"),
        ("1263500", "cache_mgr_main"), ("1240590", "gpud"),
    ]  # fmt: skip
    assert xids[0].text.startswith("Timeout after 6s of waiting for RPC response from GPU4 GSP!")
    assert xids[0].text.endswith("Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4).")
    [found] = _findings(xids, buses=["00000000:9B:00.0"])
    assert found.severity == _severity(119) == "fail"
    assert found.scope == "host:n0/cuda:0" and found.evidence["xids"][0]["count"] == 5
    assert found.evidence["xids"][0]["processes"] == ["cache_mgr_main", "gpud", "nvidia-smi"]
    assert (found.evidence["xids"][0]["first"], found.evidence["xids"][0]["last"]) == (
        "Sun Feb 23 16:24:18 2025", "Sun Feb 23 16:30:13 2025")  # fmt: skip


def test_dmesg_decode_iso_sm_exceptions_then_xid43() -> None:
    """dmesg --decode --time-format=iso: 16 Xid 13 (SM warp/global exceptions) and one Xid 43
    on 0000:38:00 within 4 ms; the wall stamp follows 'kern  :warn  : '."""
    xids, _ = _parse("dmesg_decode_iso_xid13_xid43.log")
    assert [e.code for e in xids] == [13] * 16 + [43]
    assert {e.pci_bus_id for e in xids} == {"0000:38:00"}
    assert xids[0].when == "2025-01-21T04:41:44,283302+00:00"
    assert xids[-1].when == "2025-01-21T04:41:44,287197+00:00"
    assert all((e.pid, e.process) == (None, None) for e in xids[:16])  # '<unknown>'
    assert (xids[-1].pid, xids[-1].process, xids[-1].text) == ("2924364", "pt_main_thread",
                                                               "Ch 00000008")  # fmt: skip
    warp = "Graphics SM Warp Exception on (GPC 9, TPC 1, SM 1): Out Of Range Address"
    assert xids[2].text == warp
    [found] = _findings(xids)
    assert found.evidence["pci_bus_id"] == "0000:38:00" and found.scope == "host:n0"
    assert found.severity == max(_severity(13), _severity(43), key=["info", "warn", "fail"].index)
    assert found.severity == "warn" and _severity(43) == "info"
    assert [(r["xid"], r["count"]) for r in found.evidence["xids"]] == [(13, 16), (43, 1)]


def test_dmesg_ctime_quoted_xid13_and_xid109() -> None:
    """dmesg --ctime lines quoted in a README ('> '): three Xid 13 with '<unknown>' pid/name,
    an Xid 109 (context switch timeout) of pt_main_thread, and an nvidia-peermem line."""
    name = "dmesg_ctime_xid13_xid109_quoted.txt"
    xids, sxids = _parse(name)
    assert len(_lines(name)) == 5 and sxids == []
    assert [(e.code, e.pci_bus_id, e.when) for e in xids] == [
        (13, "0000:cb:00", "Fri Aug 30 11:43:09 2024"),
        (13, "0000:cb:00", "Fri Aug 30 11:43:09 2024"),
        (13, "0000:cb:00", "Fri Aug 30 11:43:09 2024"),
        (109, "0000:cb:00", "Fri Aug 30 11:43:14 2024"),
    ]
    assert (xids[3].pid, xids[3].process) == ("1797828", "pt_main_thread")
    assert xids[3].text == "Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005"
    [found] = _findings(xids)
    assert found.severity == _severity(109) == "fail"
    assert _severity(13) == "warn"


def test_dmesg_uptime_xid79_with_fatal_sxids_on_three_nvswitches() -> None:
    """Xid 79 (fallen off the bus) on 0000:91:00, then SXid 20034 (LTSSM Fault Up) on
    NVSwitches 0, 1 and 2; the 'Severity' and 'Data' lines continue the event before them."""
    name = "dmesg_xid79_sxid20034_nvswitch_quoted.txt"
    xids, sxids = _parse(name)
    [fell] = xids
    assert (fell.code, fell.pci_bus_id) == (79, "0000:91:00")
    assert fell.when == "6781741.548779 s after boot"
    assert (fell.pid, fell.process, fell.text) == (None, None, "GPU has fallen off the bus.")
    assert [(e.switch, e.pci_bus_id, e.code, e.fatal) for e in sxids] == [
        (1, "0000:06:00.0", 20034, True),
        (0, "0000:05:00.0", 20034, True),
        (2, "0000:07:00.0", 20034, True),
        (0, "0000:05:00.0", 20034, True),
    ]
    assert [e.text for e in sxids][:2] == ["Fatal, Link 48 LTSSM Fault Up",
                                           "Fatal, Link 63 LTSSM Fault Up"]  # fmt: skip
    assert sxids[0].when == "6781753.400584 s after boot"
    assert _severity(79) == "fail"
    found = xid.check_xid_log(_src(["0000:91:00.0"], log="\n".join(_lines(name))))
    gpu, *switches = found
    assert (gpu.id, gpu.severity, gpu.scope) == ("doctor.gpu.xid", "fail", "host:n0/cuda:0")
    assert [(f.scope, f.severity) for f in switches] == [
        ("host:n0/nvswitch:0", "fail"), ("host:n0/nvswitch:1", "fail"),
        ("host:n0/nvswitch:2", "fail"),
    ]  # fmt: skip
    assert "2 SXid event(s)" in switches[0].message


def test_journal_xid45_after_nvlink_xids_on_four_gpus() -> None:
    """journalctl lines cut to 'kernel: ...' (no stamp): Xid 45 (preemptive cleanup) of four
    python3 processes, one per GPU, 'caused by previous Xid 149' or '145'."""
    xids, _ = _parse("journal_kernel_xid45_after_xid145_xid149.txt")
    assert [(e.pci_bus_id, e.pid) for e in xids] == [
        ("0000:dc:00", "1818990"), ("0000:ed:00", "1818992"), ("0000:ba:00", "1818989"),
        ("0000:97:00", "1818987"), ("0000:dc:00", "1818990"), ("0000:ba:00", "1818989"),
        ("0000:ed:00", "1818992"),
    ]  # fmt: skip
    assert {(e.code, e.process, e.when) for e in xids} == {(45, "python3", None)}
    assert xids[1].text == "Ch 0000000c caused by previous Xid 145"
    found = _findings(xids)
    assert [f.evidence["pci_bus_id"] for f in found] == ["0000:dc:00", "0000:ed:00", "0000:ba:00",
                                                         "0000:97:00"]  # fmt: skip
    assert {f.severity for f in found} == {_severity(45)} == {"info"}


def test_dmesg_uptime_laptop_xid32_and_xid31_without_pid() -> None:
    """The dmesg of an Acer 3830TG laptop (its GeForce under Bumblebee): two Xid 32 and an
    Xid 31, in the driver's older form that names no process (no pid=, no name=)."""
    xids, _ = _parse("dmesg_uptime_xid32_xid31_bumblebee.txt")
    assert [(e.code, e.pci_bus_id, e.when) for e in xids] == [
        (32, "0000:01:00", "24128.828315 s after boot"),
        (32, "0000:01:00", "24128.828608 s after boot"),
        (31, "0000:01:00", "24128.834365 s after boot"),
    ]
    assert {(e.pid, e.process) for e in xids} == {(None, None)}
    assert [e.text for e in xids] == ["Channel ID 00000000 intr 00004000"] * 2 + [
        "Ch 00000003, engmask 00000101, intr 10000000"]  # fmt: skip
    [found] = _findings(xids, buses=["0000:01:00.0"])
    assert found.severity == _severity(32) == _severity(31) == "warn"


@pytest.mark.parametrize(
    "line",
    [
        "> [Fri Aug 30 11:11:22 2024] nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected "
        "invalid context, skipping further processing",
        "[Sun Feb 23 16:24:36 2025] NVRM: Rate limiting GSP RPC error prints for GPU at "
        "PCI:0000:9b:00 (printing 1 of every 30).  The GPU likely needs to be reset.",
        "> [6781741.548783] NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.",
        "> [6781753.404848] nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Severity 1 Engine "
        "instance 60 Sub-engine instance 00",
    ],
)  # fmt: skip
def test_published_non_xid_lines_are_ignored(line: str) -> None:
    assert any(line in _lines(p.name) for p in LOGS.glob("*.*") if p.suffix != ".md")
    assert xid.parse_kernel_log([line]) == ([], [])


def test_dmesg_ctime_and_decode_iso_stamps_were_lost_before() -> None:
    """The fix these files asked for: dmesg -T's '[Sun Feb 23 16:24:18 2025]' and dmesg
    --decode's 'kern  :warn  : 2025-01-21T04:41:44,283302+00:00' gave no time at all."""
    ctime, iso = _lines("h100_xe9680_dmesg_ctime_xid119.log")[2], _lines(
        "dmesg_decode_iso_xid13_xid43.log")[0]  # fmt: skip
    assert (event := xid.parse_xid_line(ctime)) is not None
    assert event.when == "Sun Feb 23 16:24:18 2025"
    assert (event := xid.parse_xid_line(iso)) is not None
    assert event.when == "2025-01-21T04:41:44,283302+00:00"
