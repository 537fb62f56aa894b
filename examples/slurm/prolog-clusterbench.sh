#!/bin/bash
# Slurm Prolog: check the node with `clusterbench doctor --fast` before a job starts on it.
#
# slurm.conf (add PrologFlags=Alloc to run it when the job is allocated, not at its first step):
#   Prolog=/etc/slurm/prolog.d/clusterbench.sh
#
# A Prolog that exits non-zero makes Slurm set the node to DRAIN and requeue the job, held
# unless SchedulerParameters has nohold_on_prolog_fail (https://slurm.schedmd.com/prolog_epilog.html,
# "Failure Handling").  So this script only exits 1 on a fail finding and does not call scontrol:
# the same page asks prologs not to run Slurm commands.  The drain reason Slurm sets is its own
# ("Prolog error"); what doctor found goes to syslog: journalctl -t clusterbench-prolog.
#
# Slurm expects a Prolog to finish within MessageTimeout (10 s by default, slurm.conf(5)).
# doctor --fast ends in under 10 s on its own, a hung check included; `timeout` also bounds a
# Python that cannot start (a virtual environment on a hung network file system).
#
# Prologs run without a search path: standard folders are put on PATH below, and clusterbench
# is named by its full path (change CLUSTERBENCH for your site).

PATH="${PATH:+$PATH:}/usr/sbin:/usr/bin:/sbin:/bin"
CLUSTERBENCH="${CLUSTERBENCH:-/opt/clusterbench/bin/clusterbench}"
TAG=clusterbench-prolog

out="$(timeout -k 1 9 "$CLUSTERBENCH" doctor --fast 2>&1)"
rc=$?
printf '%s\n' "$out" | logger -t "$TAG"

case "$rc" in
    0) exit 0 ;;  # healthy (warnings are logged, not acted on)
    1) exit 1 ;;  # a fail finding: Slurm drains the node and requeues the job
    124 | 137)  # did not end in 10 s: even starting the check hangs on this node
        logger -t "$TAG" "clusterbench doctor --fast did not finish in 10 s (exit $rc)"
        exit 1 ;;
    *)  # 2 bad usage, 126/127 not installed: a broken installation, not a broken node;
        # draining every node for it would stop the cluster, so only say so loudly
        logger -t "$TAG" -p user.err "clusterbench doctor --fast could not run (exit $rc)"
        exit 0 ;;
esac
