"""Silent data corruption: the same GEMMs on the same inputs on every device, compared bit for bit.

Every rank builds the same inputs from a fixed seed (:mod:`.compute`), runs a chain of
dependent GEMMs ``repeats`` times per case and hashes each result (sha256).  The ranks then
exchange the hashes only (a few bytes per result) and vote within each group of like devices
(same GPU model, driver and libraries: :func:`.compute.peer_group`): the majority's result
is the reference (:mod:`.vote`).  Only where a device differs does the rank holding the
reference send its result, so that the device that differs can count the differing elements
and the largest difference; the traffic of a clean run is the hashes alone.

cuBLAS picks the same kernel for the same shape on the same GPU model and toolkit, and its
routines give the same bits on every run there (cuBLAS docs, "Results reproducibility"), so
any difference among like GPUs, or between repeats on one, is a fault.  fp32 runs with TF32
off.  ``plant_flip_rank`` flips one bit of one rank's results, to check the check end to end.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.distributed as dist

from clusterbench.benchmarks.sdc.compute import (
    TORCH_DTYPES,
    Case,
    chain,
    diff,
    flip_bit,
    make_inputs,
    peer_group,
    result_hash,
)
from clusterbench.benchmarks.sdc.settings import (
    SdcConfig,
    SdcMetrics,
)
from clusterbench.benchmarks.sdc.vote import HASH_CHARS, Vote, differing_repeats, modal, vote
from clusterbench.runtime.dist import DistContext
from clusterbench.runtime.precision import matmul_precision
from clusterbench.schema import Measurement, ParamValue

__all__ = ["case_params", "sdc"]


def case_params(case: Case, repeats: int) -> dict[str, ParamValue]:
    return {"dtype": case.dtype, "m": case.m, "n": case.n, "k": case.k, "depth": case.depth,
            "repeats": repeats}  # fmt: skip


@dataclass(slots=True)
class _Ran:
    """One case on this rank: its repeats' hashes and each distinct result (normally one)."""

    case: Case
    hashes: list[str]
    results: dict[str, torch.Tensor]


def sdc(ctx: DistContext, cfg: SdcConfig) -> Iterator[Measurement]:
    """Bit-for-bit GEMM check: fixed inputs on every device, across repeats and like devices."""
    cases = cfg.cases()
    ctx.progress.start(len(cases) + 1)
    t0 = time.perf_counter()
    ran = []
    for case in cases:
        with matmul_precision(case.dtype), ctx.doing(f"sdc {case.label}"):
            ran.append(_run_case(ctx, cfg, case))
        ctx.progress.advance()
    group = peer_group(ctx)
    digests = ctx.all_gather((ctx.rank, group, [r.hashes for r in ran]))
    groups = sorted({g for _, g, _ in digests})
    for i, r in enumerate(ran):
        own = vote({rank: h[i] for rank, g, h in digests if g == group})
        yield from _case_measurements(ctx, cfg, ran=r, own=own, group=group)
        for g in groups:  # every rank takes part in every group's exchange (world collective)
            v = vote({rank: h[i] for rank, gg, h in digests if gg == g})
            if v.odd:
                yield from _compare_with_reference(ctx, ran=r, v=v, member=g == group)
    ctx.progress.advance()
    params: dict[str, ParamValue] = {"num_cases": len(cases), "repeats": cfg.repeats,
                                     "depth": cfg.depth}  # fmt: skip
    yield ctx.measurement(SdcMetrics.checked, value=len(cases) * cfg.repeats, params=params)
    yield ctx.measurement(SdcMetrics.seconds, value=time.perf_counter() - t0, params=params)


def _run_case(ctx: DistContext, cfg: SdcConfig, case: Case) -> _Ran:
    a, b1, b2 = make_inputs(case, seed=cfg.seed, device=ctx.device)
    hashes: list[str] = []
    results: dict[str, torch.Tensor] = {}
    for repeat in range(cfg.repeats):
        out = chain(a, b1, b2, depth=case.depth)
        if ctx.rank == cfg.plant_flip_rank and cfg.plant_flip_repeat in (-1, repeat):
            flip_bit(out)
        digest = result_hash(out)[:HASH_CHARS]
        hashes.append(digest)
        results.setdefault(digest, out)
    return _Ran(case=case, hashes=hashes, results=results)


def _case_measurements(
    ctx: DistContext, cfg: SdcConfig, *, ran: _Ran, own: Vote, group: str
) -> Iterator[Measurement]:
    """This rank's verdict counts on one case, and how far its odd repeats are from its own
    most common result."""
    base = case_params(ran.case, cfg.repeats)
    mine = modal(ran.hashes)
    params = {**base, "group": group, "group_size": own.num_devices, "hash": mine,
              "repeat_hashes": ",".join(ran.hashes), "reference": own.against,
              "majority": own.decided}  # fmt: skip
    mismatches = len(differing_repeats(ran.hashes, own.against))
    yield ctx.measurement(SdcMetrics.mismatches, value=mismatches, params=params)
    odd = differing_repeats(ran.hashes, mine)
    yield ctx.measurement(SdcMetrics.unstable_repeats, value=len(odd), params=base)
    if odd:
        worst = max(
            (diff(ran.results[h], ran.results[mine]) for h in {ran.hashes[i] for i in odd}),
            key=lambda d: d[0],
        )
        yield from _diff_measurements(ctx, base=base, worst=worst, against="repeats")


def _compare_with_reference(
    ctx: DistContext, *, ran: _Ran, v: Vote, member: bool
) -> Iterator[Measurement]:
    """The pivot sends the reference result to every rank (as bytes, which every backend
    carries); the members whose results differ count what differs."""
    shape, dtype = ran.case.out_shape, TORCH_DTYPES[ran.case.dtype]
    if ctx.rank == v.pivot:
        buf = ran.results[v.against].contiguous().view(-1).view(torch.uint8)
    else:
        itemsize = torch.empty((), dtype=dtype).element_size()
        buf = torch.empty(shape[0] * shape[1] * itemsize, dtype=torch.uint8, device=ctx.device)
    with ctx.doing(f"sdc: reference of {ran.case.label} from rank {v.pivot}", collective=True):
        dist.broadcast(buf, src=v.pivot)
    differing = [h for h in ran.results if h != v.against]
    if not member or ctx.rank not in v.odd or not differing:
        return
    ref = buf.view(dtype).view(shape)
    worst = max((diff(ran.results[h], ref) for h in differing), key=lambda d: d[0])
    base = case_params(ran.case, len(ran.hashes))
    yield from _diff_measurements(ctx, base=base, worst=worst, against="peers")


def _diff_measurements(
    ctx: DistContext, *, base: dict[str, ParamValue], worst: tuple[int, float], against: str
) -> Iterator[Measurement]:
    params = {**base, "against": against}
    count, gap = worst
    yield ctx.measurement(SdcMetrics.diff_elements, value=count, params=params)
    yield ctx.measurement(SdcMetrics.max_abs_diff, value=gap, params=params)
