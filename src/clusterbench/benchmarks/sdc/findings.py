"""Verdicts on ``sdc``: the device whose GEMM results differ bit for bit from its like peers'
(``sdc.mismatch``), the device whose repeats differ among themselves (``sdc.unstable``), and
what a clean check compared (``sdc.ok``).

The vote is :func:`clusterbench.benchmarks.sdc.vote.vote` over the repeat hashes results.json
recorded, the same the benchmark used, within each group of like devices (GPU model, driver,
torch, CUDA and cuBLAS; on CPUs the model, torch and threads).  Severities: fail on GPUs; on CPU
workers info, as for the project's other CPU verdicts (CPU BLAS libraries promise bitwise equal
results only in modes such as oneMKL's conditional numerical reproducibility), but every
finding names the rank either way.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from clusterbench.benchmarks.sdc.compare import Comparison, case_key, comparisons, diffs
from clusterbench.benchmarks.sdc.vote import differing_repeats, modal
from clusterbench.judging.measurements import as_number, gpu_severity, scope_label
from clusterbench.schema import Finding, Measurement, Results
from clusterbench.thresholds import Thresholds

__all__ = ["findings"]


def findings(results: Results, thresholds: Thresholds) -> list[Finding]:
    """Mismatching and unstable devices (fail; info on CPU workers), else what was compared."""
    compared = comparisons(results)
    if not compared:
        return []
    out = [*_mismatch_findings(results, compared), *_unstable_findings(results, compared)]
    return out or [_ok_finding(compared)]


# --- who and what ----------------------------------------------------------------------------


def _who(results: Results, m: Measurement) -> str:
    """``rank 1 (host node0, cuda:1, GPU 1, uuid GPU-...)``; the parts known."""
    parts = [f"host {m.host}", m.device]
    index = _gpu_index(m.device)
    if index is not None:
        parts.append(f"GPU {index}")
        uuid = _device_uuid(results, m)
        if uuid:
            parts.append(f"uuid {uuid}")
    return f"rank {m.rank} ({', '.join(parts)})"


def _device_uuid(results: Results, m: Measurement) -> str | None:
    index = _gpu_index(m.device)
    return None if index is None else _uuid(results, m.host, index)


def _gpu_index(device: str) -> int | None:
    kind, _, index = device.partition(":")
    return int(index) if kind == "cuda" and index.isdigit() else None


def _uuid(results: Results, host: str, index: int) -> str | None:
    for h in results.hosts:
        if h.hostname == host:
            return next((g.uuid for g in h.gpus if g.index == index), None)
    return None


def _repeats_text(indices: list[int], total: int) -> str:
    """``repeat 3 of 5 differs``, ``repeats 1, 3 of 5 differ``, ``all 5 repeats differ``."""
    if len(indices) == total:
        return f"all {total} repeats differ" if total > 1 else "its one run differs"
    if len(indices) == 1:
        return f"repeat {indices[0]} of {total} differs"
    return f"repeats {', '.join(str(i) for i in indices)} of {total} differ"


def _elements(m: Measurement) -> int | None:
    p = {k: as_number(m.params.get(k)) for k in ("m", "n", "k", "depth")}
    if any(v is None for v in p.values()):
        return None
    rows, n, k, depth = (int(v or 0) for v in p.values())
    return rows * (n if depth % 2 else k)


def _diff_text(m: Measurement, found: tuple[float, float] | None) -> str:
    if found is None:
        return ""
    count, gap = found
    total = _elements(m)
    of = f" of {total:,}" if total else ""
    verb = "differs" if int(count) == 1 else "differ"
    return f": {int(count):,}{of} elements {verb}, max |difference| {gap:.3g}"


def _planted(results: Results) -> int | None:
    """The rank ``sdc.plant_flip_rank`` made wrong on purpose, if the run's config set one."""
    sdc = results.run.config.get("benchmarks", {}).get("sdc", {})
    rank = sdc.get("plant_flip_rank", -1) if isinstance(sdc, dict) else -1
    return rank if isinstance(rank, int) and rank >= 0 else None


def _fix(results: Results, ranks: list[int]) -> str:
    planted = _planted(results)
    if planted is not None and planted in ranks:
        return f"Planted by sdc.plant_flip_rank={planted}: the check works; nothing to fix."
    if results.run.backend != "nccl":
        return (
            "Rerun `clusterbench run --device cpu --only sdc`; a difference that stays points at "
            "the CPU or its memory: machine-check errors in `journalctl -k | grep -i mce`."
        )
    return (
        "Drain this GPU and test it: `dcgmi diag -r 3`, `nvidia-smi -q -d ECC,ROW_REMAPPER -i N`, "
        "Xid errors in `dmesg | grep -i xid`; rerun `clusterbench run --only sdc` to confirm, and "
        "replace the GPU if its results keep differing."
    )


# --- findings --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Odd:
    """A device whose result of one case is not its group's reference (or, with no majority,
    not the lowest rank's)."""

    comparison: Comparison
    rank: int
    repeats: list[int]
    """Repeats whose result differs from what the device is compared with."""
    diff: tuple[float, float] | None
    """(differing elements, largest |difference|) of its worst such result, where counted."""

    @property
    def m(self) -> Measurement:
        return self.comparison.devices[self.rank]

    def text(self) -> str:
        total = len(self.comparison.hashes(self.rank))
        return f"{_repeats_text(self.repeats, total)}{_diff_text(self.m, self.diff)}"

    def evidence(self) -> dict[str, object]:
        c = self.comparison
        return {"case": c.case, "group": c.group, "repeats_differing": self.repeats,
                "hash": modal(c.hashes(self.rank)), "reference": c.vote.reference,
                "diff_elements": None if self.diff is None else self.diff[0],
                "max_abs_diff": None if self.diff is None else self.diff[1]}  # fmt: skip


def _mismatch_findings(results: Results, compared: list[Comparison]) -> list[Finding]:
    """One finding per device outvoted by its group, one per group without a majority."""
    counted = diffs(results)
    outvoted: dict[int, list[_Odd]] = defaultdict(list)
    undecided: dict[str, list[_Odd]] = defaultdict(list)
    for c in compared:
        for rank in c.vote.odd:
            m = c.devices[rank]
            odd = _Odd(comparison=c, rank=rank,
                       repeats=differing_repeats(c.hashes(rank), c.vote.against),
                       diff=counted.get((rank, case_key(m), "peers")))  # fmt: skip
            if c.vote.decided:
                outvoted[rank].append(odd)
            elif modal(c.hashes(rank)) != c.vote.against:  # the lowest rank's peers that differ
                undecided[c.group].append(odd)
    return [
        *(_outvoted(results, odds) for odds in outvoted.values()),
        *(_undecided(results, odds) for odds in undecided.values()),
    ]


def _outvoted(results: Results, odds: list[_Odd]) -> Finding:
    m, c = odds[0].m, odds[0].comparison
    peers = c.vote.num_devices - 1
    texts = "; ".join(f"{o.comparison.case}: {o.text()}" for o in odds)
    return Finding(
        id="sdc.mismatch",
        severity=gpu_severity(results, "fail"),
        scope=scope_label(m.host, m.device),
        message=(
            f"{_who(results, m)} computes GEMM results that differ bit for bit from the "
            f"{peers} other device{'s' if peers > 1 else ''} of its kind ({c.group}) on the "
            f"same inputs: {texts}."
        ),
        evidence={
            "rank": m.rank,
            "host": m.host,
            "device": m.device,
            "gpu_index": _gpu_index(m.device),
            "uuid": _device_uuid(results, m),
            "num_devices": c.vote.num_devices,
            "cases": [o.evidence() for o in odds],
        },
        fix=_fix(results, [m.rank]),
    )


def _undecided(results: Results, odds: list[_Odd]) -> Finding:
    c = odds[0].comparison
    n = c.vote.num_devices
    ranks = sorted({*(o.comparison.vote.pivot for o in odds), *(o.rank for o in odds)})
    pairs: dict[tuple[int, int], list[_Odd]] = defaultdict(list)
    for o in odds:
        pairs[(o.comparison.vote.pivot, o.rank)].append(o)
    texts = "; ".join(
        f"{_who(results, pair[0].comparison.devices[pivot])} vs {_who(results, pair[0].m)}: "
        + "; ".join(f"{o.comparison.case}: {o.text()}" for o in pair)
        for (pivot, _), pair in pairs.items()
    )
    third = "a third device" if n == 2 else "more devices"
    return Finding(
        id="sdc.mismatch",
        severity=gpu_severity(results, "fail"),
        scope="run",
        message=(
            f"The {n} devices of {c.group} give GEMM results that differ bit for bit on the "
            f"same inputs, and no majority agrees: {texts}. One of them is wrong, but which "
            f"cannot be told from {n}: rerun with {third} of this kind."
        ),
        evidence={
            "group": c.group,
            "ranks": ranks,
            "num_devices": n,
            "undecided": True,
            "cases": [o.evidence() for o in odds],
        },
        fix=(
            f"Rerun `clusterbench run --only sdc` with {third} of this model, driver and "
            f"libraries: the majority names the wrong one. {_fix(results, ranks)}"
        ),
    )


def _unstable_findings(results: Results, compared: list[Comparison]) -> list[Finding]:
    """One finding per device whose repeats of a case do not all give the same bits."""
    counted = diffs(results)
    by_rank: dict[int, list[str]] = defaultdict(list)
    for c in compared:
        for rank, m in c.devices.items():
            hashes = c.hashes(rank)
            odd = differing_repeats(hashes, modal(hashes))
            if odd:
                found = counted.get((rank, case_key(m), "repeats"))
                by_rank[rank].append(
                    f"{c.case}: {_repeats_text(odd, len(hashes))} from the other "
                    f"{len(hashes) - len(odd)}{_diff_text(m, found)}"
                )
    out = []
    for rank, texts in by_rank.items():
        m = next(c.devices[rank] for c in compared if rank in c.devices)
        out.append(
            Finding(
                id="sdc.unstable",
                severity=gpu_severity(results, "fail"),
                scope=scope_label(m.host, m.device),
                message=(
                    f"{_who(results, m)} gives different bits for the same GEMMs on the same "
                    f"inputs from one repeat to the next: {'; '.join(texts)}."
                ),
                evidence={"rank": rank, "host": m.host, "device": m.device, "cases": texts},
                fix=_fix(results, [rank]),
            )
        )
    return out


def _ok_finding(compared: list[Comparison]) -> Finding:
    groups = list(dict.fromkeys(c.group for c in compared))
    sizes = {c.group: c.vote.num_devices for c in compared}
    cases = list(dict.fromkeys(c.case for c in compared))
    first = next(iter(compared[0].devices.values())).params
    alone = [g for g in groups if sizes[g] == 1]
    text = "; ".join(f"{sizes[g]} × {g}" for g in groups)
    note = ""
    if len(groups) > 1:
        note += (" Groups are compared within themselves only: another GPU model, driver or "
                 "library version may legitimately give other bits.")  # fmt: skip
    if alone:
        note += (f" {len(alone)} group(s) of one device: checked across repeats only; a second "
                 "device of that kind checks it against a peer.")  # fmt: skip
    return Finding(
        id="sdc.ok",
        severity="info",
        scope="run",
        message=(
            f"Bit-for-bit GEMM check: {sum(sizes.values())} device(s) ({text}), {len(cases)} "
            f"case(s) ({', '.join(cases)}), each a chain of {first.get('depth')} GEMMs run "
            f"{first.get('repeats')} times: every result identical across repeats and devices."
            + note
        ),
        evidence={
            "groups": sizes,
            "cases": cases,
            "depth": first.get("depth"),
            "repeats": first.get("repeats"),
        },
        fix="",
    )
