"""``clusterbench schema``: the JSON Schema of results.json."""

from __future__ import annotations

import json

import typer

from clusterbench.cli.common import PlainUsage, app

__all__ = ["schema"]


@app.command(cls=PlainUsage)
def schema() -> None:
    """Print the JSON Schema of results.json."""
    from clusterbench.schema import results_json_schema

    typer.echo(json.dumps(results_json_schema(), indent=2))
