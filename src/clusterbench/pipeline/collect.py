"""How a rank's records reach results.json: the run's :class:`Collector`.

- :class:`FileCollector` when clusterbench started the workers: the parent reads every rank's
  file when they end, however they end, and assembles the run;
- :class:`GatherCollector` under torchrun/srun/mpirun: there is no parent, so rank 0 gathers
  every rank's new records after each benchmark and rewrites results.json with what it has so
  far (assembled, not analysed), and finishes the run once at its end -- or, when a rank
  fails, says what happened (from what it gathered, the files it can see, and every rank's
  flight record in the run's store).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import torch.distributed as dist

from clusterbench.exits import EXIT_RUN_ERROR
from clusterbench.pipeline.assemble import dedupe
from clusterbench.pipeline.spec import RunSpec
from clusterbench.runtime.dist import DistContext
from clusterbench.runtime.flight import FlightState, parse_flight, read_flights, store_key
from clusterbench.runtime.records import Error, RankLog, Record, read_rank_file, read_records

if TYPE_CHECKING:
    from clusterbench.pipeline.finish import Finished

__all__ = ["EXIT_INTERRUPTED", "Collector", "FileCollector", "GatherCollector", "flight_store"]

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a process ended by Ctrl-C


class Collector(Protocol):
    """How this rank's records reach results.json."""

    gathers: bool
    """Records also travel over the network (RankLog keeps them until gathered)."""
    interrupted_exit_code: int

    def after_benchmark(self, ctx: DistContext, log: RankLog) -> None: ...

    def finished(self, ctx: DistContext) -> None: ...

    def failed(self, ctx: DistContext, log: RankLog) -> None: ...

    def interrupted(self, ctx: DistContext) -> None: ...


class FileCollector:
    """clusterbench started the workers: the parent reads each rank's file when they end."""

    gathers = False
    interrupted_exit_code = EXIT_INTERRUPTED

    def after_benchmark(self, ctx: DistContext, log: RankLog) -> None:
        pass

    def finished(self, ctx: DistContext) -> None:
        pass

    def failed(self, ctx: DistContext, log: RankLog) -> None:
        pass

    def interrupted(self, ctx: DistContext) -> None:
        pass


class GatherCollector:
    """A launcher started the workers: rank 0 gathers and writes results.json as the run goes."""

    gathers = True
    interrupted_exit_code = EXIT_RUN_ERROR

    def __init__(self, spec: RunSpec, store: dist.Store | None = None) -> None:
        self.spec = spec
        self.store = store
        """The run's store, where every rank also keeps its flight record (other nodes'
        files are not visible to rank 0)."""
        self.gathered: list[Record] = []
        self.finished_run: Finished | None = None
        """Rank 0's finished run, once the loop has ended."""

    def after_benchmark(self, ctx: DistContext, log: RankLog) -> None:
        """Rank 0 collects every rank's new records and rewrites results.json with them."""
        everyone = ctx.gather_to_root(log.take_unsent())
        if ctx.rank != 0 or everyone is None:
            return
        for recs in everyone:
            self.gathered.extend(recs)
        from clusterbench.pipeline.finish import ResultsWriteError, write_partial

        # A full disk does not stop the measuring: the final write tries again and a failure
        # there reaches the CLI (with the results from memory).
        with contextlib.suppress(ResultsWriteError):
            write_partial(self.spec, records=self.gathered, world_size=ctx.world_size,
                          flights=read_flights(Path(self.spec.run_dir)))  # fmt: skip

    def finished(self, ctx: DistContext) -> None:
        if ctx.rank == 0:
            self.finished_run = self._finish(ctx.world_size)

    def failed(self, ctx: DistContext, log: RankLog) -> None:
        """No parent assembles the run: the ranks say what happened.

        A rank that failed on its own says so on stderr; rank 0 rewrites results.json from what
        it gathered and what the partial files it can see hold, and names the first cause.
        """
        from clusterbench.pipeline.finish import ResultsWriteError

        mine = [r for r in read_rank_file(log.path) if isinstance(r, Error)]
        if mine and not (mine[-1].while_waiting or mine[-1].in_collective):
            print(f"clusterbench: rank {ctx.rank} on host {ctx.host} failed in "
                  f"{mine[-1].benchmark}: {mine[-1].message}", file=sys.stderr)  # fmt: skip
        if ctx.rank != 0:
            return
        if not mine or mine[-1].while_waiting or mine[-1].in_collective:
            # let the rank that failed first write its record, and the heartbeats of the ranks
            # still alive go on past the error (a dead rank's stopped before it)
            time.sleep(2.0)
        try:
            results = self._finish(ctx.world_size).results
        except ResultsWriteError as exc:
            if exc.results.errors:
                print(f"clusterbench: run failed: {exc.results.errors[0].message}",
                      file=sys.stderr)  # fmt: skip
            print(f"clusterbench: error: {exc}", file=sys.stderr)
            return
        if results.errors:
            print(f"clusterbench: run failed: {results.errors[0].message}; results kept in "
                  f"{self.spec.run_dir}", file=sys.stderr)  # fmt: skip

    def interrupted(self, ctx: DistContext) -> None:
        from clusterbench.pipeline.finish import ResultsWriteError

        if ctx.rank == 0:
            try:
                self._finish(ctx.world_size, interrupted=True)
            except ResultsWriteError as exc:
                print(f"clusterbench: interrupted; error: {exc}", file=sys.stderr)
                return
            print(f"clusterbench: interrupted; results kept in {self.spec.run_dir}",
                  file=sys.stderr)  # fmt: skip

    def _finish(self, world_size: int, *, interrupted: bool = False) -> Finished:
        # imported when the run is finished: the workers' fork server loads this module, and
        # the analysis, the report and the history are the parent's (or, under a launcher, rank 0's)
        from clusterbench.pipeline.finish import finish

        records = dedupe([*self.gathered, *read_records(Path(self.spec.run_dir))])
        flights = {**self._stored_flights(world_size), **read_flights(Path(self.spec.run_dir))}
        return finish(self.spec, records=records, failures=[], world_size=world_size,
                        interrupted=interrupted, flights=flights)  # fmt: skip

    def _stored_flights(self, world_size: int) -> dict[int, FlightState]:
        out: dict[int, FlightState] = {}
        if self.store is None:
            return out
        for rank in range(world_size):
            try:
                if self.store.check([store_key(rank)]):
                    state = parse_flight(self.store.get(store_key(rank)))
                    if state is not None:
                        out[rank] = state
            except RuntimeError:  # the store went with its host: what the files say must do
                break
        return out


def flight_store() -> dist.Store | None:
    """A client of the run's store (the launcher's MASTER_ADDR:MASTER_PORT), its own connection
    so that the heartbeat thread never shares one with the main thread."""
    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if not addr or not port:
        return None
    try:
        return dist.TCPStore(addr, int(port), is_master=False, timeout=timedelta(seconds=10))
    except (RuntimeError, ValueError):
        return None
