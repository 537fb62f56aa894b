"""The public torch.profiler traces of tests/data/traces-public/ (its README): the manifest is
whole and agrees with the README's table; every job whose files are present is read by
``analyze`` with its world size and every file accounted for; the scripts that fetch the
traces and cut excerpts of them do what they say.

The traces are fetched, not stored here (scripts/fetch_public_traces.py): a job whose files
are absent is skipped with its name. This tier analyses the small jobs;
tests/integration/test_public_traces_all.py every one. A per-job expectation is a field of the
job's manifest entry checked in ``check_analysis`` (as ``ranks`` is).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import inspect
import io
import json
import os
import re
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from clusterbench.exits import ConfigError
from clusterbench.pipeline.finish import Finished
from clusterbench.pipeline.imported import analyze_traces

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "data" / "traces-public"
MANIFEST = CORPUS / "manifest.json"
README = CORPUS / "README.md"
CORPUS_ENV = "CLUSTERBENCH_PUBLIC_TRACES"
SMALL_JOB_BYTES = 2_000_000
"""The unit tier analyses the jobs of at most this many bytes (about 0.3 s each here)."""

KNOWN_FAILURES: dict[str, str] = {}
"""Jobs analyze fails on today, with its error: xfail(strict=True, ConfigError), so that the
fix turns them into failures to remove from here (the README names the jobs the reader
fixed: the PyTorch 1.8 format and rank-less files of one process, then the JSON array form
with ranks from worker names)."""

COMM_FAMILIES = {"nccl", "rccl", "deepep", "symm_mem", "gloo", "nvshmem"}
HEX40 = re.compile(r"[0-9a-f]{40}")
HEX64 = re.compile(r"[0-9a-f]{64}")

Job = dict[str, Any]


def jobs() -> list[Job]:
    entries: list[Job] = json.loads(MANIFEST.read_text(encoding="utf-8"))["jobs"]
    return entries


def job_bytes(job: Job) -> int | None:
    """The job's size, None where a file's size is not in the manifest."""
    sizes = [f["bytes"] for f in job["files"]]
    return None if None in sizes else sum(sizes)


def corpus_root() -> Path | None:
    """The first folder holding fetched job folders: $CLUSTERBENCH_PUBLIC_TRACES, this
    repository's tests/data/traces-public, or ../shared/traces-public beside the checkout."""
    named = os.environ.get(CORPUS_ENV)
    for root in ([Path(named)] if named else []) + [
        CORPUS,
        REPO.parent / "shared" / "traces-public",
    ]:
        if root.is_dir() and any(p.is_dir() for p in root.iterdir()):
            return root
    return None


def job_params(keep: Callable[[Job], bool]) -> list[Any]:
    """The jobs ``keep`` takes, those of KNOWN_FAILURES marked as expected to fail."""
    params = []
    for job in jobs():
        if not keep(job):
            continue
        why = KNOWN_FAILURES.get(job["folder"])
        marks = [pytest.mark.xfail(strict=True, raises=ConfigError, reason=why)] if why else []
        params.append(pytest.param(job, id=job["folder"], marks=marks))
    return params


def job_files(job: Job) -> list[Path]:
    """The job's files in the corpus; skips the test where any is absent."""
    root = corpus_root()
    if root is None:
        pytest.skip(
            f"no fetched traces: python scripts/fetch_public_traces.py {CORPUS.relative_to(REPO)}"
        )
    paths = [root / job["folder"] / f["name"] for f in job["files"]]
    absent = [p.name for p in paths if not p.is_file()]
    if absent:
        pytest.skip(f"{job['folder']}: not fetched: {', '.join(absent)}")
    return paths


def check_analysis(job: Job, finished: Finished, paths: list[Path], warnings: list[str]) -> None:
    """What every job must show: its ranks (so its world size), and each file analysed or named."""
    results = finished.results
    imported = results.run.config["imported"]
    assert sorted(imported["ranks"]) == sorted(set(job["ranks"]))
    assert results.run.world_size == len(set(job["ranks"]))
    said = [*imported["unread"], *warnings, *(f.message for f in results.findings)]
    for path in paths:
        named = any(path.name in line for line in said)
        assert str(path) in imported["files"] or named, f"{path.name}: neither analysed nor named"
    shares = _mean_shares(results)
    for rank, share in shares.items():
        # every kernel classed by the table of families: at most 1% of a rank's step unknown
        assert share.get("unclassified", 0.0) <= 1.0, (rank, share)
    if job["comm_families"] and any(s for s in shares.values() if "compute" in s):
        # its collectives (NCCL, RCCL, DeepEP, symmetric memory) classed as communication
        comm = [s.get("communication", 0.0) + s.get("communication_overlapped", 0.0)
                for s in shares.values()]  # fmt: skip
        assert max(comm) > 0.0, shares


def _mean_shares(results: Any) -> dict[int, dict[str, float]]:
    """Per rank, its mean share of the profiled steps by class, %."""
    out: dict[int, dict[str, float]] = {}
    for m in results.measurements:
        if m.benchmark == "attribution" and m.unit == "%" and m.params.get("rank_step") == "mean":
            out.setdefault(m.rank, {})[m.metric] = m.value
    return out


IN_PROCESS: dict[str, Any] = (
    {"jobs": 1} if "jobs" in inspect.signature(analyze_traces).parameters else {}
)
"""The unit tier reads every file in this process (analyze's ``jobs=1``: no reading pool)."""


def run_job(job: Job, tmp_path: Path, **options: Any) -> None:
    paths = job_files(job)
    warnings: list[str] = []
    finished = analyze_traces(
        [paths[0].parent], out=tmp_path / "run", use_history=False, warn=warnings.append, **options
    )
    check_analysis(job, finished, paths, warnings)


@pytest.mark.parametrize(
    "job", job_params(lambda j: (job_bytes(j) or SMALL_JOB_BYTES + 1) <= SMALL_JOB_BYTES)
)
def test_analyze_reads_the_job(job: Job, tmp_path: Path) -> None:
    run_job(job, tmp_path, **IN_PROCESS)


def _readme_section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


def _table_folders(section: str) -> list[str]:
    return re.findall(r"^\| `([^`/]+)/?` \|", section, flags=re.MULTILINE)


def test_readme_lists_every_job_of_the_manifest() -> None:
    listed = _table_folders(_readme_section("Jobs"))
    assert len(listed) == len(set(listed))
    assert sorted(listed) == sorted(j["folder"] for j in jobs())


def test_readme_names_the_jobs_that_fail_today() -> None:
    failing = _table_folders(_readme_section("What `analyze` does with them today"))
    assert sorted(failing) == sorted(KNOWN_FAILURES)
    assert set(KNOWN_FAILURES) <= {j["folder"] for j in jobs()}


def _check_facts(job: Job) -> None:
    assert re.fullmatch(r"[a-z0-9]+-[A-Za-z0-9_.]+", job["folder"]), job["folder"]
    assert re.fullmatch(r"[\w.-]+/[\w.-]+", job["source"])
    assert HEX40.fullmatch(job["commit"]) and job["licence"]
    assert job["workload"] in {"training", "inference"}
    assert job["vendor"] in {"nvidia", "amd", "none"}
    assert job["profiler_steps"] in {True, False, None}
    assert set(job["comm_families"]) <= COMM_FAMILIES
    ranks = job["ranks"]
    assert ranks and len(ranks) == len(set(ranks)) and min(ranks) >= 0
    world = job["world_size"]  # None: the trace does not record it
    assert world is None or (world >= len(ranks) and max(ranks) < world)
    assert job["hta_straggler"] is None or job["hta_straggler"] in ranks
    for key in ("gpu", "backend", "strategy", "format", "notes"):
        assert isinstance(job[key], str) and job[key], key


def _check_files(job: Job) -> None:
    names = [f["name"] for f in job["files"]]
    assert names and len(names) == len(set(names))
    for f in job["files"]:
        # a member of an archive: path and git_blob are the archive's, the rest the member's
        member = f.get("member")
        assert (member or f["path"]).endswith(f["name"]) and HEX40.fullmatch(f["git_blob"])
        assert member is None or (f["path"].endswith((".tar.gz", ".tgz", ".tar"))
                                  and f["sha256"] is not None)  # fmt: skip
        # a size and a SHA-256 were taken together, where the file could be read
        assert (f["bytes"] is None) == (f["sha256"] is None)
        assert f["sha256"] is None or (HEX64.fullmatch(f["sha256"]) and f["bytes"] > 0)


def test_manifest_entries_are_whole() -> None:
    entries = jobs()
    folders = [j["folder"] for j in entries]
    assert len(folders) == len(set(folders))
    for job in entries:
        _check_facts(job)
        _check_files(job)


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_git_blob_id_is_gits() -> None:
    fetch = _script("fetch_public_traces")
    # `printf 'hello\n' | git hash-object --stdin`
    assert fetch.git_blob_id(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"


def test_fetch_checks_every_file_against_the_manifest(tmp_path: Path) -> None:
    fetch = _script("fetch_public_traces")
    content = b"hello\n"
    good = fetch.TraceFile(folder="a-job", name="t.json", source="o/r", commit="0" * 40,
                           path="t.json", git_blob="ce013625030ba8dba906f756967f9e9ca394464a",
                           sha256=hashlib.sha256(content).hexdigest())  # fmt: skip
    fetch.check(content, good)
    with pytest.raises(ValueError, match="git blob"):
        fetch.check(b"hello", good)
    with pytest.raises(ValueError, match="SHA-256"):
        fetch.check(content, dataclasses.replace(good, sha256="0" * 64))
    (tmp_path / "a-job").mkdir()
    (tmp_path / "a-job" / "t.json").write_bytes(content)
    done, failed = fetch.fetch(tmp_path, files=[good], clones={})  # a matching file: no download
    assert done == ["a-job/t.json: already there"] and failed == []
    with pytest.raises(ValueError, match="OWNER/NAME=CLONE"):
        fetch.parse_clones(["no-slash=dir"])


def _tar(members: dict[str, bytes], *, link: str | None = None) -> bytes:
    """A gzip-compressed tar archive of ``members``; ``link``: one more member, a symbolic link."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
        if link is not None:
            info = tarfile.TarInfo(link)
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(info)
    return buf.getvalue()


def test_fetch_reads_members_out_of_an_archive(tmp_path: Path, monkeypatch: Any) -> None:
    fetch = _script("fetch_public_traces")
    content = {"d/worker0.json": b'{"traceEvents": []}\n', "d/worker1.json": b"[]\n"}
    archive = _tar(content, link="d/link.json")
    downloads: list[str] = []

    def from_network(f: Any, *, timeout_s: float) -> bytes:
        downloads.append(f.path)
        return archive

    monkeypatch.setattr(fetch, "from_network", from_network)

    def member(name: str, **changes: Any) -> Any:
        data = content.get(f"d/{name}", b"")
        fields = {"folder": "a-job", "name": name, "source": "o/r", "commit": "0" * 40,
                  "path": "x/d.tar.gz", "git_blob": fetch.git_blob_id(archive),
                  "member": f"d/{name}", "num_bytes": len(data),
                  "sha256": hashlib.sha256(data).hexdigest()}  # fmt: skip
        return fetch.TraceFile(**{**fields, **changes})

    files = [member("worker0.json"), member("worker1.json")]
    done, failed = fetch.fetch(tmp_path, files=files, clones={})
    assert failed == [] and len(done) == 2 and downloads == ["x/d.tar.gz"]  # one download
    for name, data in content.items():
        assert (tmp_path / "a-job" / Path(name).name).read_bytes() == data
    done, failed = fetch.fetch(tmp_path, files=files, clones={})
    assert done == [f"a-job/{f.name}: already there" for f in files] and len(downloads) == 1
    bad = [member("w.json", member="/etc/passwd"), member("x.json", member="d/../../x.json"),
           member("link.json"), member("absent.json"),
           member("worker0.json", folder="b-job", sha256="0" * 64),
           member("worker1.json", folder="c-job", git_blob="1" * 40)]  # fmt: skip
    done, failed = fetch.fetch(tmp_path, files=bad, clones={})
    assert done == [] and [line.split(": ", 1)[1] for line in failed] == [
        "archive member '/etc/passwd': not a relative path inside the archive",
        "archive member 'd/../../x.json': not a relative path inside the archive",
        "archive member 'd/link.json': not a regular file",
        "archive member 'd/absent.json': not in the archive",
        "SHA-256 differs from the manifest's",
        f"git blob {fetch.git_blob_id(archive)}, the manifest says {'1' * 40}",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-job"]  # nothing else written
    with pytest.raises(ValueError, match="not a tar archive"):
        fetch.extract_member(b"not an archive", "d/worker0.json")


def _event(name: str, ts: float, dur: float, cat: str, **args: object) -> dict[str, object]:
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": 1, "tid": 1,
            "args": dict(args)}  # fmt: skip


def test_excerpt_keeps_the_first_steps_and_their_kernels() -> None:
    excerpt = _script("trace_excerpt")
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
        *(_event(f"ProfilerStep#{n}", 100.0 * n, 100.0, "user_annotation") for n in (1, 2, 3)),
        _event("ProfilerStep#1", 105.0, 90.0, "gpu_user_annotation"),
        _event("cudaLaunchKernel", 290.0, 5.0, "cuda_runtime", correlation=7),
        _event("gemm", 298.0, 20.0, "kernel", correlation=7),  # runs past step 2's end (300)
        {"ph": "s", "cat": "ac2g", "id": 7, "ts": 290.0, "pid": 1, "tid": 1},
        _event("cudaLaunchKernel", 350.0, 5.0, "cuda_runtime", correlation=8),
        _event("late", 360.0, 20.0, "kernel", correlation=8),
    ]
    trace = {"schemaVersion": 1, "distributedInfo": {"rank": 3}, "traceEvents": events}
    start, end = excerpt.step_window(events, 2)
    assert (start, end) == (100.0, 300.0)
    cut = excerpt.excerpt(trace, start=start, end=end)
    names = [e["name"] for e in cut["traceEvents"] if "name" in e]
    assert names == ["process_name", "ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#1",
                     "cudaLaunchKernel", "gemm"]  # fmt: skip
    assert any(e.get("cat") == "ac2g" for e in cut["traceEvents"])
    assert {k: v for k, v in cut.items() if k != "traceEvents"} == {
        "schemaVersion": 1, "distributedInfo": {"rank": 3}}  # fmt: skip
    with pytest.raises(ValueError, match="no ProfilerStep"):
        excerpt.step_window(events[5:], 1)


def test_an_excerpt_of_a_recorded_trace_is_analysed_as_its_steps(tmp_path: Path) -> None:
    excerpt = _script("trace_excerpt")
    (source,) = (REPO / "tests" / "data" / "traces" / "h100").glob("*.json.gz")
    target = tmp_path / source.name
    assert excerpt.main([str(source), str(target), "--steps", "2"]) == 0
    finished = analyze_traces([target], out=tmp_path / "run", use_history=False)
    assert finished.results.run.config["imported"]["steps"] == [2, 3]  # recorded: steps 2-5
    assert target.read_bytes()[4:8] == b"\0\0\0\0"  # gzip -n: no time in the header
