"""doctor's torch-bytecode check, on a package of generated modules: counted with and without
bytecode, and the compile cost of the modules this process imported measured against loading
them from bytecode."""

from __future__ import annotations

import compileall
import importlib
import sys
from pathlib import Path

import pytest

from clusterbench.doctor import FAMILIES, Sources, bytecode
from clusterbench.schema import HostInfo

_MODULES = 8


def _package(root: Path) -> Path:
    """A package of modules with enough code that compiling it takes measurable time."""
    pkg = root / "cbpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    body = "".join(
        f"def f{i}(x, y=2):\n    z = [x * k + y for k in range({i % 7 + 1})]\n"
        f"    return {{'a': sum(z), 'b': max(z, default=0), 'c': '{i}' * 3}}\n\n"
        for i in range(600)
    )
    for n in range(_MODULES):
        (pkg / f"m{n}.py").write_text(body)
    return pkg


@pytest.fixture
def imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The package, imported by this process without bytecode being written."""
    pkg = _package(tmp_path)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.syspath_prepend(str(tmp_path))
    for n in range(_MODULES):
        importlib.import_module(f"cbpkg.m{n}")
    yield pkg
    for name in [m for m in sys.modules if m == "cbpkg" or m.startswith("cbpkg.")]:
        del sys.modules[name]


def _src(**env: str) -> Sources:
    return Sources(host=HostInfo(hostname="h1"), env=env)


def test_modules_are_counted_with_and_without_bytecode(tmp_path: Path) -> None:
    """Of the top-level modules where this process imported none of the package's."""
    pkg = _package(tmp_path)
    (pkg / "sub").mkdir()
    (pkg / "sub" / "deep.py").write_text("x = 1\n")  # not top-level: not counted
    before = bytecode.bytecode_coverage(pkg, modules={})
    assert (before.modules, before.compiled, before.imported) == (_MODULES + 1, 0, False)
    assert compileall.compile_dir(str(pkg), quiet=1)
    after = bytecode.bytecode_coverage(pkg, modules={})
    assert (after.modules, after.compiled, after.share) == (_MODULES + 1, _MODULES + 1, 1.0)


def test_modules_this_process_imported_are_the_ones_counted(imported: Path) -> None:
    cov = bytecode.bytecode_coverage(imported)
    assert (cov.modules, cov.compiled, cov.imported) == (_MODULES + 1, 0, True)
    assert cov.counted == "this process imported"
    one = {"m": sys.modules["cbpkg.m0"]}
    assert bytecode.bytecode_coverage(imported, modules=one).modules == 1


def test_what_compiling_the_imported_modules_costs_is_measured(imported: Path) -> None:
    cost = bytecode.measure_compile_cost(imported, budget_s=60)
    assert cost is not None
    assert (cost.modules, cost.measured) == (_MODULES + 1, _MODULES + 1)
    assert cost.source_bytes == sum(p.stat().st_size for p in imported.glob("*.py"))
    # compiling is the slow half (about 25x loading on the 2-core CPU machine): judged only
    # against the load timed beside it, with that margin to spare
    assert cost.compile_s > cost.load_s > 0
    # within a budget the first modules are timed and the rest scaled by their source size
    cut = bytecode.measure_compile_cost(imported, budget_s=0.0)
    assert cut is not None and cut.measured == 1 and cut.modules == _MODULES + 1
    assert bytecode.measure_compile_cost(imported, modules={}) is None


def test_a_package_without_bytecode_that_none_writes_is_a_note_with_its_measured_cost(
    imported: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bytecode, "torch_package_dir", lambda: imported)
    [f] = bytecode.check_torch_bytecode(_src(PYTHONDONTWRITEBYTECODE="1"))
    assert (f.id, f.severity) == ("doctor.python.torch_bytecode", "info")
    assert f.message.startswith(
        f"torch's modules lack bytecode (0 of the {_MODULES + 1} this process imported "
        "byte-compiled) and an import writes none (PYTHONDONTWRITEBYTECODE is set)"
    )
    assert f"measured here, compiling the {_MODULES + 1} without it costs " in f.message
    ev = f.evidence
    assert ev["imported_without_bytecode"] == _MODULES + 1
    assert ev["compile_s"] > ev["load_from_bytecode_s"]  # type: ignore[operator]
    gain = ev["compile_s"] - ev["load_from_bytecode_s"]  # type: ignore[operator]
    assert (f.fix != "") == (gain >= bytecode.MIN_GAIN_S)
    if f.fix:
        assert f.fix.startswith(f"write the bytecode once where torch is installed: python -m "
                                f"compileall -q -j 0 {imported}")  # fmt: skip
    monkeypatch.setattr(bytecode, "MIN_GAIN_S", 1e9)  # a gain too small to matter: no advice
    [f] = bytecode.check_torch_bytecode(_src(PYTHONDONTWRITEBYTECODE="1"))
    assert f.fix == "" and "measured here" in f.message


def test_no_note_where_an_import_writes_the_bytecode_or_it_is_there(
    imported: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bytecode, "torch_package_dir", lambda: imported)
    assert bytecode.check_torch_bytecode(_src()) == []  # writable, nothing forbids writing
    assert compileall.compile_dir(str(imported), quiet=1)
    assert bytecode.check_torch_bytecode(_src(PYTHONDONTWRITEBYTECODE="1")) == []
    monkeypatch.setattr(bytecode, "torch_package_dir", lambda: None)
    assert bytecode.check_torch_bytecode(_src(PYTHONDONTWRITEBYTECODE="1")) == []


def test_the_check_runs_with_every_doctor() -> None:
    assert bytecode.check_torch_bytecode in FAMILIES["python_start"]
