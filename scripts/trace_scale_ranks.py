"""How long, and in how much memory, does `clusterbench analyze` take over many ranks?

Builds --ranks traces of about --mb megabytes each from a recorded one (tests/data/traces/h100
by default), as scripts/trace_scale.py builds one: its events repeated, each copy shifted past
the one before, its ProfilerStep spans renumbered.  Every rank gets, at the end of each step,
an NCCL all-reduce on a stream of its own that ends at the same instant on every rank (as a
collective does: the early ranks wait in it), the ranks on time starting it up to 30 us apart;
each rank's whole timeline is shifted by a clock offset of its own (uniform in +-50 ms), as
hosts' clocks differ.  A few ranks are stragglers: in about half the steps each starts its
all-reduce later (the first by --delay-ms, the next ones by a quarter less each), so that every
rank waits for it there.

Then it runs `clusterbench analyze` on them with --jobs processes, sampling the memory of the
whole process tree (the sum of its processes' proportional set size, PSS, which counts the
pages they share once), and prints the wall time and the peak memory of each phase: start
(imports, the pool), read (until the last file is read), attribute (the traces' checks and
trace_attribution.attribute, marked by wrapping it) and write (the measurements, the
findings, the run folder); the read rate per core; whether each planted straggler was named;
and the figures extrapolated to --goal-ranks x --goal-mb on --goal-cores cores: the reading
at the measured rate per core, the phases after it (one process) and analyze's own memory in
proportion to the MB of trace.

    python scripts/trace_scale_ranks.py --ranks 64 --mb 10
    python scripts/trace_scale_ranks.py --ranks 1024 --mb 100 --jobs 16 --gzip --keep DIR

1,024 x 100 MB is 100 GB of JSON; --gzip writes .json.gz (about a tenth of that on disk) and
the read then includes the decompression.  --keep DIR keeps the traces there, and a second
run with the same arguments reads them again without building them.
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import psutil

from clusterbench.analyses.trace.pool import default_jobs

ROOT = Path(__file__).resolve().parents[1]
NCCL_KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
TRANSFER_US = 300.0
"""The all-reduce's own duration: what the last rank to arrive spends in it."""
JITTER_US = 30.0
"""How far apart the ranks that are on time start it."""
GAP_US = 20.0
"""From the step's end on the host to the all-reduce's start, and from its end on."""
COPY_GAP_US = 1000.0
"""Between two copies of the recorded trace (as scripts/trace_scale.py leaves)."""
CLOCK_US = 50_000.0
"""Each rank's clock offset is uniform in +-50 ms."""
STRAGGLE_SHARE = 0.5
"""The share of the steps a straggler is late in."""


@dataclass(kw_only=True)
class Template:
    """The recorded trace, each event's JSON split around the numbers a copy changes."""

    head: dict[str, Any]
    events: list[tuple[str, float, str, int]] = field(default_factory=list)
    """Per event: its JSON before ``ts``, ``ts``, after it, and the step ends before it."""
    steps: list[tuple[str, int, str, float, str, float, str]] = field(default_factory=list)
    """Per host-side ProfilerStep#N span: its JSON around N, ts and dur, and those."""
    step_ends: list[float] = field(default_factory=list)
    span_us: float = 0.0
    bytes_per_copy: int = 0


def load(source: Path) -> Template:
    data = json.loads(gzip.decompress(source.read_bytes()))
    events = data.pop("traceEvents")
    first = min(e["ts"] for e in events if "ts" in e)
    span = max(e.get("ts", 0) + e.get("dur", 0) for e in events) - first
    out = Template(head=data, span_us=span)
    out.step_ends = sorted(e["ts"] + e["dur"] for e in events if _host_step(e))
    for e in events:
        if _host_step(e):
            text = json.dumps({**e, "name": "@", "ts": "@", "dur": "@"})
            a, b, c, d = text.split('"@"')
            n = int(e["name"].split("#")[1])
            out.steps.append((a + '"ProfilerStep#', n, '"' + b, e["ts"], c, e["dur"], d))
        elif "ts" in e:
            before, after = json.dumps({**e, "ts": "@"}).split('"@"')
            out.events.append((before, e["ts"], after, bisect.bisect_right(out.step_ends, e["ts"])))
    out.steps.sort(key=lambda s: s[3])
    out.bytes_per_copy = sum(len(json.dumps(e)) + 2 for e in events)
    return out


def _host_step(e: dict[str, Any]) -> bool:
    return e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#")


@dataclass(frozen=True, kw_only=True)
class Plan:
    """What the ranks share (the copies, each step's gap) and what each has of its own."""

    ranks: int
    copies: int
    delays_ms: dict[int, float]
    """Each straggler's delay."""
    late: dict[int, frozenset[tuple[int, int]]]
    """Each straggler's late steps, as (copy, step index)."""
    offsets_us: list[float]
    seed: int


def make_plan(*, ranks: int, copies: int, stragglers: int, delay_ms: float, seed: int) -> Plan:
    rng = random.Random(seed)
    chosen = rng.sample(range(ranks), min(stragglers, ranks - 1))
    delays = {r: delay_ms * (1.0 - 0.25 * i) for i, r in enumerate(chosen)}
    late = {
        r: frozenset(
            (c, k) for c in range(copies) for k in range(4) if rng.random() < STRAGGLE_SHARE
        )
        for r in chosen
    }
    offsets = [rng.uniform(-CLOCK_US, CLOCK_US) for _ in range(ranks)]
    return Plan(ranks=ranks, copies=copies, delays_ms=delays, late=late, offsets_us=offsets,
                seed=seed)  # fmt: skip


def _gaps(p: Plan, c: int, steps: int) -> list[float]:
    """What each step of copy ``c`` gains on every rank for its all-reduce: the all-reduce,
    the gaps around it, and the latest straggler's delay there."""
    out = []
    for k in range(steps):
        late = max((d for r, d in p.delays_ms.items() if (c, k) in p.late[r]), default=0.0)
        out.append(GAP_US + JITTER_US + TRANSFER_US + late * 1e3 + GAP_US)
    return out


def write_rank(t: Template, p: Plan, rank: int, path: Path) -> int:
    """Rank ``rank``'s trace at ``path``; its size in bytes, uncompressed."""
    rng = random.Random(p.seed * 100_003 + rank)
    head = {**t.head, "host_name": f"node{rank // 8:04d}"}
    head["distributedInfo"] = {**head.get("distributedInfo", {}), "rank": rank,
                               "world_size": p.ranks}  # fmt: skip
    written = 0
    with _open(path) as f:
        for chunk in _chunks(t, p, rank, head=head, rng=rng):
            f.write(chunk)
            written += len(chunk)
    return written


def _open(path: Path) -> IO[str]:
    if path.name.endswith(".gz"):
        return gzip.open(path, "wt", compresslevel=1)
    return path.open("w")


def _chunks(t: Template, p: Plan, rank: int, *, head: dict[str, Any],
            rng: random.Random) -> Iterator[str]:  # fmt: skip
    yield json.dumps(head)[:-1] + ', "traceEvents": [\n'
    shift = p.offsets_us[rank]
    for c in range(p.copies):
        gaps = _gaps(p, c, len(t.steps))
        before = [sum(gaps[:k]) for k in range(len(gaps) + 1)]
        out = [f"{a}{ts + shift + before[n]:.3f}{b}" for a, ts, b, n in t.events]
        for k, (a, n, b, ts, c2, dur, d) in enumerate(t.steps):
            out.append(f"{a}{c * 100 + n}{b}{ts + shift + before[k]:.3f}{c2}"
                       f"{dur + gaps[k]:.3f}{d}")  # fmt: skip
            out.append(_all_reduce(p, rank, c=c, k=k, at=t.step_ends[k] + shift + before[k],
                                   gap=gaps[k], rng=rng))  # fmt: skip
        yield ("" if c == 0 else ",\n") + ",\n".join(out)
        shift += t.span_us + COPY_GAP_US + before[-1]
    yield "\n]}\n"


def _all_reduce(p: Plan, rank: int, *, c: int, k: int, at: float, gap: float,
                rng: random.Random) -> str:  # fmt: skip
    """Step ``k`` of copy ``c``'s all-reduce: it ends at the same instant on every rank; a
    rank starts it after its jitter and, where it is late, its delay."""
    end = at + gap - GAP_US
    start = at + GAP_US + rng.uniform(0.0, JITTER_US)
    if rank in p.late and (c, k) in p.late[rank]:
        start += p.delays_ms[rank] * 1e3
    event = {"ph": "X", "cat": "kernel", "name": NCCL_KERNEL, "pid": 0, "tid": 20,
             "ts": round(start, 3), "dur": round(end - start, 3),
             "args": {"device": 0, "stream": 20, "context": 1}}  # fmt: skip
    return json.dumps(event)


def _write_one(args: tuple[Template, Plan, int, Path]) -> int:
    return write_rank(*args)


def build(t: Template, p: Plan, folder: Path, *, gz: bool, jobs: int) -> int:
    """Every rank's trace in ``folder`` (``jobs`` at a time); their bytes, uncompressed."""
    folder.mkdir(parents=True, exist_ok=True)
    suffix = ".json.gz" if gz else ".json"
    tasks = [(t, p, r, folder / f"rank-{r:05d}{suffix}") for r in range(p.ranks)]
    if jobs <= 1:
        return sum(map(_write_one, tasks))
    with ProcessPoolExecutor(jobs) as pool:
        return sum(pool.map(_write_one, tasks, chunksize=4))


@dataclass
class Sampler:
    """The memory of ``pid`` and its descendants, sampled every ``every_s``: PSS where the
    kernel gives it, else RSS; the parent's apart."""

    pid: int
    every_s: float = 0.1
    samples: list[tuple[float, float, float]] = field(default_factory=list)
    """(time, tree MB, parent MB)."""
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        root = psutil.Process(self.pid)
        while not self._stop.is_set():
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            sizes = [_mb(p) for p in procs]
            self.samples.append((time.monotonic(), sum(sizes), sizes[0]))
            time.sleep(self.every_s)

    def stop(self) -> None:
        self._stop.set()

    def peak(self, start: float, end: float) -> tuple[float, float, float]:
        """(tree, parent, children) peaks between ``start`` and ``end``."""
        inside = [s for s in self.samples if start <= s[0] <= end] or self.samples[-1:]
        return (max(s[1] for s in inside), max(s[2] for s in inside),
                max(s[1] - s[2] for s in inside))  # fmt: skip

    def parent_at(self, when: float) -> float:
        return min(self.samples, key=lambda s: abs(s[0] - when))[2]


def _mb(p: psutil.Process) -> float:
    try:
        info = p.memory_full_info()
        return float(getattr(info, "pss", info.rss)) / 1e6
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return 0.0


_DRIVER = """
import sys
from clusterbench.analyses.trace import attribution as trace_attribution
from clusterbench.cli import main

inner = trace_attribution.attribute


def marked(*args, **kwargs):
    print("phase: attribute", file=sys.stderr, flush=True)
    try:
        return inner(*args, **kwargs)
    finally:
        print("phase: write", file=sys.stderr, flush=True)


trace_attribution.attribute = marked
sys.argv = ["clusterbench", *sys.argv[1:]]
main()
"""
"""`clusterbench analyze` as its command runs it, the attribution's start and end marked on
stderr (analyze_traces calls it through its module)."""

_READ_LINE = re.compile(r"^read (\d+)/(\d+): ")
PHASES = ("start", "read", "attribute", "write")
"""start: imports and the pool, until the first file is read; read: until the last is;
attribute: the traces' checks and trace_attribution.attribute; write: the measurements, the
findings and the run folder."""


@dataclass(kw_only=True)
class Timed:
    begins: dict[str, float]
    """When each phase began."""
    ended: float
    code: int
    stderr_tail: str

    def span(self, phase: str) -> tuple[float, float]:
        later = [self.begins[p] for p in PHASES[PHASES.index(phase) + 1 :] if p in self.begins]
        return self.begins.get(phase, self.ended), min([*later, self.ended])


def run_analyze(
    folder: Path, out: Path, *, jobs: int, sampler_every_s: float
) -> tuple[Timed, Sampler]:
    """`clusterbench analyze FOLDER --jobs J -v` in a process of its own, its memory sampled,
    its phases told from its 'read N/N' lines and the attribution's marks."""
    cmd = [sys.executable, "-c", _DRIVER, "analyze", str(folder), "-o", str(out),
           "--no-history", "--jobs", str(jobs), "-v"]  # fmt: skip
    begins = {"start": time.monotonic()}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    sampler = Sampler(proc.pid, every_s=sampler_every_s)
    watcher = threading.Thread(target=sampler.run, daemon=True)
    watcher.start()
    tail: list[str] = []
    assert proc.stderr is not None
    for line in proc.stderr:
        m = _READ_LINE.match(line)
        if m and m.group(1) == "1":
            begins["read"] = time.monotonic()
        if m and m.group(1) == m.group(2):
            begins["attribute"] = time.monotonic()
        if line.startswith("phase: write"):
            begins["write"] = time.monotonic()
        tail = [*tail[-19:], line]
    code = proc.wait()
    ended = time.monotonic()
    sampler.stop()
    watcher.join()
    return Timed(begins=begins, ended=ended, code=code, stderr_tail="".join(tail)), sampler


def named(results: dict[str, Any], planted: dict[int, float]) -> list[str]:
    """For each planted straggler: whether a finding names it, and where the ranks' what-if
    savings (what the job would save were that rank on time) place it."""
    findings = results.get("findings", [])
    straggler = {f["evidence"].get("rank") for f in findings if f["id"] == "attribution.straggler"}
    slow = {f["evidence"].get("rank") for f in findings if f["id"] == "attribution.slow_rank"}
    saving = {
        m["rank"]: m["value"]
        for m in results.get("measurements", [])
        if m["metric"] == "whatif_saving_ms"
        and m["params"].get("whatif") == "straggler"
        and m["params"].get("rank_step", "mean") == "mean"
    }
    order = sorted(saving, key=lambda r: -saving[r])
    lines = []
    for r, delay in sorted(planted.items(), key=lambda kv: -kv[1]):
        where = ("the straggler finding" if r in straggler
                 else "a slow-rank finding" if r in slow else "no finding")  # fmt: skip
        place = "no what-if saving"
        if r in saving:
            place = f"#{order.index(r) + 1} of {len(order)} by what-if saving ({saving[r]:.2f} ms)"
        lines.append(
            f"rank {r} (late {delay:.2f} ms in ~half its steps): named in {where}; {place}"
        )
    others = sorted(straggler - set(planted))
    if others:
        lines.append(f"not planted, named the straggler: {others}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--mb", type=float, default=100.0, help="MB of JSON per rank")
    parser.add_argument("--jobs", type=int, default=default_jobs())
    parser.add_argument("--stragglers", type=int, default=3)
    parser.add_argument("--delay-ms", type=float, default=6.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gzip", action="store_true", help="write .json.gz")
    parser.add_argument("--keep", type=Path, help="write the traces here, and keep them")
    parser.add_argument(
        "--source", type=Path, default=next((ROOT / "tests/data/traces/h100").glob("*.gz"))
    )
    parser.add_argument("--goal-ranks", type=int, default=1024)
    parser.add_argument("--goal-mb", type=float, default=100.0)
    parser.add_argument("--goal-cores", type=int, default=16)
    args = parser.parse_args()
    template = load(args.source)
    copies = max(1, round(args.mb * 1e6 / template.bytes_per_copy))
    p = make_plan(ranks=args.ranks, copies=copies, stragglers=args.stragglers,
                  delay_ms=args.delay_ms, seed=args.seed)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="trace-ranks-") as tmp:
        folder = args.keep or Path(tmp) / "traces"
        _report(template, p, folder=folder, out=Path(tmp) / "run", args=args)


def _report(t: Template, p: Plan, *, folder: Path, out: Path, args: argparse.Namespace) -> None:
    stamp = folder / (
        f".built-{p.ranks}-{p.copies}-{p.seed}-{int(args.gzip)}-{args.stragglers}-{args.delay_ms:g}"
    )
    t0 = time.monotonic()
    if stamp.exists():
        total = int(stamp.read_text())
        print(f"traces: {p.ranks} ranks already in {folder}")
    else:
        total = build(t, p, folder, gz=args.gzip, jobs=args.jobs)
        stamp.write_text(str(total))
        print(
            f"built {p.ranks} ranks x {total / p.ranks / 1e6:.1f} MB ({total / 1e9:.2f} GB of "
            f"JSON, {p.copies * 4} steps a rank) in {time.monotonic() - t0:.0f} s"
        )
    on_disk = sum(f.stat().st_size for f in folder.glob("rank-*"))
    load = os.getloadavg()[0]
    print(f"{default_jobs()} cores here, load average {load:.1f} before the run")
    timed, sampler = run_analyze(folder, out, jobs=args.jobs, sampler_every_s=0.1)
    if timed.code not in (0, 1):
        sys.exit(f"clusterbench analyze exited {timed.code}:\n{timed.stderr_tail}")
    mb = total / 1e6
    print(
        f"analyze --jobs {args.jobs}: {timed.ended - timed.begins['start']:.1f} s in all (exit "
        f"code {timed.code}); {mb:,.0f} MB of JSON, {on_disk / 1e6:,.0f} MB on disk"
    )
    figures: dict[str, tuple[float, float, float, float]] = {}
    for phase in PHASES:
        start, end = timed.span(phase)
        tree, parent, children = sampler.peak(start, end)
        figures[phase] = (end - start, tree, parent, children)
        print(
            f"  {phase:9s} {end - start:7.1f} s   peak {tree:8,.0f} MB (the process tree's "
            f"PSS; analyze's own {parent:,.0f} MB, its workers {children:,.0f} MB)"
        )
    read_s = figures["start"][0] + figures["read"][0]
    rate = mb / read_s / args.jobs
    print(f"  read rate: {mb / read_s:.1f} MB/s from the start, {rate:.1f} MB/s per core")
    results = json.loads((out / "results.json").read_text())
    sizes = ", ".join(f"{f.name} {f.stat().st_size / 1e6:,.1f} MB"
                      for f in sorted(out.iterdir()) if f.is_file())  # fmt: skip
    print(f"  run folder: {len(results['measurements']):,} measurements; {sizes}")
    for line in named(results, p.delays_ms):
        print(f"  straggler {line}")
    _extrapolate(args, mb=mb, rate=rate, figures=figures, workers=min(args.jobs, p.ranks),
                 base=sampler.parent_at(timed.span("read")[0]),
                 held=sampler.parent_at(timed.span("attribute")[0]))  # fmt: skip


def _extrapolate(args: argparse.Namespace, *, mb: float, rate: float,
                 figures: dict[str, tuple[float, float, float, float]], workers: int,
                 base: float, held: float) -> None:  # fmt: skip
    """The goal's figures: the reading at the measured rate per core on the goal's cores; the
    phases after it (one process) and analyze's own memory above ``base`` (its size as the
    first file is read) in proportion to the MB of trace; the workers' memory in proportion
    to their number.  ``held``: analyze's size once every file is read."""
    scale = args.goal_ranks * args.goal_mb / mb
    read_s = args.goal_ranks * args.goal_mb / (rate * args.goal_cores)
    after = {p: figures[p][0] * scale for p in ("attribute", "write")}
    per_worker = figures["read"][3] / max(1, workers)
    memory = {
        "read": base + (held - base) * scale + per_worker * args.goal_cores,
        **{p: base + (figures[p][2] - base) * scale for p in ("attribute", "write")},
    }
    total_min = (read_s + sum(after.values())) / 60
    peak = max(memory.values())
    phases = ", ".join(f"{p} {s / 60:.1f} min" for p, s in after.items())
    late = "met" if total_min <= 10 else f"missed by {total_min - 10:.1f} min"
    print(
        f"extrapolated to {args.goal_ranks} ranks x {args.goal_mb:.0f} MB on {args.goal_cores} "
        f"cores: read {read_s / 60:.1f} min, {phases}: {total_min:.1f} min (goal 10: {late})"
    )
    over = "met" if peak <= 16e3 else f"missed by {(peak - 16e3) / 1e3:.1f} GB"
    sizes = ", ".join(f"{p} {m / 1e3:.1f} GB" for p, m in memory.items())
    print(f"  peak memory: {sizes} (goal 16 GB: {over})")


if __name__ == "__main__":
    main()
