"""``clusterbench import nccl-tests`` and ``import dcgm-diag``: real nccl-tests outputs
(tests/data/nccl-tests, one H100) and dcgmi's JSON shapes become run folders that compare, the
history, baselines, the report and the exports take; a foreign or missing file is one line
and nothing written."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clusterbench.analyses.nccl.nccl_tests import parse_texts
from clusterbench.cli import app
from clusterbench.history_db import open_history
from clusterbench.schema import load_results
from tests.unit.test_doctor_dcgm import _FAIL_AND_WARN, _PASS

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"
TEXTS = sorted(DATA.glob("*.txt"))
runner = CliRunner()


def _import(*args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(app, ["import", *map(str, args)])
    return result.exit_code, result.stdout, result.stderr


def test_nccl_tests_texts_become_a_run_of_the_collectives_benchmark(tmp_path: Path) -> None:
    code, out, err = _import("nccl-tests", *TEXTS, "-o", tmp_path / "run")
    assert code == 0, err
    results = load_results(tmp_path / "run")
    assert results.run.suite == "nccl-tests" and results.run.status == "completed"
    assert results.run.config["imported"]["ops"] == sorted(
        ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv",
         "reduce"]
    )  # fmt: skip
    assert results.run.config["imported"]["nccl"] == "2.28.3"
    (host,) = results.hosts
    assert host.hostname == "vm" and host.versions == {"nccl": "2.28.3", "nccl-tests": "2.19.6"}
    (gpu,) = host.gpus
    assert gpu.name == "NVIDIA H100 80GB HBM3" and gpu.spec is not None
    assert gpu.spec.sku == "H100 SXM" and gpu.pci_bus_id == "0000:00:06"
    # every size row of every file: latency, algbw, busbw out of place and in place
    rows = sum(len(run.rows) for path in TEXTS for run in parse_texts(path.read_text()))
    metrics = [m for m in results.measurements if m.metric != "num_wrong"]
    assert len(metrics) == rows * 2 * 3
    big = [
        m
        for m in results.measurements
        if (m.metric, m.params["op"], m.params["mode"]) == ("busbw", "broadcast", "back_to_back")
    ]
    # the last row of broadcast_perf.txt, out of place
    assert max(big, key=lambda m: m.params["size_bytes"]).value == 1390.8
    # the page, the summary and the console carry it; one rank's busbw 0 is not judged
    assert (tmp_path / "run" / "report.html").is_file()
    assert "busbw GB/s by size, back-to-back, group world (1 ranks, fp32)" in out
    assert not [f for f in results.findings if f.severity in ("warn", "fail")]
    with open_history(None) as store:
        assert [r.id for r in store.runs()] == [results.run.id]


def test_the_text_and_json_of_one_run_are_imported_once(tmp_path: Path) -> None:
    text, json_ = DATA / "all_reduce_perf.txt", DATA / "all_reduce_perf.json"
    code, _, err = _import("nccl-tests", json_, text, "-o", tmp_path / "run", "--no-history")
    assert code == 0
    assert err.strip().splitlines() == [
        f"clusterbench: warning: {text}: all_reduce on 1 rank(s), timed back_to_back, again "
        f"(as in {json_}); the first is imported"
    ]
    results = load_results(tmp_path / "run")
    assert results.run.config["imported"]["files"] == [str(json_), str(text)]
    # the JSON's start time is the run's start (its local time, in UTC)
    assert results.run.started.endswith("+00:00")
    # the JSON's unrounded figures
    assert any(m.metric == "latency_us" and m.value == 4.57175 for m in results.measurements)


def test_compare_history_baseline_and_exports_take_imports(tmp_path: Path) -> None:
    a, b = tmp_path / "week48", tmp_path / "week49"
    assert _import("nccl-tests", DATA / "all_reduce_perf.txt", "-o", a)[0] == 0
    code, _, err = _import(
        "nccl-tests", DATA / "all_reduce_perf.json", "-o", b, "--baseline", a, "--export", "csv"
    )
    assert code == 0, err
    saved = json.loads((b / "comparison.json").read_text())
    assert saved["base"]["suite"] == saved["new"]["suite"] == "nccl-tests"
    with (b / "results.csv").open() as f:
        exported = list(csv.DictReader(f))
    assert {r["metric"] for r in exported} == {"latency_us", "algbw", "busbw", "num_wrong"}
    with open_history(None) as store:
        ids = [r.id for r in store.runs()]
    assert len(ids) == 2
    # compare takes the history's ids; the same sizes on both sides: nothing new or missing
    result = runner.invoke(app, ["compare", ids[0], ids[1], "--json"])
    assert result.exit_code in (0, 1), result.stderr
    rows = json.loads(result.stdout)["rows"]
    # the text rounds what the JSON holds: every figure matched, none changed beyond noise
    assert len(rows) == len(saved["rows"]) == 146
    assert {r["verdict"] for r in rows} == {"unchanged"}
    built = runner.invoke(
        app, ["baseline", "build", str(a), str(b), "-o", str(tmp_path / "b.json")]
    )
    assert built.exit_code == 0, built.stderr
    assert "H100" in built.stdout


def test_a_log_of_several_binaries_under_mpirun_tag_output() -> None:
    """Two real outputs one after the other, each line prefixed as mpirun --tag-output does."""
    log = "".join(
        "".join(f"[1,0]<stdout>:{line}\n" for line in (DATA / name).read_text().splitlines())
        for name in ("all_gather_perf.txt", "sendrecv_perf.txt")
    )
    runs = parse_texts(log)
    assert [r.op for r in runs] == ["all_gather", "send_recv"]
    assert [len(r.rows) for r in runs] == [24, 24] and runs[1].hosts == ["vm"]


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("hello\n", "not an nccl-tests output"),
        ('{"version": 3}', "not an nccl-tests JSON output"),
        (
            "# Collective test starting: all_reduce_perf\n"
            "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw"
            "  #wrong\n  8  2  float  sum  -1  x  0.00  0.00  0  62.8  0.00  0.00  0\n",
            "not an nccl-tests size row (a cell is not a number): '8 2 float sum -1 x",
        ),
    ],
)
def test_a_foreign_file_is_one_line_and_nothing_written(
    tmp_path: Path, content: str, says: str
) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text(content)
    out = tmp_path / "run"
    code, _, err = _import("nccl-tests", DATA / "all_reduce_perf.txt", bad, "-o", out)
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line.startswith(f"clusterbench: error: {bad}: {says}")
    assert not out.exists()
    code, _, err = _import("nccl-tests", tmp_path / "missing.txt", "-o", out)
    missing = tmp_path / "missing.txt"
    assert code == 2 and err.strip() == f"clusterbench: error: {missing}: no such file"


def test_dcgm_diag_tests_become_findings(tmp_path: Path) -> None:
    bad = tmp_path / "gpu-17.json"
    bad.write_text(json.dumps(_FAIL_AND_WARN))
    code, out, err = _import("dcgm-diag", bad, "-o", tmp_path / "run")
    assert code == 1, err  # a test failed
    results = load_results(tmp_path / "run")
    assert results.run.suite == "dcgm-diag" and [h.hostname for h in results.hosts] == ["gpu-17"]
    fail = [f for f in results.findings if f.severity == "fail"]
    assert [f.evidence["test"] for f in fail] == ["memory"]
    assert fail[0].scope == "host:gpu-17/cuda:1"
    assert "faulty memory elements" in fail[0].message and "DCGM diag -r 2" in fail[0].message
    assert results.run.config["imported"]["failed"] == ["memory"]
    assert "memory" in out
    good = tmp_path / "pass.json"
    good.write_text(json.dumps(_PASS))
    code, _, err = _import("dcgm-diag", good, "--host", "gpu-18", "--level", "3",
                           "-o", tmp_path / "ok")  # fmt: skip
    assert code == 0, err
    ok = load_results(tmp_path / "ok")
    (summary,) = ok.findings
    assert summary.scope == "host:gpu-18" and summary.message.startswith("DCGM diag -r 3: 2 test")
    code, _, err = _import("dcgm-diag", DATA / "all_reduce_perf.json", "-o", tmp_path / "x")
    assert code == 2 and "not 'dcgmi diag -j' output" in err and not (tmp_path / "x").exists()
