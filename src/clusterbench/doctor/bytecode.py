"""Python start-up: whether torch's modules carry bytecode where none can be written.

``pip install`` byte-compiles what it installs; ``uv pip install`` does not unless asked
(``--compile-bytecode``), and images built with ``PYTHONDONTWRITEBYTECODE=1`` or installed
read-only never get it written later.  Then every process that imports torch compiles its
modules from source first: seconds of every rank's start, on every run.  Where torch is
already imported (a run's doctor step), the cost is measured here, not assumed: the loaded
modules that have no bytecode are compiled again from their source (the work each import did),
and the code they give is loaded from bytecode (the work a byte-compiled import does), both
timed in this process.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import sys
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from clusterbench.doctor._sources import Check, Sources
from clusterbench.schema import Finding

__all__ = [
    "CHECKS",
    "MEASURE_BUDGET_S",
    "MIN_GAIN_S",
    "WITHOUT_SHARE",
    "CompileCost",
    "Coverage",
    "bytecode_coverage",
    "check_torch_bytecode",
    "measure_compile_cost",
    "torch_package_dir",
]

ID = "doctor.python.torch_bytecode"
WITHOUT_SHARE = 0.5
"""A package counts as without bytecode when fewer than this share of its modules have it."""
MEASURE_BUDGET_S = 0.25
"""Seconds of compiling the measurement may spend; past it the rest is scaled by source size."""
MIN_GAIN_S = 0.1
"""Compiling must cost a process at least this much more than loading bytecode for the fix."""


@dataclass(frozen=True, slots=True)
class Coverage:
    """How many of a package's modules have bytecode where this Python looks for it."""

    package: Path
    modules: int
    compiled: int
    imported: bool
    """Counted over the modules this process imported (else over the top-level modules)."""
    without: tuple[Path, ...] = ()
    """The counted modules that lack bytecode."""

    @property
    def counted(self) -> str:
        return "this process imported" if self.imported else "top-level modules"

    @property
    def share(self) -> float:
        return self.compiled / self.modules if self.modules else 1.0


@dataclass(frozen=True, slots=True)
class CompileCost:
    """What compiling a process's imported modules from source costs, against loading them
    from bytecode, measured on ``measured`` of ``modules`` modules (the rest scaled by source
    size)."""

    modules: int
    measured: int
    source_bytes: int
    compile_s: float
    load_s: float


def torch_package_dir() -> Path | None:
    """torch's package folder, found without importing torch; None where it is absent."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent


def _has_bytecode(source: Path) -> bool:
    try:
        return Path(importlib.util.cache_from_source(str(source))).exists()
    except (NotImplementedError, ValueError):  # no cache tag: this Python writes none
        return True


def _imported_sources(package: Path, modules: Mapping[str, object] | None) -> list[Path]:
    """The ``.py`` files of ``package`` among the modules this process imported."""
    loaded = modules if modules is not None else sys.modules
    prefix = str(package) + os.sep
    return sorted(
        {
            Path(f)
            for m in list(loaded.values())
            if isinstance(f := getattr(m, "__file__", None), str)
            and f.startswith(prefix)
            and f.endswith(".py")
        }
    )


def bytecode_coverage(package: Path, *, modules: Mapping[str, object] | None = None) -> Coverage:
    """How many of the package's modules have bytecode (``__pycache__``, or under
    ``sys.pycache_prefix`` where PYTHONPYCACHEPREFIX sets one): of those this process imported
    (``modules``, default ``sys.modules``; their files were just read, so looking is cheap, a
    few ms for torch's thousand), else of its top-level modules (doctor --fast imports no
    torch; a walk of all its ~2,100 cost a run's doctor step 0.13-0.18 s on a cold page cache)."""
    imported = _imported_sources(package, modules)
    sources = imported or sorted(package.glob("*.py"))
    without = tuple(p for p in sources if not _has_bytecode(p))
    return Coverage(package, len(sources), len(sources) - len(without), bool(imported), without)


def measure_compile_cost(
    package: Path,
    *,
    budget_s: float = MEASURE_BUDGET_S,
    modules: Mapping[str, object] | None = None,
) -> CompileCost | None:
    """Compile again the modules of ``package`` this process imported that have no bytecode,
    within ``budget_s`` (past it the rest is scaled by source size), and load the code from
    bytecode; None where it imported none of them."""
    without = [p for p in _imported_sources(package, modules) if not _has_bytecode(p)]
    return _time_compiles(without, budget_s=budget_s)


def _time_compiles(sources: Sequence[Path], *, budget_s: float) -> CompileCost | None:
    """:func:`measure_compile_cost` of these modules (that lack bytecode); None for none."""
    # a fixed but scattered order, so that what the budget times is a fair sample of the rest
    paths = sorted(sources, key=lambda p: zlib.crc32(bytes(p)))
    if not paths:
        return None
    sizes = {p: p.stat().st_size for p in paths}
    compile_s = load_s = 0.0
    measured_bytes = measured = 0
    for path in paths:
        if measured and compile_s >= budget_s:  # one module at least, then the budget
            break
        source = path.read_bytes()
        start = time.perf_counter()
        code = compile(source, str(path), "exec", dont_inherit=True)
        compile_s += time.perf_counter() - start
        blob = marshal.dumps(code)
        start = time.perf_counter()
        marshal.loads(blob)
        load_s += time.perf_counter() - start
        measured += 1
        measured_bytes += sizes[path]
    total = sum(sizes.values())
    scale = total / measured_bytes if measured_bytes else 1.0
    return CompileCost(len(paths), measured, total, compile_s * scale, load_s * scale)


def _cannot_write(src: Sources, package: Path) -> str | None:
    """Why bytecode of ``package`` is never written by an import here, else None."""
    if src.env.get("PYTHONDONTWRITEBYTECODE"):
        return "PYTHONDONTWRITEBYTECODE is set"
    if sys.pycache_prefix is None and not os.access(package, os.W_OK):
        return "its folder is read-only to this user"
    return None


def check_torch_bytecode(src: Sources) -> list[Finding]:
    """Info where fewer than half of torch's modules have bytecode and none is written by an
    import here: every process that imports torch compiles them first.  Where torch is
    imported in this process (a run's doctor step), what that costs is measured
    (:func:`measure_compile_cost`) and, where compiling costs :data:`MIN_GAIN_S` more than
    loading bytecode, the fix says how to write it; else the finding states the fact alone."""
    package = torch_package_dir()
    if package is None:
        return []
    coverage = bytecode_coverage(package)
    why = _cannot_write(src, package)
    if coverage.modules == 0 or coverage.share >= WITHOUT_SHARE or why is None:
        return []
    # measured where the modules counted are those this process imported (torch is imported)
    cost = None
    if coverage.imported:
        cost = _time_compiles(coverage.without, budget_s=MEASURE_BUDGET_S)
    evidence: dict[str, object] = {
        "package": str(package),
        "modules": coverage.modules,
        "counted": coverage.counted,
        "with_bytecode": coverage.compiled,
        "not_written_because": why,
    }
    message = (
        f"torch's modules lack bytecode ({coverage.compiled:,} of the {coverage.modules:,} "
        f"{coverage.counted} byte-compiled) and an import writes none ({why}): every process "
        "that imports torch compiles them from source first"
    )
    fix = ""
    if cost is not None:
        evidence.update(
            imported_without_bytecode=cost.modules,
            measured_modules=cost.measured,
            source_bytes=cost.source_bytes,
            compile_s=round(cost.compile_s, 3),
            load_from_bytecode_s=round(cost.load_s, 3),
        )
        scaled = (
            f", {cost.measured:,} of them timed and the rest scaled by source size"
            if cost.measured < cost.modules
            else ""
        )
        about = "about " if scaled else ""
        message += (
            f"; measured here, compiling the {cost.modules:,} without it costs "
            f"{about}{cost.compile_s:.2f} s, loading them from bytecode {about}"
            f"{cost.load_s:.2f} s{scaled}"
        )
        if cost.compile_s - cost.load_s >= MIN_GAIN_S:
            fix = (
                "write the bytecode once where torch is installed: python -m compileall -q "
                f"-j 0 {package} (pip install writes it; uv pip install with --compile-bytecode)"
            )
    return [
        Finding(
            id=ID,
            severity="info",
            scope=src.scope,
            message=message,
            evidence=evidence,
            fix=fix,
        )
    ]


CHECKS: tuple[Check, ...] = (check_torch_bytecode,)
