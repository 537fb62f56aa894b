"""A benchmark of one's own carries its own rules in its one folder: ``tests/example_benchmark``
declares a threshold (``thresholds.tiny_min_elements_per_s``) and a verdict label, and nothing
in clusterbench names them; the config takes the threshold from ``--set`` and a TOML file, its
findings apply it, and the verdict line names its figure against a known-good one."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from clusterbench import metrics, registry
from clusterbench.analyses.baseline import build_baseline
from clusterbench.analyses.verdict.nodes import node_verdicts
from clusterbench.config import ConfigError, build_run_config
from clusterbench.schema import Results
from tests.unit.test_compare import meas, results

_PACKAGE = "tests.example_benchmark"


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The example package, registered for this test only (the registry, the metric
    declarations and the imported modules as they were afterwards)."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(metrics, "_DECLARED", dict(metrics._DECLARED))
    before = {k: v for k, v in sys.modules.items() if k.startswith(_PACKAGE)}
    for name in before:
        del sys.modules[name]
    try:
        yield importlib.import_module(_PACKAGE)
    finally:
        for name in [k for k in sys.modules if k.startswith(_PACKAGE)]:
            del sys.modules[name]
        sys.modules.update(before)


def _rate(value: float) -> Results:
    return results(meas(value, benchmark="tiny", metric="elements_per_s", unit="elements/s"))


def test_the_threshold_is_set_by_set_and_toml_and_checked(tiny: ModuleType, tmp_path: Path) -> None:
    limits = tiny.TinyThresholds
    cfg = build_run_config(
        device_type="cpu", only=["tiny"], sets=["thresholds.tiny_min_elements_per_s=5e6"]
    )
    assert cfg.thresholds.of(limits).tiny_min_elements_per_s == 5e6
    assert cfg.to_dict()["thresholds"]["tiny_min_elements_per_s"] == 5e6
    path = tmp_path / "c.toml"
    path.write_text("[thresholds]\ntiny_min_elements_per_s = 7.5\n")
    cfg = build_run_config(device_type="cpu", only=["tiny"], config_file=path)
    assert cfg.thresholds.of(limits).tiny_min_elements_per_s == 7.5
    default = build_run_config(device_type="cpu", only=["tiny"])
    assert default.thresholds.of(limits).tiny_min_elements_per_s == 1.0
    with pytest.raises(ConfigError, match="tiny_min_elements_per_s must be positive"):
        build_run_config(device_type="cpu", sets=["thresholds.tiny_min_elements_per_s=0"])
    with pytest.raises(ConfigError, match="did you mean 'tiny_min_elements_per_s'"):
        build_run_config(device_type="cpu", sets=["thresholds.tiny_min_element_per_s=1"])


def test_its_findings_apply_the_threshold(tiny: ModuleType) -> None:
    findings = registry.get("tiny").verdicts()
    assert findings is not None
    run = _rate(2e6)
    assert [f.id for f in findings(run, build_run_config(device_type="cpu").thresholds)] == [
        "tiny.rate"
    ]
    strict = build_run_config(device_type="cpu", sets=["thresholds.tiny_min_elements_per_s=5e6"])
    [slow] = findings(run, strict.thresholds)
    assert (slow.id, slow.severity) == ("tiny.slow", "warn")


def test_the_verdict_names_its_figure_by_its_label(tiny: ModuleType) -> None:
    fleet = build_baseline([_rate(2e6)])
    [healthy] = node_verdicts(_rate(2e6), fleet)
    assert healthy.line() == "node h1: healthy: tiny all-reduce 100% of a known-good NVIDIA H200"
    [half] = node_verdicts(_rate(1e6), fleet)
    assert "tiny all-reduce 50%" in half.line()
