"""The bars' last frame and its line end go out in one write, once, from any thread: a rank
ended by a signal right after it leaves no half line for the launcher's next line."""

from __future__ import annotations

import io
import threading

from rich.console import Console

from clusterbench.report.progress import RunProgress, end_displays


class _Writes(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


def _console(out: _Writes, *, terminal: bool) -> Console:
    return Console(file=out, force_terminal=terminal, width=80, color_system=None)


def test_the_last_frame_and_its_line_end_are_one_write_off_a_terminal() -> None:
    out = _Writes()
    with RunProgress(_console(out, terminal=False)) as progress:
        progress.bar("collectives").start(1)
    assert len(out.writes) == 1, out.writes
    assert "collectives" in out.writes[0] and out.writes[0].endswith("\n"), out.writes


def test_the_last_frame_and_its_line_end_are_one_write_on_a_terminal() -> None:
    out = _Writes()
    progress = RunProgress(_console(out, terminal=True))
    with progress:
        progress.bar("gemm").start(1)
        before = len(out.writes)
    last = out.writes[before:]
    assert len(last) == 1, last
    assert last[0].endswith("\n") or last[0].endswith("\x1b[?25h"), repr(last[0])
    assert "\n" in last[0] and "\x1b[?25h" in last[0], repr(last[0])  # line ended, cursor shown


def test_end_displays_from_another_thread_ends_the_line_once() -> None:
    out = _Writes()
    progress = RunProgress(_console(out, terminal=False))
    with progress:
        progress.bar("collectives").start(1)
        watcher = threading.Thread(target=end_displays)
        watcher.start()
        watcher.join()
        assert len(out.writes) == 1 and out.writes[0].endswith("\n"), out.writes
    assert len(out.writes) == 1, out.writes  # the main thread's own stop adds nothing
    end_displays()  # none drawn now: nothing happens
    assert len(out.writes) == 1, out.writes
