"""Telemetry sampling: one background thread per GPU rank polls its GPU while the run goes on.

The sampler reads its GPU through a :class:`GpuReader` (NVML or amdsmi, made in
``hardware/gpu_telemetry.py``) every ``interval_s`` into an in-memory series, and appends each
sample to the rank's CSV in the run folder, ``telemetry/rank-NNNNN.csv``: ``t`` (unix s),
``benchmark`` (empty between benchmarks), then :data:`~clusterbench.schema.TELEMETRY_FIELDS`
(an empty cell: not reported).  The worker marks the windows: :meth:`TelemetrySampler.begin`
when a benchmark starts, :meth:`~TelemetrySampler.mark` each time the benchmark records
something (the summary since its previous record), :meth:`~TelemetrySampler.end` when it ends
(its whole window, a :class:`~clusterbench.schema.TelemetryWindow`).

It never raises into the benchmark: a read that fails is counted and its sample left out, a
CSV that cannot be written is closed and the series kept in memory.  The series holds the
current benchmark's samples only (:meth:`~TelemetrySampler.begin` drops the earlier ones), so a
long soak does not grow it.  :meth:`~TelemetrySampler.stop` joins the thread with a timeout.
"""

from __future__ import annotations

import bisect
import csv
import io
import math
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any, Protocol

from clusterbench.runtime.telemetry_summary import Sample, summarize
from clusterbench.schema import TELEMETRY_FIELDS, TelemetrySummary, TelemetryWindow

__all__ = [
    "CSV_COLUMNS",
    "TELEMETRY_DIR",
    "GpuReader",
    "Sample",
    "TelemetrySampler",
    "read_series",
    "series_path",
]

TELEMETRY_DIR = "telemetry"
CSV_COLUMNS = ("t", "benchmark", *TELEMETRY_FIELDS)


class GpuReader(Protocol):
    """What the sampler reads: one GPU's telemetry, one sample a call."""

    source: str
    """``nvml`` or ``amdsmi``."""
    max_sm_clock_mhz: float | None
    temp_slowdown_c: float | None

    def read(self) -> Mapping[str, float | None]: ...
    def reason_names(self, mask: int) -> list[str]: ...
    def close(self) -> None: ...


def series_path(run_dir: Path, rank: int) -> Path:
    return Path(run_dir) / TELEMETRY_DIR / f"rank-{rank:05d}.csv"


class TelemetrySampler:
    """Polls ``reader`` every ``interval_s`` on a daemon thread (see the module's docstring)."""

    def __init__(
        self,
        reader: GpuReader,
        *,
        interval_s: float,
        rank: int,
        host: str,
        device: str,
        run_dir: Path | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.reader, self.interval_s = reader, interval_s
        self.rank, self.host, self.device = rank, host, device
        self._run_dir, self._clock = run_dir, clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"telemetry-{rank}", daemon=True)
        self._samples: list[Sample] = []
        self._times: list[float] = []
        self._benchmark: str = ""
        self._round: int | None = None
        self._begun = self._marked = 0.0
        self._file: IO[str] | None = None
        self._csv: Any = None
        self.series: str | None = None
        """The CSV, relative to the run folder (None: not written)."""
        self.polls = 0
        self.poll_seconds = 0.0
        """Seconds spent in reads, over all polls (the sampler's own cost)."""
        self.failed_reads = 0
        self.last_error: str | None = None

    # --------------------------------------------------------------- the worker's side

    def start(self) -> None:
        """Open the CSV and start polling (a first sample at once, then every interval)."""
        self.open_series()
        self._thread.start()

    def open_series(self) -> None:
        """Open the rank's CSV (a folder that cannot take it costs the file, not the
        sampling); a file already there is appended to, under its own header."""
        if self._run_dir is not None and self._file is None:
            path = series_path(self._run_dir, self.rank)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._file = open(path, "a", encoding="utf-8", newline="")  # noqa: SIM115
                self._csv = csv.writer(self._file)
                if self._file.tell() == 0:
                    self._csv.writerow(CSV_COLUMNS)
                self.series = str(path.relative_to(self._run_dir))
            except OSError as exc:
                self._close_file(f"cannot write {path}: {exc.strerror or exc}")

    def begin(self, benchmark: str, *, round: int | None = None) -> None:
        """``benchmark`` starts now: its window (and its first record's) opens."""
        now = self._clock()
        with self._lock:
            keep = bisect.bisect_left(self._times, now)
            del self._samples[:keep], self._times[:keep]
            self._benchmark, self._round = benchmark, round
            self._begun = self._marked = now

    def mark(self) -> TelemetrySummary | None:
        """The summary since the previous record of this benchmark (or its start), up to now;
        the next record's window opens now.  None when no sample fell in it."""
        now = self._clock()
        with self._lock:
            since, self._marked = self._marked, now
        return self.summary(since, now)

    def end(self) -> TelemetryWindow:
        """The benchmark's window, start to now, with its summary; samples between
        benchmarks are labelled with none."""
        now = self._clock()
        with self._lock:
            benchmark, soak_round, begun = self._benchmark, self._round, self._begun
            self._benchmark, self._round = "", None
        return TelemetryWindow(
            rank=self.rank,
            host=self.host,
            device=self.device,
            benchmark=benchmark,
            round=soak_round,
            start=round_s(begun),
            end=round_s(now),
            summary=self.summary(begun, now),
            series=self.series,
            source=self.reader.source,
        )

    def summary(self, start: float, end: float) -> TelemetrySummary | None:
        """The summary of the samples taken from ``start`` to ``end`` (unix s)."""
        with self._lock:
            lo = bisect.bisect_left(self._times, start)
            hi = bisect.bisect_right(self._times, end)
            inside = self._samples[lo:hi]
        return summarize(
            inside,
            window_s=end - start,
            reason_names=self.reader.reason_names,
            sm_clock_max_mhz=self.reader.max_sm_clock_mhz,
            temp_slowdown_c=self.reader.temp_slowdown_c,
        )

    @property
    def running(self) -> bool:
        """Whether the polling thread is alive."""
        return self._thread.is_alive()

    def samples(self) -> list[Sample]:
        """The samples held now (the current benchmark's, and any taken after it)."""
        with self._lock:
            return list(self._samples)

    def stop(self, timeout_s: float = 5.0) -> bool:
        """Stop polling and wait up to ``timeout_s`` for the thread; then close the CSV and
        (once the thread is out of it) the reader.  False: the thread did not end in time."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        stopped = not self._thread.is_alive()
        with self._lock:
            self._close_file(None)
        if stopped:
            try:
                self.reader.close()
            except Exception as exc:  # closing a session must not cost the run its end
                self.last_error = f"closing the reader: {type(exc).__name__}: {exc}"
        return stopped

    # --------------------------------------------------------------- the thread's side

    def _loop(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.poll()
            next_at += self.interval_s
            wait = next_at - time.monotonic()
            if wait < 0:  # a slow poll: go on from now, not in a burst to catch up
                next_at, wait = time.monotonic(), 0.0
            self._stop.wait(wait)

    def poll(self) -> None:
        """Take one sample now (the thread calls it every interval; tests call it directly)."""
        t = self._clock()
        started = time.perf_counter()
        try:
            values = dict(self.reader.read())
        except Exception as exc:  # the sampler must never end the run; the sample is lost
            self.failed_reads += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            return
        finally:
            self.poll_seconds += time.perf_counter() - started
            self.polls += 1
        with self._lock:
            self._samples.append(Sample(t, self._benchmark, values))
            self._times.append(t)
            self._write(t, self._benchmark, values)

    def _write(self, t: float, benchmark: str, values: Mapping[str, float | None]) -> None:
        if self._csv is None or self._file is None:
            return
        try:
            self._csv.writerow([f"{t:.3f}", benchmark, *(_cell(values.get(k)) for k in
                                                        TELEMETRY_FIELDS)])  # fmt: skip
            self._file.flush()  # a killed rank keeps what it sampled
        except OSError as exc:  # a full disk: keep sampling into memory
            self._close_file(f"cannot write {self.series}: {exc.strerror or exc}")

    def _close_file(self, error: str | None) -> None:
        if error is not None:
            self.last_error, self.series = error, None
        if self._file is not None:
            try:
                self._file.close()
            except OSError as exc:
                self.last_error = f"closing {self.series}: {exc.strerror or exc}"
        self._file, self._csv = None, None


def round_s(t: float) -> float:
    return round(t, 3)


def _cell(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return ""
    return str(int(value)) if float(value).is_integer() else f"{value:.6g}"


def read_series(path: Path) -> list[Sample]:
    """The samples of one rank's CSV; rows that do not parse (a torn last line) are left out."""
    text = Path(path).read_text(encoding="utf-8")
    samples = []
    for row in csv.DictReader(io.StringIO(text)):
        try:
            values = {k: float(row[k]) if row.get(k) else None for k in TELEMETRY_FIELDS}
            samples.append(Sample(float(row["t"]), row.get("benchmark") or "", values))
        except (KeyError, TypeError, ValueError):
            continue
    return samples
