"""What a run is asked to do: :class:`RunOptions`, the one argument of
:func:`clusterbench.run` (``clusterbench run`` builds one from its options)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clusterbench.analyses.baseline import Baseline
    from clusterbench.schema import Results

__all__ = ["RunOptions"]


@dataclass(frozen=True, kw_only=True, slots=True)
class RunOptions:
    """The options of one run, as ``clusterbench run`` takes them (its ``--help`` names the
    flag of each); every field has the command's default.  The lists (``only``, ``skip``,
    ``sets``, ``exports``) may be given as any sequence and are kept as tuples::

        clusterbench.run(RunOptions(device="cpu", baseline="builtin"))
    """

    suite: str | None = None
    """``quick``, ``standard`` or ``full`` (None: the config file's suite, else quick)."""
    only: Sequence[str] = ()
    """Run only these benchmarks (``clusterbench list`` names them)."""
    skip: Sequence[str] = ()
    """Leave these benchmarks out."""
    config_file: Path | None = None
    """A TOML file selecting and tuning benchmarks and thresholds (``--config``)."""
    sets: Sequence[str] = ()
    """Overrides of one setting each, ``SECTION.KEY=VALUE`` (``--set gemm.dtypes=bf16``)."""
    out: Path | None = None
    """The run folder to write (None: ``clusterbench-runs/<UTC time>-<host>``)."""
    nproc: int | None = None
    """Workers on this node (None: one per GPU, or 2 on CPU)."""
    oversubscribe: bool = False
    """Allow more CPU workers than cores (up to 4x the cores, at most 256)."""
    device: str = "auto"
    """``auto`` (GPUs when present), ``cuda`` or ``cpu``."""
    nccl_debug: bool = False
    """Run NCCL with ``NCCL_DEBUG=INFO`` and keep each rank's log in the run folder."""
    telemetry: bool | None = None
    """Sample each GPU's telemetry while the benchmarks run (None: the config file's key,
    else on)."""
    telemetry_interval_s: float | None = None
    """Seconds between two telemetry samples (None: the config file's key, else 0.1)."""
    timeout_s: float | None = None
    """Seconds one benchmark may take on one rank before the run is ended (None: 900)."""
    soak: str | None = None
    """A duration (``2h``, ``30m``): repeat the benchmarks round after round for this long,
    every round kept (``run.soak`` in the results)."""
    repeat: int | None = None
    """A number of rounds: repeat the benchmarks this many times (not with ``soak``)."""
    budget: str | None = None
    """A duration (``10m``): the whole run should take this long; every benchmark is cut to
    its share and stops at it (``run.plan`` says what was cut)."""
    plan_only: bool = False
    """Make the plan, hand it to ``announce`` and return (exit code 0, no results) without
    starting a worker or writing anything."""
    baseline: str | Results | Baseline | None = None
    """At the end, compare the run with this run folder, results.json, baseline file, run id
    of the history or ``builtin`` (or a loaded run or baseline): comparison.json, its
    regressions among the findings."""
    expect_nodes: int | None = None
    """Nodes the run must span: with fewer, it stops at once, naming those that joined."""
    join_timeout_s: float | None = None
    """Seconds the ranks have to join under a launcher (None: 300, or ``timeout_s`` when
    shorter)."""
    history: Path | None = None
    """The history database (None: ``$CLUSTERBENCH_HISTORY``, else the default one)."""
    use_history: bool = True
    """Plan with the earlier runs of this host in the history, judge the comparison's noise by
    them and record the run there."""
    exports: Sequence[str] = ()
    """At the end, export the run into its folder: ``csv``, ``json-lines``, ``prometheus``,
    ``wandb``, as ``clusterbench export`` does."""
    pushgateway: str | None = None
    """At the end, push the run's Prometheus metrics to this Pushgateway URL."""
    launcher: str | None = None
    """What started this process's ranks where their environment cannot tell (``ray``)."""

    def __post_init__(self) -> None:
        for name in ("only", "skip", "sets", "exports"):
            value = getattr(self, name)
            if isinstance(value, str):  # a lone name would otherwise be its letters
                raise TypeError(f"RunOptions.{name} takes a sequence of strings, not a string")
            object.__setattr__(self, name, tuple(value))
