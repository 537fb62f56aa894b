"""The "what to change" table that heads the console summary, summary.md and report.html: the
run's advice (:func:`clusterbench.judging.advice.collect_advice`), ranked by gain, as text
cells the three renderers share.

With no advice the table is replaced by one sentence when the run compared settings (they
kept the defaults: that is an answer too), and left out when it compared none (nothing to
change is then no finding of the run, only the absence of a test).
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterbench.analyses.trials import tried
from clusterbench.judging.advice import Advice, collect_advice
from clusterbench.schema import Results

__all__ = [
    "ADVICE_HEADER",
    "ADVICE_TITLE",
    "AdviceRow",
    "AdviceTable",
    "advice_table",
    "basis_text",
    "gain_text",
]

ADVICE_TITLE = "What to change"
ADVICE_HEADER = ("#", "change", "gain", "basis", "evidence", "from")
NOT_MEASURED = "gain not measured"
AdviceRow = tuple[str, str, str, str, str, str]
"""rank, change, gain, basis, evidence, from (:data:`ADVICE_HEADER`)."""


def _pct(fraction: float) -> str:
    """12% / 5.2% / 0.7% / 0.024%: whole percent from 10%, one decimal down to 0.1%, two
    significant digits below."""
    value = 100 * fraction
    if value >= 9.95:
        return f"{value:.0f}%"
    if value >= 0.095:
        return f"{value:.1f}%"
    return f"{value:.2g}%"


def gain_text(a: Advice) -> str:
    """'−12% all_reduce time at 32 KiB', '+35% DataLoader samples/s ...', or 'gain not
    measured' (topology advice)."""
    if a.gain is None:
        return NOT_MEASURED
    sign = "−" if a.better == "lower" else "+"
    return f"{sign}{_pct(a.gain)} {a.gain_of}".strip()


def basis_text(a: Advice) -> str:
    """'measured ±0.7%' (the interval's half-width), 'predicted ±4.1%' (the model's measured
    error), 'measured' (no figure of the noise: the evidence names the test), 'topology'."""
    if a.noise is None or a.basis == "topology":
        return a.basis
    return f"{a.basis} ±{_pct(a.noise)}"


@dataclass(frozen=True, slots=True)
class AdviceTable:
    """The ranked advice and its text rows; or, without advice, :attr:`empty` (the sentence
    to print, '' when the section is left out)."""

    advice: list[Advice]
    rows: list[AdviceRow]
    empty: str

    @property
    def shown(self) -> bool:
        return bool(self.rows or self.empty)


def advice_table(results: Results, advice: list[Advice] | None = None) -> AdviceTable:
    """The run's advice (``advice``: as :func:`collect_advice` gives it, computed once per run),
    one row per change: rank, change, gain, basis, evidence, from."""
    advice = collect_advice(results) if advice is None else advice
    rows: list[AdviceRow] = [
        (str(n), a.change, gain_text(a), basis_text(a), a.evidence, a.source)
        for n, a in enumerate(advice, start=1)
    ]
    empty = ""
    if not advice:
        compared = tried(results)
        if compared:
            empty = (
                "No setting beat the defaults beyond the noise in this run (tried: "
                + ", ".join(compared)
                + ")."
            )
    return AdviceTable(advice=advice, rows=rows, empty=empty)
