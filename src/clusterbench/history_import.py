"""What ``clusterbench history import`` records: the run folders at or under the paths given.

A run folder is a folder holding a results.json; the history is an index over them that this
command rebuilds (:mod:`clusterbench.history_db` records each one).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = ["find_run_folders"]


def find_run_folders(paths: Sequence[Path], *, max_depth: int = 3) -> tuple[list[Path], list[str]]:
    """Run folders (each holding a results.json) at or under ``paths``, and one line for each
    path that is none and holds none (within ``max_depth`` folders) or is a run folder without
    its results.json.  A run folder's own subfolders are not searched."""
    found: list[Path] = []
    problems: list[str] = []
    for path in paths:
        if (path / "results.json").is_file() or path.name == "results.json":
            found.append(path.parent if path.name == "results.json" else path)
        elif not path.exists():
            problems.append(f"{path}: no such file or folder")
        elif not path.is_dir():
            problems.append(f"{path}: not a run folder or results.json")
        else:
            before = len(found)
            _walk(path, max_depth, found, problems)
            if len(found) == before and not any(p.startswith(f"{path}") for p in problems):
                problems.append(f"{path}: no run folders (with a results.json) in it")
    unique: dict[Path, Path] = {}
    for folder in found:  # a folder given twice (itself and in its parent) is one run
        unique.setdefault(folder.resolve(), folder)
    return list(unique.values()), problems


def _walk(folder: Path, depth: int, found: list[Path], problems: list[str]) -> None:
    if (folder / "results.json").is_file():
        found.append(folder)
        return
    if (folder / "ranks").is_dir():
        problems.append(f"{folder}: a run folder without results.json (its run did not finish "
                        "writing it)")  # fmt: skip
        return
    if depth == 0:
        return
    try:
        children = sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError as exc:
        problems.append(f"{folder}: cannot read it ({exc.strerror})")
        return
    for child in children:
        _walk(child, depth - 1, found, problems)
