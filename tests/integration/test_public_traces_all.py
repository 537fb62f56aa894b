"""Every job of tests/data/traces-public/ that is fetched, large ones included, read by
``analyze`` as tests/unit/test_public_traces.py reads the small ones; and the fetch script
taking a file from a real git clone (a process: not the unit tier's)."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from tests.unit.test_public_traces import Job, _script, job_params, run_job


@pytest.mark.parametrize("job", job_params(lambda _: True))
def test_analyze_reads_every_job(job: Job, tmp_path: Path) -> None:
    run_job(job, tmp_path)


def _git_repo(folder: Path, content: bytes) -> str:
    """A repository with one commit holding ``trace.json``; the file's blob id."""
    folder.mkdir()
    (folder / "trace.json").write_bytes(content)
    git = ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "trace.json"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "t"], check=True)
    done = subprocess.run([*git, "rev-parse", "HEAD:trace.json"], check=True,
                          capture_output=True, text=True)  # fmt: skip
    return done.stdout.strip()


def test_fetch_takes_files_from_a_clone_and_writes_none_that_differs(tmp_path: Path) -> None:
    fetch = _script("fetch_public_traces")
    content = b'{"traceEvents": []}'
    blob = _git_repo(tmp_path / "clone", content)
    assert fetch.git_blob_id(content) == blob
    good = fetch.TraceFile(folder="a-job", name="trace.json", source="o/r", commit="0" * 40,
                           path="trace.json", git_blob=blob,
                           sha256=hashlib.sha256(content).hexdigest())  # fmt: skip
    wrong = fetch.TraceFile(folder="b-job", name="trace.json", source="o/r", commit="0" * 40,
                            path="trace.json", git_blob=blob, sha256="0" * 64)  # fmt: skip
    absent = fetch.TraceFile(folder="c-job", name="trace.json", source="o/r", commit="0" * 40,
                             path="trace.json", git_blob="1" * 40, sha256=None)  # fmt: skip
    done, failed = fetch.fetch(tmp_path / "out", files=[good, wrong, absent],
                               clones={"o/r": tmp_path / "clone"})  # fmt: skip
    assert (tmp_path / "out" / "a-job" / "trace.json").read_bytes() == content
    assert len(done) == 1 and len(failed) == 2
    assert "SHA-256" in failed[0] and "does not hold blob" in failed[1]
    assert not (tmp_path / "out" / "b-job").exists() and not (tmp_path / "out" / "c-job").exists()
