"""Files replaced whole: a reader never sees half of one."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["write_text_atomic"]


def write_text_atomic(path: Path, text: str) -> None:
    """``text`` to a temporary file beside ``path`` (flushed to the disk), then renamed over
    it.  On an OSError the temporary file is removed, ``path`` stays as it was, and the error
    is raised."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(text.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
