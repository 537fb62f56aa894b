"""The console summary at 80 columns, as a new user's terminal shows it: every header whole,
collectives counted in ranks, latency titles that say what was measured, sizes in 3 digits,
and where the time went."""

from __future__ import annotations

import io
import itertools
import re

import pytest
from rich.console import Console

from clusterbench.analyses.run import summary_sections
from clusterbench.benchmarks.collectives.section import collective_grids
from clusterbench.report.console import fold_constant_columns, render_summary
from clusterbench.report.markdown import render_markdown
from clusterbench.report.timing import time_line
from clusterbench.schema import Measurement, ParamValue, Results, RunInfo, ToolInfo
from clusterbench.units import format_bytes, format_seconds
from clusterbench.views.cells import Grid, Section, format_value, rows_layout
from tests.pages import analysis


def m(
    bench: str, metric: str, value: float, unit: str, rank: int = 0, **params: ParamValue
) -> Measurement:
    return Measurement(
        benchmark=bench,
        metric=metric,
        value=value,
        unit=unit,
        params=params,
        rank=rank,
        host="node1",
        device=f"cuda:{rank}",
    )


def collectives(mode: str = "back_to_back") -> list[Measurement]:
    ops = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv")
    group: dict[str, ParamValue] = {
        "group": "world",
        "group_kind": "world",
        "group_size": 2,
        "dtype": "fp32",
    }
    out = []
    for op, size in itertools.product(ops, (8, 2048, 65536, 1 << 20, 16 << 20)):
        metric, unit = ("busbw", "GB/s") if size > 65536 else ("latency_us", "us")
        value = 123.4 if metric == "busbw" else 1903.0
        out.append(
            m("collectives", metric, value, unit, op=op, size_bytes=size, mode=mode, **group)
        )
    return out


def training() -> list[Measurement]:
    out = []
    for ws in (1, 2, 4, 8):
        case: dict[str, ParamValue] = {
            "model": "1.3b",
            "strategy": "ddp",
            "precision": "bf16",
            "world_size": ws,
            "global_batch": 8 * ws,
            "grad_accum": 1,
            "activation_checkpointing": False,
            "compile": True,
            "cuda_graphs": False,
            "series": "scaling",
        }
        out += [
            m("training", "step_time_ms", 812.5, "ms", **case),
            m("training", "tokens_per_s_per_gpu", 20_143.0, "tokens/s", **case),
            m("training", "tokens_per_s", 20_143.0 * ws, "tokens/s", **case),
            m("training", "mfu", 41.3, "%", **case),
            m("training", "peak_memory_gb", 61.2, "GB", **case),
            m("training", "loss", 6.25, "nats", **case),
        ]
        if ws > 1:
            out.append(m("training", "scaling_efficiency", 97.1, "%", **case))
    return out


def attribution() -> list[Measurement]:
    out = []
    metrics = (
        "step_time_ms",
        "compute",
        "memory",
        "communication",
        "communication_overlapped",
        "coordination",
        "collective_start_lateness_ms",
        "profiler_overhead_pct",
    )
    for rank in range(2):
        for metric in metrics:
            unit = "ms" if metric.endswith("_ms") else "%"
            out.append(m("attribution", metric, 12.5 + rank, unit, rank, rank_step="mean"))
    return out


def dataloader() -> list[Measurement]:
    out = []
    for rank in range(2):
        for workers, prefetch in ((0, None), (4, 2), (8, 2)):
            setting: dict[str, ParamValue] = {
                "dataset": "images",
                "num_workers": workers,
                "pin_memory": workers > 0,
                "prefetch_factor": prefetch,
            }
            out.append(
                m(
                    "dataloader",
                    "loader_samples_per_s",
                    1000.0 + 300 * workers,
                    "samples/s",
                    rank,
                    batch_size=64,
                    **setting,
                )
            )
            if workers in (0, 8):
                choice = "best" if workers else "default"
                out.append(
                    m(
                        "dataloader",
                        "gpu_busy",
                        95.0 if workers else 40.0,
                        "%",
                        rank,
                        choice=choice,
                        **setting,
                    )
                )
        out.append(
            m(
                "dataloader",
                "step_samples_per_s",
                2500.0,
                "samples/s",
                rank,
                model="resnet50",
                batch_size=64,
                dataset="images",
            )
        )
    return out


def checkpoint() -> list[Measurement]:
    out = [
        m(
            "checkpoint",
            "free_space_gb",
            812.3,
            "GB",
            directory="/scratch",
            filesystem="xfs",
            checkpoint_bytes=1970004,
        )
    ]
    for fmt, size in (("torch", 1970004), ("safetensors", 656640), ("dcp", 1970004)):
        extra: dict[str, ParamValue] = {"num_ranks": 2} if fmt == "dcp" else {}
        for metric, unit, value in (
            ("save_gbps", "GB/s", 0.35),
            ("save_s", "s", 0.0056),
            ("load_gbps", "GB/s", 0.25),
            ("load_s", "s", 0.008),
        ):
            out.append(m("checkpoint", metric, value, unit, format=fmt, size_bytes=size, **extra))
    async_case: dict[str, ParamValue] = {
        "format": "dcp_async",
        "size_bytes": 1970004,
        "num_ranks": 2,
        "steps": 3,
    }
    out += [
        m("checkpoint", "async_block_s", 0.0095, "s", **async_case),
        m("checkpoint", "async_stall_pct", 57.4, "%", **async_case),
    ]
    return out


def results(ms: list[Measurement], **run: object) -> Results:
    info = RunInfo(
        id="r1",
        started="2026-12-01T10:00:00+00:00",
        finished="2026-12-01T10:01:35+00:00",
        suite="standard",
        world_size=2,
        num_nodes=1,
        backend="nccl",
        command="clusterbench run",
        **run,
    )  # type: ignore[arg-type]
    return Results(tool=ToolInfo(version="0"), run=info, measurements=ms)


def render(res: Results, width: int = 80) -> str:
    buf = io.StringIO()
    render_summary(analysis(res), Console(file=buf, width=width))
    return buf.getvalue()


def flat(out: str) -> str:
    """The output with its line breaks as spaces: titles wrap at 80 columns."""
    return " ".join(out.split())


def standard_like() -> Results:
    return results([*collectives(), *training(), *attribution(), *dataloader(), *checkpoint()])


def test_every_header_is_whole_at_80_columns() -> None:
    res = standard_like()
    out = render(res)
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) <= 80
    lines = out.splitlines()
    for section in summary_sections(res):
        headers = [rows_layout(section).header] if section.rows else []
        headers += [fold_constant_columns(g)[0] for g in section.grids]
        for header in headers:
            # one line of the output holds every column name, in order
            pattern = r"\s+".join(re.escape(h) for h in header)
            assert any(re.search(pattern, line) for line in lines), (header, out)


def test_constant_columns_move_to_the_title() -> None:
    out = render(results(training()))
    assert "model 1.3b · strategy ddp · precision bf16" in flat(out)
    header = next(line for line in out.splitlines() if line.startswith("GPUs"))
    assert "model" not in header and "precision" not in header and "loss" in header


def test_dataloader_sweep_and_checkpoint_are_tables() -> None:
    out = render(results([*dataloader(), *checkpoint()]))
    images = next(line for line in out.splitlines() if line.startswith("8 "))
    # workers 8: pinned, prefetch 2, 3,400 samples/s on both devices, 1.4x the step, busy 95
    assert images.split() == ["8", "yes", "2", "3,400", "3,400", "3,400", "1.4x", "95.0", "(best)"]
    assert "40.0 (default)" in out and "2,500 samples/s the resnet50 step consumes" in flat(out)
    torch_row = next(line for line in out.splitlines() if line.startswith("torch "))
    assert torch_row.split() == ["torch", "1.88", "MiB", "1", "0.35", "0.0056", "0.25", "0.008"]
    assert "/scratch (xfs) 812.3 GB" in flat(out) and "dcp_async" in out
    assert "checkpoint_bytes" not in out and "1.87874" not in out


def test_collective_rows_count_the_ranks_of_the_group() -> None:
    res = results(collectives())
    out = render(res, width=120)
    assert "collectives · 2 ranks · best of 1 MiB–16 MiB" in out
    assert "1 device" not in out
    # one measurement per row: min and max would repeat the median
    header = next(line for line in out.splitlines() if line.startswith("what"))
    assert header.split() == ["what", "unit", "median"]
    md = render_markdown(analysis(res))
    assert "| what | unit | ranks | median | min | max | reference | % of ref |" in md
    assert "| all_reduce busbw · world, best of 1 MiB–16 MiB | GB/s | 2 | 123.4 |" in md


@pytest.mark.parametrize(
    ("modes", "says"),
    [
        (("back_to_back",), "latency µs by size, back-to-back,"),
        (("graph",), "latency µs by size, CUDA graph,"),
        (
            ("graph", "back_to_back"),
            "latency µs by size, CUDA graph where measured, else back-to-back,",
        ),
    ],
)
def test_latency_title_says_what_was_measured(modes: tuple[str, ...], says: str) -> None:
    ms = [x for mode in modes for x in collectives(mode)]
    if len(modes) == 2:  # graph mode for all_reduce only, as where graphs capture some ops
        ms = [x for x in ms if x.params["mode"] != "graph" or x.params["op"] == "all_reduce"]
    [latency] = [g for g in collective_grids(ms) if g.title.startswith("latency")]
    assert latency.title.startswith(says)
    assert ("CUDA graph" in latency.title) == ("graph" in modes)


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (8, "8 B"),
        (1023, "1023 B"),
        (128 << 10, "128 KiB"),
        (8 << 30, "8 GiB"),
        (1970004, "1.88 MiB"),
        (656640, "641 KiB"),
        (1.5 * 2**30, "1.5 GiB"),
        (12.34 * 2**20, "12.3 MiB"),
        (1023.9 * 2**10, "1 MiB"),
        (999.7 * 2**10, "0.976 MiB"),
        (3 << 40, "3 TiB"),
    ],
)
def test_sizes_have_at_most_three_significant_digits(size: float, text: str) -> None:
    assert format_bytes(size) == text


def test_no_size_in_the_summary_has_more_than_three_digits() -> None:
    out = render(standard_like(), width=200)
    for number in re.findall(r"(\d+(?:\.\d+)?) (?:B|KiB|MiB|GiB|TiB)\b", out):
        assert len(number.replace(".", "").lstrip("0")) <= 3, number


def test_time_line_names_each_benchmark_and_the_total() -> None:
    seconds = {"gemm": 12.34, "memory": 4.1, "collectives": 63.5}
    res = results(collectives(), benchmark_seconds=seconds)
    line = time_line(res)
    assert (
        line == "time: gemm 12.3 s, memory 4.1 s, collectives 63.5 s (total 79.9 s of a 95.0 s run)"
    )
    assert line in render(res, width=200)
    md = render_markdown(analysis(res))
    assert "## Time" in md and "| collectives | 63.5 s |" in md
    older = results(collectives())  # results.json written before timings were kept
    assert time_line(older) == "" and "time:" not in render(older)
    assert "## Time" not in render_markdown(analysis(older))


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0123, "0.012 s"),
        (5.31, "5.3 s"),
        (99.96, "100 s"),
        (470.2, "470 s"),
        (1234, "21 min"),
        (7200, "2.0 h"),
    ],
)
def test_format_seconds(seconds: float, text: str) -> None:
    assert format_seconds(seconds) == text


def test_rows_layout_keeps_differing_counts_as_a_column() -> None:
    ms = [
        *collectives(),
        *(
            x.model_copy(update={"params": {**x.params, "group": "node", "group_size": 8}})
            for x in collectives()
        ),
    ]
    section: Section = summary_sections(results(ms))[0]
    layout = rows_layout(section)
    assert "ranks" in layout.header and layout.title == "collectives · best of 1 MiB–16 MiB"
    assert {layout.cells(r)[layout.header.index("ranks")] for r in section.rows} == {"2", "8"}


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [(29.0, "count", "29"), (12_345.0, "count", "12,345"), (2.5, "count", "2.5"),
     (4.0, "gen", "4"), (16.0, "lanes", "16"), (29.0, "GB/s", "29.0")],
)  # fmt: skip
def test_counts_are_whole_numbers(value: float, unit: str, text: str) -> None:
    assert format_value(value, unit) == text


def test_a_count_in_the_summary_is_no_float() -> None:
    """The doctor's ``checks_run`` showed ``29.0``."""
    doctor = m("doctor", "checks_run", 29.0, "count")
    out = render(results([*collectives(), doctor]))
    row = next(line for line in out.splitlines() if "checks_run" in line or "checks" in line)
    assert re.search(r"\b29\b", row) and "29.0" not in row, row


@pytest.mark.parametrize(
    ("title", "named_once"),
    [("placement: where each rank ran", True), ("where each rank ran", False)],
)
def test_a_section_title_is_not_repeated(title: str, named_once: bool) -> None:
    """The console printed ``placement``, a blank line, then ``placement: where each rank
    ran``; a first table whose title does not name the section keeps the name above it."""
    grid = Grid(title=title, header=("rank", "node"), rows=[("0", "node1")])
    res = results([])
    buf = io.StringIO()
    render_summary(analysis(res, [Section("placement", grids=[grid])]), Console(file=buf, width=80))
    lines = buf.getvalue().splitlines()
    at = lines.index(title)
    assert lines[at - 1] == ""
    if named_once:
        assert "placement" not in lines[: at - 1] and lines[at - 2] != "", lines
    else:
        assert lines[at - 2] == "placement", lines
