"""What every HTML report carries inline: its style sheet, its small scripts (unpack plotly,
draw the figures, sort a table by a click on its header) and plotly's JavaScript, compressed,
so that the page opens offline from a file share or a laptop and fetches nothing.  The
JavaScript is plotly's cartesian partial bundle where the install holds it (the wheel's build
fetches it from npm), else, or for a figure of another trace type, the full bundle."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from clusterbench.runtime.atomic import write_text_atomic

__all__ = [
    "CSS",
    "DRAW_JS",
    "LOAD_JS",
    "PARTIAL_BUNDLE",
    "PARTIAL_TRACES",
    "PLOTLY_CONFIG",
    "SORT_JS",
    "needs_full_bundle",
    "partial_bundle",
    "plotly_js",
    "plotly_packed",
]


PARTIAL_BUNDLE = "plotly-cartesian.min.js"
"""plotly.js's cartesian partial bundle (1.5 MB, against the full bundle's 4.8 MB), which the
wheel's build installs from npm into ``assets/`` (hatch_build.py)."""

PARTIAL_TRACES = frozenset(
    {
        "bar",
        "box",
        "contour",
        "heatmap",
        "histogram",
        "histogram2d",
        "histogram2dcontour",
        "image",
        "pie",
        "scatter",
        "scatterternary",
        "violin",
    }
)
"""The trace types the partial bundle draws (its README's list); a page with any other, a
plugin's 3-D scatter say, carries the full bundle."""


def partial_bundle() -> Path | None:
    """The partial bundle this install holds, or None (built without npm: the full one)."""
    path = Path(__file__).with_name("assets") / PARTIAL_BUNDLE
    return path if path.is_file() else None


def needs_full_bundle(figures: Iterable[Mapping[str, Any]]) -> bool:
    """Whether these plotly figures (dicts with ``data``) draw a trace the partial bundle has
    not; a trace without a type is a scatter, as in plotly."""
    for figure in figures:
        for trace in figure.get("data") or ():
            if str(trace.get("type") or "scatter") not in PARTIAL_TRACES:
                return True
    return False


@functools.cache
def plotly_js(full: bool = False) -> str:
    """The plotly.js a page carries: the partial bundle where it is installed and ``full`` is
    not asked, else the full bundle that plotly.py ships (read once per process)."""
    partial = None if full else partial_bundle()
    if partial is not None:
        return partial.read_text(encoding="utf-8")
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def _bundle_id(full: bool) -> str:
    """A name for the bundle that changes with its contents: the package and version."""
    partial = None if full else partial_bundle()
    if partial is None:
        import importlib.metadata

        return f"plotly-{importlib.metadata.version('plotly')}"
    stamp = partial.with_name(f"{PARTIAL_BUNDLE}.version")
    with contextlib.suppress(OSError):
        return "-".join(stamp.read_text(encoding="utf-8").split())
    return f"plotly-cartesian-{partial.stat().st_size}"


@functools.cache
def plotly_packed(full: bool = False) -> str:
    """:func:`plotly_js` compressed (gzip) and base64-encoded, as the page carries it: the
    partial bundle's 1.5 MB become 0.66 MB (the full bundle's 4.8 MB, 2.0 MB), which the page
    unpacks with the browser's own DecompressionStream.  Compressing takes up to 0.2 s, so the
    result is kept per bundle and version in the user's cache folder ($XDG_CACHE_HOME/
    clusterbench, else ~/.cache/clusterbench); a folder that cannot be written costs the
    time again, nothing else."""
    import base64
    import gzip

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    cached = Path(base) / "clusterbench" / f"{_bundle_id(full)}.js.gz.b64"
    with contextlib.suppress(OSError, UnicodeDecodeError):
        text = cached.read_text(encoding="ascii")
        if text:
            return text
    packed = base64.b64encode(gzip.compress(plotly_js(full).encode("utf-8"), 9, mtime=0))
    text = packed.decode("ascii")
    with contextlib.suppress(OSError):
        cached.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(cached, text)
    return text


PLOTLY_CONFIG = {
    "displaylogo": False,
    "responsive": True,
    "showSendToCloud": False,
    "showTips": False,
    "typesetMath": False,  # no MathJax: nothing to typeset, nothing to fetch
    "plotlyServerURL": "",
    "modeBarButtonsToRemove": ["sendDataToCloud", "select2d", "lasso2d"],
    "toImageButtonOptions": {"format": "png", "scale": 2},
}
"""Plotly.newPlot's config: no logo, no link to plotly's cloud, the figure follows the page."""

CSS = """
:root{--fail:#c62828;--warn:#a15c00;--info:#1559b0;--ok:#2e7d32;--line:#d7dbe0;--soft:#f4f6f8;
--text:#1d232a;--dim:#5d6873}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;
color:var(--text);background:#fff}
main{max-width:1500px;margin:0 auto;padding:1rem 1.5rem 3rem}
h1{font-size:1.45rem;margin:.3rem 0 .6rem}h2{font-size:1.2rem;margin:0 0 .6rem}
h3{font-size:1rem;margin:1rem 0 .4rem}
section{border-top:1px solid var(--line);padding:1rem 0}
code{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:var(--soft);
padding:.1rem .3rem;border-radius:3px;word-break:break-all}
.verdict{font-size:1.15rem;font-weight:600;padding:.55rem .9rem;border-radius:6px;
border-left:6px solid var(--ok);background:#edf7ee;margin:.4rem 0 .8rem}
.verdict.fail{border-color:var(--fail);background:#fdecec}
.verdict.warn{border-color:var(--warn);background:#fdf3e3}
.node-verdicts{list-style:none;padding:0;margin:0 0 .8rem}
.node-verdicts li{padding:.15rem .6rem;border-left:4px solid var(--ok);margin:.2rem 0}
.node-verdicts li.short{border-color:var(--warn);font-weight:600}
.sev{font-weight:700;text-transform:uppercase;font-size:.8rem}
.sev-fail .sev,.err{color:var(--fail)}.sev-warn .sev{color:var(--warn)}
.sev-info .sev{color:var(--info)}
tr.sev-fail{background:#fff5f5}tr.sev-warn{background:#fffaf1}
.cols{display:grid;grid-template-columns:repeat(auto-fit,minmax(22rem,1fr));gap:.5rem 2rem}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:.15rem .8rem;margin:0}
dl.meta dt{color:var(--dim)}dl.meta dd{margin:0}
dl.meta+dl.meta,details+dl.meta{margin-top:.6rem;padding-top:.6rem;
border-top:1px dashed var(--line)}
dd.differs{color:var(--warn);font-weight:600}
nav.toc ol{margin:.2rem 0;padding-left:1.4rem;columns:16rem}
nav.toc a{text-decoration:none}nav.toc .dim{color:var(--dim)}
.pair{display:flex;flex-wrap:wrap;gap:1.2rem;align-items:flex-start;margin:.6rem 0 1.2rem}
.pair>figure{flex:1 1 30rem;min-width:0}
.pair>div{flex:0 1 auto;max-width:100%;min-width:0}
figure{margin:0}figcaption{font-weight:600;margin-bottom:.2rem}
.plot{width:100%;min-height:22rem}
.notes{margin:.3rem 0 0;padding-left:1.2rem;color:var(--dim)}
.note{color:var(--warn)}
.tbl{overflow:auto;max-height:34rem;margin:.2rem 0 .9rem}
.tbl.long{max-height:22rem}
.tbl-title{font-style:italic;margin:.5rem 0 .15rem}
table{border-collapse:collapse;font-size:13px}
th,td{padding:.2rem .55rem;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
td[data-v]{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.sev,td.verdict{text-align:left}
thead th{position:sticky;top:0;background:var(--soft);z-index:1}
table.sortable thead th{cursor:pointer;user-select:none;white-space:nowrap}
table.sortable thead th::after{content:" \\2195";color:#9aa3ad;font-size:.75em}
table.sortable thead th[aria-sort=ascending]::after{content:" \\25B2";color:var(--text)}
table.sortable thead th[aria-sort=descending]::after{content:" \\25BC";color:var(--text)}
.v-regression{color:var(--fail);font-weight:700}.v-improvement{color:var(--ok);font-weight:600}
.v-new{color:#00838f}.v-missing{color:var(--warn)}.v-unchanged{color:var(--dim)}
.dim{color:var(--dim)}
details summary{cursor:pointer;color:var(--dim)}
"""

LOAD_JS = """
(function(){
  function failed(why) {
    var note = document.createElement("p");
    note.className = "note";
    note.textContent = "plots not drawn: this browser could not unpack plotly.js (" + why + ")";
    document.querySelector("main").prepend(note);
    document.body.setAttribute("data-plots-drawn", "0");
  }
  if (typeof DecompressionStream === "undefined") { failed("no DecompressionStream"); return; }
  var packed = atob(document.getElementById("cb-plotly").textContent);
  var bytes = new Uint8Array(packed.length);
  for (var k = 0; k < packed.length; k++) bytes[k] = packed.charCodeAt(k);
  var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  new Response(stream).text().then(function (code) {
    var script = document.createElement("script");
    script.textContent = code;
    document.head.appendChild(script);  // runs plotly.js now
    window.cbDraw();
  }, function (err) { failed(String(err)); });
})();
"""
"""Unpacks plotly.js (gzip, base64, in ``cb-plotly``) with the browser's DecompressionStream,
runs it, then draws the figures."""

DRAW_JS = """
window.cbDraw = function(){
  var blob = JSON.parse(document.getElementById("cb-data").textContent);
  var figures = blob.figures, i = 0, drawn = 0;
  function next() {
    if (i >= figures.length) {
      document.body.setAttribute("data-plots-drawn", String(drawn));
      return;
    }
    var f = figures[i++], el = document.getElementById(f.id);
    var layout = Object.assign({autosize: true, margin: {t: 24, r: 16, b: 56, l: 64}}, f.layout);
    var config = Object.assign({}, blob.config,
      {toImageButtonOptions: Object.assign({filename: f.id}, blob.config.toImageButtonOptions)});
    Plotly.newPlot(el, f.data, layout, config).then(function () { drawn++; next(); },
      function (err) { el.textContent = "plot not drawn: " + err; next(); });
  }
  next();
};
"""
"""Draws the figures of the ``cb-data`` blob one after another (the header is readable at
once); ``body[data-plots-drawn]`` says how many were drawn once all are done."""

SORT_JS = r"""
document.addEventListener("click", function (ev) {
  var th = ev.target.closest ? ev.target.closest("table.sortable thead th") : null;
  if (!th) return;
  var table = th.closest("table"), body = table.tBodies[0];
  if (!body) return;
  var col = Array.prototype.indexOf.call(th.parentNode.children, th);
  var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
  var rows = Array.prototype.slice.call(body.rows);
  function has(r) { var c = r.cells[col]; return c && c.hasAttribute("data-v"); }
  function blank(r) { var c = r.cells[col]; return !c || /^\s*-?\s*$/.test(c.textContent); }
  var numeric = rows.some(has) && rows.every(function (r) { return has(r) || blank(r); });
  function key(r) {
    var c = r.cells[col];
    if (!numeric) return c ? c.textContent : "";
    var v = c ? c.getAttribute("data-v") : null;
    return v === null ? NaN : parseFloat(v);
  }
  var keyed = rows.map(function (r, n) { return [key(r), n, r]; });
  keyed.sort(function (a, b) {
    var x = a[0], y = b[0];
    if (numeric) {
      if (isNaN(x) || isNaN(y)) return isNaN(x) === isNaN(y) ? a[1] - b[1] : (isNaN(x) ? 1 : -1);
      if (x !== y) return (x - y) * dir;
    } else {
      var c = x.localeCompare(y, undefined, {numeric: true});
      if (c) return c * dir;
    }
    return a[1] - b[1];
  });
  var frag = document.createDocumentFragment();
  keyed.forEach(function (k) { frag.appendChild(k[2]); });
  body.appendChild(frag);
  Array.prototype.forEach.call(th.parentNode.children, function (h) {
    h.removeAttribute("aria-sort");
  });
  th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
});
"""
"""Sorts a ``table.sortable`` by the clicked column: numerically by each cell's ``data-v``
(the number itself, not its formatted text) where every cell of the column that is not
empty or '-' has one, else by the text; cells without a number go last; a second click
reverses."""
