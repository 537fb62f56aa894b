"""Every source a threshold, message or figure cites is on one list, docs/sources.md, under the
short name the text uses, and no text cites one a reader cannot look up ("the seed guide",
a bare "the paper" in a message).  The checks read the code's string constants (ast), the
docs' text, the GPU specs' ``source`` fields, the ``source`` of every ``Reference`` the code
builds from a constant, and the built-in baseline's sources."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusterbench.hardware.specs import SPECS

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "clusterbench"
DOCS = ROOT / "docs"
SOURCES_PAGE = DOCS / "sources.md"
BASELINE = SRC / "data" / "builtin_baseline.json"

# One entry: `- <a id="KEY"></a>**NAME**: what it is`, its lines after the first indented.
_ENTRY = re.compile(
    r'^- <a id="(?P<key>[^"]+)"></a>\*\*(?P<name>[^*]+)\*\*(?P<rest>.*(?:\n {2,}\S.*)*)', re.M
)
# The issue's own check: `grep -rniE "the seed( guide| paper)?\b" src docs README.md`.
_UNKNOWN = re.compile(r"the seed( guide| paper)?\b", re.I)
_CITED = re.compile(r"\bthe\s+((?:[\w'-]+\s+){1,3}(?:paper|guide))\b", re.I)
_BARE = re.compile(r"\bthe\s+(?:paper|guide)\b", re.I)
_MD_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_SOURCES_LINK = re.compile(r"sources\.md#([\w-]+)")


@dataclass(frozen=True, slots=True)
class Entry:
    key: str
    name: str
    rest: str


def _entries() -> list[Entry]:
    text = SOURCES_PAGE.read_text(encoding="utf-8")
    return [Entry(m["key"], " ".join(m["name"].split()), m["rest"]) for m in _ENTRY.finditer(text)]


ENTRIES = _entries()
NAMES = [e.name for e in ENTRIES]


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def unlisted_citations(text: str, names: list[str]) -> list[str]:
    """Each "the <words> paper/guide" in ``text`` that does not end with a listed name."""
    lowered = [n.lower() for n in names]
    out = []
    for m in _CITED.finditer(_MD_LINK.sub(r"\1", text)):
        phrase = " ".join(m[1].split()).lower()
        if not any(phrase == n or phrase.endswith(" " + n) for n in lowered):
            out.append(m[0])
    return out


def _constants(tree: ast.AST) -> Iterator[tuple[str, bool]]:
    """Every string constant of a module, and whether it is a docstring (a statement alone)."""
    docstrings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value, id(node) in docstrings


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(SRC.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


MODULES = list(_modules())
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
# The list itself names the parts of a source inside its entry ("the Megatron Core user guide").
CITING_PAGES = [p for p in PAGES if p != SOURCES_PAGE]


def _reference_sources(tree: ast.AST) -> Iterator[str]:
    """The constant ``source`` of each ``Reference(value=..., kind=..., source=...)`` call."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Reference"):
            continue
        kw = {k.arg: k.value for k in node.keywords}
        source = kw.get("source")
        if "kind" in kw and isinstance(source, ast.Constant) and isinstance(source.value, str):
            yield source.value


def test_the_list_parses_and_each_anchor_is_its_short_name() -> None:
    assert len(ENTRIES) >= 10, ENTRIES
    keys = [e.key for e in ENTRIES]
    assert len(set(keys)) == len(keys), sorted(k for k in keys if keys.count(k) > 1)
    assert [e.key for e in ENTRIES if e.key != _slug(e.name)] == []
    assert [e.key for e in ENTRIES if len(e.rest.strip(" :")) < 10] == []  # says what it is


def test_no_text_names_the_seed() -> None:
    files = [p for p in SRC.rglob("*") if p.is_file() and p.suffix != ".pyc"] + PAGES
    hits = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in files
        for n, line in enumerate(p.read_text(encoding="utf-8", errors="ignore").splitlines(), 1)
        if _UNKNOWN.search(line)
    ]
    assert hits == []


def test_every_paper_or_guide_the_code_names_is_listed() -> None:
    bad = [
        f"{path.relative_to(ROOT)}: {hit!r}"
        for path, tree in MODULES
        for text, _ in _constants(tree)
        for hit in unlisted_citations(text, NAMES)
    ]
    assert bad == []


def test_no_message_cites_a_bare_paper_or_guide() -> None:
    """Outside docstrings (messages, labels, help), "the paper" must say which."""
    bad = [
        f"{path.relative_to(ROOT)}: {text[:80]!r}"
        for path, tree in MODULES
        for text, is_docstring in _constants(tree)
        if not is_docstring and _BARE.search(text)
    ]
    assert bad == []


def test_every_paper_or_guide_the_docs_name_is_listed() -> None:
    bad = [
        f"{page.relative_to(ROOT)}: {hit!r}"
        for page in CITING_PAGES
        for hit in unlisted_citations(page.read_text(encoding="utf-8"), NAMES)
    ]
    assert bad == []


def test_every_link_to_the_list_finds_its_entry() -> None:
    keys = {e.key for e in ENTRIES}
    links = [
        (page.relative_to(ROOT), key)
        for page in PAGES
        for key in _SOURCES_LINK.findall(page.read_text(encoding="utf-8"))
    ]
    heading_keys = {"guides-and-papers", "datasheets-and-specifications"}
    assert len(links) >= 5
    assert [(p, k) for p, k in links if k not in keys | heading_keys] == []


def test_every_spec_source_starts_with_a_listed_name() -> None:
    fields = [s.source for s in SPECS] + [s.busbw_source for s in SPECS if s.busbw_source]
    assert [f for f in fields if not f.startswith(tuple(NAMES))] == []


def test_every_constant_reference_source_starts_with_a_listed_name() -> None:
    sources = [(p, s) for p, tree in MODULES for s in _reference_sources(tree)]
    assert sources, "no Reference(source=...) constant found: the scan is broken"
    assert [
        (str(p.relative_to(ROOT)), s) for p, s in sources if not s.startswith(tuple(NAMES))
    ] == []


def test_every_baseline_figure_names_a_listed_source_or_its_page() -> None:
    entries = json.loads(BASELINE.read_text(encoding="utf-8"))["entries"]
    sources = [s for e in entries for s in e["sources"]]
    assert sources
    bad = [s for s in sources if "docs/" not in s and not any(n in s for n in NAMES)]
    assert bad == []


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("(the seed paper saw FP16 weight updates at 65%)", ["the seed paper"]),
        ("rule of thumb (the vendor's\nsizing guide): above ~70%", ["the vendor's\nsizing guide"]),
        ("the [bottleneck-analysis paper](sources.md#x) saw", []),
        ("(the bottleneck-analysis paper saw up to 11.7%)", []),
        ("as the whole cluster-benchmarking guide says", []),
        ("the paper's figure", []),
    ],
)
def test_the_citation_check_finds_what_is_not_listed(text: str, found: list[str]) -> None:
    assert unlisted_citations(text, NAMES) == found
