"""Progress bars for a run: one per benchmark, drawn by rank 0 only."""

from __future__ import annotations

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

__all__ = ["BenchmarkBar", "RunProgress"]


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


class RunProgress:
    def __init__(self, console: Console | None = None) -> None:
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
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._progress.stop()
