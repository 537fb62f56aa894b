from __future__ import annotations

import random
from pathlib import Path

import pytest

from clusterbench.benchmarks.gemm.thresholds import GemmThresholds
from clusterbench.benchmarks.memory.thresholds import MemoryThresholds
from clusterbench.config import ConfigError, Thresholds, build_run_config


def test_quick_suite_on_cpu_selects_level1() -> None:
    cfg = build_run_config(device_type="cpu")
    assert cfg.suite == "quick"
    assert list(cfg.benchmarks) == ["doctor", "gemm", "sdc", "memory", "transfer", "collectives"]
    assert cfg.timeout_s == 900.0
    assert cfg.thresholds == Thresholds()


def test_set_overrides_parse_lists_numbers_and_thresholds() -> None:
    cfg = build_run_config(
        device_type="cuda",
        sets=["gemm.dtypes=bf16,fp8", "gemm.repeats=7", "thresholds.gemm_min_efficiency=0.7"],
    )
    assert cfg.benchmarks["gemm"].dtypes == ["bf16", "fp8"]
    assert cfg.benchmarks["gemm"].repeats == 7
    assert cfg.thresholds.of(GemmThresholds).gemm_min_efficiency == 0.7
    assert cfg.to_dict()["thresholds"]["gemm_min_efficiency"] == 0.7


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
    assert cfg.thresholds.of(MemoryThresholds).hbm_min_efficiency == 0.5


def test_cli_flags_beat_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('suite = "standard"\ntimeout_s = 60\n')
    cfg = build_run_config(device_type="cpu", config_file=path, suite="full", timeout_s=5)
    assert cfg.suite == "full" and cfg.timeout_s == 5


def test_only_and_skip() -> None:
    cfg = build_run_config(device_type="cpu", only=["memory", "selftest"])
    assert list(cfg.benchmarks) == ["memory", "selftest"]
    cfg = build_run_config(device_type="cpu", skip=["transfer"])
    assert list(cfg.benchmarks) == ["doctor", "gemm", "sdc", "memory", "collectives"]
    cfg = build_run_config(device_type="cpu", suite="standard")
    assert list(cfg.benchmarks) == [
        "doctor", "gemm", "sdc", "memory", "transfer", "collectives", "network",
        "training", "weight_update", "dataloader", "checkpoint", "attribution",
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
        ({"timeout_s": 0}, "--timeout must be a positive number of seconds, got 0"),
        ({"timeout_s": -1.0}, "--timeout must be a positive number"),
        ({"timeout_s": float("nan")}, "--timeout must be a positive number of seconds, got nan"),
        ({"timeout_s": float("inf")}, "--timeout must be a positive number of seconds, got inf"),
        # NaN and infinity are refused in every number, whatever the class's own checks
        ({"sets": ["gemm.warmup_min_s=nan"]}, "gemm.warmup_min_s: must be a finite number"),
        ({"sets": ["gemm.warmup_min_s=inf"]}, "gemm.warmup_min_s: must be a finite number"),
        ({"sets": ["thresholds.outlier_mads=nan"]}, "outlier_mads: must be a finite number"),
        ({"sets": ["thresholds.mfu_min=-inf"]}, "mfu_min: must be a finite number"),
        ({"sets": ["selftest.sleep_s=inf"]}, "selftest.sleep_s: must be a finite number"),
        ({"sets": ["collectives.graph_max_bytes=-1"]}, "graph_max_bytes must be >= 0"),
        ({"sets": ["selftest.fail_rank=-2"]}, "fail_rank must be a rank or -1"),
        ({"sets": ["attribution.delay_rank=-2"]}, "delay_rank must be a rank or -1"),
        # settings of benchmarks the (quick) suite does not run are checked all the same
        ({"sets": ["training.model=nope"]}, "training.model: input should be 'tiny'"),
        ({"sets": ["training.batch_size=0"]}, "training.batch_size: batch_size must be >= 1"),
        ({"sets": ["network.duration_s=nan"]}, "network.duration_s: must be a finite number"),
        ({"sets": ["attribution.active=0"]}, "attribution.active: active must be >= 1"),
        ({"only": ["gemm"], "skip": ["gemm"]}, "--only and --skip both name gemm"),
        ({"only": ["gemm", "memory"], "skip": ["memory"]}, "--only and --skip both name memory"),
        (
            {"skip": ["doctor", "gemm", "sdc", "memory", "transfer", "collectives"]},
            "nothing to run: --skip leaves no benchmark of the quick suite",
        ),
        ({"only": ["transfer"]}, "nothing to run: no cpu form of transfer"),
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


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("timeout_s = nan\n", "c.toml: timeout_s: must be a finite number (got nan)"),
        ("timeout_s = inf\n", "c.toml: timeout_s: must be a finite number (got inf)"),
        ("timeout_s = -1\n", "c.toml: timeout_s must be a positive number of seconds, got -1"),
        ("[gemm]\nwarmup_min_s = inf\n", "c.toml: gemm.warmup_min_s: must be a finite number"),
        ("[thresholds]\noutlier_mads = nan\n", "thresholds.outlier_mads: must be a finite"),
        ("[gemm]\nrepeats = -3\n", "c.toml: gemm.repeats: repeats must be >= 1"),
        # sections of benchmarks the quick suite does not run
        ("[training]\nnosuchkey = 1\n", "c.toml: training.nosuchkey: unknown key"),
        ("[training]\nworld_sizes = [0]\n", "c.toml: training.world_sizes"),
        ("[checkpoint]\nrepeats = 0\n", "c.toml: checkpoint.repeats: repeats must be >= 1"),
        ('only = ["gemm"]\nskip = ["gemm"]\n', "--only and --skip both name gemm"),
    ],
)
def test_every_section_and_number_of_a_file_is_checked(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        build_run_config(device_type="cpu", config_file=path)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_file_of_random_bytes_is_not_a_utf8_toml_file(tmp_path: Path) -> None:
    data = random.Random(0).randbytes(4096)
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")  # the file is what the test says it is
    path = tmp_path / "noise.toml"
    path.write_bytes(data)
    with pytest.raises(ConfigError) as info:
        build_run_config(device_type="cpu", config_file=path)
    assert str(info.value) == f"{path}: not a UTF-8 TOML file"


def test_a_setting_the_selected_attribution_takes_from_training_is_checked_there() -> None:
    # attribution alone may profile its own models, which training does not run ...
    cfg = build_run_config(
        device_type="cpu", only=["attribution"], sets=["training.model=comm_heavy"]
    )
    assert cfg.benchmarks["attribution"].model == "comm_heavy" and "training" not in cfg.benchmarks
    # ... but a key training does not have is not passed on, it is refused
    with pytest.raises(ConfigError, match=r"training\.active: unknown key"):
        build_run_config(device_type="cpu", only=["attribution"], sets=["training.active=2"])
    # and a training setting attribution does not take over (it has its own) is checked too
    with pytest.raises(ConfigError, match=r"training\.batch_size: batch_size must be >= 1"):
        build_run_config(
            device_type="cpu",
            only=["attribution"],
            sets=["attribution.batch_size=5", "training.batch_size=0"],
        )
    # unselected benchmarks given settings are checked, then dropped
    cfg = build_run_config(device_type="cpu", sets=["training.batch_size=3", "selftest.sleep_s=1"])
    assert list(cfg.benchmarks) == ["doctor", "gemm", "sdc", "memory", "transfer", "collectives"]


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


def test_the_check_before_torch_leaves_a_mistake_of_one_device_type_to_the_run() -> None:
    """``check_run_config`` tells only what every device type ``--device`` allows refuses alike:
    transfer has no CPU form, which a GPU machine runs, so ``--device auto`` waits for torch."""
    from clusterbench.config import check_run_config

    with pytest.raises(ConfigError, match="no cpu form of transfer"):
        build_run_config(device_type="cpu", only=["transfer"])
    check_run_config(only=["transfer"])
    with pytest.raises(ConfigError, match="no cpu form of transfer"):
        check_run_config(device="cpu", only=["transfer"])
    with pytest.raises(ConfigError, match=r"gemm\.sizes: unknown key"):
        check_run_config(sets=["gemm.sizes=1"])
    check_run_config(device="tpu", sets=["gemm.sizes=1"])  # the device's own check names it
