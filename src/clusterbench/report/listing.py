"""``clusterbench list``: the registered benchmarks as a table."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from clusterbench.benchmarks.registry import BenchmarkSpec

__all__ = ["render_benchmark_list"]

LEVEL_NAMES = {0: "self-test", 1: "one node", 2: "network", 3: "training"}


def render_benchmark_list(specs: Iterable[BenchmarkSpec], console: Console) -> None:
    """Name, level, scope, device types and description of each benchmark."""
    table = Table(title="benchmarks", title_justify="left", header_style="bold")
    table.add_column("name", style="bold")
    table.add_column("level")
    table.add_column("scope")
    table.add_column("devices")
    table.add_column("description")
    for spec in specs:
        level = LEVEL_NAMES.get(spec.level)
        table.add_row(
            spec.name,
            f"{spec.level} ({level})" if level else str(spec.level),
            spec.scope,
            ", ".join(sorted(spec.devices)),
            spec.description,
        )
    console.print(table)
