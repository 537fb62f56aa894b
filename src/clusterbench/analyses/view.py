"""What a run part reads of its run beside the results it judges: the run's one analysis
(:class:`clusterbench.analyses.run.RunAnalysis`) as a protocol, so that the parts, which that
analysis calls, need not import it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from clusterbench.analyses.prediction.predict import Prediction
    from clusterbench.schema import Results
    from clusterbench.thresholds import Thresholds

__all__ = ["RunView"]


class RunView(Protocol):
    """The run a part belongs to."""

    @property
    def results(self) -> Results:
        """The whole run (every round of a soak)."""

    @property
    def run_dir(self) -> Path | None:
        """The run folder (the telemetry series, the prices of cost.json); None: none."""

    @property
    def thresholds(self) -> Thresholds:
        """The limits the run is judged by."""

    @property
    def prediction(self) -> Prediction | str | None:
        """The run's one scaling prediction (the reason when none could be made; None: it
        does not apply)."""

    def part(self, name: str) -> Any:
        """The run part ``name``'s analysis of the run, computed once and kept."""
