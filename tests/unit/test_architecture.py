"""The architecture as a checked contract: no import circles between modules.

The layers (which package may import which) are import-linter's contract in pyproject.toml,
run by CI as ``lint-imports``; this test reads the same import graph (grimp, import-linter's own
library), function-level and ``if TYPE_CHECKING:`` imports included, and fails on any circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import grimp
import pytest


def _graph() -> grimp.ImportGraph:
    return grimp.build_graph("clusterbench", exclude_type_checking_imports=False)


def import_circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected groups of two or more modules (Tarjan), each sorted."""
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for m in modules:
        if m not in index:
            visit(m)
    return circles


def test_no_import_circles() -> None:
    graph = _graph()
    circles = import_circles(graph)
    detail = []
    for group in circles:
        a, b = group[0], group[1]
        chain = graph.find_shortest_chain(importer=a, imported=b)
        back = graph.find_shortest_chain(importer=b, imported=a)
        detail.append(f"{' -> '.join(chain or ())} | {' -> '.join(back or ())}")
    assert not circles, "import circles:\n" + "\n".join(detail)


def test_circle_finder_sees_function_level_and_type_checking_imports(tmp_path, monkeypatch):
    """The check can fail: a circle hidden in a function or a TYPE_CHECKING block is found."""
    pkg = tmp_path / "circlepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from circlepkg import b\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from circlepkg import a\n"
    )
    (pkg / "c.py").write_text("import circlepkg.a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("circlepkg", exclude_type_checking_imports=False, cache_dir=None)
    assert import_circles(graph) == [["circlepkg.a", "circlepkg.b"]]


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("clusterbench.benchmarks", "clusterbench.report"),
        ("clusterbench.views", "clusterbench.benchmarks"),
        ("clusterbench.views", "clusterbench.analyses"),
        ("clusterbench.registry", "clusterbench.catalog"),
        ("clusterbench.analyses", "clusterbench.report"),
        ("clusterbench.analyses", "clusterbench.benchmarks"),
        ("clusterbench.benchmarks", "clusterbench.analyses"),
        ("clusterbench.declared", "clusterbench.benchmarks"),
        ("clusterbench.runtime", "clusterbench.benchmarks"),
        ("clusterbench.schema", "clusterbench.runtime"),
    ],
)
def test_measurement_never_reaches_up(importer: str, imported: str) -> None:
    """A few of the layers contract's rules, stated where a reader of the tests sees them."""
    graph = _graph()
    chains = graph.find_shortest_chains(importer=importer, imported=imported)
    assert not chains, f"{importer} imports {imported}: {sorted(chains)[:3]}"


def _top(module: str) -> str:
    """``clusterbench.analyses.run`` -> ``clusterbench.analyses``."""
    return ".".join(module.split(".")[:2])


def string_imports(package_dir: Path, package: str) -> set[tuple[str, str]]:
    """(importer, imported) for each ``importlib.import_module("<package>...")`` or
    ``__import__("<package>...")`` with a literal name: the imports grimp cannot see."""
    found: set[tuple[str, str]] = set()
    for path in package_dir.rglob("*.py"):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        importer = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else None
            name = name or (node.func.id if isinstance(node.func, ast.Name) else None)
            arg = node.args[0]
            if (
                name in ("import_module", "__import__")
                and isinstance(arg, ast.Constant)
                and isinstance(arg.value, str)
                and arg.value.split(".")[0] == package
            ):
                found.add((importer, arg.value))
    return found


def package_edges(graph: grimp.ImportGraph, extra: set[tuple[str, str]]) -> dict[str, set[str]]:
    """Imports between the package's top-level modules and subpackages, grimp's and ``extra``."""
    edges: dict[str, set[str]] = {}
    pairs = {(m, n) for m in graph.modules for n in graph.find_modules_directly_imported_by(m)}
    for importer, imported in pairs | extra:
        a, b = _top(importer), _top(imported)
        edges.setdefault(a, set())
        if a != b:
            edges[a].add(b)
    return edges


def package_circle(edges: dict[str, set[str]]) -> list[str] | None:
    """One circle between top-level packages (``a -> b -> a``), or None."""
    done: set[str] = set()

    def walk(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        for nxt in sorted(edges.get(node, ())):
            circle = walk(nxt, [*path, node])
            if circle:
                return circle
        done.add(node)
        return None

    for start in sorted(edges):
        circle = walk(start, [])
        if circle:
            return circle
    return None


def test_no_circle_between_packages_counting_imports_by_name() -> None:
    """Tiers are one way: no top-level package reaches one that reaches it back, counting the
    modules loaded by a literal name (``importlib.import_module("clusterbench.catalog")``)."""
    import clusterbench

    package_dir = Path(clusterbench.__file__).parent
    edges = package_edges(_graph(), string_imports(package_dir, "clusterbench"))
    circle = package_circle(edges)
    assert circle is None, "import circle between packages: " + " -> ".join(circle or ())


def test_the_package_circle_check_sees_imports_by_name(tmp_path: Path) -> None:
    """The check can fail: a low module that loads a high one by name closes a circle."""
    pkg = tmp_path / "tiers"
    (pkg / "low").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low" / "__init__.py").write_text("")
    (pkg / "low" / "registry.py").write_text(
        "import importlib\n\ndef load():\n    importlib.import_module('tiers.top.catalog')\n"
    )
    (pkg / "top").mkdir()
    (pkg / "top" / "__init__.py").write_text("")
    (pkg / "top" / "catalog.py").write_text("from tiers.low import registry\n")
    by_name = string_imports(pkg, "tiers")
    assert by_name == {("tiers.low.registry", "tiers.top.catalog")}
    static = {"tiers.top": {"tiers.low"}, "tiers.low": set()}
    assert package_circle(static) is None
    edges = {"tiers.top": {"tiers.low"}, "tiers.low": {"tiers.top"}}
    assert package_circle(edges) == ["tiers.low", "tiers.top", "tiers.low"]


_LONG_FUNCTIONS = {
    # docs/architecture.md, "Sizes": typer commands whose options are most of their lines, and
    # the run read top to bottom
    ("cli/run.py", "run"),
    ("cli/launch.py", "launch"),
    ("cli/report.py", "report"),
    ("cli/predict.py", "predict"),
    ("cli/compare.py", "compare_runs"),
    ("pipeline/start.py", "run"),
}


def test_no_module_over_500_lines_and_no_unlisted_function_over_80() -> None:
    root = Path(__file__).parents[2] / "src" / "clusterbench"
    long_modules, long_functions = [], set()
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(root).as_posix()
        if text.count("\n") > 500:
            long_modules.append(name)
        for node in ast.walk(ast.parse(text)):
            if (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and (node.end_lineno or node.lineno) - node.lineno + 1 > 80
            ):
                long_functions.add((name, node.name))
    assert long_modules == []
    assert long_functions <= _LONG_FUNCTIONS, sorted(long_functions - _LONG_FUNCTIONS)
