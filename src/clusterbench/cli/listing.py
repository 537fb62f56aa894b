"""``clusterbench list``: every benchmark with its level, scope and what it measures."""

from __future__ import annotations

from clusterbench.cli.common import PlainUsage, _console, app

__all__ = ["list_benchmarks"]


@app.command("list", cls=PlainUsage)
def list_benchmarks() -> None:
    """List every benchmark with its level, scope and what it measures."""
    from clusterbench.registry import all_benchmarks
    from clusterbench.report.listing import render_benchmark_list

    render_benchmark_list(all_benchmarks(), _console())
