"""Progress bars for a run: one per benchmark, drawn by rank 0 only."""

from __future__ import annotations

import threading
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

__all__ = ["BenchmarkBar", "RunProgress", "end_displays"]


class BenchmarkBar:
    """The bar of one benchmark; satisfies runtime.dist.Progress."""

    def __init__(self, progress: Progress, task: TaskID) -> None:
        self._progress = progress
        self._task = task

    def start(self, total: float) -> None:
        self._progress.update(self._task, total=total, completed=0)

    def advance(self, amount: float = 1.0) -> None:
        self._progress.advance(self._task, amount)

    def finish(self, note: str = "") -> None:
        task = next(t for t in self._progress.tasks if t.id == self._task)  # ids outlive removals
        total = task.total if task.total is not None else 1.0
        desc = task.description + (f" [dim]{note}" if note else "")
        self._progress.update(self._task, total=total, completed=total, description=desc)


_LIVE: set[RunProgress] = set()
"""The displays drawn now in this process, for :func:`end_displays`."""


def end_displays() -> None:
    """End every display still drawn in this process, from any thread: its last frame, the
    end of its line and (on a terminal) the cursor shown again.  For a process about to be
    ended by a signal, which would otherwise leave the terminal's next line glued to a bar."""
    for display in list(_LIVE):
        display.stop()


class RunProgress:
    def __init__(self, console: Console | None = None) -> None:
        self._lock = threading.Lock()
        self._stopped = False
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console or Console(stderr=True),
        )

    def bar(self, name: str) -> BenchmarkBar:
        return BenchmarkBar(self._progress, self._progress.add_task(name, total=None))

    def clear(self, note: str = "") -> None:
        """Remove every bar (a soak's finished round), leaving ``note`` printed above the
        next ones: a soak of many rounds shows one line a round, not a bar per benchmark."""
        for task in list(self._progress.task_ids):
            self._progress.remove_task(task)
        if note:
            self._progress.console.print(note, highlight=False)

    def __enter__(self) -> RunProgress:
        self._progress.start()
        _LIVE.add(self)
        return self

    def stop(self) -> None:
        """Draw the last frame and end its line, once.  Frame and line end go out in one
        write (rich writes them as two where the console is not a terminal), so a process
        killed here leaves no half line for the next one to be glued to."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            with self._progress.console:  # one buffer, flushed as one write
                self._progress.stop()
            _LIVE.discard(self)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
