"""A reader that stops early (``clusterbench list | head``) ends the command quietly with exit 0,
not 1, the code of a ``fail`` finding; through rich's console and through click's echo."""

from __future__ import annotations

import io
import os
import sys

import pytest

from clusterbench import cli
from clusterbench.cli.common import _console


def _closed_pipe() -> io.TextIOWrapper:
    """The write end of a pipe whose reader has gone (set as stdout in the test itself: pytest's
    capture sets its own stdout again between a fixture and the test)."""
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    return io.TextIOWrapper(io.FileIO(write_fd, "w"), encoding="utf-8")


def test_console_on_a_closed_pipe_exits_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdout", _closed_pipe())
    console = _console()
    with pytest.raises(SystemExit) as done:
        console.print("a line\n" * 100)
    assert done.value.code == 0
    assert console.quiet
    console.print("nothing more is written")  # quiet: no second broken pipe


def test_echo_on_a_closed_pipe_exits_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdout", _closed_pipe())
    monkeypatch.setattr(sys, "argv", ["clusterbench", "--help"])
    with pytest.raises(SystemExit) as done:
        cli.main()
    assert done.value.code == 0


def test_a_failing_exit_code_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["clusterbench", "no-such-command"])
    with pytest.raises(SystemExit) as done:
        cli.main()
    assert done.value.code == 2
