from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench.config import ConfigError, Thresholds, build_run_config


def test_quick_suite_on_cpu_selects_level1() -> None:
    cfg = build_run_config(device_type="cpu")
    assert cfg.suite == "quick"
    assert list(cfg.benchmarks) == ["doctor", "gemm", "memory", "transfer", "collectives"]
    assert cfg.timeout_s == 900.0
    assert cfg.thresholds == Thresholds()


def test_set_overrides_parse_lists_numbers_and_thresholds() -> None:
    cfg = build_run_config(
        device_type="cuda",
        sets=["gemm.dtypes=bf16,fp8", "gemm.repeats=7", "thresholds.gemm_min_efficiency=0.7"],
    )
    assert cfg.benchmarks["gemm"].dtypes == ["bf16", "fp8"]
    assert cfg.benchmarks["gemm"].repeats == 7
    assert cfg.thresholds.gemm_min_efficiency == 0.7


def test_toml_file_selects_and_tunes(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        'suite = "standard"\nonly = ["gemm"]\ntimeout_s = 60\n'
        '[gemm]\ndtypes = ["fp32"]\n[thresholds]\nhbm_min_efficiency = 0.5\n'
    )
    cfg = build_run_config(device_type="cpu", config_file=path)
    assert cfg.suite == "standard"
    assert list(cfg.benchmarks) == ["gemm"]
    assert cfg.benchmarks["gemm"].dtypes == ["fp32"]
    assert cfg.timeout_s == 60
    assert cfg.thresholds.hbm_min_efficiency == 0.5


def test_cli_flags_beat_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('suite = "standard"\ntimeout_s = 60\n')
    cfg = build_run_config(device_type="cpu", config_file=path, suite="full", timeout_s=5)
    assert cfg.suite == "full" and cfg.timeout_s == 5


def test_only_and_skip() -> None:
    cfg = build_run_config(device_type="cpu", only=["memory", "selftest"])
    assert list(cfg.benchmarks) == ["memory", "selftest"]
    cfg = build_run_config(device_type="cpu", skip=["transfer"])
    assert list(cfg.benchmarks) == ["doctor", "gemm", "memory", "collectives"]
    cfg = build_run_config(device_type="cpu", suite="standard")
    assert list(cfg.benchmarks) == [
        "doctor", "gemm", "memory", "transfer", "collectives", "network",
        "training", "dataloader", "checkpoint", "attribution",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"only": ["gemn"]}, "unknown benchmark 'gemn' (did you mean 'gemm'?)"),
        ({"skip": ["nope"]}, "unknown benchmark 'nope'"),
        ({"suite": "huge"}, "unknown suite 'huge'"),
        ({"sets": ["gemm.dtypse=bf16"]}, "gemm.dtypse: unknown key (did you mean 'dtypes'?)"),
        ({"sets": ["gemm.repeats=many"]}, "gemm.repeats"),
        ({"sets": ["gemm.repeats=0"]}, "gemm.repeats"),
        ({"sets": ["memory.size_bytes=-5"]}, "size_bytes must be a positive"),
        ({"sets": ["thresholds.gemm_min_efficiency=-1"]}, "gemm_min_efficiency must be positive"),
        ({"sets": ["gemm"]}, "expected SECTION.KEY=VALUE"),
        ({"sets": ["nosuch.x=1"]}, "unknown benchmark 'nosuch'"),
        ({"timeout_s": 0}, "timeout must be positive"),
    ],
)
def test_bad_values_are_one_clear_error(kwargs: dict[str, object], text: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_run_config(device_type="cpu", **kwargs)  # type: ignore[arg-type]
    message = str(info.value)
    assert text in message
    assert "\n" not in message


def test_malformed_and_unknown_toml(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[gemm\ndtypes = 1")
    with pytest.raises(ConfigError, match="malformed TOML"):
        build_run_config(device_type="cpu", config_file=bad)
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("sute = 'quick'\n")
    with pytest.raises(ConfigError, match="unknown key 'sute'"):
        build_run_config(device_type="cpu", config_file=unknown)
    wrong_type = tmp_path / "wrong.toml"
    wrong_type.write_text("[gemm]\nrepeats = 'x'\n")
    with pytest.raises(ConfigError, match=r"gemm\.repeats"):
        build_run_config(device_type="cpu", config_file=wrong_type)
    with pytest.raises(ConfigError, match="not found"):
        build_run_config(device_type="cpu", config_file=tmp_path / "missing.toml")


def test_training_settings_also_describe_the_attribution_workload() -> None:
    cfg = build_run_config(
        device_type="cpu", only=["attribution"], sets=["training.model=gemm_heavy"]
    )
    assert cfg.benchmarks["attribution"].model == "gemm_heavy"
    cfg = build_run_config(
        device_type="cpu",
        only=["training", "attribution"],
        sets=["training.batch_size=3", "attribution.batch_size=5"],
    )
    assert cfg.benchmarks["training"].batch_size == 3
    assert cfg.benchmarks["attribution"].batch_size == 5
    # the attribution's own setting wins in either order
    cfg = build_run_config(
        device_type="cpu",
        only=["training", "attribution"],
        sets=["attribution.batch_size=5", "training.batch_size=3", "training.steps=7"],
    )
    assert cfg.benchmarks["attribution"].batch_size == 5
    assert cfg.benchmarks["training"].steps == 7
