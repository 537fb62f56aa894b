"""Xid and SXid events since boot, from the kernel log, each with its meaning and fix.

The NVIDIA driver writes an Xid line to the kernel log for every GPU error it handles
(``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., name=..., GPU has fallen off the bus.``), and the
NVSwitch driver an SXid line for every switch error (``nvidia-nvswitch0: SXid
(PCI:0000:05:00.0): 20034, Fatal, Link 48 LTSSM Fault Up``).  The log is read through the
Sources' command runner (``journalctl -k -b``, else ``dmesg``) or, where neither answers (not
root, a container), from ``/var/log/kern.log`` or ``/var/log/messages`` under the Sources'
root, from the last boot on.  Each Xid is looked up in NVIDIA's catalog (``xid_table``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from clusterbench.doctor import xid_table
from clusterbench.doctor._sources import Check, Sources
from clusterbench.schema import Finding, HostInfo, Severity

__all__ = [
    "CHECKS",
    "KernelLog",
    "SxidEvent",
    "XidEvent",
    "check_xid_log",
    "gpu_by_bus",
    "parse_kernel_log",
    "parse_sxid_line",
    "parse_xid_line",
    "read_kernel_log",
    "xid_findings",
]

_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("journalctl", "-k", "-b", "-o", "short-monotonic", "--no-pager", "-q"),
    ("dmesg",),
)
_FILES = ("var/log/kern.log", "var/log/messages")
_BOOT_MARK = "Linux version "  # the kernel's first line at every boot
_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9a-fA-F]+:[0-9a-fA-F]{1,2}:[0-9a-fA-F]{1,2})(?:\.[0-7])?\)"
    r": (?P<code>\d+)(?:,\s*|\s+|$)(?:pid=(?P<pid>[^,]*),\s*)?(?:name=(?P<name>[^,]*),\s*)?"
    r"(?P<text>.*)$"
)
_SXID = re.compile(
    r"nvidia-nvswitch(?P<switch>\d+): SXid \((?:PCI:)?(?P<bus>[0-9a-fA-F:.]+)\): (?P<code>\d+),"
    r"\s*(?P<text>.*)$"
)
_UPTIME = re.compile(r"\[\s*(\d+\.\d+)\]")
# syslog's and journalctl's stamp at the line's start, or an ISO one (rsyslog; dmesg
# --decode --time-format=iso, after its "kern  :warn  : ")
_WALL = re.compile(
    r"^(?:[a-z]+\s*:[a-z]+\s*:\s*)?"
    r"(\d{4}-\d{2}-\d{2}T\S+|[A-Z][a-z]{2}\s+\d{1,2}\s+\d{2}:\d{2}:\d{2})"
)
# dmesg -T: "[Sun Feb 23 16:24:18 2025]"
_CTIME = re.compile(r"\[([A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4})\]")
# Xid 154 names the recovery the other Xids need (catalog: "None", "Drain P2P", "Drain and
# Reset", "GPU Reset Required", "Node Reboot Required").
_RECOVERY = re.compile(r"to 0x[0-9a-fA-F]+ \((?P<action>[^)]+)\)")
_RECOVERY_SEVERITY: dict[str, Severity] = {"None": "info", "Drain P2P": "warn"}


@dataclass(frozen=True, slots=True)
class KernelLog:
    source: str
    """The command or file it came from."""
    lines: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class XidEvent:
    code: int
    pci_bus_id: str | None
    """The PCI address as the line gives it (``0000:3b:00``); None from NVML's events."""
    gpu: int | None = None
    """The GPU's index in the inventory, where known."""
    when: str | None = None
    """When it happened: the log's wall-clock stamp, or seconds after boot."""
    pid: str | None = None
    process: str | None = None
    text: str = ""


@dataclass(frozen=True, slots=True)
class SxidEvent:
    code: int
    switch: int
    pci_bus_id: str
    fatal: bool | None
    """From the line's 'Fatal' / 'Non-fatal'; None when it says neither."""
    when: str | None = None
    text: str = ""


def _when(prefix: str) -> str | None:
    wall = _WALL.match(prefix.strip()) or _CTIME.search(prefix)
    if wall:
        return wall.group(1)
    uptime = _UPTIME.search(prefix)
    return f"{float(uptime.group(1)):.6f} s after boot" if uptime else None


def _known(value: str | None) -> str | None:
    """A pid or process name as logged; None for the driver's '<unknown>' and 'N/A'."""
    value = (value or "").strip().strip("'\"")
    return None if value in ("", "<unknown>", "N/A") else value


def parse_xid_line(line: str) -> XidEvent | None:
    """The Xid of one kernel-log line, whatever the prefix (dmesg, journalctl, syslog)."""
    match = _XID.search(line)
    if match is None:
        return None
    pid, name = _known(match.group("pid")), _known(match.group("name"))
    return XidEvent(
        code=int(match.group("code")),
        pci_bus_id=match.group("bus").lower(),
        when=_when(line[: match.start()]),
        pid=pid,
        process=name,
        text=match.group("text").strip(),
    )


def parse_sxid_line(line: str) -> SxidEvent | None:
    """The SXid of one line; None for the continuation lines that add a severity or data to
    the event before them (``..., Severity 1 Engine instance ...``, ``..., Data {...}``)."""
    match = _SXID.search(line)
    if match is None:
        return None
    text = match.group("text").strip()
    if text.startswith(("Severity ", "Data {")):
        return None
    kind = text.split(",", 1)[0].strip().lower()
    return SxidEvent(
        code=int(match.group("code")),
        switch=int(match.group("switch")),
        pci_bus_id=match.group("bus").lower(),
        fatal=True if kind == "fatal" else False if kind == "non-fatal" else None,
        when=_when(line[: match.start()]),
        text=text,
    )


def parse_kernel_log(lines: Iterable[str]) -> tuple[list[XidEvent], list[SxidEvent]]:
    xids, sxids = [], []
    for line in lines:
        if (xid := parse_xid_line(line)) is not None:
            xids.append(xid)
        elif (sxid := parse_sxid_line(line)) is not None:
            sxids.append(sxid)
    return xids, sxids


def _has_kernel_lines(text: str) -> bool:
    # journalctl without the rights prints "-- No entries --" (and a hint on stderr), exit 0
    return any(line.strip() and not line.startswith("-- ") for line in text.splitlines())


def read_kernel_log(src: Sources) -> KernelLog | None:
    """The kernel log since boot, from the first source that answers; None when none does."""
    for cmd in _COMMANDS:
        out = src.run(cmd)
        if out is not None and _has_kernel_lines(out):
            return KernelLog(source=" ".join(cmd), lines=tuple(out.splitlines()))
    for rel in _FILES:
        try:
            text = (src.root / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        lines = text.splitlines()
        boots = [i for i, line in enumerate(lines) if _BOOT_MARK in line and "kernel:" in line]
        since = boots[-1] if boots else 0
        return KernelLog(source=f"/{rel}", lines=tuple(lines[since:]))
    return None


def _bus_key(bus_id: str) -> tuple[int, int, int] | None:
    parts = bus_id.strip().split(".")[0].split(":")
    if len(parts) == 2:  # no domain: domain 0
        parts = ["0", *parts]
    try:
        domain, bus, device = (int(p, 16) for p in parts)
    except ValueError:  # not three hex numbers
        return None
    return domain, bus, device


def gpu_by_bus(host: HostInfo) -> dict[tuple[int, int, int], int]:
    """(domain, bus, device) -> GPU index: an Xid line's ``0000:3b:00`` and the inventory's
    ``0000:3b:00.0`` (NVML's ``00000000:3B:00.0`` alike) name the same GPU."""
    out = {}
    for gpu in host.gpus:
        key = _bus_key(gpu.pci_bus_id) if gpu.pci_bus_id else None
        if key is not None:
            out[key] = gpu.index
    return out


def _with_gpu(events: Iterable[XidEvent], host: HostInfo) -> list[XidEvent]:
    by_bus = gpu_by_bus(host)
    out = []
    for e in events:
        key = _bus_key(e.pci_bus_id) if e.pci_bus_id else None
        gpu = by_bus.get(key) if key is not None else None
        out.append(e if e.gpu is not None or gpu is None else dataclasses.replace(e, gpu=gpu))
    return out


_RANK: dict[Severity, int] = {"info": 0, "warn": 1, "fail": 2}


def _xid_severity(code: int, events: Sequence[XidEvent]) -> Severity:
    if code == 154:  # its text names the recovery: the worst one logged decides
        actions = [m.group("action") for e in events if (m := _RECOVERY.search(e.text))]
        levels = [_RECOVERY_SEVERITY.get(a, "fail") for a in actions] or ["info"]
        return max(levels, key=_RANK.__getitem__)
    return xid_table.severity_of(xid_table.lookup(code))


def _summary(code: int, events: Sequence[XidEvent], gpu: int | None) -> dict[str, object]:
    info = xid_table.lookup(code)
    return {
        "xid": code,
        "count": len(events),
        "first": events[0].when,
        "last": events[-1].when,
        "mnemonic": info.mnemonic if info else "unknown",
        "description": info.description if info else "not in this table",
        "immediate_action": info.immediate if info else None,
        "investigatory_action": info.investigatory if info else None,
        "severity": _xid_severity(code, events),
        "fix": xid_table.fix_for(info, gpu=gpu, code=code),
        "example": events[-1].text,
        "processes": sorted({e.process for e in events if e.process}),
    }


def xid_findings(
    events: Sequence[XidEvent], *, src: Sources, source: str, finding_id: str, during: str
) -> list[Finding]:
    """One finding per GPU (or per PCI address outside the inventory) that logged Xids:
    its worst Xid's severity, every code counted with first and last time, the fix of the
    worst ones.  ``during``: 'since boot' or 'during the run'."""
    groups: dict[tuple[int | None, str | None], list[XidEvent]] = {}
    for e in _with_gpu(events, src.host):
        groups.setdefault((e.gpu, None if e.gpu is not None else e.pci_bus_id), []).append(e)
    findings = []
    for (gpu, bus), mine in groups.items():
        by_code: dict[int, list[XidEvent]] = {}
        for e in mine:
            by_code.setdefault(e.code, []).append(e)
        rows = [_summary(code, evs, gpu) for code, evs in sorted(by_code.items())]
        levels = [_xid_severity(code, evs) for code, evs in sorted(by_code.items())]
        worst = max(levels, key=_RANK.__getitem__)
        fixes = list(dict.fromkeys(str(r["fix"]) for r in rows if r["severity"] == worst))
        what = f"GPU {gpu}" if gpu is not None else f"the GPU at PCI {bus} (not in the inventory)"
        listed = ", ".join(f"Xid {r['xid']} ({r['description']}) x{r['count']}" for r in rows)
        findings.append(
            Finding(
                id=finding_id,
                severity=worst,
                scope=src.gpu_scope(gpu) if gpu is not None else src.scope,
                message=f"{what}: {len(mine)} Xid event(s) {during}: {listed}",
                evidence={
                    "source": source,
                    "catalog": xid_table.CATALOG_URL,
                    "pci_bus_id": bus or mine[0].pci_bus_id,
                    "xids": rows,
                },
                fix="; ".join(fixes),
            )
        )
    return findings


def _sxid_findings(events: Sequence[SxidEvent], *, src: Sources, source: str) -> list[Finding]:
    switches: dict[int, list[SxidEvent]] = {}
    for e in events:
        switches.setdefault(e.switch, []).append(e)
    findings = []
    for switch, mine in sorted(switches.items()):
        fatal = [e for e in mine if e.fatal]
        unknown = [e for e in mine if e.fatal is None]
        severity: Severity = "fail" if fatal else "warn" if unknown else "info"
        codes = sorted({e.code for e in mine})
        findings.append(
            Finding(
                id="doctor.nvswitch.sxid",
                severity=severity,
                scope=f"{src.scope}/nvswitch:{switch}",
                message=f"NVSwitch {switch} ({mine[0].pci_bus_id}): {len(mine)} SXid event(s) "
                f"since boot, {len(fatal)} fatal: SXid {', '.join(map(str, codes))}",
                evidence={
                    "source": source,
                    "guide": xid_table.FM_GUIDE_URL,
                    "sxids": [
                        {"sxid": e.code, "fatal": e.fatal, "when": e.when, "text": e.text}
                        for e in mine[-20:]
                    ],
                },
                fix="a fatal SXid needs the GPUs and NVSwitches reset: drain the node, stop "
                "nvidia-fabricmanager, reset the GPUs (nvidia-smi -r), start it again, or "
                "reboot; if it recurs, contact the vendor"
                if fatal
                else "non-fatal SXids are informational (Fabric Manager user guide); if the "
                "count keeps growing, check the links they name (nvidia-smi nvlink -e)",
            )
        )
    return findings


def _unreadable(src: Sources) -> Finding:
    tried = [" ".join(c[:3]) for c in _COMMANDS] + [f"/{f}" for f in _FILES]
    return Finding(
        id="doctor.xid.log_unreadable",
        severity="info",
        scope=src.scope,
        message="the kernel log is not readable here (not root, or a container without it): "
        "Xid and SXid errors since boot were not checked",
        evidence={"tried": tried},
        fix="run clusterbench doctor as root, or add the user to the systemd-journal (or adm) "
        "group, or sysctl kernel.dmesg_restrict=0; in a container, run doctor on the host",
    )


def check_xid_log(src: Sources) -> list[Finding]:
    """Xid (per GPU) and SXid (per NVSwitch) events since boot; hosts without GPUs skip."""
    if not src.host.gpus:
        return []
    log = read_kernel_log(src)
    if log is None:
        return [_unreadable(src)]
    xids, sxids = parse_kernel_log(log.lines)
    found = xid_findings(xids, src=src, source=log.source, finding_id="doctor.gpu.xid",
                         during="since boot")  # fmt: skip
    return found + _sxid_findings(sxids, src=src, source=log.source)


CHECKS: tuple[Check, ...] = (check_xid_log,)
