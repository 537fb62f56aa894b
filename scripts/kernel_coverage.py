"""How much of each trace's device time the kernel-family table classes, family by family.

    python scripts/kernel_coverage.py TRACE_OR_DIR [...] [--top 10] [--max-unclassified-pct 1]
    python scripts/kernel_coverage.py --docs > docs/kernel-families.md

Per trace file (torch.profiler / Kineto JSON, .json or .json.gz; folders are searched), it
prints the device time (kernels, copies, memsets), each family's share of it, the unclassified
share with its largest unclassified names, and the names that look like communication (NCCL,
all-reduce, all-to-all, dispatch/combine, send/recv...) but are not classed so. It exits 1
when a trace's unclassified share is above --max-unclassified-pct or a communication-looking
name is not classed as communication.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from clusterbench.analyses.trace.formats import open_trace
from clusterbench.traces.kernels import classify, families_page

DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"})
# names that a reader would take for communication; each must be classed "comm"
COMM_LOOKING = re.compile(
    r"nccl|rccl|msccl|nvshmem|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|"
    r"sendrecv|deep_ep|cross_device|multimem",
    re.IGNORECASE,
)


@dataclass
class Coverage:
    """One trace's device time by family, in µs."""

    path: Path
    total_us: float = 0.0
    by_family: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    unclassified: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    """Unclassified names and their µs."""
    comm_misclassed: dict[str, str] = field(default_factory=dict)
    """Communication-looking names and the family they got (or "unclassified")."""

    @property
    def unclassified_pct(self) -> float:
        return 100.0 * sum(self.unclassified.values()) / self.total_us if self.total_us else 0.0

    def top_unclassified(self, n: int) -> list[tuple[str, float]]:
        return sorted(self.unclassified.items(), key=lambda kv: -kv[1])[:n]


def device_times(path: Path) -> dict[tuple[str, str], float]:
    """Total µs of each (category, name) of the trace's device activities."""
    import ijson

    out: dict[tuple[str, str], float] = defaultdict(float)
    with open_trace(path) as stream:
        for e in ijson.items(stream, "traceEvents.item", use_float=True):
            if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in DEVICE_CATS:
                out[(str(e["cat"]), str(e.get("name", "")))] += float(e.get("dur") or 0.0)
    return out


def coverage(path: Path, times: dict[tuple[str, str], float]) -> Coverage:
    """The family shares of one trace's device times."""
    out = Coverage(path)
    for (cat, name), us in times.items():
        out.total_us += us
        family = classify(name, cat)
        if family is None:
            out.unclassified[name] += us
        else:
            out.by_family[family.name] += us
        if COMM_LOOKING.search(name) and (family is None or family.kind != "comm"):
            out.comm_misclassed[name] = family.name if family else "unclassified"
    return out


def find_traces(paths: Iterable[str]) -> Iterator[Path]:
    for given in paths:
        path = Path(given)
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.name.endswith((".json", ".json.gz")))
        else:
            yield path


def _print(cov: Coverage, *, top: int) -> None:
    print(f"{cov.path}  device {cov.total_us / 1e3:.1f} ms  "
          f"unclassified {cov.unclassified_pct:.2f}%")  # fmt: skip
    for name, us in sorted(cov.by_family.items(), key=lambda kv: -kv[1]):
        print(f"  {100 * us / cov.total_us:6.2f}%  {name}")
    for name, us in cov.top_unclassified(top):
        print(f"  unclassified {100 * us / cov.total_us:6.2f}%  {name[:160]}")
    for name, family in sorted(cov.comm_misclassed.items()):
        print(f"  NOT COMM ({family}): {name[:160]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="*")
    parser.add_argument("--docs", action="store_true", help="print docs/kernel-families.md")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--max-unclassified-pct", type=float, default=1.0)
    args = parser.parse_args(argv)
    if args.docs:
        sys.stdout.write(families_page())
        return 0
    failed = 0
    for path in find_traces(args.traces):
        times = device_times(path)
        if not times:
            print(f"{path}  no device activity")
            continue
        cov = coverage(path, times)
        _print(cov, top=args.top)
        failed += cov.unclassified_pct > args.max_unclassified_pct or bool(cov.comm_misclassed)
    print(f"{failed} trace(s) above {args.max_unclassified_pct}% unclassified or with "
          "communication not classed so")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
