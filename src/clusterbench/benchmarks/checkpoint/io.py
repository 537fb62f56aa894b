"""Helpers of the ``checkpoint`` benchmark: walking a nested state dict, bounding it to a size,
sampling and comparing tensors, making files durable and cold, and the filesystem type of a
folder."""

from __future__ import annotations

import os
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import torch

from clusterbench.hardware.sysfs import mount_of, read_text

__all__ = [
    "bounded_state",
    "bounded_weights",
    "check",
    "drop_cache",
    "files",
    "filesystem_of",
    "fsync_files",
    "nbytes",
    "pick_within",
    "sample",
    "tensors",
    "unique",
    "zeros_like",
]


def tensors(tree: Any, prefix: str = "") -> dict[str, torch.Tensor]:
    """Every tensor in a nested dict/list, keyed by its path."""
    if isinstance(tree, torch.Tensor):
        return {prefix: tree}
    items = (
        tree.items()
        if isinstance(tree, dict)
        else enumerate(tree)
        if isinstance(tree, list | tuple)
        else ()
    )
    out: dict[str, torch.Tensor] = {}
    for key, value in items:
        out.update(tensors(value, f"{prefix}/{key}" if prefix else str(key)))
    return out


def nbytes(tree: Any) -> int:
    """Bytes of the tensors in ``tree``, a tensor held under two keys (tied weights) once:
    torch.save writes one storage once."""
    seen: set[tuple[int, int, int]] = set()
    total = 0
    for t in tensors(tree).values():
        size = t.numel() * t.element_size()
        ident = (t.untyped_storage().data_ptr(), int(t.storage_offset()), size)
        if size and ident in seen:
            continue
        seen.add(ident)
        total += size
    return total


K = TypeVar("K", bound=Hashable)


def pick_within(sizes: Sequence[tuple[K, int]], max_bytes: int) -> list[K]:
    """The keys, in order, whose sizes fit in ``max_bytes`` taken greedily (one that does not
    fit is passed over, the next may fit); the smallest alone when none fits."""
    picked: list[K] = []
    total = 0
    for key, size in sizes:
        if total + size <= max_bytes:
            picked.append(key)
            total += size
    if not picked and sizes:
        picked.append(min(sizes, key=lambda ks: ks[1])[0])
    return picked


def bounded_state(state: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """The part of a ``{"model": ..., "optim": ...}`` state (``get_state_dict``'s) of at most
    ``max_bytes``: whole parameters, each with its optimizer state (AdamW's exp_avg,
    exp_avg_sq, step), in the model's order; the whole state when it fits."""
    if nbytes(state) <= max_bytes:
        return state
    model, optim = state["model"], state["optim"]
    per_param = optim.get("state", {})
    sizes = [(k, nbytes([t, per_param.get(k, {})])) for k, t in model.items()]
    keep = set(pick_within(sizes, max_bytes))
    groups = [
        {**g, "params": [p for p in g.get("params", []) if p in keep]}
        for g in optim.get("param_groups", [])
    ]
    return {
        "model": {k: t for k, t in model.items() if k in keep},
        "optim": {
            "state": {k: v for k, v in per_param.items() if k in keep},
            "param_groups": groups,
        },
    }


def bounded_weights(weights: dict[str, torch.Tensor], max_bytes: int) -> dict[str, torch.Tensor]:
    """The first whole tensors of a flat dict (safetensors' weights) of at most ``max_bytes``."""
    if nbytes(weights) <= max_bytes:
        return weights
    keep = set(pick_within([(k, nbytes(t)) for k, t in weights.items()], max_bytes))
    return {k: t for k, t in weights.items() if k in keep}


def sample(tree: Any, num: int) -> dict[str, torch.Tensor]:
    """Copies (on the host) of ``num`` tensors spread evenly over the state."""
    flat = tensors(tree)
    keys = sorted(flat)
    n = min(num, len(keys))
    picked = {keys[round(i * (len(keys) - 1) / max(1, n - 1))] for i in range(n)}
    return {k: flat[k].detach().to("cpu", copy=True) for k in picked}


def check(expected: dict[str, torch.Tensor], loaded: Any, *, fmt: str) -> None:
    flat = tensors(loaded)
    for key, want in expected.items():
        got = flat.get(key)
        if got is None or not torch.equal(got.detach().cpu(), want):
            raise RuntimeError(
                f"checkpoint: {fmt}: loaded tensor {key!r} differs from the saved one"
            )


def fsync_files(paths: list[Path]) -> None:
    """Make the files durable: a save is done when its bytes are on the storage."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def drop_cache(paths: list[Path]) -> None:
    """Drop the (written, synced) files from the page cache, so that a load reads the storage."""
    if not hasattr(os, "posix_fadvise"):
        return
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def unique(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Contiguous tensors, each storage once: safetensors refuses shared (tied) tensors."""
    seen: set[tuple[int, int]] = set()
    out = {}
    for key, t in weights.items():
        ident = (t.untyped_storage().data_ptr(), int(t.storage_offset()))
        if ident not in seen:
            seen.add(ident)
            out[key] = t.detach().contiguous()
    return out


def zeros_like(tree: Any) -> Any:
    if isinstance(tree, torch.Tensor):
        return torch.zeros_like(tree)
    if isinstance(tree, dict):
        return {k: zeros_like(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [zeros_like(v) for v in tree]
    return tree


def filesystem_of(path: Path) -> str:
    """Type of the filesystem holding ``path`` (the longest mount point above it), from
    /proc/mounts; 'unknown' where that file does not exist."""
    mount = mount_of(read_text(Path("/proc/mounts")) or "", str(path.resolve()))
    return mount[1] if mount else "unknown"
