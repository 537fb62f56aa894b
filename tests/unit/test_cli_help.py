"""Every command's --help in plain words: required arguments bare in the usage line (not in
braces), and each option's value named (``--out DIR``, ``--match host|gpu``), not typed
(``<path>``, ``<list[str]>``)."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from clusterbench.cli import app

COMMANDS = [
    ["run"], ["launch"], ["report"], ["export"], ["compare"], ["cost"], ["predict"],
    ["doctor"], ["info"], ["list"], ["schema"], ["history", "show"], ["history", "import"],
    ["baseline", "build"], ["import", "nccl-tests"], ["import", "dcgm-diag"], ["analyze"],
]  # fmt: skip
_TYPED = re.compile(r"^\s+(?:(?:-\w, )?--[\w-]+|[A-Z][A-Z|.\[\] ]*) <[^>]+>", re.M)
"""An option's or argument's Python type in angle brackets (``--out <path>``, ``DIR
<list[Path]>``) where its metavar should name the value."""


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_names_values_plainly(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    usage = next(line for line in result.output.splitlines() if "Usage:" in line)
    assert "{" not in usage and "}" not in usage, usage
    assert not _TYPED.findall(result.output), _TYPED.findall(result.output)


def test_required_arguments_are_bare_and_optional_ones_bracketed() -> None:
    out = CliRunner().invoke(app, ["report", "--help"], env={"COLUMNS": "100"}).output
    assert "report [OPTIONS] RUN|BASE [NEW]" in out
    out = CliRunner().invoke(app, ["compare", "--help"], env={"COLUMNS": "100"}).output
    assert "compare [OPTIONS] BASE NEW" in out and "--match host|gpu" in out


@pytest.mark.parametrize("command", [["run"], ["launch"], ["report"], ["export"],
                                     ["baseline", "build"], ["import", "nccl-tests"],
                                     ["import", "dcgm-diag"], ["analyze"]],
                         ids=" ".join)  # fmt: skip
def test_every_command_that_writes_takes_o_and_out(command: list[str]) -> None:
    out = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "120"}).output
    assert re.search(r"^\s+-o, --out[ ,]", out, re.M), out


def test_cost_help_keeps_its_price_table() -> None:
    """The price table keeps its lines (it was rewrapped into one paragraph)."""
    out = CliRunner().invoke(app, ["cost", "--help"], env={"COLUMNS": "100"}).output
    lines = out.splitlines()
    assert "    cloud    --gpu-hour PRICE ($ per GPU-hour)" in lines
    i = lines.index("    cloud    --gpu-hour PRICE ($ per GPU-hour)")
    assert lines[i + 1].startswith("    on-prem  --capex-per-node $")
    assert lines[i + 3].startswith("    several  --prices FILE.toml")


def _first_sentence(text: str) -> str:
    flat = " ".join(text.split("\n\n")[0].split())
    found = re.match(r".*?\.(?=\s|$)", flat)
    return found.group(0) if found else flat


@pytest.mark.parametrize("group", [[], ["history"], ["baseline"], ["import"]], ids=str)
def test_command_lists_show_each_first_sentence_whole(group: list[str]) -> None:
    """``clusterbench --help`` listed "Run a suite on every GPU of this node (or join..."."""
    import click
    import typer

    out = CliRunner().invoke(app, [*group, "--help"], env={"COLUMNS": "80"}).output
    listing = out[out.index("Commands:") :]
    assert "..." not in listing, listing
    command = typer.main.get_command(app)
    ctx = click.Context(command)
    for name in group:
        command = command.get_command(ctx, name)  # type: ignore[attr-defined]
    bare = "".join(listing.split())  # the wrap breaks lines at spaces and hyphens (on-prem)
    for name in command.list_commands(ctx):  # type: ignore[attr-defined]
        help_text = command.get_command(ctx, name).help  # type: ignore[attr-defined]
        sentence = _first_sentence(help_text or "")
        assert sentence and "".join(f"{name} {sentence}".split()) in bare, (name, sentence)


def test_ray_driver_help_names_values_plainly() -> None:
    """``python -m clusterbench.ray --help`` showed ``<list[str]>``, ``<int>`` and ``<str>``."""
    from clusterbench.ray._cli import app as ray_app

    out = CliRunner().invoke(ray_app, ["--help"], env={"COLUMNS": "100"}).output
    assert "--nodes N " in out and "--env KEY=VALUE " in out, out
    assert not re.search(r"<[a-z][\w\[\], ]*>", out), out
