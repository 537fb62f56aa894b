"""What the ``doctor`` benchmark declares that the run-wide analyses read too: the id of its
finding about copies from a remote NUMA node, which the placement summary reports; its settings
module re-exports it."""

from __future__ import annotations

__all__ = ["NUMA_FINDING_ID"]

NUMA_FINDING_ID = "doctor.numa.remote_copy"
"""The finding of a copy to a GPU from a remote NUMA node that is slower than from its own."""
