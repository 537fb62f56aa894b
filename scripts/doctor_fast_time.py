"""Does ``clusterbench doctor --fast`` finish in under 10 s on this machine?  Runs the real
command ``--runs`` times (a new process each, as a Slurm prolog or a Kubernetes probe starts
it), prints each wall time and the median, and exits 1 when the slowest run takes longer than
``--limit-s`` (or a run exits with neither 0 nor 1).  ``--hang-commands`` puts programs that
never return first on PATH under the names doctor runs (journalctl, dmesg, lspci, nvidia-smi):
the command must still end in time, naming them.

    python scripts/doctor_fast_time.py                    # 5 runs, limit 10 s
    python scripts/doctor_fast_time.py --hang-commands
    python scripts/doctor_fast_time.py --runs 9 -- --checkpoint-dir /scratch
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_HUNG = ("journalctl", "dmesg", "lspci", "nvidia-smi")


def _command(extra: list[str]) -> tuple[list[str], str]:
    """The command, and how to print it: the console script as a scheduler calls it."""
    args = ["doctor", "--fast", *extra]
    exe = shutil.which("clusterbench")
    if exe is None:
        return [sys.executable, "-m", "clusterbench", *args], " ".join(
            ["python -m clusterbench", *args]
        )
    return [exe, *args], " ".join(["clusterbench", *args])


def _hung_path(folder: Path) -> dict[str, str]:
    """An environment whose PATH starts with programs that sleep for a minute."""
    for name in _HUNG:
        program = folder / name
        program.write_text("#!/bin/sh\nexec sleep 60\n")
        program.chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--limit-s", type=float, default=10.0)
    parser.add_argument("--hang-commands", action="store_true", help=f"hung {', '.join(_HUNG)}")
    parser.add_argument("extra", nargs="*", help="after --: more 'doctor --fast' arguments")
    args = parser.parse_args()
    cmd, shown = _command(args.extra)
    hung = Path(tempfile.mkdtemp(prefix="hung-")) if args.hang_commands else None
    env = _hung_path(hung) if hung else None
    print(f"$ {shown}  ({args.runs} runs" + (", hung commands on PATH)" if hung else ")"))
    seconds: list[float] = []
    for i in range(args.runs):
        start = time.perf_counter()
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=120, check=False, env=env
        )
        seconds.append(time.perf_counter() - start)
        last = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
        print(f"run {i + 1}: {seconds[-1]:.2f} s, exit {proc.returncode}: {last}")
        if hung:
            for line in proc.stdout.splitlines()[:-1]:
                print(f"    {line[:160]}")
        if proc.returncode not in (0, 1):
            print(f"FAIL: exit {proc.returncode}: {proc.stderr.strip()[-500:]}")
            return 1
    median, slowest = statistics.median(seconds), max(seconds)
    verdict = "OK" if slowest <= args.limit_s else "FAIL"
    print(
        f"{verdict}: median {median:.2f} s, min {min(seconds):.2f} s, max {slowest:.2f} s "
        f"over {args.runs} runs (limit {args.limit_s:g} s)"
    )
    return 0 if verdict == "OK" else 1


if __name__ == "__main__":
    sys.exit(main())
