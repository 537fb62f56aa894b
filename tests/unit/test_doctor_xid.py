"""Xid/SXid events from kernel-log lines, NVLink/PCIe error counters and the NVML Xid event
watcher, each against stand-ins (a command runner, a file tree, a fake NVML)."""

from __future__ import annotations

import queue
import time
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from clusterbench.doctor import FAMILIES, Sources, error_counters, xid, xid_table
from clusterbench.doctor.error_counters import COUNTERS, ErrorCounts, Growth
from clusterbench.doctor.run_health import HealthMetrics, RunHealth
from clusterbench.doctor.xid_watch import XidWatcher
from clusterbench.runtime.dist import DistContext
from clusterbench.schema import Finding, GpuInfo, HostInfo, Measurement
from clusterbench.thresholds import Thresholds

BUSES = ("0000:3b:00.0", "0000:86:00.0")


def _host(buses: Sequence[str] = BUSES) -> HostInfo:
    gpus = [GpuInfo(index=i, name="NVIDIA H200", pci_bus_id=b) for i, b in enumerate(buses)]
    return HostInfo(hostname="n0", gpus=gpus)


def _runner(answers: dict[str, str | None]) -> Any:
    """A command runner answering by program name (None: missing, failed or refused)."""
    calls: list[str] = []

    def run(cmd: Sequence[str]) -> str | None:
        calls.append(cmd[0])
        return answers.get(cmd[0])

    run.calls = calls  # type: ignore[attr-defined]
    return run


def _src(log: str | None = None, *, root: Path | None = None, **kw: Any) -> Sources:
    run = kw.pop("run", None) or _runner({"journalctl": log})
    return Sources(host=kw.pop("host", None) or _host(), run=run, root=root or Path("/nonexistent"),
                   **kw)  # fmt: skip


# ---------------------------------------------------------------------------- parsing

PREFIXES = {
    "dmesg": "[ 1234.567890] ",
    "journalctl short-monotonic": "[ 1234.567890] gpu-node kernel: ",
    "kern.log": "Jan  5 10:00:00 gpu-node kernel: [ 1234.567890] ",
    "rsyslog iso": "2025-01-05T10:00:00.123456+00:00 gpu-node kernel: ",
}


@pytest.mark.parametrize("fmt", PREFIXES)
@pytest.mark.parametrize(
    ("code", "bus", "pid", "name", "text"),
    [
        (79, "0000:3b:00", "1234", "python", "GPU has fallen off the bus."),
        (13, "0000:86:00", "'<unknown>'", "<unknown>", "Graphics Exception: ESR 0x405830=0x1"),
        (63, "00000000:3B:00", None, None, "Row Remapper: New row marked for remapping"),
    ],
)
def test_xid_lines_of_every_log_format(
    fmt: str, code: int, bus: str, pid: str | None, name: str | None, text: str
) -> None:
    fields = (f"pid={pid}, " if pid else "") + (f"name={name}, " if name else "")
    line = f"{PREFIXES[fmt]}NVRM: Xid (PCI:{bus}): {code}, {fields}{text}"
    event = xid.parse_xid_line(line)
    assert event is not None
    assert (event.code, event.pci_bus_id, event.text) == (code, bus.lower(), text)
    known = {p: None if p is None or "unknown" in p else p.strip("'") for p in (pid, name)}
    assert (event.pid, event.process) == (known[pid], known[name])
    stamp = PREFIXES[fmt].split(" gpu-node")[0].strip()
    expected = f"{1234.56789:.6f} s after boot" if stamp.startswith("[") else stamp
    assert event.when == expected
    assert xid.parse_sxid_line(line) is None


def test_old_xid_format_without_pci_prefix() -> None:
    event = xid.parse_xid_line("[  42.000001] NVRM: Xid (0000:03:00): 14, Channel 00000001")
    assert event is not None and (event.code, event.pci_bus_id) == (14, "0000:03:00")
    assert event.text == "Channel 00000001"


@pytest.mark.parametrize(
    ("line", "code", "switch", "fatal"),
    [
        ("[ 6781.400584] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM "
         "Fault Up", 20034, 1, True),
        ("Jan  5 10:00:00 n0 kernel: nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, "
         "Non-fatal, Link 32 egress non-posted PRIV error (First)", 12028, 3, False),
        ("[ 9.5] nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 28002, Link 20 Therm Warn", 28002, 0,
         None),
    ],
)  # fmt: skip
def test_sxid_lines(line: str, code: int, switch: int, fatal: bool | None) -> None:
    event = xid.parse_sxid_line(line)
    assert event is not None and (event.code, event.switch, event.fatal) == (code, switch, fatal)
    assert xid.parse_xid_line(line) is None


NOISE = [
    "[    3.1] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15",
    "[  120.0] NVRM: GPU at PCI:0000:3b:00: GPU-b850f46d-d5ea-c752-ddf3-c4453e44d3f7",
    "[  120.0] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.",
    "[  130.0] audit: type=1400 msg='cmd=grep Xid /var/log/kern.log'",
    "[  140.0] nvidia-nvswitch0: probe: NVSwitch at 0000:05:00.0",
    "[  150.0] nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Severity 1 Engine instance 60",
    "[  150.0] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Data {0x10000000, 0x0}",
    "-- No entries --",
]


def test_noise_lines_do_not_match() -> None:
    xids, sxids = xid.parse_kernel_log(NOISE)
    assert (xids, sxids) == ([], [])


# ---------------------------------------------------------------------------- reading the log


def _xid_line(code: int, bus: str, t: float, text: str = "some error") -> str:
    return f"[{t:12.6f}] n0 kernel: NVRM: Xid (PCI:{bus}): {code}, pid=7, name=train, {text}"


def test_journalctl_first_then_dmesg() -> None:
    log = "\n".join([*NOISE[:2], _xid_line(13, "0000:3b:00", 5.0)])
    run = _runner({"journalctl": "-- No entries --\n", "dmesg": log})
    got = xid.read_kernel_log(_src(run=run))
    assert got is not None and got.source == "dmesg" and run.calls == ["journalctl", "dmesg"]
    assert len(got.lines) == 3


def test_kern_log_from_the_last_boot_only(tmp_path: Path) -> None:
    (tmp_path / "var/log").mkdir(parents=True)
    lines = [
        "Jan  4 09:00:00 n0 kernel: [    0.000000] Linux version 6.8.0 (buildd@lcy02)",
        "Jan  4 09:10:00 n0 kernel: " + _xid_line(79, "0000:3b:00", 600.0).split("kernel: ")[1],
        "Jan  5 08:00:00 n0 kernel: [    0.000000] Linux version 6.8.0 (buildd@lcy02)",
        "Jan  5 08:10:00 n0 kernel: " + _xid_line(13, "0000:86:00", 600.0).split("kernel: ")[1],
    ]
    (tmp_path / "var/log/kern.log").write_text("\n".join(lines) + "\n")
    src = _src(run=_runner({}), root=tmp_path)
    got = xid.read_kernel_log(src)
    assert got is not None and got.source == "/var/log/kern.log" and got.lines == tuple(lines[2:])
    [found] = xid.check_xid_log(src)
    assert found.scope == "host:n0/cuda:1" and found.evidence["xids"][0]["xid"] == 13


def test_unreadable_log_is_information_with_the_way_to_read_it() -> None:
    [found] = xid.check_xid_log(_src(run=_runner({})))
    assert (found.id, found.severity) == ("doctor.xid.log_unreadable", "info")
    assert "not root" in found.message and "systemd-journal" in found.fix
    assert (
        "journalctl -k -b" in found.evidence["tried"]
        and "/var/log/kern.log" in (found.evidence["tried"])
    )
    # a host without GPUs has no Xids to read
    assert xid.check_xid_log(_src(run=_runner({}), host=HostInfo(hostname="n0"))) == []


# ---------------------------------------------------------------------------- verdicts


def test_gpu_index_from_the_pci_address_in_any_domain_format() -> None:
    host = _host(("0000:3b:00.0", "00000000:86:00.0", "0001:1a:00.0"))
    assert xid.gpu_by_bus(host) == {(0, 0x3B, 0): 0, (0, 0x86, 0): 1, (1, 0x1A, 0): 2}


@pytest.mark.parametrize("code", [79, 48, 74, 95, 119, 64, 13, 31, 94, 63, 43, 92, 999])
def test_one_xid_gets_the_tables_severity_and_fix(code: int) -> None:
    times = (10.0, 20.0, 30.5)
    log = "\n".join(_xid_line(code, "0000:86:00", t) for t in times)
    [found] = xid.check_xid_log(_src(log))
    info = xid_table.lookup(code)
    assert (found.id, found.scope) == ("doctor.gpu.xid", "host:n0/cuda:1")
    assert found.severity == xid_table.severity_of(info)
    assert found.fix == xid_table.fix_for(info, gpu=1, code=code)
    [row] = found.evidence["xids"]
    assert (row["xid"], row["count"]) == (code, len(times))
    assert (row["first"], row["last"]) == (f"{times[0]:.6f} s after boot",
                                           f"{times[-1]:.6f} s after boot")  # fmt: skip
    assert row["processes"] == ["train"] and found.evidence["source"].startswith("journalctl")
    if info is None:
        assert row["mnemonic"] == "unknown" and xid_table.CATALOG_URL in found.fix
    else:
        assert (row["mnemonic"], row["immediate_action"]) == (info.mnemonic, info.immediate)


def test_severities_follow_nvidias_resolution_buckets() -> None:
    fails = [c for c in (79, 48, 74, 95, 119, 120, 64, 62, 140) if xid_table.lookup(c)]
    assert {xid_table.severity_of(xid_table.lookup(c)) for c in fails} == {"fail"}
    assert {xid_table.severity_of(xid_table.lookup(c)) for c in (13, 31, 32, 68, 69)} == {"warn"}
    assert xid_table.lookup(79).immediate == "RESTART_BM"  # type: ignore[union-attr]
    assert "reboot" in xid_table.fix_for(xid_table.lookup(79), gpu=0)
    assert "nvidia-smi -r -i 5" in xid_table.fix_for(xid_table.lookup(95), gpu=5)
    for info in xid_table.XIDS.values():  # every row's buckets are spelled out
        assert info.immediate in xid_table.ACTIONS, info


def test_a_gpu_with_several_xids_is_judged_by_the_worst() -> None:
    log = "\n".join(
        [_xid_line(13, "0000:3b:00", 1.0), _xid_line(13, "0000:3b:00", 2.0),
         _xid_line(79, "0000:3b:00", 3.0), _xid_line(31, "0000:86:00", 4.0),
         _xid_line(48, "0000:99:00", 5.0)]
    )  # fmt: skip
    found = {f.scope: f for f in xid.check_xid_log(_src(log))}
    gpu0, gpu1, other = found["host:n0/cuda:0"], found["host:n0/cuda:1"], found["host:n0"]
    assert gpu0.severity == "fail" and [r["count"] for r in gpu0.evidence["xids"]] == [2, 1]
    assert gpu0.fix == xid_table.fix_for(xid_table.lookup(79), gpu=0)  # the worst one's fix
    assert "3 Xid event(s) since boot" in gpu0.message
    assert gpu1.severity == "warn"
    assert other.severity == "fail" and "0000:99:00" in other.message  # not in the inventory


@pytest.mark.parametrize(
    ("action", "severity"),
    [("None", "info"), ("Drain P2P", "warn"), ("GPU Reset Required", "fail"),
     ("Node Reboot Required", "fail")],
)  # fmt: skip
def test_xid_154_is_judged_by_the_recovery_it_names(action: str, severity: str) -> None:
    text = f"GPU recovery action changed from 0x0 (None) to 0x2 ({action})"
    [found] = xid.check_xid_log(_src(_xid_line(154, "0000:3b:00", 9.0, text)))
    assert found.severity == severity


def test_sxids_per_switch_fatal_fails_non_fatal_informs() -> None:
    lines = [
        "[ 10.0] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 30 LTSSM Fault Up",
        "[ 10.1] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Severity 1 Engine instance 30",
        "[ 11.0] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 12028, Non-fatal, Link 32 PRIV error",
        "[ 12.0] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 12028, Non-fatal, Link 33 PRIV error",
    ]
    found = {f.scope: f for f in xid.check_xid_log(_src("\n".join(lines)))}
    fatal, benign = found["host:n0/nvswitch:0"], found["host:n0/nvswitch:1"]
    assert (fatal.id, fatal.severity, len(fatal.evidence["sxids"])) == ("doctor.nvswitch.sxid",
                                                                        "fail", 1)  # fmt: skip
    assert "nvidia-fabricmanager" in fatal.fix
    assert (benign.severity, len(benign.evidence["sxids"])) == ("info", 2)


def test_registered_in_doctor() -> None:
    checks = [c for family in FAMILIES.values() for c in family]
    assert xid.check_xid_log in checks and error_counters.check_link_errors in checks


# ---------------------------------------------------------------------------- fake NVML


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__({3: "Not Supported", 10: "Timeout"}.get(value, f"error {value}"))
        self.value = value


class FakeNvml:
    """GPUs with ``links`` active NVLinks each; counters settable; Xid events from a queue."""

    NVMLError = NVMLError
    NVML_NVLINK_MAX_LINKS = 6

    def __init__(self, *, links: int = 4, unsupported: Sequence[int] = (), events: bool = True):
        self.links = links
        self.nvlink: dict[tuple[int, int, int], int] = {}  # (gpu, link, counter) -> count
        self.pcie: dict[int, int] = {}
        self.unsupported = set(unsupported)
        self.events_supported = events
        self.queue: queue.Queue[Any] = queue.Queue()
        self.registered: list[tuple[int, int]] = []
        self.freed = self.shut_down = False

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimpleNamespace:
        return SimpleNamespace(index=index)

    def nvmlDeviceGetNvLinkState(self, h: Any, link: int) -> int:
        if link >= self.links:
            raise NVMLError(3)
        return 1

    def nvmlDeviceGetNvLinkErrorCounter(self, h: Any, link: int, counter: int) -> int:
        if counter in self.unsupported:
            raise NVMLError(3)
        return self.nvlink.get((h.index, link, counter), 0)

    def nvmlDeviceGetPcieReplayCounter(self, h: Any) -> int:
        return self.pcie.get(h.index, 0)

    def nvmlEventSetCreate(self) -> str:
        return "event-set"

    def nvmlDeviceRegisterEvents(self, h: Any, types: int, event_set: str) -> None:
        if not self.events_supported:
            raise NVMLError(3)
        self.registered.append((h.index, types))

    def nvmlEventSetWait(self, event_set: str, timeout_ms: int) -> Any:
        try:
            return self.queue.get(timeout=timeout_ms / 1000)
        except queue.Empty:
            raise NVMLError(10) from None

    def nvmlEventSetFree(self, event_set: str) -> None:
        self.freed = True

    def nvmlDeviceGetIndex(self, device: Any) -> int:
        return int(device.index)

    def nvmlShutdown(self) -> None:
        self.shut_down = True

    def xid(self, gpu: int, code: int) -> None:
        self.queue.put(SimpleNamespace(device=SimpleNamespace(index=gpu), eventType=0x8,
                                       eventData=code))  # fmt: skip


# ---------------------------------------------------------------------------- error counters


def test_counter_growth_names_gpu_link_and_counter() -> None:
    nvml = FakeNvml(links=4)
    before_counts = {(0, 1, COUNTERS["crc_flit"]): 10, (0, 2, COUNTERS["replay"]): 3}
    nvml.nvlink.update(before_counts)
    nvml.pcie[0] = 100
    before = error_counters.read_counts(nvml, 0, nvml.nvmlDeviceGetHandleByIndex(0))
    deltas = {(1, "crc_flit"): 25, (3, "recovery"): 2}
    for (link, name), d in deltas.items():
        key = (0, link, COUNTERS[name])
        nvml.nvlink[key] = nvml.nvlink.get(key, 0) + d
    nvml.pcie[0] += 7
    after = error_counters.read_counts(nvml, 0, nvml.nvmlDeviceGetHandleByIndex(0))
    grown = error_counters.growth(before, after)
    expected = {(link, name, d) for (link, name), d in deltas.items()} | {(None, "pcie_replay", 7)}
    assert {(g.link, g.counter, g.delta) for g in grown} == expected
    assert len(before.nvlink) == 4 * len(COUNTERS)
    found = error_counters.growth_finding(grown, seconds=600.0, thresholds=Thresholds(),
                                          scope="host:n0/cuda:0")  # fmt: skip
    assert found is not None and found.id == "health.gpu.link_errors_grew"
    assert "GPU 0" in found.message and "NVLink 1 crc_flit +25" in found.message
    assert "NVLink 3 recovery +2" in found.message and "PCIe replays +7" in found.message
    assert "link(s) 1, 3" in found.fix and "RMA" in found.fix and "slot" in found.fix
    # a recovery error fails (DCGM's health watch), the slow CRC and PCIe growth alone warn
    assert found.severity == "fail" and found.evidence["over_limit"] == [
        {"link": 3, "counter": "recovery"}
    ]


@pytest.mark.parametrize("seconds", [10.0, 60.0, 600.0])
def test_crc_and_pcie_growth_fail_only_above_their_rate(seconds: float) -> None:
    limits = Thresholds()
    window_s = max(seconds, error_counters.MIN_WINDOW_S)  # a short run: still per minute
    crc_fail = int(limits.nvlink_crc_fail_per_s * window_s) + 1
    pcie_fail = int(limits.pcie_replay_fail_per_min * window_s / 60) + 1
    for delta, counter, link in ((crc_fail, "crc_data", 0), (pcie_fail, "pcie_replay", None)):
        for d, severity in ((delta - 2, "warn"), (delta, "fail")):
            g = [Growth(gpu=2, counter=counter, link=link, delta=d)]
            found = error_counters.growth_finding(g, seconds=seconds, thresholds=limits,
                                                  scope="s")  # fmt: skip
            assert found is not None and found.severity == severity, (counter, d)
    assert error_counters.growth_finding([], seconds=1.0, thresholds=limits, scope="s") is None


def test_counter_reset_counts_from_zero_and_unsupported_counters_are_skipped() -> None:
    before = ErrorCounts(gpu=0, nvlink={(0, "replay"): 50, (1, "replay"): 5}, pcie_replay=None)
    after = ErrorCounts(gpu=0, nvlink={(0, "replay"): 4, (1, "replay"): 5, (2, "replay"): 9},
                        pcie_replay=3)  # fmt: skip
    assert error_counters.growth(before, after) == [Growth(gpu=0, counter="replay", link=0,
                                                           delta=4)]  # fmt: skip
    nvml = FakeNvml(links=2, unsupported=[COUNTERS["crc_flit"], COUNTERS["crc_data"]])
    counts = error_counters.read_counts(nvml, 0, nvml.nvmlDeviceGetHandleByIndex(0))
    assert {name for _, name in counts.nvlink} == {"replay", "recovery"}
    assert len(counts.nvlink) == 2 * 2


def test_doctor_reports_nonzero_counters_and_warns_on_a_high_average(tmp_path: Path) -> None:
    uptime_s = 3600.0
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/uptime").write_text(f"{uptime_s} 1.0\n")
    nvml = FakeNvml(links=2)
    nvml.nvlink[(0, 1, COUNTERS["replay"])] = 12
    nvml.pcie[1] = int(Thresholds().pcie_replay_fail_per_min * uptime_s / 60) + 10
    src = Sources(host=_host(), nvml=nvml, root=tmp_path)
    found = {f.scope: f for f in error_counters.check_link_errors(src)}
    gpu0, gpu1 = found["host:n0/cuda:0"], found["host:n0/cuda:1"]
    assert (gpu0.id, gpu0.severity) == ("doctor.gpu.link_errors", "info")
    assert gpu0.evidence["counts"] == [{"link": 1, "counter": "replay", "count": 12}]
    assert gpu1.severity == "warn" and f"PCIe replays {nvml.pcie[1]}" in gpu1.message
    nvml.pcie[1] = 5
    assert error_counters.check_link_errors(src)[1].severity == "info"
    assert error_counters.check_link_errors(Sources(host=_host(), nvml=None)) == []
    assert error_counters.check_link_errors(Sources(host=_host(), nvml=FakeNvml())) == []


# ---------------------------------------------------------------------------- NVML Xid events


def _wait_for(cond: Any, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_watcher_keeps_the_xid_events_of_its_gpus() -> None:
    nvml = FakeNvml()
    handles = {i: nvml.nvmlDeviceGetHandleByIndex(i) for i in (0, 1)}
    watcher = XidWatcher(nvml, handles, wait_ms=20)
    assert watcher.start() and nvml.registered == [(0, 0x8), (1, 0x8)]
    sent = [(1, 79), (0, 13), (1, 79)]
    for gpu, code in sent:
        nvml.xid(gpu, code)
    nvml.queue.put(SimpleNamespace(device=handles[0], eventType=0x1, eventData=0))  # not an Xid
    _wait_for(lambda: nvml.queue.empty() and len(watcher.events()) == len(sent))
    time.sleep(0.05)  # several timeouts pass: the watcher keeps waiting
    events = watcher.stop()
    assert [(e.gpu, e.code) for e in events] == sent and nvml.freed
    assert watcher.problem is None and all(e.when for e in events)


def test_watcher_says_why_when_nvml_has_no_events() -> None:
    nvml = FakeNvml(events=False)
    watcher = XidWatcher(nvml, {0: nvml.nvmlDeviceGetHandleByIndex(0)}, wait_ms=20)
    assert not watcher.start() and watcher.problem and "Not Supported" in watcher.problem
    assert nvml.freed and watcher.stop() == []


def _ctx(*, cuda: bool = True, local_rank: int = 0) -> DistContext:
    host = _host()
    return DistContext(rank=local_rank, world_size=2, local_rank=local_rank, local_world_size=2,
                       node_rank=0, num_nodes=1, host="n0", backend="nccl" if cuda else "gloo",
                       device=torch.device("cuda", local_rank) if cuda else torch.device("cpu"),
                       gpu=host.gpus[local_rank] if cuda else None, host_info=host)  # fmt: skip


def test_a_runs_health_from_start_to_end() -> None:
    nvml = FakeNvml(links=3)
    nvml.nvlink[(1, 0, COUNTERS["crc_flit"])] = 40
    health = RunHealth.start(_ctx(local_rank=1), nvml=nvml)
    nvml.nvlink[(1, 2, COUNTERS["crc_flit"])] = 6  # grows during the run
    nvml.pcie[1] = 3
    nvml.xid(1, 94)
    _wait_for(lambda: health.watcher is not None and len(health.watcher.events()) == 1)
    items = health.finish(_ctx(local_rank=1), thresholds=Thresholds())
    ms = [i for i in items if isinstance(i, Measurement)]
    fs = {f.id: f for f in items if isinstance(f, Finding)}
    by = {(m.metric, m.params.get("counter"), m.params.get("link")): m.value for m in ms}
    assert by[("xid_events", None, None)] == 1
    assert by[("nvlink_errors_grown", "crc_flit", None)] == 6
    assert by[("nvlink_errors_grown", "replay", None)] == 0
    assert by[("nvlink_link_errors_grown", "crc_flit", 2)] == 6
    assert by[("pcie_replays_grown", None, None)] == 3
    assert {m.benchmark for m in ms} == {HealthMetrics.benchmark} and ms[0].device == "cuda:1"
    assert {m.metric for m in ms} <= {m.name for m in HealthMetrics.all()}
    xid_found = fs["health.gpu.xid"]
    assert xid_found.scope == "host:n0/cuda:1" and "during the run" in xid_found.message
    assert xid_found.severity == xid_table.severity_of(xid_table.lookup(94))
    grew = fs["health.gpu.link_errors_grew"]
    assert grew.severity == "warn" and "NVLink 2 crc_flit +6" in grew.message
    assert "health.not_watched" not in fs and not nvml.shut_down  # the caller's NVML


def test_health_without_nvml_or_events_says_so_once_a_node() -> None:
    assert (
        RunHealth.start(_ctx(cuda=False), nvml=FakeNvml()).finish(
            _ctx(cuda=False), thresholds=Thresholds()
        )
        == []
    )
    for rank, count in ((0, 1), (1, 0)):
        health = RunHealth.start(_ctx(local_rank=rank), nvml=None)
        found = health.finish(_ctx(local_rank=rank), thresholds=Thresholds())
        assert [f.id for f in found] == ["health.not_watched"] * count  # type: ignore[union-attr]
    nvml = FakeNvml(events=False)
    items = RunHealth.start(_ctx(), nvml=nvml).finish(_ctx(), thresholds=Thresholds())
    ids = [i.id if isinstance(i, Finding) else i.metric for i in items]
    assert "health.not_watched" in ids and "xid_events" not in ids and "pcie_replays_grown" in ids


def test_a_broken_nvml_costs_the_run_nothing_but_is_said() -> None:
    class Broken(FakeNvml):
        def nvmlDeviceGetHandleByIndex(self, index: int) -> SimpleNamespace:
            raise RuntimeError("driver gone")

    health = RunHealth.start(_ctx(), nvml=Broken())
    [found] = health.finish(_ctx(), thresholds=Thresholds())
    assert isinstance(found, Finding) and found.id == "health.not_watched"
    assert "RuntimeError: driver gone" in found.message
