"""Telemetry sampling against a stand-in NVML: the reader's fields, the sampler's series, CSV
and window summaries, the worker's windows, the findings and the report's figure."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import plotly.graph_objects as go
import pytest
import torch

from clusterbench.analyses.run import report_plots
from clusterbench.analyses.telemetry import figures as telemetry_figures
from clusterbench.analyses.telemetry import judge as analysis
from clusterbench.analyses.telemetry import section as telemetry_section
from clusterbench.config import ConfigError, build_run_config
from clusterbench.hardware import gpu_telemetry
from clusterbench.hardware.gpu_telemetry import AmdSmiReader, NvmlReader, open_reader
from clusterbench.pipeline import rank as worker
from clusterbench.pipeline.assemble import RunMeta, assemble_results
from clusterbench.pipeline.spec import RunSpec
from clusterbench.runtime.records import (
    End,
    MeasurementRecord,
    RankLog,
    Skip,
    Start,
    TelemetryRecord,
    read_rank_file,
)
from clusterbench.runtime.telemetry import TelemetrySampler, read_series
from clusterbench.schema import (
    Finding,
    Measurement,
    Results,
    RunInfo,
    TelemetrySummary,
    TelemetryWindow,
    ToolInfo,
)
from clusterbench.thresholds import Thresholds
from clusterbench.views.cells import Grid, format_value
from tests.fake_nvml import NOT_SUPPORTED, UNKNOWN, FakeNvml, NVMLError
from tests.helpers import one_rank_ctx
from tests.pages import analysed

SW_POWER_CAP, HW_THERMAL, IDLE = 0x04, 0x40, 0x01
T0_US = 1_700_000_000_000_000  # unix us
SERIES: dict[str, list[Any]] = {
    "sm": [1980, 1755, 1590, 1605, 1590, 1620, 1590, 1575, 1590, 1600, 1590],
    "mem": [2619],
    "power_mw": [120_000, 690_500, 700_200, 699_100, 701_000, 698_700, 700_000, 699_500],
    "limit_mw": [700_000],
    "temp": [41, 55, 60, 64, 66, 67, 68, 69, 70, 71],
    "reasons": [IDLE, 0, SW_POWER_CAP, SW_POWER_CAP, SW_POWER_CAP | IDLE, 0, SW_POWER_CAP],
    "used": [10**9 + i * 10**8 for i in range(9)],
    "field_t_us": [T0_US + i * 100_000 for i in range(1000)],  # NVML's timestamps, 0.1 s apart
    "pcie_tx": [i * 500_000_000 for i in range(1000)],  # 5e8 B per 0.1 s: 5,000 MB/s
    "pcie_rx": [i * 20_000_000 for i in range(1000)],  # 200 MB/s
    "nvlink_tx": [i * 1_000_000 for i in range(1000)],  # KiB
    "nvlink_rx": [0],
    "pcie_kbps_tx": [123_000],
    "pcie_kbps_rx": [45_000],
}


def value(name: str, poll: int) -> Any:
    """What the fake answers on poll ``poll`` (0-based) for ``name``."""
    return SERIES[name][poll % len(SERIES[name])]


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def fake(**kw: Any) -> FakeNvml:
    return FakeNvml(series=SERIES, **kw)


def reader(nvml: FakeNvml) -> NvmlReader:
    return NvmlReader(nvml, nvml.nvmlDeviceGetHandleByIndex(0))


# ---------------------------------------------------------------------------- the reader


def test_the_reader_converts_every_field_and_drops_those_not_supported() -> None:
    nvml = fake(unsupported=frozenset({"mem", "nvlink_tx", "nvlink_rx"}))
    r = reader(nvml)
    first, second = r.read(), r.read()
    for poll, sample in enumerate((first, second)):
        assert sample["sm_clock_mhz"] == value("sm", poll)
        assert sample["power_w"] == value("power_mw", poll) / 1e3
        assert sample["power_limit_w"] == value("limit_mw", poll) / 1e3
        assert sample["temp_c"] == value("temp", poll)
        assert sample["clocks_event_reasons"] == value("reasons", poll)
        assert sample["mem_used_bytes"] == value("used", poll)
        assert sample["mem_clock_mhz"] is None  # NotSupported: empty, not fatal
        assert sample["nvlink_tx_mbps"] is None and sample["nvlink_rx_mbps"] is None
    # counters: no rate on the first poll; then the bytes since it over NVML's own timestamps
    assert first["pcie_tx_mbps"] is None
    dt_s = (value("field_t_us", 1) - value("field_t_us", 0)) / 1e6
    tx = (value("pcie_tx", 1) - value("pcie_tx", 0)) / dt_s / 1e6
    rx = (value("pcie_rx", 1) - value("pcie_rx", 0)) / dt_s / 1e6
    assert second["pcie_tx_mbps"] == pytest.approx(tx)
    assert second["pcie_rx_mbps"] == pytest.approx(rx)
    assert r.max_sm_clock_mhz == nvml.max_sm_clock_mhz
    assert r.temp_slowdown_c == nvml.slowdown_c
    # a query NVML does not support is not asked again
    r.read()
    assert nvml.calls["mem"] == 1


def test_one_poll_makes_eight_nvml_calls() -> None:
    nvml = fake()
    r = reader(nvml)
    r.read()
    before = sum(nvml.calls.values())
    r.read()
    assert sum(nvml.calls.values()) - before == 8
    assert nvml.calls["nvmlDeviceGetFieldValues"] == 2
    assert nvml.calls["pcie_kbps_tx"] == 0  # the byte counters make the blocking query needless


def test_nvlink_counters_in_kib_become_mb_per_s() -> None:
    r = reader(fake())
    r.read()
    second = r.read()
    dt_s = (value("field_t_us", 1) - value("field_t_us", 0)) / 1e6
    kib = value("nvlink_tx", 1) - value("nvlink_tx", 0)
    assert second["nvlink_tx_mbps"] == pytest.approx(kib * 1024 / dt_s / 1e6)
    assert second["nvlink_rx_mbps"] == 0.0


def test_without_pcie_byte_counters_the_driver_throughput_is_read() -> None:
    nvml = fake(unsupported=frozenset({"pcie_tx", "pcie_rx"}))
    r = reader(nvml)
    r.read()  # learns the counters are missing
    sample = r.read()
    assert sample["pcie_tx_mbps"] == pytest.approx(value("pcie_kbps_tx", 0) * 1e3 / 1e6)
    assert sample["pcie_rx_mbps"] == pytest.approx(value("pcie_kbps_rx", 0) * 1e3 / 1e6)


def test_a_failing_query_leaves_that_sample_empty_and_is_asked_again() -> None:
    series = {**SERIES, "temp": [NVMLError(UNKNOWN), 60]}
    nvml = FakeNvml(series=series)
    r = reader(nvml)
    assert r.read()["temp_c"] is None
    assert r.read()["temp_c"] == 60


def test_no_gpu_handle_is_a_reason_not_an_error() -> None:
    class NoGpu(FakeNvml):
        def nvmlDeviceGetHandleByIndex(self, index: int) -> SimpleNamespace:
            raise NVMLError(NOT_SUPPORTED)

    why = open_reader(3, amd=False, nvml=NoGpu(series=SERIES))
    assert isinstance(why, str) and why.startswith("no NVML handle for GPU 3")


def test_the_gpu_is_found_by_its_pci_address_before_its_index() -> None:
    asked: list[str] = []

    class TwoGpus(FakeNvml):
        def nvmlDeviceGetHandleByPciBusId(self, bus_id: str) -> SimpleNamespace:
            asked.append(bus_id)
            if bus_id != "00000000:3b:00.0":
                raise NVMLError(UNKNOWN)
            return SimpleNamespace(index=5)

    nvml = TwoGpus(series=SERIES)
    found = open_reader(0, amd=False, pci_bus_id="0000:3b:00.0", nvml=nvml)
    assert isinstance(found, NvmlReader) and found._handle.index == 5
    other = open_reader(2, amd=False, pci_bus_id="0000:99:00.0", nvml=nvml)
    assert isinstance(other, NvmlReader) and other._handle.index == 2  # by index, as a fallback
    assert asked == ["00000000:3b:00.0", "00000000:99:00.0"]


def test_the_real_bindings_without_a_driver_give_a_reason() -> None:
    found = open_reader(0, amd=False)
    if not isinstance(found, str):
        found.close()
        pytest.skip("NVML works on this machine")
    assert found.startswith("no NVML")


def test_amdsmi_reader_reads_the_fields_amd_has() -> None:
    class AmdSmiException(Exception):
        def __init__(self, err_code: int) -> None:
            super().__init__(f"amdsmi error {err_code}")
            self.err_code = err_code

    def power_info(h: Any) -> dict[str, Any]:
        return {"current_socket_power": "N/A", "average_socket_power": 612}

    def temp_metric(h: Any, sensor: int, metric: int) -> int:
        raise AmdSmiException(2)  # not supported

    smi = SimpleNamespace(
        AmdSmiException=AmdSmiException,
        AmdSmiClkType=SimpleNamespace(GFX=0, MEM=1),
        AmdSmiTemperatureType=SimpleNamespace(HOTSPOT=1),
        AmdSmiTemperatureMetric=SimpleNamespace(CURRENT=0),
        amdsmi_get_processor_handles=lambda: ["gpu0"],
        amdsmi_get_clock_info=lambda h, kind: {"clk": 2100 if kind == 0 else 1300,
                                               "max_clk": 2100 if kind == 0 else 1300},
        amdsmi_get_power_info=power_info,
        amdsmi_get_power_cap_info=lambda h: {"power_cap": 750_000_000},  # uW
        amdsmi_get_gpu_vram_usage=lambda h: {"vram_used": 2048, "vram_total": 196_592},  # MiB
        amdsmi_get_temp_metric=temp_metric,
    )  # fmt: skip
    r = open_reader(0, amd=True, amdsmi=smi)
    assert isinstance(r, AmdSmiReader)
    sample = r.read()
    assert sample == {
        "sm_clock_mhz": 2100.0,
        "mem_clock_mhz": 1300.0,
        "power_w": 612.0,
        "power_limit_w": 750.0,
        "temp_c": None,
        "mem_used_bytes": 2048 * 2**20,
    }
    assert r.max_sm_clock_mhz == 2100.0 and r.reason_names(0xFF) == []


# ---------------------------------------------------------------------------- the sampler


def sampled(tmp_path: Path, series: dict[str, list[Any]] | None = None) -> tuple[
    TelemetrySampler, list[TelemetrySummary | None], TelemetryWindow
]:  # fmt: skip
    """Poll 0 before gemm starts; polls 1-10 inside it, 0.1 s apart; a record after poll 5
    and one after poll 10; then the end."""
    nvml = FakeNvml(series=series or SERIES)
    clock = Clock(1000.0)
    s = TelemetrySampler(reader(nvml), interval_s=0.1, rank=0, host="h", device="cuda:0",
                         run_dir=tmp_path, clock=clock)  # fmt: skip
    s.open_series()
    s.poll()
    clock.now = 1000.05
    s.begin("gemm")
    marks = []
    for poll in range(1, 11):
        clock.now = 1000.0 + 0.1 * poll
        s.poll()
        if poll in (5, 10):
            clock.now += 0.01
            marks.append(s.mark())
    clock.now += 0.02
    window = s.end()
    s.stop()
    return s, marks, window


def test_windows_summarize_their_own_samples(tmp_path: Path) -> None:
    _, (first, second), window = sampled(tmp_path)
    assert first is not None and second is not None and window.summary is not None
    windows = ((first, range(1, 6)), (second, range(6, 11)), (window.summary, range(1, 11)))
    for summary, polls in windows:
        sm = [value("sm", p) for p in polls]
        power = [value("power_mw", p) / 1e3 for p in polls]
        masks = [value("reasons", p) for p in polls]
        assert summary.samples == len(polls)
        assert summary.sm_clock_mhz_median == statistics.median(sm)
        assert summary.sm_clock_mhz_min == min(sm)
        assert summary.power_w_median == pytest.approx(statistics.median(power))
        assert summary.power_w_max == pytest.approx(max(power))
        assert summary.power_limit_w == value("limit_mw", 0) / 1e3
        assert summary.temp_c_max == max(value("temp", p) for p in polls)
        assert summary.mem_used_max_bytes == max(value("used", p) for p in polls)
        cap = sum(1 for m in masks if m & SW_POWER_CAP) / len(masks)
        idle = sum(1 for m in masks if m & IDLE) / len(masks)
        assert summary.reasons.get("SW power cap", 0) == pytest.approx(cap, abs=1e-4)
        assert summary.reasons.get("GPU idle", 0) == pytest.approx(idle, abs=1e-4)
        assert list(summary.reasons.values()) == sorted(summary.reasons.values(), reverse=True)
        assert summary.sm_clock_max_mhz == 1980 and summary.temp_slowdown_c == 90
    assert (window.benchmark, window.rank, window.device, window.source) == (
        "gemm", 0, "cuda:0", "nvml"
    )  # fmt: skip
    assert window.start == 1000.05 and window.series == "telemetry/rank-00000.csv"


def test_the_csv_holds_every_sample_with_its_benchmark(tmp_path: Path) -> None:
    sampler, _, window = sampled(tmp_path)
    assert window.series is not None
    rows = read_series(tmp_path / window.series)
    assert [r.benchmark for r in rows] == [""] + ["gemm"] * 10
    assert [r.t for r in rows] == pytest.approx([1000.0 + 0.1 * p for p in range(11)])
    for poll, row in enumerate(rows):
        assert row.values["sm_clock_mhz"] == value("sm", poll)
        assert row.values["power_w"] == pytest.approx(value("power_mw", poll) / 1e3)
        assert row.values["clocks_event_reasons"] == value("reasons", poll)
    # in memory: the benchmark's samples only (begin drops the ones before it)
    assert [s.values for s in sampler.samples()] == [r.values for r in rows[1:]]
    header = (tmp_path / window.series).read_text().splitlines()[0]
    assert header.startswith("t,benchmark,sm_clock_mhz,mem_clock_mhz,power_w,power_limit_w")


def test_an_empty_window_has_no_summary(tmp_path: Path) -> None:
    clock = Clock(5.0)
    s = TelemetrySampler(reader(fake()), interval_s=0.1, rank=1, host="h", device="cuda:1",
                         clock=clock)  # fmt: skip
    s.begin("memory")
    clock.now = 5.01
    assert s.mark() is None
    window = s.end()
    assert window.summary is None and window.series is None


class Flaky:
    """Every third read raises."""

    source = "nvml"
    max_sm_clock_mhz: float | None = None
    temp_slowdown_c: float | None = None

    def __init__(self) -> None:
        self.reads = 0
        self.closed = False

    def read(self) -> dict[str, float | None]:
        self.reads += 1
        if self.reads % 3 == 0:
            raise RuntimeError("the driver went away")
        return {"sm_clock_mhz": 1000.0 + self.reads}

    def reason_names(self, mask: int) -> list[str]:
        return []

    def close(self) -> None:
        self.closed = True


def test_the_thread_survives_failed_reads_and_stops(tmp_path: Path) -> None:
    flaky = Flaky()
    s = TelemetrySampler(flaky, interval_s=0.005, rank=0, host="h", device="cuda:0",
                         run_dir=tmp_path)  # fmt: skip
    s.start()
    deadline = time.monotonic() + 10
    while s.polls < 7 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert s.running
    assert s.stop() and not s.running and flaky.closed
    assert s.failed_reads >= 2 and s.last_error == "RuntimeError: the driver went away"
    assert len(s.samples()) == s.polls - s.failed_reads
    assert not [t for t in threading.enumerate() if t.name == "telemetry-0"]
    rows = read_series(tmp_path / "telemetry" / "rank-00000.csv")
    assert len(rows) == len(s.samples())


def test_a_reader_stuck_in_the_driver_does_not_hold_the_end(tmp_path: Path) -> None:
    release = threading.Event()

    class Stuck(Flaky):
        def read(self) -> dict[str, float | None]:
            release.wait(30)
            return {}

    stuck = Stuck()
    s = TelemetrySampler(stuck, interval_s=0.01, rank=0, host="h", device="cuda:0")
    s.start()
    started = time.monotonic()
    assert not s.stop(timeout_s=0.2)
    assert time.monotonic() - started < 5 and not stuck.closed  # not closed under the thread
    release.set()


# ---------------------------------------------------------------------------- the worker


def spec(tmp_path: Path, *, device_type: str = "cuda", **kw: Any) -> RunSpec:
    config = build_run_config(device_type="cpu", only=["gemm"], **kw)
    return RunSpec(run_id="r", run_dir=str(tmp_path), config=config, device_type=device_type,
                   started="now", command="clusterbench run", self_launched=True)  # fmt: skip


def test_cpu_workers_record_why_there_is_no_telemetry(tmp_path: Path) -> None:
    ctx = one_rank_ctx("", run_dir=tmp_path)
    log = RankLog(tmp_path, 0)
    with worker._telemetry(ctx, spec=spec(tmp_path, device_type="cpu"), log=log):
        assert ctx.telemetry is None
    log.close()
    assert read_rank_file(log.path) == [
        Skip(rank=0, seq=0, benchmark="telemetry", reason="no NVML: CPU workers")
    ]
    assert not (tmp_path / "telemetry").exists()


def test_telemetry_off_says_so(tmp_path: Path) -> None:
    ctx = one_rank_ctx("", device=torch.device("cuda", 0), run_dir=tmp_path)
    log = RankLog(tmp_path, 0)
    with worker._telemetry(ctx, spec=spec(tmp_path, telemetry=False), log=log):
        assert ctx.telemetry is None
    log.close()
    [skip] = read_rank_file(log.path)
    assert isinstance(skip, Skip) and skip.reason == "off (--no-telemetry)"


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    nvml = fake()
    monkeypatch.setattr(gpu_telemetry, "open_reader", lambda index, **kw: reader(nvml))
    return nvml


def test_the_sampler_stops_on_ctrl_c(tmp_path: Path, fake_gpu: FakeNvml) -> None:
    ctx = one_rank_ctx("", device=torch.device("cuda", 0), run_dir=tmp_path)
    log = RankLog(tmp_path, 0)
    with (
        pytest.raises(KeyboardInterrupt),
        worker._telemetry(ctx, spec=spec(tmp_path, telemetry_interval_s=0.01), log=log),
    ):
        sampler = ctx.telemetry
        assert sampler is not None and sampler.running and sampler.interval_s == 0.01
        raise KeyboardInterrupt
    log.close()
    assert ctx.telemetry is None and sampler is not None and not sampler.running
    assert read_rank_file(log.path) == []  # no skip: it sampled


def test_each_measurement_carries_its_own_window(tmp_path: Path, fake_gpu: FakeNvml) -> None:
    yielded: list[float] = []  # when the benchmark yielded a, the finding, b

    def bench_run(ctx: Any, cfg: Any) -> Iterator[Measurement | Finding]:
        time.sleep(0.15)
        yielded.append(time.monotonic())
        yield Measurement(benchmark="fake", metric="a", value=1.0, unit="s", rank=0, host="h",
                          device="cuda:0")  # fmt: skip
        time.sleep(0.15)
        yielded.append(time.monotonic())
        yield Finding(id="fake.note", severity="info", scope="run", message="m")
        time.sleep(0.15)
        yielded.append(time.monotonic())
        yield Measurement(benchmark="fake", metric="b", value=2.0, unit="s", rank=0, host="h",
                          device="cuda:0")  # fmt: skip

    ctx = one_rank_ctx("fake", device=torch.device("cuda", 0), run_dir=tmp_path)
    log = RankLog(tmp_path, 0)
    bench = SimpleNamespace(name="fake", measure=lambda: bench_run)
    with worker._telemetry(ctx, spec=spec(tmp_path, telemetry_interval_s=0.01), log=log):
        worker._run_one(ctx, bench=bench, cfg=None, log=log, timeout_s=60)  # type: ignore[arg-type]
    log.close()
    records = read_rank_file(log.path)
    assert [type(r) for r in records] == [
        Start, MeasurementRecord, type(records[2]), MeasurementRecord, End, TelemetryRecord
    ]  # fmt: skip
    a, b = (r.data for r in records if isinstance(r, MeasurementRecord))
    (window,) = (r.data for r in records if isinstance(r, TelemetryRecord))
    assert a.telemetry is not None and b.telemetry is not None and window.summary is not None
    # a: start to its record; b: from the finding (the previous record) to its own
    assert 0.1 < a.telemetry.window_s < window.summary.window_s
    # b's window is the time since the finding, not since a: the two differ by the 0.15 s
    # slept between a and the finding whatever the machine's load, so b must be the nearer
    t_a, t_finding, t_b = yielded
    since_finding, since_a = t_b - t_finding, t_b - t_a
    assert abs(b.telemetry.window_s - since_finding) < abs(b.telemetry.window_s - since_a)
    assert b.telemetry.window_s > 0.1
    assert a.telemetry.samples + b.telemetry.samples < window.summary.samples
    assert window.benchmark == "fake" and window.series == "telemetry/rank-00000.csv"
    assert (tmp_path / window.series).is_file()
    # results.json: the measurements with their summaries, the window in results.telemetry
    meta = RunMeta(id="r", started="s", finished="f", suite="quick", world_size=1,
                   backend="nccl", command="c", config={}, benchmarks=["fake"], version="0",
                   fallback_host="h")  # fmt: skip
    results = assemble_results(records=records, meta=meta, failures=[])
    assert results.telemetry == [window]
    assert [m.telemetry for m in results.measurements] == [a.telemetry, b.telemetry]


# ---------------------------------------------------------------------------- findings


def results_of(summary: TelemetrySummary, window: TelemetryWindow, **params: Any) -> Results:
    m = Measurement(benchmark="gemm", metric="tflops", value=700.0, unit="TFLOP/s",
                    params=params or {"dtype": "bf16", "m": 8192, "n": 8192, "k": 8192},
                    rank=0, host="h", device="cuda:0", telemetry=summary)  # fmt: skip
    run = RunInfo(id="r", started="s", suite="quick", world_size=1, num_nodes=1, backend="nccl",
                  command="c")  # fmt: skip
    return Results(tool=ToolInfo(version="0"), run=run, measurements=[m], telemetry=[window])


def test_the_power_cap_finding_names_the_measurement_and_its_numbers(tmp_path: Path) -> None:
    _, (first, _), window = sampled(tmp_path)
    assert first is not None
    [found] = analysis.findings(
        results_of(first, window), analysed(results_of(first, window), Thresholds())
    )
    polls = range(1, 6)
    median = statistics.median(value("sm", p) for p in polls)
    power = statistics.median(value("power_mw", p) / 1e3 for p in polls)
    share = sum(1 for p in polls if value("reasons", p) & SW_POWER_CAP) / len(polls)
    assert (found.id, found.severity, found.scope) == ("telemetry.throttled", "info",
                                                       "host:h/cuda:0")  # fmt: skip
    assert found.message.startswith(
        f"gemm tflops (dtype=bf16, m=8192, n=8192, k=8192) ran at {median:,.0f} MHz median "
        f"(the GPU's maximum 1,980 MHz, {1 - median / 1980:.0%} below it) under the software "
        f"power cap (700 W) in {share:.0%}"
    )
    assert f"power {power:,.0f} W median against the 700 W limit" in found.message
    # the reason's bit set with the clock at its maximum: said to cost little
    near = first.model_copy(update={"sm_clock_mhz_median": 1975.0})
    [little] = analysis.findings(
        results_of(near, window), analysed(results_of(near, window), Thresholds())
    )
    assert (
        "ran at 1,975 MHz median (the GPU's maximum 1,980 MHz, within 0% of it: this cost "
        "little clock)" in little.message
    )
    assert found.evidence["fraction"] == pytest.approx(share, abs=1e-4)
    assert found.evidence["measurement"]["params"]["dtype"] == "bf16"
    assert found.evidence["sm_clock_mhz_median"] == median
    assert "nvidia-smi -q -d POWER,PERFORMANCE -i 0" in found.fix


def test_thermal_slowdown_warns_and_idle_is_no_limit(tmp_path: Path) -> None:
    hot = {**SERIES, "reasons": [HW_THERMAL, HW_THERMAL, 0]}
    _, (first, _), window = sampled(tmp_path / "hot", hot)
    assert first is not None
    [found] = analysis.findings(
        results_of(first, window), analysed(results_of(first, window), Thresholds())
    )
    assert (found.severity, found.evidence["reason"]) == ("warn", "HW thermal slowdown")
    assert "hardware thermal slowdown" in found.message and "cooling" in found.fix
    assert f"up to {max(value('temp', p) for p in range(1, 6))} °C" in found.message
    idle = {**SERIES, "reasons": [IDLE, 0x02]}  # idle and application clocks: no limit
    _, (first, _), window = sampled(tmp_path / "idle", idle)
    assert first is not None and first.reasons
    assert (
        analysis.findings(
            results_of(first, window), analysed(results_of(first, window), Thresholds())
        )
        == []
    )


def test_a_reason_below_its_share_is_no_finding(tmp_path: Path) -> None:
    _, (first, _), window = sampled(tmp_path)
    assert first is not None
    share = first.reasons["SW power cap"]
    above = Thresholds(telemetry_throttle_min_fraction=share + 0.01)
    assert (
        analysis.findings(results_of(first, window), analysed(results_of(first, window), above))
        == []
    )


def test_near_the_slowdown_temperature_is_hot(tmp_path: Path) -> None:
    _, (first, _), window = sampled(tmp_path)
    assert first is not None and window.summary is not None
    hottest = window.summary.temp_c_max
    assert hottest is not None
    near = window.model_copy(update={"summary": window.summary.model_copy(
        update={"temp_slowdown_c": hottest + 3})})  # fmt: skip
    judged = results_of(first, near)
    found = [f for f in analysis.findings(judged, analysed(judged)) if f.id == "telemetry.hot"]
    assert [f.severity for f in found] == ["warn"]
    assert f"reached {hottest:.0f} °C during gemm" in found[0].message
    far = Thresholds(telemetry_hot_margin_c=2)
    assert not [
        f
        for f in analysis.findings(results_of(first, near), analysed(results_of(first, near), far))
        if f.id == "telemetry.hot"
    ]


# ---------------------------------------------------------------------------- the report


def test_the_report_draws_the_series_under_the_benchmark(tmp_path: Path) -> None:
    _, (first, _), window = sampled(tmp_path)
    assert first is not None and window.summary is not None and window.series is not None
    results = results_of(first, window)
    plots = report_plots(results, run_dir=tmp_path)["gemm"]
    plot = plots[-1]
    assert plot.title == "gemm: GPU telemetry"
    go.Figure(plot.figure)  # valid by plotly's schema
    rows = [r for r in read_series(tmp_path / window.series) if r.benchmark == "gemm"]
    traces = {(t["name"], t.get("yaxis", "y")): t for t in plot.figure["data"]}
    clock = traces["cuda:0", "y"]
    assert clock["y"] == [r.values["sm_clock_mhz"] for r in rows]
    assert clock["x"] == pytest.approx([r.t - window.start for r in rows])
    assert traces["cuda:0", "y3"]["y"] == [r.values["temp_c"] for r in rows]
    limit = traces[f"power limit {window.summary.power_limit_w:.1f} W", "y2"]
    assert set(limit["y"]) == {window.summary.power_limit_w}
    marked = traces["cuda:0: limiting reason", "y"]
    limited = [r for r in rows if int(r.values["clocks_event_reasons"] or 0) & SW_POWER_CAP]
    assert marked["y"] == [r.values["sm_clock_mhz"] for r in limited]
    assert isinstance(plot.table, Grid) and plot.table.rows[0][1] == str(window.summary.samples)
    for key, ax in plot.figure["layout"].items():
        if key.startswith(("xaxis", "yaxis")):
            assert ax["title"]["text"].endswith(")"), key  # every axis names its unit
    # without the run folder: the table and a note, no figure
    [alone] = telemetry_figures.figures(results, "gemm", None)
    assert alone.figure == {} and "not found" in alone.notes[0]


def test_a_benchmark_too_short_for_a_sample_draws_and_says_nothing(tmp_path: Path) -> None:
    """doctor ends between two polls: the rank's CSV is there (gemm's samples are in it), with
    none in doctor's window; no figure, no note that the CSV is missing."""
    clock = Clock(1000.0)
    s = TelemetrySampler(reader(FakeNvml(series=SERIES)), interval_s=0.1, rank=0, host="h",
                         device="cuda:0", run_dir=tmp_path, clock=clock)  # fmt: skip
    s.open_series()
    s.poll()
    clock.now = 1000.05
    s.begin("doctor")
    clock.now = 1000.06
    short = s.end()
    s.begin("gemm")
    for poll in range(1, 4):
        clock.now = 1000.0 + 0.1 * poll
        s.poll()
    clock.now += 0.01
    long = s.end()
    s.stop()
    assert short.summary is None and long.summary is not None
    assert short.series is not None and (tmp_path / short.series).is_file()
    results = results_of(long.summary, long)
    results.telemetry = [short, long]
    assert telemetry_figures.figures(results, "doctor", tmp_path) == []
    assert telemetry_figures.figures(results, "doctor", None) == []
    [drawn] = telemetry_figures.figures(results, "gemm", tmp_path)
    assert drawn.figure and not any("not found" in n for n in drawn.notes)


def test_the_summary_has_a_telemetry_line_per_benchmark(tmp_path: Path) -> None:
    _, (first, _), window = sampled(tmp_path)
    assert first is not None and window.summary is not None
    section = telemetry_section.section(
        results_of(first, window), analysed(results_of(first, window))
    )
    assert section is not None
    [row] = section.grids[0].rows
    s = window.summary
    assert row[0] == "gemm" and row[1] == "1"
    assert row[2] == f"{format_value(s.sm_clock_mhz_median)} MHz"
    assert row[5] == f"{format_value(s.temp_c_max)} °C"
    assert row[6] == f"SW power cap {s.reasons['SW power cap']:.0%}"
    empty = results_of(first, window).model_copy(update={"telemetry": []})
    assert telemetry_section.section(empty, analysed(empty)) is None


# ---------------------------------------------------------------------------- settings


def test_the_interval_is_checked_and_recorded() -> None:
    config = build_run_config(device_type="cpu", telemetry_interval_s=0.5)
    assert config.to_dict()["telemetry"] == {"enabled": True, "interval_s": 0.5}
    assert build_run_config(device_type="cpu", telemetry=False).to_dict()["telemetry"] == {
        "enabled": False, "interval_s": 0.1
    }  # fmt: skip
    with pytest.raises(ConfigError, match=r"--telemetry-interval must be 0\.01 to 60 seconds"):
        build_run_config(device_type="cpu", telemetry_interval_s=0.001)


def test_the_file_sets_telemetry_too(tmp_path: Path) -> None:
    toml = tmp_path / "c.toml"
    toml.write_text("telemetry = false\ntelemetry_interval_s = 0.25\n")
    config = build_run_config(device_type="cpu", config_file=toml)
    assert (config.telemetry, config.telemetry_interval_s) == (False, 0.25)
    toml.write_text("telemetry_interval_s = 600\n")
    with pytest.raises(ConfigError, match="telemetry_interval_s must be"):
        build_run_config(device_type="cpu", config_file=toml)
