"""Exports that need a process or a server: a real Pushgateway, an offline W&B run, and the CLI
(``export``, ``run --export``) on real runs."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import clusterbench.catalog  # noqa: F401  (the metric declarations: HELP texts)
from clusterbench.report import export_prometheus, export_wandb
from clusterbench.report.export import (
    COLUMNS,
)
from clusterbench.schema import (
    Results,
    load_results,
)
from tests.helpers import cli
from tests.unit.test_export import (
    check_csv,
    check_prometheus,
    export_cli,
    families,
    free_port,
    synthetic,
    write_run,
)

PUSHGATEWAY = shutil.which("prometheus-pushgateway") or "/usr/bin/prometheus-pushgateway"


@pytest.fixture
def pushgateway(tmp_path: Path) -> Iterator[str]:
    """A real Pushgateway (Debian's prometheus-pushgateway) on a free port; its absence fails."""
    port = free_port()
    proc = subprocess.Popen(
        [PUSHGATEWAY, f"--web.listen-address=127.0.0.1:{port}",
         f"--persistence.file={tmp_path / 'pushgateway.db'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                assert proc.poll() is None, "the pushgateway exited"
                assert time.monotonic() < deadline, "the pushgateway never became ready"
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def scrape(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {k: f for k, f in families(text).items() if k.startswith("clusterbench_")}


@pytest.mark.pushgateway
def test_pushgateway_serves_what_was_pushed(pushgateway: str) -> None:
    results = synthetic()
    grouping = {"instance": "node1", "suite": "standard"}
    assert export_prometheus.push(results, pushgateway) == grouping
    found = scrape(pushgateway)
    check_prometheus(found, results)
    for family in found.values():
        for sample in family.samples:
            assert (sample.labels["job"], sample.labels["instance"]) == ("clusterbench", "node1")
    # the host's next run of the suite replaces its figures (PUT): what it did not measure is gone
    fewer = results.model_copy(update={"measurements": results.measurements[:2]})
    export_prometheus.push(fewer, pushgateway)
    again = scrape(pushgateway)
    assert "clusterbench_gemm_best_flop_per_second" not in again
    assert len(again["clusterbench_memory_bandwidth_bytes_per_second"].samples) == 2
    # a run of another suite is a group of its own: both are served
    quick = fewer.model_copy(update={"run": fewer.run.model_copy(update={"suite": "quick"})})
    export_prometheus.push(quick, pushgateway)
    both = scrape(pushgateway)["clusterbench_memory_bandwidth_bytes_per_second"].samples
    assert sorted(s.labels["suite"] for s in both) == ["quick", "quick", "standard", "standard"]


def wandb_records(path: Path) -> list[Any]:
    """The records of a .wandb file: wandb's LevelDB-log framing (a 7-byte ':W&B' header, then
    32 KiB blocks of chunks, each a 7-byte header: CRC, length, type full/first/middle/last)
    around protobuf Records."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, records, pending = 7, 32768, [], b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 0:
            break
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
    return records


def read_wandb_run(folder: Path) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The config, the summary and the run's name from the run's .wandb file."""
    (wandb_file,) = folder.glob("run-*.wandb")
    config: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    name = ""
    for record in wandb_records(wandb_file):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            name = record.run.display_name
            config.update({i.key: json.loads(i.value_json) for i in record.run.config.update})
        elif kind == "config":
            config.update({i.key: json.loads(i.value_json) for i in record.config.update})
        elif kind == "summary":
            summary.update({i.key: json.loads(i.value_json) for i in record.summary.update
                            if i.key})  # fmt: skip
    return config, summary, name


def check_wandb(folder: Path, results: Results) -> None:
    config, summary, name = read_wandb_run(folder)
    assert name == results.run.id
    assert config["run"]["id"] == results.run.id
    assert config["run"]["config"] == results.run.config
    assert config["hardware"]["num_gpus"] == sum(len(h.gpus) for h in results.hosts)
    for m in results.measurements:
        assert summary[export_wandb.summary_key(m)] == m.value
    fails = sum(f.severity == "fail" for f in results.findings)
    assert summary["findings/fail"] == fails
    (table,) = folder.glob("files/media/table/measurements_*.table.json")
    written = json.loads(table.read_text())
    assert written["columns"][: len(COLUMNS)] == list(COLUMNS)
    values = [row[written["columns"].index("value")] for row in written["data"]]
    assert values == [m.value for m in results.measurements]


def test_wandb_offline_run_is_written_with_the_results(tmp_path: Path) -> None:
    """Through the CLI (wandb's service ends with the process), offline, no account."""
    results = synthetic()
    run = write_run(tmp_path / "run", results)
    env = {"WANDB_MODE": "offline", "WANDB_API_KEY": "", "WANDB_DIR": ""}
    proc = cli("export", str(run), "--format", "wandb", "--wandb-project", "cb-test", env=env)
    assert proc.returncode == 0, proc.stderr
    (folder,) = (run / "wandb").glob("offline-run-*")
    assert proc.stdout == f"wandb: {folder}\n"
    check_wandb(folder, results)


@pytest.mark.pushgateway
def test_cli_pushes_to_a_pushgateway(tmp_path: Path, pushgateway: str) -> None:
    results = synthetic()
    run = write_run(tmp_path / "run", results)
    result = export_cli(str(run), "--pushgateway", pushgateway)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        f"pushgateway: {pushgateway} (job=clusterbench,instance=node1,suite=standard)\n"
    )
    check_prometheus(scrape(pushgateway), results)
    assert not (run / "metrics.prom").exists()  # --pushgateway alone writes no file


def test_run_export_writes_every_format_and_a_failed_push_costs_one_line(tmp_path: Path) -> None:
    """A real CPU run: --export at its end, as 'clusterbench export' does; the push to a
    gateway that is not there is a warning, not a changed exit code."""
    out = tmp_path / "run"
    proc = cli(
        "run", "--only", "memory", "--device", "cpu", "--nproc", "2", "--out", str(out),
        "--no-history", "--set", "memory.size_bytes=8388608", "--set", "memory.repeats=3",
        "--export", "csv,prometheus", "--export", "json-lines,wandb",
        "--pushgateway", f"http://127.0.0.1:{free_port()}",
        env={"WANDB_MODE": "offline", "WANDB_DIR": "", "WANDB_API_KEY": ""},
    )  # fmt: skip
    results = load_results(out)
    assert results.measurements and results.run.status == "completed"
    assert proc.returncode == (1 if any(f.severity == "fail" for f in results.findings) else 0)
    (warning,) = [line for line in proc.stderr.splitlines() if "clusterbench:" in line]
    assert warning.startswith("clusterbench: warning: export not done: pushgateway: cannot push")
    check_csv((out / "results.csv").read_text(), results)
    lines = (out / "measurements.jsonl").read_text().splitlines()
    assert [json.loads(line)["value"] for line in lines] == [m.value for m in results.measurements]
    found = families((out / "metrics.prom").read_text())
    samples = found["clusterbench_memory_bandwidth_bytes_per_second"].samples
    expected = sorted((m.device, m.params["op"], m.value * 1e9) for m in results.measurements)
    got = sorted((s.labels["device"], s.labels["op"], s.value) for s in samples)
    assert [g[:2] for g in got] == [e[:2] for e in expected]
    assert [g[2] for g in got] == pytest.approx([e[2] for e in expected], rel=1e-12)
    (folder,) = (out / "wandb").glob("offline-run-*")
    check_wandb(folder, results)
    for fmt, name in (("csv", "results.csv"), ("prometheus", "metrics.prom")):
        said = f"{fmt}: {out / name}\n"
        # where each went, after the summary and the run's files
        assert said in proc.stdout and proc.stdout.index(said) > proc.stdout.index("results: ")
    # 'clusterbench export' of the same run gives the same CSV
    again = cli("export", str(out), "-f", "csv", "-o", "-")
    assert again.stdout == (out / "results.csv").read_text()


def test_run_with_a_bad_export_stops_before_running(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = cli("run", "--only", "memory", "--out", str(out), "--export", "parquet")
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert line.startswith("clusterbench: error: --export: unknown export format 'parquet'")
    assert not out.exists()


def test_a_bad_export_stops_every_rank_of_a_launchers_run(tmp_path: Path) -> None:
    """Rank 1 under torchrun (no results to export there) still checks the format names, so a
    mistyped one stops it too instead of leaving it waiting for rank 0."""
    out = tmp_path / "run"
    rank1 = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1",
             "MASTER_PORT": "1"}  # fmt: skip
    proc = cli("run", "--only", "memory", "--out", str(out), "--export", "parquet", env=rank1)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = proc.stderr.splitlines()
    assert line.startswith("clusterbench: error: --export: unknown export format 'parquet'")
