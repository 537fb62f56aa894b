"""A page that cannot be written costs a real run's results nothing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from clusterbench import catalog
from clusterbench.pipeline.finish import REPORT_FILE, write_results
from clusterbench.schema import Finding, load_results
from tests.pages import analysis
from tests.unit.test_compare import meas, results

catalog.register_builtin()


def test_a_page_that_does_not_fit_costs_the_results_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a 512 KiB tmpfs results.json and summary.md fit, the page (0.7 MB) does not:
    the new results.json and summary.md are written, one warning line names report.html, and
    no temporary file stays."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI is root)")
    where = tmp_path / "tmpfs"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(where)], check=True)
    try:
        r = results(meas(700.0))
        write_results(analysis(r, run_dir=where))
        changed = r.model_copy(
            update={
                "findings": [Finding(id="x", severity="warn", scope="run", message="new", fix="")]
            }
        )
        write_results(analysis(changed, run_dir=where), html=True)
        assert load_results(where).findings[0].message == "new"
        assert "new" in (where / "summary.md").read_text()
        assert sorted(p.name for p in where.iterdir()) == ["results.json", "summary.md"]
        err = capsys.readouterr().err.splitlines()
        assert err == [
            f"clusterbench: warning: cannot write {REPORT_FILE}: no space left on "
            f"{where / REPORT_FILE}; results.json is complete (clusterbench report {where} "
            "builds the page)"
        ]
    finally:
        subprocess.run(["umount", str(where)], check=False)
