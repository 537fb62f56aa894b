"""A deadline for one benchmark on one rank.

A benchmark that hangs (a peer that never arrives, a wedged kernel) cannot be interrupted from
Python, so when the deadline passes the watchdog records what happened and ends the process;
the launcher then stops the other ranks and the run is assembled from what every rank wrote.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from types import TracebackType

EXIT_TIMEOUT = 124


class Deadline:
    """Ends the process ``timeout_s`` after entry unless the block finished.

    When ``grace_if()`` is true at the deadline (the rank is only waiting for others), it waits
    ``grace_s`` more, so that the rank that really hangs reports itself first.
    """

    def __init__(
        self,
        timeout_s: float,
        on_expire: Callable[[], None],
        *,
        grace_s: float = 0.0,
        grace_if: Callable[[], bool] | None = None,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout must be positive, got {timeout_s}")
        self._timer = threading.Timer(timeout_s, self._expire)
        self._timer.daemon = True
        self._on_expire = on_expire
        self._grace_s = grace_s
        self._grace_if = grace_if
        self._done = threading.Event()

    def _expire(self) -> None:
        waiting = self._grace_if is not None and self._grace_s > 0 and self._grace_if()
        if waiting and self._done.wait(self._grace_s):
            return
        if self._done.is_set():
            return
        try:
            self._on_expire()
        finally:
            sys.stderr.flush()
            os._exit(EXIT_TIMEOUT)

    def __enter__(self) -> Deadline:
        self._timer.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._done.set()
        self._timer.cancel()
