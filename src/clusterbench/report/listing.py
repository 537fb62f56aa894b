"""``clusterbench list``: the registered benchmarks as a table."""

from __future__ import annotations

from collections.abc import Iterable, Set
from typing import Protocol

from rich.console import Console
from rich.table import Table

__all__ = ["Listed", "render_benchmark_list"]


class Listed(Protocol):
    """What the list shows of a benchmark (a registry declaration has it all)."""

    @property
    def name(self) -> str: ...
    @property
    def level(self) -> int: ...
    @property
    def scope(self) -> str: ...
    @property
    def suites(self) -> Set[str]: ...
    @property
    def devices(self) -> Set[str]: ...
    @property
    def description(self) -> str: ...


LEVEL_NAMES = {0: "self-test", 1: "one node", 2: "network", 3: "training"}


def render_benchmark_list(specs: Iterable[Listed], console: Console) -> None:
    """Name, level, scope, suites, device types and description of each benchmark, by level."""
    table = Table(title="benchmarks", title_justify="left", header_style="bold")
    table.add_column("name", style="bold")
    table.add_column("level")
    table.add_column("scope")
    table.add_column("suites")
    table.add_column("devices")
    table.add_column("description")
    order = ("quick", "standard", "full")
    for spec in sorted(specs, key=lambda s: s.level):
        level = LEVEL_NAMES.get(spec.level)
        table.add_row(
            spec.name,
            f"{spec.level} ({level})" if level else str(spec.level),
            spec.scope,
            ", ".join(s for s in order if s in spec.suites) or "(--only)",
            ", ".join(sorted(spec.devices)),
            spec.description,
        )
    console.print(table)
