"""NVIDIA's Xid catalog: what an Xid means and what to do about it.

Each row is one line of NVIDIA's published catalog for Ampere and newer GPUs, "Analyzing Xid
Errors with the Xid Catalog" (:data:`CATALOG_URL`): the code, its mnemonic, the description,
and the two resolution buckets, "Immediate Action" and "Investigatory Action", in NVIDIA's own
words (RESTART_APP, RESET_GPU, RESTART_BM, CONTACT_SUPPORT, IGNORE, WORKFLOW_*).  The rows kept
are those a data-center GPU logs (the catalog marks many codes "Unused" on A100 and newer).
A verdict's severity follows the immediate action (:data:`ACTIONS`): a reset, reboot, vendor
call or mechanical check is ``fail``, restarting the application is ``warn``, IGNORE is
``info``.  The fix text spells the bucket out as commands.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterbench.schema import Severity

__all__ = [
    "ACTIONS",
    "CATALOG_URL",
    "FM_GUIDE_URL",
    "XIDS",
    "XidInfo",
    "fix_for",
    "lookup",
    "severity_of",
]

CATALOG_URL = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
FM_GUIDE_URL = "https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/"
"""NVSwitch SXids are documented in the Fabric Manager user guide, not in the Xid catalog."""


@dataclass(frozen=True, slots=True)
class XidInfo:
    """One row of NVIDIA's Xid catalog."""

    code: int
    mnemonic: str
    description: str
    immediate: str
    """Resolution Bucket (Immediate Action)."""
    investigatory: str
    """Resolution Bucket (Investigatory Action)."""


ACTIONS: dict[str, tuple[Severity, str]] = {
    "IGNORE": ("info", "no action needed for this event alone"),
    "RESTART_APP": ("warn", "restart the application; the GPU stays usable"),
    "RESET_GPU": ("fail", "drain the node, then reset the GPU (nvidia-smi -r -i {gpu}) or reboot"),
    "RESTART_BM": ("fail", "drain the node and reboot it (a GPU reset does not bring it back)"),
    "RESTART_VM": ("fail", "restart the virtual machine"),
    "CONTACT_SUPPORT": ("fail", "drain the node and contact NVIDIA or the system vendor (RMA)"),
    "CHECK_MECHANICALS": ("fail", "drain the node; check the GPU's power cables and seating"),
    "UPDATE_SWFW": ("warn", "update the GPU driver and firmware"),
    "CHECK_UVM": ("warn", "check the nvidia-uvm module and the application's managed memory"),
    "WORKFLOW_XID_45": (
        "info",
        "an application was torn down (Ctrl-C, kill, a GPU reset): follow the other Xids "
        "logged with it",
    ),
    "WORKFLOW_XID_48": (
        "fail",
        "drain the node, reset the GPU (nvidia-smi -r -i {gpu}) or reboot; nvidia-smi -q -d "
        "ECC -i {gpu}: SRAM errors over their threshold mean RMA",
    ),
    "WORKFLOW_NVLINK_ERR": (
        "fail",
        "drain the node, reset the GPU (nvidia-smi -r -i {gpu}) or reboot; nvidia-smi nvlink "
        "-e -i {gpu} names the link; if it returns, contact the vendor (the link, or the "
        "device at its far end)",
    ),
    "WORKFLOW_NVLINK5_ERR": (
        "warn",
        "decode its sub-code in the catalog's NVLink5 table: the fatal ones need a GPU reset "
        "(drain, nvidia-smi -r -i {gpu})",
    ),
    "XID_154": ("info", "follow the recovery action it names"),
}
"""Immediate action -> (severity, what to do); ``{gpu}`` is the GPU's index."""

_XID45_INVESTIGATE = "Solo: RESTART_FM Not Solo: IGNORE (follow other Xid)"
_INVESTIGATE: dict[str, str] = {
    "CONTACT_SUPPORT": "contact NVIDIA or the system vendor (RMA)",
    "CHECK_APP/CUDA": "check the application and its CUDA version",
    "INVESTIGATE_SW": "look at the driver and software stack (nvidia-bug-report.sh)",
    "INVESTIGATE_LINK_SI": "check the link's signal integrity (cable, connector, board)",
    "WORKFLOW_XID_13": "run the application under compute-sanitizer or cuda-gdb "
    "(CUDA_DEVICE_WAITS_ON_EXCEPTION=1)",
    "WORKFLOW_XID_31": "run the application under compute-sanitizer or cuda-gdb "
    "(CUDA_DEVICE_WAITS_ON_EXCEPTION=1)",
    "XID_137_FLOW": "run the application under compute-sanitizer (an illegal NVLink peer access)",
    "INVESTIGATE_SW_USER": "check what took the link down on purpose (software or a user)",
    "SYMPATHETIC_REPORT_SOLO": "usually follows another error; report it if it comes alone",
    "UPDATE_SWFW": "update the GPU driver and firmware",
    _XID45_INVESTIGATE: "alone: restart nvidia-fabricmanager; with other Xids: follow them",
}
"""Investigatory action -> what to do when it recurs (IGNORE and the WORKFLOW_XID_48 and
NVLink workflows, already spelled out by the immediate action, add nothing)."""


def _rows(*rows: tuple[int, str, str, str, str]) -> dict[int, XidInfo]:
    return {row[0]: XidInfo(*row) for row in rows}


# (code, mnemonic, description, immediate, investigatory), as the catalog lists them.
XIDS: dict[int, XidInfo] = _rows(
    (8, "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "GPU stopped processing", "RESTART_APP",
     "CONTACT_SUPPORT"),
    (11, "ROBUST_CHANNEL_GR_ERROR_MISSING_HW", "Invalid or corrupted push buffer stream",
     "RESTART_APP", "CHECK_APP/CUDA"),
    (13, "ROBUST_CHANNEL_GR_EXCEPTION", "Graphics Engine Exception (usually an application "
     "fault, e.g. an out-of-bounds access)", "RESTART_APP", "WORKFLOW_XID_13"),
    (14, "ROBUST_CHANNEL_FAKE_ERROR", "Fake or injected error from userspace", "IGNORE",
     "CONTACT_SUPPORT"),
    (25, "ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY", "Invalid or illegal push buffer stream",
     "RESTART_APP", "CHECK_APP/CUDA"),
    (31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault (usually an "
     "application's illegal address)", "RESTART_APP", "WORKFLOW_XID_31"),
    (32, "ROBUST_CHANNEL_PBDMA_ERROR", "Invalid or corrupted push buffer stream (mostly PCIe "
     "quality, not the application)", "RESTART_APP", "CHECK_APP/CUDA"),
    (37, "ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD", "Driver firmware error", "IGNORE",
     "CHECK_APP/CUDA"),
    (38, "ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "Driver firmware error", "IGNORE",
     "CONTACT_SUPPORT"),
    (39, "ROBUST_CHANNEL_CE0_ERROR", "Copy Engine Exception", "RESTART_APP", "CONTACT_SUPPORT"),
    (40, "ROBUST_CHANNEL_CE1_ERROR", "Copy Engine Exception", "RESTART_APP", "CONTACT_SUPPORT"),
    (41, "ROBUST_CHANNEL_CE2_ERROR", "Copy Engine Exception", "RESTART_APP", "CONTACT_SUPPORT"),
    (43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing (an application's "
     "software-induced fault; the GPU stays healthy)", "IGNORE", "CONTACT_SUPPORT"),
    (44, "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW", "Graphics Engine fault during context switch",
     "IGNORE", "CONTACT_SUPPORT"),
    (45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "Preemptive cleanup, due to previous errors",
     "WORKFLOW_XID_45", _XID45_INVESTIGATE),
    (46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing", "RESET_GPU",
     "CONTACT_SUPPORT"),
    (48, "ROBUST_CHANNEL_GPU_ECC_DBE", "Double Bit ECC Error", "WORKFLOW_XID_48",
     "WORKFLOW_XID_48"),
    (54, "SILENT_RUNNING_PWR_REDUCED_CLOCKING", "Auxiliary power is not connected to the GPU "
     "board", "CHECK_MECHANICALS", "CONTACT_SUPPORT"),
    (60, "ROBUST_CHANNEL_SEC2_ERROR", "Video processor exception", "RESTART_APP",
     "INVESTIGATE_SW"),
    (61, "PMU_BREAKPOINT", "Internal micro-controller breakpoint (listed unused on A100 and "
     "newer)", "CONTACT_SUPPORT", "CONTACT_SUPPORT"),
    (62, "PMU_HALT_ERROR", "Internal micro-controller halt", "RESET_GPU", "CONTACT_SUPPORT"),
    (63, "INFOROM_DRAM_RETIREMENT_EVENT", "GPU memory remapping event (row remapping or page "
     "retirement after ECC errors)", "IGNORE", "IGNORE"),
    (64, "INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory remapping failure", "RESET_GPU",
     "CONTACT_SUPPORT"),
    (66, "ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION", "Illegal access by driver", "IGNORE",
     "INVESTIGATE_SW"),
    (67, "ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION", "Illegal access by driver", "IGNORE",
     "CONTACT_SUPPORT"),
    (68, "ROBUST_CHANNEL_NVDEC0_ERROR", "NVDEC0 Exception", "RESTART_APP", "CONTACT_SUPPORT"),
    (69, "ROBUST_CHANNEL_GR_CLASS_ERROR", "Graphics Engine class error", "RESTART_APP",
     "CHECK_APP/CUDA"),
    (74, "NVLINK_ERROR", "NVLink error (the link, or the device at its far end)",
     "WORKFLOW_NVLINK_ERR", "CONTACT_SUPPORT"),
    (79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus (not "
     "reachable over PCIe)", "RESTART_BM", "CONTACT_SUPPORT"),
    (80, "PBDMA_PUSHBUFFER_CRC_MISMATCH", "Corrupted data sent to GPU", "RESTART_APP",
     "CHECK_APP/CUDA"),
    (92, "EXCESSIVE_SBE_INTERRUPTS", "High single-bit ECC error rate", "IGNORE",
     "CONTACT_SUPPORT"),
    (93, "INFOROM_ERASE_LIMIT_EXCEEDED", "Non-fatal violation of provisioned InfoROM wear "
     "limit", "IGNORE", "CONTACT_SUPPORT"),
    (94, "ROBUST_CHANNEL_CONTAINED_ERROR", "Contained memory error (one application ended; "
     "reset the GPU when convenient)", "RESTART_APP", "IGNORE"),
    (95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "Uncontained memory error (several applications "
     "affected)", "RESET_GPU", "IGNORE"),
    (109, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "Context Switch Timeout Error", "RESET_GPU",
     "CONTACT_SUPPORT"),
    (110, "SEC_FAULT_ERROR", "Security Fault Error", "RESET_GPU", "INVESTIGATE_SW"),
    (119, "GSP_RPC_TIMEOUT", "GSP RPC Timeout", "RESET_GPU", "INVESTIGATE_SW"),
    (120, "GSP_ERROR", "GSP Error", "RESET_GPU", "INVESTIGATE_SW"),
    (121, "C2C_ERROR", "C2C Error (corrected errors on the NVLink-C2C link to a Grace CPU)",
     "IGNORE", "CONTACT_SUPPORT"),
    (136, "ALI_TRAINING_FAIL", "Link Training Failed", "RESET_GPU", "INVESTIGATE_LINK_SI"),
    (137, "NVLINK_PRIV_ERR", "NVLink Privilege Error", "IGNORE", "XID_137_FLOW"),
    (140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "ECC Unrecovered Error", "RESET_GPU",
     "CONTACT_SUPPORT"),
    (143, "GPU_INIT_ERROR", "GPU Initialization Error", "RESET_GPU", "CONTACT_SUPPORT"),
    (144, "NVLINK_SAW_ERROR", "NVLINK: SAW Error", "WORKFLOW_NVLINK5_ERR",
     "WORKFLOW_NVLINK5_ERR"),
    (145, "NVLINK_RLW_ERROR", "NVLINK: RLW Error", "WORKFLOW_NVLINK5_ERR",
     "WORKFLOW_NVLINK5_ERR"),
    (146, "NVLINK_TLW_ERROR", "NVLINK: TLW Error", "WORKFLOW_NVLINK5_ERR",
     "WORKFLOW_NVLINK5_ERR"),
    (147, "NVLINK_TREX_ERROR", "NVLINK: TREX Error", "WORKFLOW_NVLINK5_ERR",
     "WORKFLOW_NVLINK5_ERR"),
    (148, "NVLINK_NVLPW_CTRL_ERROR", "NVLINK: NVLPW_CTRL Error", "WORKFLOW_NVLINK5_ERR",
     "WORKFLOW_NVLINK5_ERR"),
    (149, "NVLINK_NETIR_ERROR", "NVLINK: NETIR Error", "WORKFLOW_NVLINK5_ERR",
     "WORKFLOW_NVLINK5_ERR"),
    (150, "NVLINK_MSE_ERROR", "NVLINK: MSE Error", "WORKFLOW_NVLINK5_ERR",
     "WORKFLOW_NVLINK5_ERR"),
    (151, "ROBUST_CHANNEL_KEY_ROTATION_ERROR", "Key rotation Error", "RESTART_VM",
     "CONTACT_SUPPORT"),
    (154, "GPU_RECOVERY_ACTION_CHANGED", "GPU Recovery Action Changed (names the recovery the "
     "other Xids need)", "XID_154", "IGNORE"),
    (155, "NVLINK_SW_DEFINED_ERROR", "NVLINK: SW Defined Error (a link taken down on purpose)",
     "RESET_GPU", "INVESTIGATE_SW_USER"),
    (156, "RESOURCE_RETIREMENT_EVENT", "Resource Retirement Event", "RESET_GPU", "IGNORE"),
    (157, "RESOURCE_RETIREMENT_FAILURE", "Resource Retirement Failure (no spare resources "
     "left)", "IGNORE", "CONTACT_SUPPORT"),
    (158, "GPU_FATAL_TIMEOUT", "GPU Fatal Timeout", "RESET_GPU", "CONTACT_SUPPORT"),
    (159, "ROBUST_CHANNEL_CHI_NON_DATA_ERROR", "CHI Non-Data Error", "CHECK_UVM",
     "SYMPATHETIC_REPORT_SOLO"),
)  # fmt: skip


def lookup(code: int) -> XidInfo | None:
    """The catalog's row for ``code``; None for a code this table does not hold."""
    return XIDS.get(code)


def severity_of(info: XidInfo | None) -> Severity:
    """The verdict for one Xid: by its immediate action; an unknown code is ``warn``."""
    if info is None:
        return "warn"
    return ACTIONS.get(info.immediate, ("warn", ""))[0]


def fix_for(info: XidInfo | None, *, gpu: int | None, code: int | None = None) -> str:
    """What to do about one Xid, spelled out from its two resolution buckets."""
    if info is None:
        return (
            f"Xid {code} is not in this table: look it up in NVIDIA's Xid catalog ({CATALOG_URL})"
        )
    gpu_text = "<gpu>" if gpu is None else str(gpu)
    now = ACTIONS.get(info.immediate, ("warn", info.immediate))[1].format(gpu=gpu_text)
    later = _INVESTIGATE.get(info.investigatory)
    bucket = f"{info.immediate}" + (f", then {info.investigatory}" if later else "")
    return f"{now}" + (f"; if it recurs: {later}" if later else "") + f" ({bucket})"
