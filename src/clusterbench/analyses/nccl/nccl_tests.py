"""NVIDIA nccl-tests' results read into clusterbench's measurements: the text every
``*_perf`` binary prints and the JSON it writes with ``-J FILE`` (format version 3).

Each size row gives, out of place and in place, the time of one op (us), algbw and busbw
(GB/s, base 10, busbw = algbw x the bus factor of ``collective_facts.py``) and
``#wrong`` (wrong elements, or ``N/A`` where an op has no check).  They become the collectives
benchmark's ``latency_us``, ``algbw`` and ``busbw`` (params: op, size_bytes, dtype, group
``world``, group_size, mode, source ``nccl-tests``) and one ``num_wrong`` per op, dtype and
mode, for compare, the history and the report.  The out-of-place columns take the mode
nccl-tests timed them in: ``back_to_back`` (its default), ``blocking`` (``-z 1``) or ``graph``
(``-G``); the in-place columns are ``in_place``.  tests/data/nccl-tests/ holds real outputs.

The ranks are processes x threads x GPUs, as nccl-tests numbers them (``src/util.cu``,
``writeDeviceReport``: a process runs ``-t`` threads of ``-g`` GPUs each, one rank per GPU):
the threads and GPUs from the header (``# nThread 1 nGpus 2``; the JSON's ``config.nthreads``
and ``config.ngpus``), the processes from the device lines (one ``Pid`` each in the text; the
JSON's ``config.devices`` holds one entry per process, its first GPU's), one process where the
output names none.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from clusterbench.collective_facts import CHUNKED_OPS
from clusterbench.declared.collectives import CollectivesMetrics
from clusterbench.hardware.specs import spec_ref_for
from clusterbench.schema import GpuInfo, HostInfo, Measurement, ParamValue

__all__ = [
    "NcclTestsRow",
    "NcclTestsRun",
    "hosts",
    "measurements",
    "parse_json",
    "parse_text",
    "parse_texts",
    "ranks_from_bus_factor",
]

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
    redop: str = "sum"
    """The reduction (``sum``, ``prod``, ...; ``none`` or ``-`` for ops without one)."""
    root: int = -1
    """The root rank of rooted ops (broadcast, reduce); -1 for the others."""
    count: int | None = None
    """The ``count`` column (elements), where read from the text."""


@dataclass(kw_only=True)
class NcclTestsRun:
    op: str
    """clusterbench's name of the collective (all_reduce, all_to_all, send_recv, ...)."""
    ranks: int
    """Processes x threads per process x GPUs per thread (``-t``, ``-g``)."""
    hosts: list[str]
    devices: list[str]
    """The GPUs the output names, as nccl-tests names them (``NVIDIA H100 80GB HBM3``): every
    rank's in the text, each process's first in the JSON (nccl-tests parses one device line
    per process into it), none where the text has no device lines."""
    rows: list[NcclTestsRow] = field(default_factory=list)
    version: str | None = None
    avg_busbw: float | None = None
    out_of_bounds: int | None = None
    timing: str = "back_to_back"
    """How nccl-tests timed the ops, in clusterbench's mode names: back_to_back (its default:
    ``-n`` ops launched, then one wait), blocking (``-z 1``: a wait after each) or graph
    (``-G N``: CUDA graphs)."""
    nccl_version: str | None = None
    """The NCCL library the binary ran with (``2.28.3``)."""
    started: str | None = None
    """When it started, as the JSON says (local time of the machine that ran it)."""
    device_indices: list[int] = field(default_factory=list)
    """Each rank's CUDA device index on its host."""
    pci_bus_ids: list[str] = field(default_factory=list)
    """Each rank's GPU's PCI address as nccl-tests prints it (``0000:1b:00``, or ``0x1b``)."""
    num_processes: int = 1
    threads_per_process: int = 1
    """``-t`` (``# nThread N``)."""
    gpus_per_thread: int = 1
    """``-g`` (``nGpus N``)."""


def _op(binary: str) -> str:
    name = binary.rsplit("/", 1)[-1].removesuffix("_perf")
    for suffix in ("_mpi",):  # make NAME_SUFFIX=_mpi
        name = name.removesuffix(f"_perf{suffix}").removesuffix(suffix)
    return _OPS.get(name, name)


def _nccl_version(code: int) -> str:
    """NCCL_VERSION_CODE as a version: 22803 -> 2.28.3 (2.9 and later: X*10000 + Y*100 + Z;
    before, X*1000 + Y*100 + Z)."""
    if code >= 10000:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def _number(text: str) -> float:
    return float(text.strip())


def _wrong(value: object) -> int | None:
    """``#wrong``: a count, or None where nccl-tests checks nothing (``N/A``; null in JSON)."""
    text = "" if value is None else str(value).strip()
    return None if text in ("N/A", "") else int(float(text))


_DEVICE = re.compile(r"^#?\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+"
                     r"device\s+(\d+)\s+\[([^\]]*)\]\s+(.+?)\s*$")  # fmt: skip
"""``#  Rank  3 Group  0 Pid 1255 on gpu-17 device  3 [0000:1b:00] NVIDIA H100 80GB HBM3``: rank,
pid, host, device index, PCI address (or ``0x1b``), name; older versions have no ``#`` or
Group."""
_LAYOUT = re.compile(r"^#?\s*nThread\s+(\d+)\s+nGpus\s+(\d+)")
"""The header's ``# nThread 1 nGpus 2 minBytes ...``: threads per process, GPUs per thread."""
_PREFIX = re.compile(r"^\[[\d,]+\](?:<stdout>:)?\s?")
"""What ``mpirun --tag-output`` puts before each line (``[1,0]<stdout>:``, ``[0]``)."""
_INNER_TAG = re.compile(r"\[\d+,\d+\]<stdout>:|(?<=\S)\[\d+\](?=\s)")
"""The tag inside a size row a process wrote in pieces: Open MPI's ``-1[1,0]<stdout>:  85.14``,
or a rank's ``-1[0]  1626.5`` (NVIDIA/nccl#1453); NCCL's ``tid [0] NCCL INFO`` is left."""
_COMMAND = re.compile(r"^(?!\s*#).*\b\w+_perf\w*\b")
"""A shell line that runs a ``*_perf`` binary (``root@host:~# ./build/all_gather_perf -g 2``):
in a console log, the start of the next output."""
_START = re.compile(r"^#?\s*(?:nccl-tests version|Collective test starting:|nThread\s+\d+)")


def parse_text(text: str) -> NcclTestsRun:
    """A ``*_perf`` binary's output.  ValueError (one line) for text that is not one, or that
    holds several (:func:`parse_texts` reads those)."""
    runs = parse_texts(text)
    if len(runs) > 1:
        raise ValueError(f"{len(runs)} nccl-tests outputs in one text, not one")
    return runs[0]


def parse_texts(text: str) -> list[NcclTestsRun]:
    """Every ``*_perf`` output in ``text``: one binary's, or a log of several run one after
    another (each starts at its ``# nccl-tests version``, ``# Collective test starting`` or
    ``# nThread`` line, or at the shell line that ran it).  Lines ``mpirun --tag-output``
    prefixed are read without the prefixes.  ValueError (one line) where
    no output is found."""
    segments: list[list[str]] = []
    current: list[str] = []
    rows_seen = False
    for raw in text.splitlines():
        line = _INNER_TAG.sub(" ", _PREFIX.sub("", raw))
        if (_START.match(line) or _COMMAND.match(line)) and rows_seen:  # the next output
            segments.append(current)
            current, rows_seen = [], False
        current.append(line)
        rows_seen = rows_seen or bool(line.strip() and not line.lstrip().startswith("#")
                                      and line.split()[0].isdigit())  # fmt: skip
    segments.append(current)
    runs = [run for lines in segments if (run := _parse_segment(lines)) is not None]
    if not runs:
        raise ValueError(
            "not an nccl-tests output: no '# Collective test starting' line with size rows after it"
        )
    return runs


def _parse_segment(lines: list[str]) -> NcclTestsRun | None:
    op = version = nccl = None
    hosts: list[str] = []
    devices: list[str] = []
    indices: list[int] = []
    buses: list[str] = []
    processes: set[tuple[str, str]] = set()
    layout = (1, 1)
    rows: list[NcclTestsRow] = []
    avg = oob = None
    table = False  # past the column header ("#  size  count  type ...")
    counts_wrong = True  # "#wrong" (a count); old versions print "error" (a max error)
    timing = "back_to_back"
    for line in lines:
        if m := re.search(r"\bgraph:\s*(\d+)", line):
            timing = "graph" if int(m.group(1)) > 0 else timing
        if re.match(r"^#?\s*Blocking Enabled", line) and timing != "graph":
            timing = "blocking"
        if m := re.match(r"^#?\s*Collective test starting: (\S+)", line):
            op = _op(m.group(1))
        elif m := re.match(r"^#?\s*nccl-tests version (\S+)", line):
            version = m.group(1)
            if lib := re.search(r"nccl-library=(\d+)", line):
                nccl = _nccl_version(int(lib.group(1)))
        elif m := _LAYOUT.match(line):
            layout = (int(m.group(1)), int(m.group(2)))
        elif m := _DEVICE.match(line):
            processes.add((m.group(3), m.group(2)))
            hosts.append(m.group(3))
            indices.append(int(m.group(4)))
            buses.append(m.group(5))
            devices.append(m.group(6))
        elif m := re.match(r"^#?\s*Avg bus bandwidth\s*:\s*(\S+)", line):
            avg = _number(m.group(1))
        elif m := re.match(r"^#?\s*Out of bounds values\s*:\s*(\d+)", line):
            oob = int(m.group(1))
        elif re.match(r"^#?\s+size\s+count\s+type", line):
            table = True
            counts_wrong = "#wrong" in line
        elif table and line.strip() and not line.lstrip().startswith("#"):
            cells = line.split()
            if cells[0].isdigit():
                rows.append(_text_row(cells, counts_wrong=counts_wrong))
    if op is None:
        found = next((m for line in lines if (m := re.search(r"(\S+_perf\S*)", line))), None)
        op = _op(found.group(1)) if found else None
    if not rows:
        return None
    threads, gpus = layout
    # Each device line is one rank; a process prints only the lines that fit in 2,048
    # characters (util.cu, MAX_LINE), so the count of processes times the header's layout.
    ranks = max(len(devices), max(1, len(processes)) * threads * gpus)
    op = op or _unnamed_all_reduce(rows, ranks)
    if op is None:
        raise ValueError(
            "an nccl-tests output that names no binary (no '# Collective test starting' "
            "line, as before nccl-tests 2.13, and no command line naming a *_perf binary): "
            "keep the command line above it"
        )
    return NcclTestsRun(op=op, ranks=ranks, hosts=hosts, devices=devices, rows=rows,
                        version=version, avg_busbw=avg, out_of_bounds=oob, nccl_version=nccl,
                        timing=timing, device_indices=indices, pci_bus_ids=buses,
                        num_processes=max(1, len(processes)), threads_per_process=threads,
                        gpus_per_thread=gpus)  # fmt: skip


def _text_row(cells: list[str], *, counts_wrong: bool = True) -> NcclTestsRow:
    """A size row: 13 columns (size count type redop root, then time algbw busbw #wrong out of
    place and in place), or 12 in versions without the root column."""
    shown = " ".join(cells)[:80]
    if len(cells) == 13:
        size, count, dtype, redop, root = cells[:5]
    elif len(cells) == 12:
        (size, count, dtype, redop), root = cells[:4], "-1"
    else:
        raise ValueError(f"not an nccl-tests size row (13 columns): {shown!r}")
    out, inp = cells[-8:-4], cells[-4:]

    def wrong(cell: str) -> int | None:
        return _wrong(cell) if counts_wrong else None

    try:
        return NcclTestsRow(
            size_bytes=int(size), count=int(count) if count.isdigit() else None,
            dtype=_DTYPES.get(dtype, dtype), redop=redop, root=int(root),
            time_us={"out_of_place": _number(out[0]), "in_place": _number(inp[0])},
            algbw={"out_of_place": _number(out[1]), "in_place": _number(inp[1])},
            busbw={"out_of_place": _number(out[2]), "in_place": _number(inp[2])},
            wrong={"out_of_place": wrong(out[3]), "in_place": wrong(inp[3])},
        )  # fmt: skip
    except ValueError:
        raise ValueError(
            f"not an nccl-tests size row (a cell is not a number): {shown!r}"
        ) from None


_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp64": 8, "int8": 1, "uint8": 1, "int32": 4,
          "uint32": 4, "int64": 8, "uint64": 8}  # fmt: skip


def _unnamed_all_reduce(rows: list[NcclTestsRow], ranks: int) -> str | None:
    """``all_reduce`` for an output that names no binary (older versions print no
    ``# Collective test starting`` line) where its rows can be no other op: a reduction
    without a root, each rank's count the whole size (reduce_scatter's is a 1/ranks share),
    and busbw / algbw the bus factor 2(n-1)/n of its ranks, n > 2 (send_recv's is 1)."""
    whole = all(
        r.redop not in ("none", "-") and r.root == -1 and r.count is not None
        and r.count * _BYTES.get(r.dtype, 0) == r.size_bytes for r in rows
    )  # fmt: skip
    probe = NcclTestsRun(op="all_reduce", ranks=ranks, hosts=[], devices=[], rows=rows)
    if ranks > 2 and whole and ranks_from_bus_factor(probe) == ranks:
        return "all_reduce"
    return None


def parse_json(text: str) -> NcclTestsRun:
    """The JSON ``-J FILE`` writes (format version 3).  ValueError (one line, in words)
    otherwise: not JSON, a JSON document without nccl-tests' keys, a result it cannot read."""
    data = _json_document(text)
    try:
        config = data.get("config") or {}
        devices = config.get("devices") or []
        timing = "back_to_back"
        if int(config.get("graph", 0) or 0) > 0:
            timing = "graph"
        elif str(config.get("blocking_collectives", "false")).lower() == "true":
            timing = "blocking"
        threads, gpus = int(config.get("nthreads", 1)), int(config.get("ngpus", 1))
        hosts = [str(d.get("hostname", "")) for d in devices]
        names = [str(d.get("device_info", "")) for d in devices]
        indices = [int(d.get("device", i)) for i, d in enumerate(devices)]
        buses = [str(d.get("device_hex", "")) for d in devices]
    except (ValueError, TypeError, AttributeError) as exc:
        raise ValueError(f"an nccl-tests JSON output whose config cannot be read ({exc})") from None
    rows = [_json_row(r, i) for i, r in enumerate(data["results"])]
    if not rows:
        raise ValueError("an nccl-tests JSON output without results")
    avg = (data.get("average_bus_bandwidth") or {}).get("bandwidth")
    oob = (data.get("out_of_bounds") or {}).get("count")
    return NcclTestsRun(
        op=_op(str(data["args"][0])),
        # one entry in config.devices per process (util.cu parses each process's first
        # device line into it), each process threads x GPUs ranks
        ranks=max(1, len(devices)) * threads * gpus,
        hosts=hosts,
        devices=names,
        nccl_version=_nccl_version(data["nccl_version"]) if "nccl_version" in data else None,
        started=str(data["start_time"]) if data.get("start_time") else None,
        timing=timing,
        device_indices=indices,
        pci_bus_ids=buses,
        rows=rows,
        version=None,
        avg_busbw=float(avg) if avg is not None else None,
        out_of_bounds=int(oob) if oob is not None else None,
        num_processes=max(1, len(devices)),
        threads_per_process=threads,
        gpus_per_thread=gpus,
    )


def _json_document(text: str) -> dict[str, Any]:
    """The JSON object with the keys nccl-tests' ``-J`` writes, or ValueError saying what it
    is instead."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"not an nccl-tests JSON output: not valid JSON ({exc.msg} at line {exc.lineno}, "
            f"column {exc.colno})"
        ) from None
    if not isinstance(data, dict):
        raise ValueError(
            f"not an nccl-tests JSON output: a JSON {type(data).__name__}, where nccl-tests' -J "
            "writes an object with 'args' and 'results'"
        )
    missing = [key for key in ("args", "results") if key not in data]
    if missing:
        keys = ", ".join(sorted(data)[:5]) or "none"
        raise ValueError(
            f"not an nccl-tests JSON output: it has no {' and no '.join(map(repr, missing))} "
            f"(nccl-tests' -J writes both; this file's keys: {keys})"
        )
    if not isinstance(data["args"], list) or not data["args"]:
        raise ValueError(
            "not an nccl-tests JSON output: its 'args' are not the command line that names the "
            "binary"
        )
    if not isinstance(data["results"], list):
        raise ValueError("not an nccl-tests JSON output: its 'results' are not a list of sizes")
    return data


def _json_row(r: Any, index: int) -> NcclTestsRow:
    """``results[index]``, or ValueError naming what it lacks."""
    try:
        modes = {mode: r[mode] for mode in _MODES}
        return NcclTestsRow(
            size_bytes=int(r["size"]),
            dtype=_DTYPES.get(r["type"], r["type"]),
            redop=str(r.get("redop", "sum")).strip(),
            root=int(str(r.get("root", "-1")).strip() or -1),
            time_us={m: float(v["time"]) for m, v in modes.items()},
            algbw={m: float(v["alg_bw"]) for m, v in modes.items()},
            busbw={m: float(v["bus_bw"]) for m, v in modes.items()},
            wrong={m: _wrong(v.get("nwrong")) for m, v in modes.items()},
        )
    except KeyError as exc:
        what = f"has no {exc.args[0]!r}"
    except (ValueError, TypeError, AttributeError) as exc:
        what = f"cannot be read ({exc})"
    raise ValueError(f"an nccl-tests JSON output whose result {index} (from 0) {what}")


def ranks_from_bus_factor(run: NcclTestsRun) -> int | None:
    """The rank count the printed busbw / algbw says, where the op's bus factor depends on it
    (all_reduce: F = 2(n-1)/n, so n = 2/(2-F); all_gather, reduce_scatter, all_to_all:
    F = (n-1)/n, so n = 1/(1-F); nccl-tests' ``src/*.cu`` getBw), read on the row with the
    largest algbw (the most digits printed); None for the other ops or where it is no whole
    number."""
    row = max(run.rows, key=lambda r: r.algbw["out_of_place"], default=None)
    if row is None or row.algbw["out_of_place"] <= 0:
        return None
    factor = row.busbw["out_of_place"] / row.algbw["out_of_place"]
    if run.op == "all_reduce" and factor < 2:
        n = 2 / (2 - factor)
    elif run.op in CHUNKED_OPS and factor < 1:
        n = 1 / (1 - factor)
    else:
        return None
    # the text rounds busbw and algbw to 2 decimals: a tolerance, not exactness
    return round(n) if abs(n - round(n)) < 0.25 else None


def measurements(run: NcclTestsRun, *, host: str | None = None) -> list[Measurement]:
    """The run's rows as the collectives benchmark's measurements, at rank 0's host and device
    (``host``: in place of the one nccl-tests names).  ``redop`` and ``root`` join the params
    where a run swept them (``-o all``, ``-r all``), so that no two measurements share a key."""
    where = host or (run.hosts[0] if run.hosts else "unknown")
    device = f"cuda:{run.device_indices[0]}" if run.device_indices else "cuda:0"
    swept = {name: len({getattr(row, name) for row in run.rows}) > 1 for name in ("redop", "root")}
    out: list[Measurement] = []
    wrong: dict[tuple[str, str], int] = {}
    for row in run.rows:
        for place in _MODES:
            mode = _mode(run, place)
            params: dict[str, ParamValue] = {
                "op": run.op, "size_bytes": row.size_bytes, "group": "world",
                "group_kind": "world", "group_size": run.ranks, "mode": mode,
                "dtype": row.dtype, "source": "nccl-tests",
            }  # fmt: skip
            if swept["redop"]:
                params["redop"] = row.redop
            if swept["root"]:
                params["root"] = row.root
            for metric, value in (
                (CollectivesMetrics.latency_us, row.time_us[place]),
                (CollectivesMetrics.algbw, row.algbw[place]),
                (CollectivesMetrics.busbw, row.busbw[place]),
            ):
                out.append(_measurement(metric, value, params, host=where, device=device))
            if row.wrong[place] is not None:
                key = (mode, row.dtype)
                wrong[key] = wrong.get(key, 0) + int(row.wrong[place] or 0)
    for (mode, dtype), total in wrong.items():
        params = {"op": run.op, "group": "world", "group_kind": "world",
                  "group_size": run.ranks, "mode": mode, "dtype": dtype,
                  "source": "nccl-tests"}  # fmt: skip
        out.append(
            _measurement(
                CollectivesMetrics.num_wrong, float(total), params, host=where, device=device
            )
        )
    return out


def _mode(run: NcclTestsRun, place: str) -> str:
    """The measurement's mode: the out-of-place columns are timed as clusterbench's mode of
    that name times (back_to_back by default), so that every figure, finding and model that
    reads back-to-back busbw reads them; the in-place columns are mode ``in_place``."""
    return run.timing if place == "out_of_place" else "in_place"


def hosts(runs: list[NcclTestsRun]) -> list[HostInfo]:
    """The hosts and GPUs the runs name (each rank's host, device index, PCI address and
    name), one entry per host in the order they first appear."""
    by_host: dict[str, dict[int, GpuInfo]] = {}
    versions: dict[str, dict[str, str]] = {}
    for run in runs:
        for i, host in enumerate(run.hosts):
            if run.nccl_version:
                versions.setdefault(host, {}).setdefault("nccl", run.nccl_version)
            if run.version:
                versions.setdefault(host, {}).setdefault("nccl-tests", run.version)
            index = run.device_indices[i] if i < len(run.device_indices) else 0
            bus = run.pci_bus_ids[i] if i < len(run.pci_bus_ids) else ""
            gpus = by_host.setdefault(host, {})
            gpus.setdefault(
                index,
                GpuInfo(
                    index=index,
                    name=run.devices[i],
                    pci_bus_id=bus or None,
                    spec=spec_ref_for(run.devices[i]),
                ),
            )
    return [
        HostInfo(
            hostname=host, gpus=[gpus[i] for i in sorted(gpus)], versions=versions.get(host, {})
        )
        for host, gpus in by_host.items()
    ]


def _measurement(
    metric: Any, value: float, params: dict[str, ParamValue], *, host: str, device: str
) -> Measurement:
    return Measurement(
        benchmark=metric.benchmark, metric=metric.name, value=value, unit=metric.unit,
        params=dict(params), rank=0, host=host, device=device,
    )  # fmt: skip
