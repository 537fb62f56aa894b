"""``clusterbench ARGS...`` with the wall time of the steps a run's phases leave out, for
scripts/gpu_validate.sh startup: where the seconds between the last benchmark and the
process's end go.

Prints one line to stderr at exit, ``marks: launch 0.41  workers ended 5.00  finish from 5.04
finish to 5.22  print from 5.22  print to 5.25  exits from 5.25  exits to 5.40  exit 5.41``:
seconds since this process started (its own start, as ``run.phase_seconds`` counts ``start``).
``workers ended`` is when every worker said it was done; ``exits`` is the wait, after the
print, for their processes to end.  With the run's phases, the workers' wind-down is
``workers ended`` - ``launch`` - (worker start + device init + probe + telemetry start +
the benchmarks' seconds).

    python3 scripts/run_marks.py run --no-history --out DIR
"""

from __future__ import annotations

import atexit
import sys
import time


def main() -> None:
    from clusterbench.runtime.phases import process_age_s

    age = process_age_s() or 0.0
    zero = time.monotonic() - age
    marks: dict[str, float] = {}

    def mark(name: str) -> None:
        marks.pop(name, None)  # a step timed twice: its last time, in the order it came
        marks[name] = time.monotonic() - zero

    def timed(module: object, attr: str, before: str, after: str) -> None:
        inner = getattr(module, attr)

        def wrapper(*args: object, **kwargs: object) -> object:
            mark(before)
            try:
                return inner(*args, **kwargs)
            finally:
                mark(after)

        setattr(module, attr, wrapper)

    import clusterbench.cli.run as cli_run
    import clusterbench.pipeline.start as start

    timed(start, "launch_local", "launch", "workers ended")
    timed(start, "finish", "finish from", "finish to")
    timed(cli_run, "_print_run", "print from", "print to")
    import clusterbench.runtime.launch as launch

    timed(launch, "wait_for_workers", "exits from", "exits to")

    def report() -> None:
        mark("exit")
        shown = "  ".join(f"{name} {seconds:.2f}" for name, seconds in marks.items())
        print(f"marks: {shown}", file=sys.stderr)

    atexit.register(report)
    from clusterbench.entry import main as entry_main

    sys.argv = ["clusterbench", *sys.argv[1:]]
    entry_main()


if __name__ == "__main__":  # the workers' fork server imports this file as __mp_main__
    main()
