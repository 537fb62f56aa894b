"""Exports read back with the tools that consume them: CSV with the csv module, JSON lines with
json, Prometheus with prometheus_client's parser from a file, and the ``export`` command in
process (a real Pushgateway, W&B and the CLI on real runs: tests/integration/test_export.py)."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

import clusterbench.catalog  # noqa: F401  (the metric declarations: HELP texts)
from clusterbench.analyses.trend import param_text
from clusterbench.cli import app
from clusterbench.report import export_prometheus
from clusterbench.report.export import (
    COLUMNS,
    ExportError,
    csv_text,
    jsonl_text,
    param_keys,
    parse_formats,
)
from clusterbench.schema import (
    Finding,
    GpuInfo,
    HostInfo,
    Measurement,
    Reference,
    Results,
    RunInfo,
    Stats,
    ToolInfo,
)

PUSHGATEWAY = shutil.which("prometheus-pushgateway") or "/usr/bin/prometheus-pushgateway"


def _m(benchmark: str, metric: str, value: float, unit: str, **kw: Any) -> Measurement:
    rank = kw.pop("rank", 0)
    fields: dict[str, Any] = {"host": "node1", "device": f"cuda:{rank}", "params": {}} | kw
    return Measurement(benchmark=benchmark, metric=metric, value=value, unit=unit, rank=rank,
                       **fields)  # fmt: skip


def synthetic() -> Results:
    """Measurements of several units, params that differ between rows (absent, None, bool, a
    key Prometheus cannot take as it is), with and without stats and reference."""
    samples = Stats.from_samples([4300.0, 4321.5, 4400.0])
    spec = Reference(value=4800.0, kind="spec_peak", source="H200 datasheet")
    measurements = [
        _m("memory", "bandwidth", 4321.5, "GB/s", params={"op": "copy", "size_bytes": 2**31},
           stats=samples, reference=spec),
        _m("memory", "bandwidth", 4290.25, "GB/s", rank=1,
           params={"op": "copy", "size_bytes": 2**31}, stats=samples, reference=spec),
        _m("collectives", "latency_us", 23.5, "us",
           params={"op": "all_reduce", "size_bytes": 8, "mode": "graph", "group-kind": "world"}),
        _m("collectives", "latency_us", 31.0, "us", params={"op": "all_reduce", "size_bytes": 8}),
        _m("gemm", "tflops_best", 786.625, "TFLOP/s", params={"dtype": "bf16"}),
        _m("training", "mfu", 55.25, "%", params={"model": "1.3b", "compile": True, "note": None}),
        _m("training", "tokens_per_s_per_gpu", 41234.5, "tokens/s", params={"model": "1.3b"}),
        _m("network", "tcp_throughput", 9.5, "Gb/s", device="host",
           params={"src_host": "node1", "dst_host": "node2"}),
    ]  # fmt: skip
    return Results(
        tool=ToolInfo(version="9.8.7"),
        run=RunInfo(
            id="cb-test-1", started="2026-12-01T10:00:00+00:00",
            finished="2026-12-01T10:05:30+00:00", suite="standard", world_size=2, num_nodes=1,
            backend="nccl", command="clusterbench run --suite standard",
            config={"suite": "standard", "timeout_s": 900.0}, benchmark_seconds={"memory": 3.25},
        ),
        hosts=[HostInfo(hostname="node1", gpus=[GpuInfo(index=0, name="NVIDIA H200"),
                                                GpuInfo(index=1, name="NVIDIA H200")])],
        measurements=measurements,
        findings=[
            Finding(id="gemm.low_efficiency", severity="warn", scope="host:node1/cuda:0",
                    message="bf16 at 79% of the dense peak", fix="check clocks"),
            Finding(id="outlier.memory", severity="fail", scope="host:node1/cuda:1",
                    message="slow", fix="drain it"),
        ],
    )  # fmt: skip


def write_run(folder: Path, results: Results) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(results.model_dump_json(indent=1), encoding="utf-8")
    return folder


# ----------------------------------------------------------------------------- csv, json lines


def check_csv(text: str, results: Results) -> None:
    """Every row of ``text`` read back with the csv module equals its measurement."""
    rows = list(csv.DictReader(io.StringIO(text)))
    keys = param_keys(results.measurements)
    assert list(rows[0]) == [*COLUMNS, *(f"params.{k}" for k in keys)]
    assert len(rows) == len(results.measurements)
    for row, m in zip(rows, results.measurements, strict=True):
        assert (row["run_id"], row["suite"], row["started"]) == (
            results.run.id, results.run.suite, results.run.started)  # fmt: skip
        assert (row["benchmark"], row["metric"], row["unit"]) == (m.benchmark, m.metric, m.unit)
        assert float(row["value"]) == m.value  # exactly: no rounding on the way
        assert (row["host"], int(row["rank"]), row["device"]) == (m.host, m.rank, m.device)
        if m.stats is None:
            assert row["samples"] == row["median"] == row["cv"] == ""
        else:
            assert int(row["samples"]) == m.stats.samples
            for name in ("median", "min", "max", "mean", "cv"):
                assert float(row[name]) == getattr(m.stats, name)
        if m.reference is None:
            assert row["reference_value"] == row["reference_kind"] == ""
        else:
            assert float(row["reference_value"]) == m.reference.value
            assert row["reference_kind"] == m.reference.kind
        for k in keys:
            assert row[f"params.{k}"] == (param_text(m.params[k]) if k in m.params else "")


def test_csv_reads_back_as_the_results() -> None:
    results = synthetic()
    text = csv_text(results)
    check_csv(text, results)
    header = next(csv.reader(io.StringIO(text)))
    # the union of param keys in the order they first appear, one column each
    assert header[len(COLUMNS):] == [
        "params.op", "params.size_bytes", "params.mode", "params.group-kind", "params.dtype",
        "params.model", "params.compile", "params.note", "params.src_host", "params.dst_host",
    ]  # fmt: skip
    mfu = list(csv.DictReader(io.StringIO(text)))[5]
    assert (mfu["params.compile"], mfu["params.note"], mfu["params.op"]) == ("true", "null", "")


def test_json_lines_read_back_as_the_results() -> None:
    results = synthetic()
    lines = jsonl_text(results).splitlines()
    assert len(lines) == len(results.measurements)
    for line, m in zip(lines, results.measurements, strict=True):
        row = json.loads(line)
        assert list(row) == [*COLUMNS, "params"]
        assert row["params"] == m.params  # nested, with the JSON types
        assert (row["benchmark"], row["metric"], row["value"], row["unit"]) == (
            m.benchmark, m.metric, m.value, m.unit)  # fmt: skip
        assert (row["host"], row["rank"], row["device"]) == (m.host, m.rank, m.device)
        assert row["samples"] == (m.stats.samples if m.stats else None)
        assert row["reference_value"] == (m.reference.value if m.reference else None)


def test_json_lines_write_non_finite_numbers_as_null() -> None:
    results = synthetic()
    loss = _m("training", "loss", math.nan, "nats")
    results = results.model_copy(update={"measurements": [loss]})
    assert json.loads(jsonl_text(results))["value"] is None


def test_format_names_are_checked() -> None:
    assert parse_formats(["CSV", "prometheus", "csv"]) == ["csv", "prometheus"]
    with pytest.raises(ValueError, match="unknown export format 'xls': choose csv, json-lines"):
        parse_formats(["csv", "xls"])


# ----------------------------------------------------------------------------- prometheus


def families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


# (benchmark, metric, unit) -> the Prometheus name and the factor to its base unit
NAMES = {
    ("memory", "bandwidth", "GB/s"): ("clusterbench_memory_bandwidth_bytes_per_second", 1e9),
    ("collectives", "latency_us", "us"): ("clusterbench_collectives_latency_seconds", 1e-6),
    ("gemm", "tflops_best", "TFLOP/s"): ("clusterbench_gemm_best_flop_per_second", 1e12),
    ("training", "mfu", "%"): ("clusterbench_training_mfu_ratio", 0.01),
    ("training", "tokens_per_s_per_gpu", "tokens/s"): (
        "clusterbench_training_tokens_per_gpu_per_second", 1.0),
    ("network", "tcp_throughput", "Gb/s"): (
        "clusterbench_network_tcp_throughput_bytes_per_second", 1e9 / 8),
    ("training", "step_time_ms", "ms"): ("clusterbench_training_step_time_seconds", 1e-3),
    ("checkpoint", "free_space_gb", "GB"): ("clusterbench_checkpoint_free_space_bytes", 1e9),
    ("dataloader", "loader_samples_per_s", "samples/s"): (
        "clusterbench_dataloader_loader_samples_per_second", 1.0),
    ("transfer", "pcie_link_width", "lanes"): ("clusterbench_transfer_pcie_link_width_lanes", 1.0),
    ("transfer", "pcie_link_gen", "gen"): ("clusterbench_transfer_pcie_link_gen", 1.0),
    ("collectives", "num_wrong", "count"): ("clusterbench_collectives_num_wrong", 1.0),
}  # fmt: skip


@pytest.mark.parametrize(("key", "expected"), NAMES.items(), ids=[".".join(k[:2]) for k in NAMES])
def test_metric_names_follow_prometheus_conventions(
    key: tuple[str, str, str], expected: tuple[str, float]
) -> None:
    assert export_prometheus.metric_name(*key) == expected


def check_prometheus(found: dict[str, Any], results: Results) -> None:
    """Every measurement is one sample of its family, in base units, with its labels."""
    for m in results.measurements:
        name, factor = NAMES[(m.benchmark, m.metric, m.unit)]
        family = found[name]
        assert family.type == "gauge"
        expected = {"host": m.host, "device": m.device, "benchmark": m.benchmark,
                    "rank": str(m.rank), "gpu": m.device.removeprefix("cuda:"),
                    "suite": results.run.suite}  # fmt: skip
        expected |= {k.replace("-", "_"): param_text(v) for k, v in m.params.items()}
        ours = []
        for sample in family.samples:
            labels = {k: v for k, v in sample.labels.items() if k not in ("job", "instance")}
            # a param of the family that this measurement does not have is ""
            if labels == expected | {k: "" for k in labels if k not in expected}:
                ours.append(sample)
        assert len(ours) == 1, (name, m)
        assert ours[0].value == pytest.approx(m.value * factor, rel=1e-12)


def test_prometheus_text_parses_back_to_the_values_and_labels(tmp_path: Path) -> None:
    results = synthetic()
    path = tmp_path / "clusterbench.prom"
    export_prometheus.write_textfile(results, path)
    found = families(path.read_text())
    check_prometheus(found, results)
    # the union of param keys within a family, "" where a measurement has none
    latency = found["clusterbench_collectives_latency_seconds"].samples
    assert sorted(s.labels["mode"] for s in latency) == ["", "graph"]
    assert {s.labels["group_kind"] for s in latency} == {"", "world"}
    assert found["clusterbench_network_tcp_throughput_bytes_per_second"].samples[0].labels[
        "gpu"] == "host"  # fmt: skip
    # HELP from the metric's declaration
    assert "median device-memory bandwidth" in found[
        "clusterbench_memory_bandwidth_bytes_per_second"].documentation  # fmt: skip
    (info,) = found["clusterbench_run_info"].samples
    assert info.value == 1
    assert {k: info.labels[k] for k in ("run_id", "suite", "version", "backend")} == {
        "run_id": "cb-test-1",
        "suite": "standard",
        "version": "9.8.7",
        "backend": "nccl",
    }
    started = found["clusterbench_run_started_timestamp_seconds"].samples[0].value
    assert started == 1796119200.0  # 2026-12-01T10:00:00Z
    findings = found["clusterbench_run_findings"].samples
    assert {s.labels["severity"]: s.value for s in findings} == {"fail": 1, "warn": 1, "info": 0}
    (wall,) = found["clusterbench_benchmark_duration_seconds"].samples
    run = {"run_id": "cb-test-1", "suite": "standard"}
    assert (wall.labels, wall.value) == (run | {"benchmark": "memory"}, 3.25)


def series(text: str) -> set[tuple[str, frozenset[tuple[str, str]]]]:
    return {(s.name, frozenset(s.labels.items())) for f in families(text).values()
            for s in f.samples}  # fmt: skip


def test_two_runs_in_one_textfile_folder_share_no_series() -> None:
    """node_exporter refuses a series that two files of its folder both hold: the figures of
    a quick and a standard run of one host, and their run metrics, differ by their labels."""
    standard = synthetic()
    quick = standard.model_copy(update={"run": standard.run.model_copy(
        update={"id": "cb-test-2", "suite": "quick"})})  # fmt: skip
    one, other = series(export_prometheus.text(standard)), series(export_prometheus.text(quick))
    assert len(one) == len(other) > len(standard.measurements)
    assert not one & other


def test_the_same_series_twice_gets_a_repeat_label() -> None:
    results = synthetic()
    twice = [results.measurements[0], results.measurements[0].model_copy(update={"value": 1.0})]
    found = families(export_prometheus.text(results.model_copy(update={"measurements": twice})))
    samples = found["clusterbench_memory_bandwidth_bytes_per_second"].samples
    assert sorted((s.labels["repeat"], s.value) for s in samples) == [("0", 4321.5e9), ("1", 1e9)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_pushgateway_that_is_not_there_is_one_line() -> None:
    with pytest.raises(ExportError) as caught:
        export_prometheus.push(synthetic(), f"http://127.0.0.1:{free_port()}", timeout_s=5)
    assert "cannot push to http://127.0.0.1:" in str(caught.value)
    assert "\n" not in str(caught.value)


# ----------------------------------------------------------------------------- W&B offline


# ----------------------------------------------------------------------------- the CLI

runner = CliRunner()


def export_cli(*args: str) -> Result:
    """``clusterbench export ARGS`` in this process (stdout and stderr apart)."""
    return runner.invoke(app, ["export", *args])


def test_without_wandb_installed_one_line_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = write_run(tmp_path / "run", synthetic())
    monkeypatch.setitem(sys.modules, "wandb", None)  # what 'import wandb' sees without it
    result = export_cli(str(run), "-f", "csv,wandb")
    assert result.exit_code == 2
    assert result.stderr == ("clusterbench: error: --format wandb: wandb is not installed: "
                             "pip install 'clusterbench[wandb]'\n")  # fmt: skip
    assert not (run / "results.csv").exists()  # checked before anything is written


def test_cli_writes_each_format_into_the_run_folder(tmp_path: Path) -> None:
    results = synthetic()
    run = write_run(tmp_path / "run", results)
    result = export_cli(str(run / "results.json"), "--format", "csv,json-lines",
                        "--format", "prometheus")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"csv: {run / 'results.csv'}",
        f"json-lines: {run / 'measurements.jsonl'}",
        f"prometheus: {run / 'metrics.prom'}",
    ]
    check_csv((run / "results.csv").read_text(), results)
    assert len((run / "measurements.jsonl").read_text().splitlines()) == len(results.measurements)
    check_prometheus(families((run / "metrics.prom").read_text()), results)


def test_cli_writes_to_stdout_a_file_or_a_folder(tmp_path: Path) -> None:
    results = synthetic()
    run = write_run(tmp_path / "run", results)
    result = export_cli(str(run), "-f", "csv", "-o", "-")
    assert result.exit_code == 0, result.stderr
    check_csv(result.stdout, results)
    target = tmp_path / "textfiles" / "clusterbench.prom"
    target.parent.mkdir()
    result = export_cli(str(run), "-f", "prometheus", "-o", str(target))
    assert (result.exit_code, result.stdout) == (0, f"prometheus: {target}\n"), result.stderr
    check_prometheus(families(target.read_text()), results)
    result = export_cli(str(run), "-f", "csv,json-lines", "-o", str(target.parent))
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in target.parent.iterdir()) == [
        "clusterbench.prom", "measurements.jsonl", "results.csv"]  # fmt: skip


def test_cli_export_that_fails_is_one_line_and_exit_3(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", synthetic())
    result = export_cli(str(run), "-f", "csv", "--pushgateway", f"127.0.0.1:{free_port()}")
    assert result.exit_code == 3
    assert (run / "results.csv").exists()  # the other export was still done
    (line,) = result.stderr.splitlines()
    assert line.startswith("clusterbench: error: pushgateway: cannot push to 127.0.0.1:")


def test_bad_inputs_are_one_line_and_exit_2(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", synthetic())
    (tmp_path / "empty").mkdir()
    (tmp_path / "not.json").write_text("{")
    cases = [
        ([str(tmp_path / "missing"), "-f", "csv"], "no such file or folder"),
        ([str(tmp_path / "empty"), "-f", "csv"], "no results.json in this folder"),
        ([str(tmp_path / "not.json"), "-f", "csv"], "malformed JSON"),
        ([str(run), "-f", "xlsx"], "unknown export format 'xlsx'"),
        ([str(run)], "nothing to export"),
        ([str(run), "-f", "wandb", "-o", "-"], "-o - writes one text format"),
        ([str(run), "-f", "csv,prometheus", "-o", str(tmp_path / "x.csv")], "one file for 2"),
    ]
    for args, message in cases:
        result = export_cli(*args)
        assert result.exit_code == 2, (args, result.stderr)
        (line,) = result.stderr.splitlines()
        assert line.startswith("clusterbench: error: ") and message in line, (args, line)
        assert result.stdout == ""


def test_help_explains_every_format() -> None:
    result = export_cli("--help")
    assert result.exit_code == 0
    for word in ("csv", "json-lines", "prometheus", "wandb", "--pushgateway", "textfile"):
        assert word in result.stdout
    run_help = " ".join(runner.invoke(app, ["run", "--help"]).stdout.split())
    assert "--export" in run_help and "--pushgateway" in run_help
