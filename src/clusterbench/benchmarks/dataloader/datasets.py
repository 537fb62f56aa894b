"""The datasets on disk of the ``dataloader`` benchmark, written before and read while it runs.

- images: encoded files (JPEG or PNG, Pillow) decoded per sample, randomly cropped to the
  model's input side, randomly flipped, scaled to [0, 1] and normalised with ImageNet's mean
  and standard deviation; plain torch ops after decoding, as torchvision's transforms do.
- tokens: one binary shard of uint16 (uint32 past 65,536 ids) token ids, as nanoGPT and
  llm.c store them; sample i is the window [i*T, i*T + T + 1), read through numpy.memmap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

from clusterbench.benchmarks.dataloader.kinds import ImageFormat
from clusterbench.benchmarks.training.workload import Batch, Workload

__all__ = [
    "IMAGE_SUFFIXES",
    "ImageFiles",
    "ImageFormat",
    "TokenShard",
    "write_images",
    "write_tokens",
]
IMAGE_SUFFIXES: dict[ImageFormat, str] = {"jpeg": ".jpg", "png": ".png"}
_JPEG_QUALITY = 90
# ImageNet channel statistics (torchvision's reference training scripts)
_MEAN = (0.485, 0.456, 0.406)
_STD = (0.229, 0.224, 0.225)
_UINT16_IDS = 2**16


class ImageFiles(Dataset[Batch]):
    """Encoded image files decoded per sample, randomly cropped to ``crop`` and flipped."""

    def __init__(self, paths: list[Path], *, labels: list[int], crop: int) -> None:
        self.paths, self.labels, self.crop = paths, labels, crop
        self._mean = torch.tensor(_MEAN).view(3, 1, 1)
        self._std = torch.tensor(_STD).view(3, 1, 1)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> Batch:
        from PIL import Image

        with Image.open(self.paths[i]) as im:
            img = torch.from_numpy(np.array(im.convert("RGB")))  # H, W, 3 uint8
        h, w, c = img.shape[0], img.shape[1], self.crop
        top = int(torch.randint(0, h - c + 1, ()))
        left = int(torch.randint(0, w - c + 1, ()))
        img = img[top : top + c, left : left + c]
        if bool(torch.rand(()) < 0.5):
            img = img.flip(1)
        x = img.permute(2, 0, 1).float().div_(255.0)
        return (x - self._mean) / self._std, torch.tensor(self.labels[i])


class TokenShard(Dataset[Batch]):
    """Windows of ``seq_len + 1`` token ids from a binary shard: (inputs, next-token targets)."""

    def __init__(self, path: Path, *, dtype: type[np.unsignedinteger[Any]], seq_len: int) -> None:
        self.path, self.dtype, self.seq_len = path, dtype, seq_len
        num_tokens = path.stat().st_size // np.dtype(dtype).itemsize
        self._len = (num_tokens - 1) // seq_len
        self._data: np.memmap[Any, Any] | None = None  # opened lazily, once per worker

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_data"] = None  # never pickle the mapping (spawned workers map their own)
        return state

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i: int) -> Batch:
        if self._data is None:
            self._data = np.memmap(self.path, dtype=self.dtype, mode="r")
        start = i * self.seq_len
        window = torch.from_numpy(self._data[start : start + self.seq_len + 1].astype(np.int64))
        return window[:-1], window[1:]


def write_images(
    folder: Path, *, num: int, size: int, fmt: ImageFormat, workload: Workload
) -> ImageFiles:
    """``num`` encoded ``size`` x ``size`` RGB files for ``workload``'s input side and classes.

    The pictures are smooth random fields plus noise: they compress like photographs, unlike
    pure noise (far larger files) or flat colour (far smaller).
    """
    from PIL import Image

    crop = int(workload.make_batch(1)[0].shape[-1])
    if size < crop:
        raise ValueError(f"dataloader: image_size {size} is below the model's input side {crop}")
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    paths = []
    for i in range(num):
        coarse = rng.integers(0, 256, (max(2, size // 16),) * 2 + (3,), dtype=np.uint8)
        smooth = np.asarray(Image.fromarray(coarse).resize((size, size), Image.Resampling.BILINEAR))
        noise = rng.integers(-12, 13, smooth.shape)
        pixels = np.clip(smooth.astype(np.int16) + noise, 0, 255).astype(np.uint8)
        path = folder / f"{i:07d}{IMAGE_SUFFIXES[fmt]}"
        Image.fromarray(pixels).save(path, quality=_JPEG_QUALITY)
        paths.append(path)
    labels = rng.integers(0, _num_classes(workload.model), num).tolist()
    return ImageFiles(paths, labels=labels, crop=crop)


def write_tokens(path: Path, *, num: int, workload: Workload) -> TokenShard:
    """A shard of ``num`` windows of the decoder's sequence length, ids below its vocabulary."""
    seq_len = workload.tokens_per_sample
    vocab = _vocab_size(workload.model)
    dtype = np.uint16 if vocab <= _UINT16_IDS else np.uint32
    shard = np.memmap(path, dtype=dtype, mode="w+", shape=(num * seq_len + 1,))
    shard[:] = np.random.default_rng(0).integers(0, vocab, shard.shape, dtype=dtype)
    shard.flush()
    del shard
    return TokenShard(path, dtype=dtype, seq_len=seq_len)


def _vocab_size(model: nn.Module) -> int:
    embedding = next((m for m in model.modules() if isinstance(m, nn.Embedding)), None)
    if embedding is None:
        raise ValueError("dataloader: the token dataset needs a decoder (no nn.Embedding found)")
    return int(embedding.num_embeddings)


def _num_classes(model: nn.Module) -> int:
    heads = [m for m in model.modules() if isinstance(m, nn.Linear)]
    if not heads:
        raise ValueError("dataloader: the image dataset needs a classifier (no nn.Linear found)")
    return int(heads[-1].out_features)
