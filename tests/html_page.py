"""The HTML report read back for tests, with the standard library's HTML parser: its tables,
plot divs, scripts and every tag's attributes, its embedded figures, and a check that it
references nothing outside itself."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

__all__ = ["Page", "Table", "external_references", "parse_page", "plotly_in"]


@dataclass
class Table:
    classes: list[str]
    title: str | None
    header: list[str] = field(default_factory=list)
    rows: list[list[tuple[str, dict[str, str]]]] = field(default_factory=list)
    """Each cell's text and attributes."""
    row_classes: list[str] = field(default_factory=list)

    def column(self, name: str) -> list[tuple[str, dict[str, str]]]:
        i = self.header.index(name)
        return [row[i] for row in self.rows]


@dataclass
class Page:
    tags: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    scripts: list[tuple[dict[str, str], str]] = field(default_factory=list)
    styles: list[str] = field(default_factory=list)
    plot_ids: list[str] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    """The visible text, one string per text node (scripts and styles left out)."""

    @property
    def blob(self) -> dict[str, Any]:
        (text,) = [body for attrs, body in self.scripts if attrs.get("id") == "cb-data"]
        data: dict[str, Any] = json.loads(text)
        return data

    def table_titled(self, start: str) -> Table:
        (found,) = [t for t in self.tables if (t.title or "").startswith(start)]
        return found

    def ids(self) -> set[str]:
        return {attrs["id"] for _, attrs in self.tags if "id" in attrs}


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self._in: list[str] = []
        self._title: str | None = None
        self._collect_title = False
        self._cell: tuple[list[str], dict[str, str]] | None = None
        self._header = False

    def handle_starttag(self, tag: str, attrs_list: list[tuple[str, str | None]]) -> None:
        attrs = {k: v or "" for k, v in attrs_list}
        self.page.tags.append((tag, attrs))
        self._in.append(tag)
        classes = attrs.get("class", "").split()
        if tag == "p" and "tbl-title" in classes:
            self._collect_title, self._title = True, ""
        elif tag == "table":
            self.page.tables.append(Table(classes=classes, title=self._title))
            self._title = None
        elif tag == "thead":
            self._header = True
        elif tag == "tbody":
            self._header = False
        elif tag == "tr" and not self._header and self.page.tables:
            self.page.tables[-1].rows.append([])
            self.page.tables[-1].row_classes.append(attrs.get("class", ""))
        elif tag in ("td", "th"):
            self._cell = ([], attrs)
        elif tag == "div" and "plot" in classes:
            self.page.plot_ids.append(attrs["id"])
        elif tag == "script":
            self.page.scripts.append((attrs, ""))
        elif tag == "style":
            self.page.styles.append("")

    def handle_endtag(self, tag: str) -> None:
        if self._in and self._in[-1] == tag:
            self._in.pop()
        if tag == "p":
            self._collect_title = False
        if tag in ("td", "th") and self._cell is not None:
            text = "".join(self._cell[0]).strip()
            table = self.page.tables[-1]
            if tag == "th" and self._header:
                table.header.append(text)
            else:
                table.rows[-1].append((text, self._cell[1]))
            self._cell = None

    def handle_data(self, data: str) -> None:
        where = self._in[-1] if self._in else ""
        if where == "script":
            attrs, body = self.page.scripts[-1]
            self.page.scripts[-1] = (attrs, body + data)
            return
        if where == "style":
            self.page.styles[-1] += data
            return
        if data.strip():
            self.page.text.append(data)
        if self._collect_title and self._title is not None:
            self._title += data
        if self._cell is not None:
            self._cell[0].append(data)


def parse_page(html: str) -> Page:
    parser = _Parser()
    parser.feed(html)
    parser.close()
    return parser.page


_REMOTE = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)
_CSS_URL = re.compile(r"url\(\s*['\"]?\s*(?:[a-z][a-z0-9+.-]*:)?//|@import", re.IGNORECASE)
_FETCHING_TAGS = {
    "link",
    "img",
    "iframe",
    "object",
    "embed",
    "base",
    "source",
    "video",
    "audio",
    "frame",
    "track",
    "picture",
    "image",
}
_URL_ATTRS = {"src", "href", "srcset", "action", "poster", "data", "xlink:href", "formaction"}


def external_references(html: str) -> list[str]:
    """Everything in the file that would load something from elsewhere: tags that fetch, a
    script with a src, src/href-like attributes to another host, CSS url()/@import to one."""
    page = parse_page(html)
    found = [f"<{tag}>" for tag, _ in page.tags if tag in _FETCHING_TAGS]
    found += [f"<script src={a['src']}>" for a, _ in page.scripts if "src" in a]
    for tag, attrs in page.tags:
        for name, value in attrs.items():
            if name in _URL_ATTRS and _REMOTE.match(value):
                found.append(f"<{tag} {name}={value}>")
            if name == "style" and _CSS_URL.search(value):
                found.append(f"<{tag} style={value}>")
    found += [f"css: {m.group(0)}" for css in page.styles for m in _CSS_URL.finditer(css)]
    # anywhere at all, plotly's bundle included: CSS url() to a host, or an @import
    found += [f"file: {m.group(0)}" for m in _CSS_URL.finditer(html)]
    return found


def plotly_in(html: str) -> list[str]:
    """The plotly.js the page carries, unpacked (gzip, base64 in ``cb-plotly``): one each."""
    import base64
    import gzip

    page = parse_page(html)
    packed = [body for attrs, body in page.scripts if attrs.get("id") == "cb-plotly"]
    return [gzip.decompress(base64.b64decode(body)).decode("utf-8") for body in packed]
