"""The dataloader part of the summary: per dataset, the loader's rate at each setting swept,
against the rate the training step consumes, and how busy the device stayed training from the
loader at the best and the default settings."""

from __future__ import annotations

import statistics
from collections import defaultdict

from clusterbench.benchmarks.dataloader import DataloaderMetrics
from clusterbench.schema import Measurement
from clusterbench.views.cells import Grid, Section, format_value

__all__ = ["section"]

_D = DataloaderMetrics
_SETTING = ("num_workers", "pin_memory", "prefetch_factor")


def _setting(m: Measurement) -> tuple[str, str, str]:
    workers, pin, prefetch = (m.params.get(k) for k in _SETTING)
    return (str(workers), "yes" if pin else "no", "-" if prefetch is None else str(prefetch))


def _order(setting: tuple[str, str, str]) -> tuple[int, str, int]:
    workers, pin, prefetch = setting
    return (
        int(workers) if workers.isdigit() else 0,
        pin,
        int(prefetch) if prefetch.isdigit() else 0,
    )


def section(ms: list[Measurement], multi_host: bool) -> Section:
    datasets = list(dict.fromkeys(str(m.params.get("dataset")) for m in ms))
    grids = [_dataset_grid([m for m in ms if m.params.get("dataset") == d], d) for d in datasets]
    return Section("dataloader", grids=[g for g in grids if g is not None])


def _dataset_grid(ms: list[Measurement], dataset: str) -> Grid | None:
    rates: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for m in _D.loader_samples_per_s.select(ms):
        rates[_setting(m)].append(m.value)
    if not rates:
        return None
    busy: dict[tuple[str, str, str], list[Measurement]] = defaultdict(list)
    for m in _D.gpu_busy.select(ms):
        busy[_setting(m)].append(m)
    steps = _D.step_samples_per_s.select(ms)
    step = statistics.median(m.value for m in steps) if steps else None
    devices = len({(m.host, m.device) for m in _D.loader_samples_per_s.select(ms)})
    several = devices > 1
    rows = []
    for setting in sorted(rates, key=_order):
        values = rates[setting]
        median = statistics.median(values)
        spread = (format_value(min(values)), format_value(max(values))) if several else ()
        of_step = "-" if not step else f"{format_value(median / step)}x"
        rows.append((*setting, format_value(median), *spread, of_step, _busy(busy.get(setting))))
    header = ("workers", "pin", "prefetch", "samples/s", *(("min", "max") if several else ()),
              "vs step", "busy %")  # fmt: skip
    model = steps[0].params.get("model") if steps else None
    consumes = f" against the {step:,.0f} samples/s the {model} step consumes" if step else ""
    over = f" (median over {devices} devices)" if several else ""
    title = (f"dataloader, {dataset}: the loader's samples/s by setting{consumes}{over}; "
             "busy: the device's busy time training from the loader at the sweep's best and "
             "at PyTorch's default setting")  # fmt: skip
    return Grid(title=title, header=header, rows=rows)


def _busy(ms: list[Measurement] | None) -> str:
    """The device busy % at this setting, and which choice it was (best, default)."""
    if not ms:
        return "-"
    choices = "/".join(sorted({str(m.params.get("choice")) for m in ms}))
    return f"{format_value(statistics.median(m.value for m in ms))} ({choices})"
