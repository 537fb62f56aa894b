"""NVIDIA nccl-tests' results read into clusterbench's measurements: the text every
``*_perf`` binary prints and the JSON it writes with ``-J FILE`` (format version 3).

Each size row gives, out of place and in place, the time of one op (us), algbw and busbw
(GB/s, base 10, busbw = algbw x the bus factor of ``benchmarks/collectives/facts.py``) and
``#wrong`` (wrong elements, or ``N/A`` where an op has no check).  They become the collectives
benchmark's ``latency_us``, ``algbw`` and ``busbw`` (params: op, size_bytes, dtype, group
``world``, group_size, mode ``out_of_place``/``in_place``, source ``nccl-tests``) and one
``num_wrong`` per op and mode, so that nccl-tests' runs enter compare, the history and the
report beside clusterbench's own.  ``tests/data/nccl-tests/`` holds real outputs of both forms.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from clusterbench.benchmarks.collectives import CollectivesMetrics
from clusterbench.schema import Measurement, ParamValue

__all__ = ["NcclTestsRow", "NcclTestsRun", "measurements", "parse_json", "parse_text"]

_OPS = {"alltoall": "all_to_all", "sendrecv": "send_recv"}
"""nccl-tests' binary names where they differ from clusterbench's op names."""
_DTYPES = {"float": "fp32", "half": "fp16", "bfloat16": "bf16", "double": "fp64"}
_MODES = ("out_of_place", "in_place")


@dataclass(frozen=True, kw_only=True, slots=True)
class NcclTestsRow:
    size_bytes: int
    dtype: str
    time_us: dict[str, float]
    """Mode (out_of_place, in_place) -> the time of one op."""
    algbw: dict[str, float]
    busbw: dict[str, float]
    wrong: dict[str, int | None]
    """Mode -> wrong elements (None: nccl-tests checks none, ``N/A``)."""


@dataclass(kw_only=True)
class NcclTestsRun:
    op: str
    """clusterbench's name of the collective (all_reduce, all_to_all, send_recv, ...)."""
    ranks: int
    hosts: list[str]
    devices: list[str]
    """Each rank's GPU as nccl-tests names it (``NVIDIA H100 80GB HBM3``)."""
    rows: list[NcclTestsRow] = field(default_factory=list)
    version: str | None = None
    avg_busbw: float | None = None
    out_of_bounds: int | None = None


def _op(binary: str) -> str:
    name = binary.rsplit("/", 1)[-1].removesuffix("_perf")
    for suffix in ("_mpi",):  # make NAME_SUFFIX=_mpi
        name = name.removesuffix(f"_perf{suffix}").removesuffix(suffix)
    return _OPS.get(name, name)


def _number(text: str) -> float:
    return float(text.strip())


def _wrong(value: object) -> int | None:
    """``#wrong``: a count, or None where nccl-tests checks nothing (``N/A``; null in JSON)."""
    text = "" if value is None else str(value).strip()
    return None if text in ("N/A", "") else int(float(text))


_DEVICE = re.compile(r"^#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+"
                     r"\[[^\]]*\]\s+(.+?)\s*$")  # fmt: skip


def parse_text(text: str) -> NcclTestsRun:
    """A ``*_perf`` binary's output.  ValueError (one line) for text that is not one."""
    op = version = None
    hosts: list[str] = []
    devices: list[str] = []
    rows: list[NcclTestsRow] = []
    avg = oob = None
    table = False  # past the column header ("#  size  count  type ...")
    for line in text.splitlines():
        if m := re.match(r"^# Collective test starting: (\S+)", line):
            op = _op(m.group(1))
        elif m := re.match(r"^# nccl-tests version (\S+)", line):
            version = m.group(1)
        elif m := _DEVICE.match(line):
            hosts.append(m.group(2))
            devices.append(m.group(3))
        elif m := re.match(r"^# Avg bus bandwidth\s*:\s*(\S+)", line):
            avg = _number(m.group(1))
        elif m := re.match(r"^# Out of bounds values\s*:\s*(\d+)", line):
            oob = int(m.group(1))
        elif re.match(r"^#\s+size\s+count\s+type", line):
            table = True
        elif table and line.strip() and not line.startswith("#"):
            rows.append(_text_row(line))
    if op is None:
        m = re.search(r"^(\S+_perf\S*)", text, re.MULTILINE)
        op = _op(m.group(1)) if m else None
    if op is None or not rows:
        raise ValueError("not an nccl-tests output (no '# Collective test starting' and size rows)")
    return NcclTestsRun(op=op, ranks=len(devices) or 1, hosts=hosts, devices=devices, rows=rows,
                        version=version, avg_busbw=avg, out_of_bounds=oob)  # fmt: skip


def _text_row(line: str) -> NcclTestsRow:
    cells = line.split()
    if len(cells) != 13:
        raise ValueError(f"not an nccl-tests size row (13 columns): {line.strip()[:80]!r}")
    size, _count, dtype, _redop, _root = cells[:5]
    out, inp = cells[5:9], cells[9:13]
    return NcclTestsRow(
        size_bytes=int(size),
        dtype=_DTYPES.get(dtype, dtype),
        time_us={"out_of_place": _number(out[0]), "in_place": _number(inp[0])},
        algbw={"out_of_place": _number(out[1]), "in_place": _number(inp[1])},
        busbw={"out_of_place": _number(out[2]), "in_place": _number(inp[2])},
        wrong={"out_of_place": _wrong(out[3]), "in_place": _wrong(inp[3])},
    )


def parse_json(text: str) -> NcclTestsRun:
    """The JSON ``-J FILE`` writes (format version 3).  ValueError (one line) otherwise."""
    try:
        data: Any = json.loads(text)
        args, results = data["args"], data["results"]
        devices = data.get("config", {}).get("devices", [])
        rows = [_json_row(r) for r in results]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not an nccl-tests JSON output ({type(exc).__name__}: {exc})") from None
    if not rows:
        raise ValueError("an nccl-tests JSON output without results")
    avg = data.get("average_bus_bandwidth", {}).get("bandwidth")
    oob = data.get("out_of_bounds", {}).get("count")
    return NcclTestsRun(
        op=_op(str(args[0])),
        ranks=len(devices) or 1,
        hosts=[str(d.get("hostname", "")) for d in devices],
        devices=[str(d.get("device_info", "")) for d in devices],
        rows=rows,
        version=None,
        avg_busbw=float(avg) if avg is not None else None,
        out_of_bounds=int(oob) if oob is not None else None,
    )


def _json_row(r: dict[str, Any]) -> NcclTestsRow:
    modes = {mode: r[mode] for mode in _MODES}
    return NcclTestsRow(
        size_bytes=int(r["size"]),
        dtype=_DTYPES.get(r["type"], r["type"]),
        time_us={m: float(v["time"]) for m, v in modes.items()},
        algbw={m: float(v["alg_bw"]) for m, v in modes.items()},
        busbw={m: float(v["bus_bw"]) for m, v in modes.items()},
        wrong={m: _wrong(v.get("nwrong")) for m, v in modes.items()},
    )


def measurements(run: NcclTestsRun, *, host: str | None = None) -> list[Measurement]:
    """The run's rows as the collectives benchmark's measurements, rank 0's host and device
    (``host``: in place of the one nccl-tests names)."""
    where = host or (run.hosts[0] if run.hosts else "unknown")
    out: list[Measurement] = []
    wrong: dict[str, int] = {}
    for row in run.rows:
        for mode in _MODES:
            params: dict[str, ParamValue] = {
                "op": run.op, "size_bytes": row.size_bytes, "group": "world",
                "group_size": run.ranks, "mode": mode, "dtype": row.dtype,
                "source": "nccl-tests",
            }  # fmt: skip
            for metric, value in (
                (CollectivesMetrics.latency_us, row.time_us[mode]),
                (CollectivesMetrics.algbw, row.algbw[mode]),
                (CollectivesMetrics.busbw, row.busbw[mode]),
            ):
                out.append(_measurement(metric, value, params, host=where))
            if row.wrong[mode] is not None:
                wrong[mode] = wrong.get(mode, 0) + int(row.wrong[mode] or 0)
    for mode, total in wrong.items():
        params = {"op": run.op, "group": "world", "group_size": run.ranks, "mode": mode,
                  "source": "nccl-tests"}  # fmt: skip
        out.append(_measurement(CollectivesMetrics.num_wrong, float(total), params, host=where))
    return out


def _measurement(
    metric: Any, value: float, params: dict[str, ParamValue], *, host: str
) -> Measurement:
    return Measurement(
        benchmark=metric.benchmark, metric=metric.name, value=value, unit=metric.unit,
        params=dict(params), rank=0, host=host, device="cuda:0",
    )  # fmt: skip
