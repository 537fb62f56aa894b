"""The architecture as a checked contract: no import circles between modules.

The layers (which package may import which) are import-linter's contract in pyproject.toml,
run by CI as ``lint-imports``; this test reads the same import graph (grimp, import-linter's own
library), function-level and ``if TYPE_CHECKING:`` imports included, and fails on any circle.
"""

from __future__ import annotations

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
        ("clusterbench.views", "clusterbench.analysis"),
        ("clusterbench.registry", "clusterbench.catalog"),
        ("clusterbench.analysis", "clusterbench.report"),
        ("clusterbench.runtime", "clusterbench.benchmarks"),
        ("clusterbench.schema", "clusterbench.runtime"),
    ],
)
def test_measurement_never_reaches_up(importer: str, imported: str) -> None:
    """A few of the layers contract's rules, stated where a reader of the tests sees them."""
    graph = _graph()
    chains = graph.find_shortest_chains(importer=importer, imported=imported)
    assert not chains, f"{importer} imports {imported}: {sorted(chains)[:3]}"
