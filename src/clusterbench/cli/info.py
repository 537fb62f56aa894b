"""``clusterbench info``: this node's GPUs, topology, CPU, NICs and software versions."""

from __future__ import annotations

from typing import Annotated

import typer

from clusterbench.cli.common import PlainUsage, _console, app

__all__ = ["info"]


@app.command(cls=PlainUsage)
def info(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable JSON.")] = False,
) -> None:
    """Show this node's GPUs, topology, CPU, NICs and software versions."""
    from clusterbench.hardware.probe import probe_host
    from clusterbench.report.info import render_host_info

    host = probe_host()
    if as_json:
        typer.echo(host.model_dump_json(indent=2))
        return
    render_host_info(host, _console())
