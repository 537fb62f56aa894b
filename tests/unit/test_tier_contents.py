"""What the fast tier holds and how its failures read (test_tier.py checks its guard against
processes): the README's test command (``python -m pytest -q tests/unit``) holds no test that
judges measured time or speed (those live in tests/timing, or carry the ``timing`` marker in
the tiers that start processes), and a failure report carries no DEBUG lines of a logger that
sets its own level, as torch's c10d and checkpoint loggers do."""

from __future__ import annotations

import ast
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).parent
_MARK = re.compile(r"\bmark\s*\.\s*timing\b")


def _timing_marks(tree: ast.AST) -> Iterator[int]:
    """Lines of ``pytest.mark.timing`` (or ``mark.timing``) in a module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "timing":
            owner = node.value
            name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
            if name == "mark":
                yield node.lineno


def test_no_test_of_the_fast_tier_judges_measured_time() -> None:
    texts = {path: path.read_text(encoding="utf-8") for path in sorted(HERE.rglob("*.py"))}
    found = [
        f"{path.relative_to(HERE)}:{line}"
        for path, text in texts.items()
        if _MARK.search(text)  # parsed only where the words appear: 0.7 s for every module
        for line in _timing_marks(ast.parse(text))
    ]
    assert found == [], f"move these to tests/timing (run one at a time by .ci/run): {found}"


def test_the_timing_marks_are_found() -> None:
    """The scan above against modules that carry the marker three ways, and one that names it
    only in words."""
    marked = ast.parse(
        "import pytest\nfrom pytest import mark\n"
        "pytestmark = [pytest.mark.dist, pytest.mark.timing]\n"
        "@mark.timing\ndef test_a(): ...\n"
        "@pytest.mark.timing\ndef test_b(): ...\n"
    )
    assert sorted(_timing_marks(marked)) == [3, 4, 6]
    assert list(_timing_marks(ast.parse('"""pytest.mark.timing"""\ntiming = 1\n'))) == []


@pytest.fixture
def debug_logger() -> Iterator[logging.Logger]:
    """A logger set to DEBUG by its owner, as torch/distributed/c10d_logger.py sets each of
    its ``c10d-*`` loggers (``dcp_logger``: the checkpoint's), here propagating to the root
    where pytest's capture listens."""
    log = logging.getLogger("c10d-NullHandler-tiers-test")
    log.setLevel(logging.DEBUG)
    log.propagate = True
    try:
        yield log
    finally:
        log.setLevel(logging.NOTSET)


def test_a_failure_report_leaves_out_debug_lines(
    debug_logger: logging.Logger, caplog: pytest.LogCaptureFixture
) -> None:
    """pyproject's ``log_level`` sets both the failure report's capture and caplog's."""
    debug_logger.debug("a checkpoint's every call")
    debug_logger.info("an info line")
    debug_logger.warning("a warning")
    assert [r.getMessage() for r in caplog.records] == ["a warning"]
