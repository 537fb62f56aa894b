"""Advice (analysis.advice) and its "What to change" table: the convention checked where advice
is built, read back leniently, ranked by the speed-up a gain amounts to (measured before
predicted at an equal gain, advice without a gain last, each change once); the shared test of
a setting's repeats; and the table at the top of summary.md and report.html, after the console's
findings, or its sentence when nothing beat the defaults."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from clusterbench import catalog
from clusterbench.analyses.trials import tried
from clusterbench.judging.advice import (
    advice_evidence,
    advice_of,
    collect_advice,
    compare_samples,
)
from clusterbench.report.advice import advice_table, basis_text, gain_text
from clusterbench.report.console import ADVICE_SHOWN, render_summary
from clusterbench.report.html import render_html
from clusterbench.report.markdown import render_markdown
from clusterbench.schema import Finding, Measurement, Results, RunInfo, ToolInfo
from tests.html_page import parse_page
from tests.pages import analysis

catalog.register_builtin()


def advice(change: str, gain: float | None, **kw: Any) -> dict[str, Any]:
    basis = kw.pop("basis", "measured" if gain is not None else "topology")
    defaults: dict[str, Any] = {"gain_of": "all_reduce time at 32 KiB", "evidence": "a test"}
    if basis == "topology":
        defaults = {"gain_of": "", "evidence": "the layout"}
    if basis == "predicted":
        defaults["noise"] = 0.01
    return advice_evidence(change=change, gain=gain, basis=basis, **{**defaults, **kw})


def finding(id_: str, evidence: dict[str, Any], severity: str = "info") -> Finding:
    return Finding(id=id_, severity=severity, scope="run", message=id_, evidence=evidence)  # type: ignore[arg-type]


def results_with(findings: list[Finding], ms: list[Measurement] | None = None) -> Results:
    run = RunInfo(id="r1", started="2026-12-01T10:00:00+00:00", suite="standard", world_size=2,
                  num_nodes=1, backend="nccl", command="clusterbench run")  # fmt: skip
    return Results(tool=ToolInfo(version="0"), run=run, findings=findings, measurements=ms or [])


def ranked(*evidence: dict[str, Any]) -> list[str]:
    fs = [finding(f"x{i}.advice", e) for i, e in enumerate(evidence)]
    return [a.change for a in collect_advice(fs)]


# --- the convention --------------------------------------------------------------------------


def test_advice_evidence_round_trips_through_a_finding() -> None:
    ev = advice("export NCCL_ALGO=allreduce:Tree", 0.25, noise=0.02)
    assert ev["advice"]["change"] == "export NCCL_ALGO=allreduce:Tree"
    assert (ev["advice"]["gain"], ev["advice"]["better"]) == (0.25, "lower")
    a = advice_of(finding("collectives.tune.recommend", {"rows": [], **ev}))
    assert a is not None and a.source == "collectives" and a.noise == 0.02
    assert a.speedup == pytest.approx(1 / 0.75)
    assert gain_text(a) == "−25% all_reduce time at 32 KiB" and basis_text(a) == "measured ±2.0%"
    rate = advice_of(finding("d.x", advice("workers", 0.35, better="higher", gain_of="samples/s")))
    assert rate is not None and rate.speedup == pytest.approx(1.35)
    assert gain_text(rate) == "+35% samples/s"


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"change": " ", "gain": 0.1, "basis": "measured"}, "setting to change"),
        ({"change": "c", "gain": 0.0, "basis": "measured"}, "fraction above 0"),
        ({"change": "c", "gain": 1.0, "basis": "measured"}, "fraction above 0"),
        ({"change": "c", "gain": None, "basis": "measured"}, "fraction above 0"),
        ({"change": "c", "gain": 0.1, "basis": "topology"}, "no measured gain"),
        ({"change": "c", "gain": 0.1, "basis": "guessed"}, "basis must be one of"),
        ({"change": "c", "gain": 0.1, "basis": "predicted"}, "exceed the model's measured error"),
        ({"change": "c", "gain": 0.1, "basis": "predicted", "noise": 0.2}, "exceed the model"),
        ({"change": "c", "gain": 0.1, "basis": "measured", "evidence": ""}, "the evidence"),
    ],
)
def test_advice_that_breaks_the_convention_is_refused(kw: dict[str, Any], says: str) -> None:
    args = {"gain_of": "time", "evidence": "a test", **kw}
    with pytest.raises(ValueError, match=says):
        advice_evidence(**args)
    # the same dict in a results file from elsewhere is skipped, not a crash
    raw = {"better": "lower", **args}
    assert advice_of(finding("x.y", {"advice": raw})) is None


def test_a_rate_may_gain_more_than_double() -> None:
    ev = advice("batch", 1.5, better="higher", gain_of="samples/s")
    assert ev["advice"]["gain"] == 1.5


def test_ranked_by_the_speed_up_a_gain_amounts_to() -> None:
    # 20% less time is 1.25x; 22% more samples/s is 1.22x; 30% more is 1.3x
    order = ranked(
        advice("rate22", 0.22, better="higher", gain_of="samples/s"),
        advice("time20", 0.20),
        advice("rate30", 0.30, better="higher", gain_of="samples/s"),
    )
    assert order == ["rate30", "time20", "rate22"]


def test_measured_before_predicted_at_an_equal_gain_and_no_gain_last() -> None:
    order = ranked(
        advice("flags", None),
        advice("predicted", 0.1, basis="predicted"),
        advice("small", 0.02),
        advice("measured", 0.1),
        advice("flags2", None),
    )
    assert order == ["measured", "predicted", "small", "flags", "flags2"]


def test_the_same_change_is_named_once_where_it_ranks_highest() -> None:
    fs = [
        finding("dataloader.a", advice("workers=8", 0.2, better="higher", gain_of="cuda:0")),
        finding("dataloader.b", advice("workers=8", 0.4, better="higher", gain_of="cuda:1")),
        finding("placement.a", advice("srun --distribution=block", None)),
        finding("placement.b", advice("srun --distribution=block", None)),
    ]
    found = collect_advice(results_with(fs))
    assert [(a.change, a.gain_of) for a in found] == [
        ("workers=8", "cuda:1"),
        ("srun --distribution=block", ""),
    ]
    assert gain_text(found[1]) == "gain not measured" and basis_text(found[1]) == "topology"


def test_findings_without_advice_give_none() -> None:
    fs = [finding("gemm.low", {"tflops": 1.0}), finding("x.y", {"advice": "not a dict"})]
    assert collect_advice(fs) == []


# --- a setting's repeats against the default's ------------------------------------------------


def noisy(centre: float, n: int, spread: float, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(v) for v in centre * (1 + spread * rng.standard_normal(n))]


def test_a_clear_win_is_beyond_the_noise_in_either_direction() -> None:
    faster = compare_samples(noisy(100, 12, 0.01, 1), noisy(80, 12, 0.01, 2), better="lower",
                             alpha=0.01)  # fmt: skip
    assert faster is not None and faster.beyond_noise and faster.p_value < 0.01
    assert faster.speedup == pytest.approx(1.25, rel=0.02)
    assert faster.gain == pytest.approx(0.2, abs=0.01) and 0 < faster.noise < 0.02
    assert 1 < faster.interval[0] < faster.speedup < faster.interval[1]
    rate = compare_samples(noisy(100, 12, 0.01, 1), noisy(130, 12, 0.01, 2), better="higher",
                           alpha=0.01)  # fmt: skip
    assert rate is not None and rate.beyond_noise and rate.gain == pytest.approx(0.3, abs=0.02)
    # the wrong way round is not a gain
    worse = compare_samples(noisy(100, 12, 0.01, 1), noisy(80, 12, 0.01, 2), better="higher",
                            alpha=0.01)  # fmt: skip
    assert worse is not None and not worse.beyond_noise and worse.speedup < 1


def test_inside_the_noise_or_too_few_repeats_is_no_gain() -> None:
    inside = compare_samples(noisy(100, 12, 0.05, 1), noisy(99, 12, 0.05, 2), better="lower",
                             alpha=0.01)  # fmt: skip
    assert inside is not None and not inside.beyond_noise
    # 3 against 3: the smallest one-sided p is 1/20, never below 0.01
    assert compare_samples([1.0, 1.1, 1.2], [2.0, 2.1, 2.2], better="higher", alpha=0.01) is None


# --- the table ---------------------------------------------------------------------------------


def seven() -> list[Finding]:
    """Five measured gains, one predicted, one topology fix."""
    fs = [
        finding(f"collectives.tune.r{g}", advice(f"export X={g}", g / 100, gain_of=f"op {g}"))
        for g in (5, 30, 12, 20, 8)
    ]
    fs.append(finding("prediction.scaling",
                      advice("provision 800 Gb/s", 0.11, basis="predicted", better="higher",
                             gain_of="throughput at 1,024 GPUs", noise=0.04)))  # fmt: skip
    fs.append(finding("placement.rank_order", advice("srun --distribution=block", None)))
    return fs


def test_the_table_rows_rank_change_gain_basis_evidence_and_source() -> None:
    table = advice_table(results_with(seven()))
    assert [row[0] for row in table.rows] == [str(n) for n in range(1, 8)]
    assert table.rows[0] == ("1", "export X=30", "−30% op 30", "measured", "a test", "collectives")
    assert table.rows[3] == (
        "4", "provision 800 Gb/s", "+11% throughput at 1,024 GPUs", "predicted ±4.0%", "a test",
        "prediction",
    )  # fmt: skip
    assert table.rows[-1][1:4] == ("srun --distribution=block", "gain not measured", "topology")


def test_summary_md_opens_with_what_to_change() -> None:
    md = render_markdown(analysis(results_with(seven()), []))
    lines = md.splitlines()
    start = lines.index("## What to change")
    assert start < lines.index("## Findings")
    assert lines[start + 2] == "| # | change | gain | basis | evidence | from |"
    assert (
        lines[start + 4] == "| 1 | `export X=30` | −30% op 30 | measured | a test | collectives |"
    )
    assert lines[start + 10].startswith("| 7 | `srun --distribution=block` | gain not measured |")


def render(r: Results, width: int = 100) -> str:
    buf = io.StringIO()
    render_summary(analysis(r), Console(file=buf, width=width))
    return buf.getvalue()


def test_the_console_names_the_top_five_after_the_findings() -> None:
    out = render(results_with(seven()))
    block = out[out.index("What to change") :]
    # advice findings are info: counted as notes, their changes listed under What to change
    assert out.index("No findings to act on.") < out.index("What to change")
    assert (
        block.splitlines()[0]
        == f"What to change: top {ADVICE_SHOWN} of 7 by gain; all in summary.md"
    )
    assert " 1. export X=30" in block and "    −30% op 30 · measured · collectives" in block
    assert " 5. export X=8" in block and "export X=5" not in block and "srun" not in block


def test_the_report_puts_the_table_after_the_verdict_before_the_hardware() -> None:
    html = render_html(analysis(results_with(seven()), [], {}))
    assert html.index('id="verdict"') < html.index('id="advice"') < html.index('id="run"')
    assert '<a href="#advice">What to change</a>' in html
    page = parse_page(html)
    (table,) = [t for t in page.tables if "advice" in t.classes]
    assert table.header == ["#", "change", "gain", "basis", "evidence", "from"]
    assert [row[1][0] for row in table.rows][:2] == ["export X=30", "export X=20"]
    gains = table.column("gain")
    assert float(gains[0][1]["data-v"]) == pytest.approx(1 / 0.7)  # sorts by the speed-up
    assert "data-v" not in gains[-1][1] and gains[-1][0] == "gain not measured"
    assert ">export X=30</code></td>" in html


def tune_keep_defaults() -> Finding:
    return finding("collectives.tune.keep_defaults", {"best": None, "min_gain": 0.05})


def test_nothing_beat_the_defaults_says_so_and_what_was_tried() -> None:
    r = results_with([tune_keep_defaults()])
    assert tried(r) == ["the NCCL tuning sweep"]
    sentence = (
        "No setting beat the defaults beyond the noise in this run (tried: the NCCL tuning sweep)."
    )
    assert advice_table(r).empty == sentence
    assert f"## What to change\n\n{sentence}" in render_markdown(analysis(r, []))
    assert f"What to change: {sentence}" in " ".join(render(r).split())
    html = render_html(analysis(r, [], {}))
    assert f'<section id="advice"><h2>What to change</h2><p class="advice-none">{sentence}' in html


def test_a_run_that_compared_nothing_has_no_section() -> None:
    r = results_with([finding("gemm.low_efficiency", {"tflops": 1.0}, "warn")])
    assert tried(r) == [] and not advice_table(r).shown
    assert "What to change" not in render_markdown(
        analysis(r, [])
    ) and "What to change" not in render(r)
    html = render_html(analysis(r, [], {}))
    assert 'id="advice"' not in html and "#advice" not in html
