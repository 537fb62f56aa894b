"""A run-wide analysis of one's own, as a user would add it: this folder and one declaration.

``device coverage`` holds the host inventory against the measurements: each host's GPUs, and
how many of them recorded a measurement.  Its folder takes the built-in run parts' shape: what
it computes of the run, once (:mod:`.compute`), its findings (:mod:`.findings`) and its
summary section (:mod:`.section`), named below as ``"module:function"``.  A built-in run part
is such a folder under ``clusterbench/analyses/`` whose ``__init__`` declares ``PART``, and one
line of ``clusterbench.catalog.RUN_PARTS``; one of one's own is
registered with ``registry.register_run_part(RUN_PART)``, as
``tests/unit/test_example_run_part.py`` does.  Nothing in clusterbench names it: the
registration makes ``analyze`` apply its findings and ``summary_sections`` show its section,
both reading the one coverage that ``run.part("device coverage")`` computed.
"""

from clusterbench.registry import RunPart
from tests.example_run_part.compute import NAME, HostCoverage

__all__ = ["NAME", "RUN_PART", "HostCoverage"]

RUN_PART = RunPart(
    name=NAME,
    compute="tests.example_run_part.compute:coverage",
    findings="tests.example_run_part.findings:findings",
    section="tests.example_run_part.section:section",
)
