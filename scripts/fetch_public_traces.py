"""Fetch the public torch.profiler traces named in tests/data/traces-public/manifest.json.

    python scripts/fetch_public_traces.py OUT [--jobs A,B] [--from-git OWNER/NAME=CLONE ...]

Each job's files go to ``OUT/<folder>/<name>``, under the names they were published with, from
``https://raw.githubusercontent.com/<source>/<commit>/<path>`` or, for a source given with
``--from-git``, from a local clone of it (any clone that holds the blob: the blob id names the
content, not the commit). Every file is checked against its git blob id (the SHA-1 git gives
``blob <size>\\0<content>``) and, where the manifest has it, its SHA-256; a file that does not
match is not written. A file already in OUT that matches is left alone. One line a file; exit
code 1 when any file could not be had or did not match, 2 on bad usage.

A file published inside an archive (a ``.tar.gz`` in the repository) names the archive as its
``path`` and ``git_blob`` and itself as ``member``, with its own ``bytes`` and ``sha256``: the
archive is fetched once and checked by its blob id, and the member read from it (never
extracted to a path of the archive's choosing: a member named with an absolute path or ``..``,
or that is not a regular file, is refused) and checked by its size and SHA-256.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

MANIFEST = (
    Path(__file__).resolve().parent.parent / "tests" / "data" / "traces-public" / "manifest.json"
)
RAW_URL = "https://raw.githubusercontent.com/{source}/{commit}/{path}"


@dataclass(frozen=True, kw_only=True, slots=True)
class TraceFile:
    """One published file of a job, as the manifest names it."""

    folder: str
    """The job's folder under OUT."""
    name: str
    """The file's name as published."""
    source: str
    """The repository, ``owner/name``."""
    commit: str
    path: str
    """The file's path in the repository."""
    git_blob: str
    sha256: str | None
    """None where the manifest has no SHA-256 (the blob id still checks the file)."""
    member: str | None = None
    """The file's path inside the archive that :attr:`path` and :attr:`git_blob` name; None
    for a file published as it is."""
    num_bytes: int | None = None
    """The file's size, where the manifest has it."""


def load_files(manifest: Path, jobs: Sequence[str] = ()) -> list[TraceFile]:
    """The files of ``jobs`` (every job when empty); ValueError naming a job the manifest lacks."""
    entries = json.loads(manifest.read_text(encoding="utf-8"))["jobs"]
    unknown = sorted(set(jobs) - {e["folder"] for e in entries})
    if unknown:
        raise ValueError(f"no such job in {manifest.name}: {', '.join(unknown)}")
    return [
        TraceFile(
            folder=e["folder"],
            name=f["name"],
            source=e["source"],
            commit=e["commit"],
            path=f["path"],
            git_blob=f["git_blob"],
            sha256=f["sha256"],
            member=f.get("member"),
            num_bytes=f.get("bytes"),
        )
        for e in entries
        if not jobs or e["folder"] in jobs
        for f in e["files"]
    ]


def git_blob_id(data: bytes) -> str:
    """The id git gives ``data`` as a blob (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def check(data: bytes, f: TraceFile) -> None:
    """ValueError (one line) unless ``data`` is the file the manifest names (for a member of an
    archive, the archive: its blob id only)."""
    got = git_blob_id(data)
    if got != f.git_blob:
        raise ValueError(f"{f.folder}/{f.name}: git blob {got}, the manifest says {f.git_blob}")
    if f.member is None:
        check_content(data, f)


def check_content(data: bytes, f: TraceFile) -> None:
    """ValueError (one line) unless ``data`` has the size and SHA-256 the manifest gives the
    file (either may be absent for a file published as it is)."""
    if f.num_bytes is not None and len(data) != f.num_bytes:
        raise ValueError(f"{f.folder}/{f.name}: {len(data)} bytes, the manifest says {f.num_bytes}")
    if f.sha256 is not None and hashlib.sha256(data).hexdigest() != f.sha256:
        raise ValueError(f"{f.folder}/{f.name}: SHA-256 differs from the manifest's")


def safe_member(name: str) -> None:
    """ValueError for a member's path that is absolute or climbs out (``..``)."""
    path = PurePosixPath(name)
    if not name or path.is_absolute() or "\\" in name or ".." in path.parts:
        raise ValueError(f"archive member {name!r}: not a relative path inside the archive")


def extract_member(archive: bytes, name: str) -> bytes:
    """The content of the regular file ``name`` in a tar archive (gzip, bzip2, xz or none),
    read in memory; ValueError (one line) for an unsafe or absent name or a member that is not
    a regular file (a link, a device, a folder)."""
    safe_member(name)
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:*") as tar:
            try:
                info = tar.getmember(name)
            except KeyError:
                raise ValueError(f"archive member {name!r}: not in the archive") from None
            if not info.isfile():
                raise ValueError(f"archive member {name!r}: not a regular file")
            handle = tar.extractfile(info)
            assert handle is not None  # a regular file always has one
            return handle.read()
    except tarfile.TarError as exc:
        raise ValueError(f"not a tar archive ({exc})") from None


def from_network(f: TraceFile, *, timeout_s: float) -> bytes:
    url = RAW_URL.format(source=f.source, commit=f.commit, path=f.path)
    with urllib.request.urlopen(url, timeout=timeout_s) as answer:
        data: bytes = answer.read()
    return data


def from_git(clone: Path, f: TraceFile) -> bytes:
    """The blob from a local clone (a work tree or a bare repository)."""
    done = subprocess.run(["git", "-C", str(clone), "cat-file", "blob", f.git_blob],
                          capture_output=True, check=False)  # fmt: skip
    if done.returncode != 0:
        raise ValueError(f"{f.folder}/{f.name}: {clone} does not hold blob {f.git_blob}")
    return done.stdout


def _present(target: Path, f: TraceFile) -> bool:
    """Whether ``target`` already holds the file (a member: by its size and SHA-256)."""
    if not target.is_file():
        return False
    data = target.read_bytes()
    try:
        if f.member is None:
            check(data, f)
        elif f.sha256 is None:
            return False  # nothing to check a member by: fetch it again
        else:
            check_content(data, f)
    except ValueError:
        return False  # a partial or other file: fetch it again
    return True


def fetch_one(
    f: TraceFile,
    out: Path,
    *,
    clones: dict[str, Path],
    timeout_s: float,
    archives: dict[str, bytes] | None = None,
) -> str:
    """Bring one file into ``out/<folder>/<name>``; the line to print. ValueError or OSError
    when it cannot be had or does not match (nothing written then). ``archives``: the archives
    already fetched, by blob id (one download for all its members)."""
    if Path(f.name).name != f.name or f.name in ("", ".", ".."):
        raise ValueError(f"{f.folder}/{f.name}: a file's name must not hold a path")
    target = out / f.folder / f.name
    if _present(target, f):
        return f"{f.folder}/{f.name}: already there"
    held = {} if archives is None else archives
    data = held.get(f.git_blob)
    if data is None:
        clone = clones.get(f.source)
        data = from_git(clone, f) if clone is not None else from_network(f, timeout_s=timeout_s)
        check(data, f)
        if f.member is not None:
            held[f.git_blob] = data
    if f.member is not None:
        try:
            data = extract_member(data, f.member)
        except ValueError as exc:
            raise ValueError(f"{f.folder}/{f.name}: {exc}") from None
        check_content(data, f)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    partial.write_bytes(data)
    partial.replace(target)
    return f"{f.folder}/{f.name}: {len(data):,} bytes"


def fetch(
    out: Path, *, files: Sequence[TraceFile], clones: dict[str, Path], timeout_s: float = 120.0
) -> tuple[list[str], list[str]]:
    """Every file into ``out``: (the lines of the files had, the lines of those that failed)."""
    done: list[str] = []
    failed: list[str] = []
    archives: dict[str, bytes] = {}
    for f in files:
        try:
            done.append(fetch_one(f, out, clones=clones, timeout_s=timeout_s, archives=archives))
        except (ValueError, OSError) as exc:
            failed.append(f"{f.folder}/{f.name}: {exc}" if f.name not in str(exc) else str(exc))
    return done, failed


def parse_clones(pairs: Sequence[str]) -> dict[str, Path]:
    """The clones ``--from-git OWNER/NAME=CLONE`` names; ValueError on a malformed one."""
    clones: dict[str, Path] = {}
    for pair in pairs:
        source, sep, folder = pair.partition("=")
        if not sep or source.count("/") != 1 or not folder:
            raise ValueError(f"--from-git takes OWNER/NAME=CLONE, not {pair!r}")
        clones[source] = Path(folder)
    return clones


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the folder the job folders go in")
    parser.add_argument("--jobs", default="", help="comma-separated job folders (default: all)")
    parser.add_argument("--from-git", action="append", default=[], metavar="OWNER/NAME=CLONE",
                        help="take that repository's files from a local clone")  # fmt: skip
    parser.add_argument("--manifest", type=Path, default=MANIFEST)
    parser.add_argument("--timeout-s", type=float, default=120.0, help="per download")
    args = parser.parse_args(argv)
    try:
        jobs = [j for j in args.jobs.split(",") if j]
        files = load_files(args.manifest, jobs)
        clones = parse_clones(args.from_git)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    done, failed = fetch(args.out, files=files, clones=clones, timeout_s=args.timeout_s)
    for line in done:
        print(line)
    for line in failed:
        print(f"failed: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
