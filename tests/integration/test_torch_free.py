"""The commands that do not measure run without torch: each is run in a fresh interpreter in
which ``import torch`` fails, on a run folder written here, and must succeed without torch in
``sys.modules`` at its end.  ``run`` and ``doctor`` measure, and may import it (``run`` in its
workers only, when it starts them itself)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_export import synthetic, write_run

# The command line run in a fresh interpreter (formatted with its args), then its exit code.
_CALL_MAIN = """
from clusterbench.cli import main
sys.argv = ["clusterbench", *{args!r}]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
"""
# Runs the CLI with torch unimportable (a finder ahead of every other refuses it, as when it is
# not installed), then says whether anything imported it anyway.
_BLOCK_TORCH = """
import importlib.abc, sys
class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked by the test)")
sys.meta_path.insert(0, NoTorch())
"""
_SAY_TORCH = """
torch = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))
print("__torch_free__", {{"code": code, "torch": torch}})
"""
_NO_TORCH = _BLOCK_TORCH + _CALL_MAIN + _SAY_TORCH


def _without_torch(*args: str) -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-c", _NO_TORCH.format(args=list(args))],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    line = next((x for x in proc.stdout.splitlines() if x.startswith("__torch_free__")), None)
    assert line is not None, (proc.returncode, proc.stdout[-2000:], proc.stderr[-3000:])
    verdict = eval(line.split(" ", 1)[1])  # a dict literal printed by the script above
    assert verdict["torch"] == [], verdict
    assert "blocked by the test" not in proc.stderr, proc.stderr[-3000:]
    return int(verdict["code"] or 0), proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("runs")
    first = synthetic()
    second = first.model_copy(deep=True)
    second.run.id = "cb-test-2"
    second.run.started = "2026-12-02T10:00:00+00:00"
    return write_run(root / "a", first), write_run(root / "b", second)


@pytest.mark.parametrize(
    "command",
    ["", "list", "compare", "report", "export", "history", "cost", "predict", "launch",
     "schema", "baseline", "info", "run", "doctor", "import", "import nccl-tests",
     "import dcgm-diag", "analyze"],
)  # fmt: skip
def test_every_command_s_help_needs_no_torch(command: str) -> None:
    code, out, _ = _without_torch(*command.split(), "--help")
    assert code == 0 and "Usage" in out


def test_list_compare_report_export_and_schema_need_no_torch(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = runs
    code, out, err = _without_torch("list")
    assert code == 0 and "gemm" in out and "collectives" in out, err
    code, out, err = _without_torch("compare", str(a), str(b), "--json", "--no-history")
    assert code == 0, err
    assert json.loads(out.split("__torch_free__")[0])["rows"], out[:500]
    code, _, err = _without_torch("report", str(a), "-o", str(tmp_path / "page.html"))
    assert code == 0, err
    assert (tmp_path / "page.html").stat().st_size > 10_000
    code, _, err = _without_torch(
        "export", str(a), "--format", "csv", "-o", str(tmp_path / "m.csv")
    )
    assert code == 0, err
    assert "bandwidth" in (tmp_path / "m.csv").read_text()
    code, out, err = _without_torch("schema")
    assert code == 0 and "measurements" in out, err


def test_history_cost_predict_and_launch_need_no_torch(tmp_path: Path) -> None:
    from tests.prediction_runs import run_of
    from tests.unit.test_cost import training_run

    trained = write_run(tmp_path / "trained", run_of(num_nodes=2, gpus_per_node=8))
    history = str(tmp_path / "history.sqlite")
    code, out, err = _without_torch("history", "import", str(trained), "--history", history)
    assert code == 0, err
    code, out, err = _without_torch("history", "--history", history, "--json")
    assert code == 0 and json.loads(out.split("__torch_free__")[0]), err
    code, out, err = _without_torch("predict", str(trained), "--json")
    assert code == 0, err
    assert json.loads(out.split("__torch_free__")[0])["predictions"], out[:500]
    priced = write_run(tmp_path / "priced", training_run({1: 1000.0, 8: 800.0}))
    code, out, err = _without_torch("cost", str(priced), "--gpu-hour", "2.5")
    assert code == 0 and (priced / "cost.json").is_file(), err  # priced: the pages rebuilt
    assert "## cost" in (priced / "summary.md").read_text()
    code, out, err = _without_torch("launch", "--torchrun", "--nodes", "2", "--gpus-per-node", "8")
    assert code == 0 and "torchrun" in out, err
    nccl_tests = Path(__file__).resolve().parents[1] / "data" / "nccl-tests" / "all_reduce_perf.txt"
    imported = tmp_path / "imported"
    code, out, err = _without_torch("import", "nccl-tests", str(nccl_tests), "-o", str(imported),
                                    "--history", history)  # fmt: skip
    assert code == 0 and (imported / "report.html").is_file(), err
    traces = Path(__file__).resolve().parents[1] / "data" / "traces" / "cpu-gloo-slow-rank"
    analysed = tmp_path / "analysed"
    code, out, err = _without_torch("analyze", str(traces), "-o", str(analysed),
                                    "--history", history)  # fmt: skip
    assert code == 0 and (analysed / "report.html").is_file(), err


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run", "--only", "gemmm"], "unknown benchmark 'gemmm' (did you mean 'gemm'?)"),
        (["run", "--skip", "colectives"], "unknown benchmark 'colectives'"),
        (["run", "--suite", "quik"], "unknown suite 'quik'"),
    ],
)
def test_a_mistyped_name_is_told_before_torch_is_imported(args: list[str], said: str) -> None:
    """``run`` measures, so it imports torch, but not to say that a name is wrong."""
    code, _, err = _without_torch(*args)
    assert code == 2 and said in err


# A torch whose files state a CPU build (as torch/version.py does), never to be imported.
_SAY_LOADED = """
loaded = sorted(m for m in sys.modules if m in ("torch", "clusterbench.pipeline.start"))
print("__loaded__", {{"code": code, "loaded": loaded}})
"""
_CPU_TORCH_RUN = "import sys\n" + _CALL_MAIN + _SAY_LOADED


def test_a_mistake_only_cpu_workers_refuse_is_told_at_once_where_torch_is_a_cpu_build(
    tmp_path: Path,
) -> None:
    """--only transfer (no CPU form) with --device auto: a torch whose files state a build for
    neither CUDA nor HIP runs on CPU workers, so the run says so before the pipeline, its fork
    server or torch load, and makes no folder."""
    fake = tmp_path / "site" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('torch imported (blocked by the test)')\n")
    (fake / "version.py").write_text("__version__ = '2.13.0+cpu'\ncuda = None\nhip = None\n")
    paths = [str(tmp_path / "site"), *filter(None, os.environ.get("PYTHONPATH", "").split(":"))]
    args = ["run", "--only", "transfer", "--out", str(tmp_path / "run")]
    proc = subprocess.run(
        [sys.executable, "-c", _CPU_TORCH_RUN.format(args=args)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    line = next((x for x in proc.stdout.splitlines() if x.startswith("__loaded__")), None)
    assert line is not None, (proc.returncode, proc.stdout[-2000:], proc.stderr[-3000:])
    verdict = eval(line.split(" ", 1)[1])  # a dict literal printed by the script above
    assert verdict == {"code": 2, "loaded": []}, (verdict, proc.stderr[-3000:])
    assert proc.stderr.strip().splitlines() == [
        "clusterbench: error: nothing to run: no cpu form of transfer"
    ]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--set", "gemm.sizes=1"], "--set: gemm.sizes: unknown key (known: dtypes,"),
        (["--set", "gemm.dtypes=fp7"], "--set: gemm.dtypes: input should be 'fp32',"),
        (["--set", "gemm.warmup=-1"], "--set: gemm.warmup: warmup must be >= 0, got -1"),
        (["--set", "gemm"], "--set 'gemm': expected SECTION.KEY=VALUE"),
        (["--set", "gemmm.warmup=1"], "unknown benchmark 'gemmm' (did you mean 'gemm'?)"),
        (["--set", "thresholds.outlier_mads=nan"], "thresholds.outlier_mads: must be a finite"),
        (["--config", "{tmp}/missing.toml"], "config file not found: {tmp}/missing.toml"),
        (["--config", "{tmp}/bad.toml"], "{tmp}/bad.toml: malformed TOML"),
        (["--timeout", "-1"], "--timeout must be a positive number of seconds, got -1.0"),
        (["--soak", "2x"], "--soak: '2x' is not a duration"),
        (["--out", "{tmp}/file"], "--out {tmp}/file: cannot write there (File exists)"),
        (["--out", "{tmp}/file/run"], "--out {tmp}/file/run: cannot write there (Not a directory)"),
        (["--out", "{tmp}/done"], "--out {tmp}/done: already holds a run"),
    ],
)
def test_a_bad_setting_or_folder_is_told_before_torch_is_imported(
    tmp_path: Path, args: list[str], said: str
) -> None:
    """The same line and exit code 2 as once the device is known (tests/unit/test_cli.py),
    told with torch unimportable: --set, --config and the flags on every device type alike,
    and an --out that cannot be made; nothing is written."""
    (tmp_path / "file").write_text("not a folder")
    (tmp_path / "bad.toml").write_text("[gemm\n")
    (tmp_path / "done").mkdir()
    (tmp_path / "done" / "results.json").write_text("{}")
    before = sorted(tmp_path.rglob("*"))
    code, _, err = _without_torch("run", *(a.format(tmp=tmp_path) for a in args))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("clusterbench: error: ") and said.format(tmp=tmp_path) in lines[0]
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize("device", ["cpu", "auto"])
def test_a_run_with_its_own_workers_imports_no_torch_itself(tmp_path: Path, device: str) -> None:
    """The workers import torch (their fork server does, once); the process that starts them
    and finishes the run does not, also to tell how many GPUs they will see (``auto``: torch's
    files, then NVML, then the fork server)."""
    out = tmp_path / "run"
    code, stdout, err = _without_torch("run", "--device", device, "--only", "memory",
                                       "--no-history", "--out", str(out))  # fmt: skip
    assert code in (0, 1), err[-3000:]
    assert "results:" in stdout and (out / "results.json").is_file()


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write in any folder")
def test_an_unwritable_out_is_told_before_torch_is_imported(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    code, _, err = _without_torch("run", "--out", str(locked / "run"))
    assert code == 2 and "cannot write there (Permission denied)" in err, err


def _cpu_only_torch() -> bool:
    from clusterbench.hardware.probe import _torch_versions_unimported

    stated = _torch_versions_unimported()
    return "torch" in stated and "cuda" not in stated and "hip" not in stated


@pytest.mark.skipif(not _cpu_only_torch(), reason="a CUDA or ROCm torch is asked for its GPUs")
@pytest.mark.parametrize("args", [["info"], ["info", "--json"], ["doctor", "--fast"]])
def test_info_and_doctor_fast_import_no_cpu_only_torch(args: list[str]) -> None:
    """Where torch is installed but built for neither CUDA nor HIP (no GPU to see, no NCCL),
    its version is read from its files: torch is importable here and still not imported
    (``-X importtime`` names every module imported, also where doctor --fast ends with
    os._exit, which leaves no sys.modules to look at)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "clusterbench", *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")]  # fmt: skip
    assert "clusterbench.hardware.probe" in imported
    assert not [m for m in imported if m == "torch" or m.startswith("torch.")]
    assert args[0] != "info" or "torch" in proc.stdout  # its version is still shown


def test_the_finish_prepared_ahead_needs_no_torch(tmp_path: Path) -> None:
    """A run's own launch imports what its finish reads, and packs the page's plotly.js, in a
    thread while the workers run: with torch unimportable that must succeed (the thread would
    keep a failure to itself), import every built-in benchmark's findings, and leave the packed
    plotly.js in the user's cache folder for every later page."""
    script = (
        _BLOCK_TORCH.replace("{{", "{").replace("}}", "}")
        + """
from clusterbench import catalog
from clusterbench.pipeline.finish import prepare_finish
catalog.register_builtin()
prepare_finish()
print("__torch__", sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
print("__findings__", sorted(m for m in sys.modules if m.endswith(".findings")))
"""
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "__torch__ []" in proc.stdout, proc.stdout[-2000:]
    found = next(x for x in proc.stdout.splitlines() if x.startswith("__findings__"))
    assert "clusterbench.benchmarks.gemm.findings" in found
    assert "clusterbench.benchmarks.training.findings" in found  # not only the quick suite's
    packed = [p.name for p in (tmp_path / "cache" / "clusterbench").iterdir()]
    assert len(packed) == 1 and packed[0].endswith(".js.gz.b64"), packed
