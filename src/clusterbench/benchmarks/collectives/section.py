"""The collectives part of the summary: busbw per op and group, size-by-op grids, node x node
busbw matrices of the node-pair groups, and the NCCL tuning sweep's table per op (each setting
against the default, with the verdict of :mod:`clusterbench.benchmarks.collectives.tune_analysis`).

Bandwidth is shown for sizes above :data:`LATENCY_MAX_BYTES` and latency at or below it, the
way nccl-tests output is read: busbw at large messages, time at small ones.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

from clusterbench.benchmarks.collectives import CollectivesMetrics
from clusterbench.benchmarks.collectives.tune_analysis import TuneRow, tune_rows
from clusterbench.schema import Measurement
from clusterbench.views.cells import Grid, Matrix, Section, format_bytes, format_value, metric_rows

__all__ = [
    "LATENCY_MAX_BYTES",
    "collective_grids",
    "collective_label",
    "node_pair_matrices",
    "section",
    "tune_grids",
]

LATENCY_MAX_BYTES = 64 * 2**10
_MISSING = "-"


def section(ms: list[Measurement], multi_host: bool) -> Section:
    rows = metric_rows(ms, label=_labeller(ms), multi_host=multi_host, group_ranks=True)
    matrices = node_pair_matrices(ms)
    grids = [*collective_grids(ms), *tune_grids(ms)]
    return Section("collectives", rows=rows, matrices=matrices, grids=grids)


def collective_label(m: Measurement) -> str | None:
    """Summary rows: the best back-to-back busbw of each op on each group."""
    if not CollectivesMetrics.busbw.matches(m) or m.params.get("mode") != "back_to_back":
        return None
    return f"{m.params.get('op')} busbw · {m.params.get('group')}"


def _labeller(ms: list[Measurement]) -> Callable[[Measurement], str | None]:
    """:func:`collective_label`, with the group's ranks where one op's group held different
    numbers of ranks (imported outputs of one GPU and of two): a row for each."""
    ranks: dict[str, set[object]] = defaultdict(set)
    for m in ms:
        text = collective_label(m)
        if text is not None:
            ranks[text].add(m.params.get("group_size"))

    def label(m: Measurement) -> str | None:
        text = collective_label(m)
        if text is None or len(ranks[text]) < 2:
            return text
        n = m.params.get("group_size")
        return f"{text} of {n} rank{'' if n == 1 else 's'}"

    return label


def _size(m: Measurement) -> int:
    size = m.params.get("size_bytes")
    return size if isinstance(size, int) else 0


def collective_grids(ms: Iterable[Measurement]) -> list[Grid]:
    """Per group and dtype: busbw by size and op (large sizes), latency by size and op (small)."""
    by_group: dict[tuple[str, str, int], list[Measurement]] = defaultdict(list)
    for m in ms:
        if CollectivesMetrics.busbw.matches(m) or CollectivesMetrics.latency_us.matches(m):
            size = m.params.get("group_size")
            key = (str(m.params.get("group")), str(m.params.get("dtype")), int(size or 0))
            by_group[key].append(m)
    grids = []
    for (group, dtype, size), group_ms in by_group.items():
        grids += _group_grids(group_ms, where=f"group {group} ({size} ranks, {dtype})")
    return grids


def _group_grids(ms: list[Measurement], *, where: str) -> list[Grid]:
    large = [m for m in ms if _size(m) > LATENCY_MAX_BYTES]
    busbw = [
        m for m in CollectivesMetrics.busbw.select(large) if m.params.get("mode") == "back_to_back"
    ]
    small = [m for m in CollectivesMetrics.latency_us.select(ms) if _size(m) <= LATENCY_MAX_BYTES]
    latency = _best_mode(small)
    grids = []
    if busbw:
        grids.append(_grid(f"busbw GB/s by size, back-to-back, {where}", busbw))
    if latency:
        grids.append(_grid(f"latency µs by size, {_modes(latency)}, {where}", latency))
    return grids


def _modes(ms: list[Measurement]) -> str:
    """What the latency cells measured: CUDA graph replay, back-to-back launches, or both."""
    modes = {m.params.get("mode") for m in ms}
    if modes == {"graph"}:
        return "CUDA graph"
    if "graph" in modes:
        return "CUDA graph where measured, else back-to-back"
    return "back-to-back"


def _best_mode(ms: list[Measurement]) -> list[Measurement]:
    """Graph-mode latency where measured (no launch overhead), else back-to-back."""
    rank = {"graph": 0, "back_to_back": 1}
    best: dict[tuple[object, int], Measurement] = {}
    for m in ms:
        mode = m.params.get("mode")
        if mode not in rank:
            continue
        key = (m.params.get("op"), _size(m))
        held = best.get(key)
        if held is None or rank[str(mode)] < rank[str(held.params.get("mode"))]:
            best[key] = m
    return list(best.values())


def _grid(title: str, ms: list[Measurement]) -> Grid:
    """One row per size as it is printed: sizes that print alike share a row (nccl-tests rounds
    each op's size to a multiple of its ranks, so all_gather's 32 MiB is a few bytes short of
    all_reduce's), unless one op has two of them."""
    ops = list(dict.fromkeys(str(m.params.get("op")) for m in ms))
    by_label: dict[str, list[Measurement]] = defaultdict(list)
    for m in sorted(ms, key=_size):
        by_label[format_bytes(_size(m))].append(m)
    rows = []
    for label, label_ms in by_label.items():
        shared = len({str(m.params.get("op")) for m in label_ms}) == len(label_ms)
        groups = [label_ms] if shared else [[m] for m in label_ms]
        for group in groups:
            cells = {str(m.params.get("op")): m.value for m in group}
            rows.append(
                (label, *(format_value(cells[op]) if op in cells else _MISSING for op in ops))
            )
    return Grid(title=title, header=("size", *ops), rows=rows)


def node_pair_matrices(ms: Iterable[Measurement]) -> list[Matrix]:
    """Per op (and dtype), back-to-back busbw of each node pair at the largest size measured
    for that op, as a symmetric node x node matrix (the busbw plateau; a pair whose sweep
    stopped short of that size has no cell)."""
    by_op: dict[tuple[str, str], list[Measurement]] = defaultdict(list)
    for m in ms:
        if (
            CollectivesMetrics.busbw.matches(m)
            and m.params.get("group_kind") == "node_pairs"
            and m.params.get("mode") == "back_to_back"
            and len(_pair_hosts(m)) == 2
        ):
            by_op[(str(m.params.get("op")), str(m.params.get("dtype")))].append(m)
    ops = [op for op, _ in by_op]
    matrices = []
    for (op, dtype), op_ms in by_op.items():
        largest = max(_size(m) for m in op_ms)
        cells: dict[tuple[str, str], float] = {}
        for m in op_ms:
            if _size(m) == largest:
                a, b = _pair_hosts(m)
                cells[(a, b)] = cells[(b, a)] = max(m.value, cells.get((a, b), m.value))
        which = f"{op} ({dtype})" if ops.count(op) > 1 else op
        title = f"{which} busbw between node pairs (largest size {format_bytes(largest)})"
        hosts = sorted({host for pair in cells for host in pair})
        matrices.append(Matrix(title=title, unit="GB/s", devices=hosts, cells=cells, corner="node"))
    return matrices


def _pair_hosts(m: Measurement) -> list[str]:
    return str(m.params.get("hosts") or "").split(",")


# --- the NCCL tuning sweep ---------------------------------------------------------------------

VERDICT_TEXT = {
    "default": "NCCL's default",
    "better": "faster",
    "inside_noise": "within the noise",
    "slower": "slower",
    "unconfirmed": "not confirmed",
    "wrong": "WRONG RESULTS",
    "unjudged": "too few repeats",
}
_TUNE_HEADER = (
    "size", "setting", "median µs", "busbw GB/s", "speed-up (95% CI)", "p (one-sided)", "confirmed",
    "NCCL's log shows", "verdict",
)  # fmt: skip


def tune_grids(ms: Iterable[Measurement]) -> list[Grid]:
    """Per op (and dtype): every setting at every size against the default measured there (p:
    the one-sided Mann-Whitney test in the direction of the speed-up)."""
    by_op: dict[tuple[str, str], list[TuneRow]] = defaultdict(list)
    for row in tune_rows(ms):
        by_op[(row.op, str(row.latency.params.get("dtype")))].append(row)
    grids = []
    for (op, dtype), rows in by_op.items():
        rows.sort(key=lambda r: (r.size_bytes, r.kind != "default"))
        ranks = rows[0].latency.params.get("group_size")
        title = f"NCCL settings against the default, {op} (world, {ranks} ranks, {dtype})"
        grids.append(Grid(title=title, header=_TUNE_HEADER, rows=[_tune_cells(r) for r in rows]))
    return grids


def _tune_cells(r: TuneRow) -> tuple[str, ...]:
    p = r.latency.params
    gain, p_value = _MISSING, r.p_value if (r.gain or 0) >= 1 else r.p_slower
    if r.gain is not None and r.gain_ci is not None:
        gain = f"{r.gain:.2f}x ({r.gain_ci[0]:.2f}-{r.gain_ci[1]:.2f})"
    return (
        format_bytes(r.size_bytes),
        r.setting,
        format_value(r.latency.value),
        format_value(r.busbw),
        gain,
        _MISSING if p_value is None else f"{p_value:.1g}",
        "yes" if p.get("confirmed") is True else "no",
        log_shows(r.latency),
        VERDICT_TEXT[r.verdict],
    )


def log_shows(m: Measurement) -> str:
    """What NCCL's log said of the row's communicator and op, in short: the algorithm and
    protocol the op ran (with --nccl-debug) and the communicator's channel count."""
    p = m.params
    parts = []
    if p.get("log_algo"):
        parts.append(f"{p.get('log_algo')}/{p.get('log_proto')}")
    if p.get("log_channels") is not None:
        parts.append(f"{p.get('log_channels')} channels")
    return ", ".join(parts) or _MISSING
