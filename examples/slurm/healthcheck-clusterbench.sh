#!/bin/bash
# Slurm HealthCheckProgram (the way NHC is run): check the node every few minutes and drain it
# when `clusterbench doctor --fast` finds a fail.
#
# slurm.conf:
#   HealthCheckProgram=/etc/slurm/healthcheck-clusterbench.sh
#   HealthCheckInterval=300
#   HealthCheckNodeState=ANY
#
# slurmd runs it as root on every node, kills it after 60 s and acts on nothing by itself: "any
# action to be taken must be explicitly performed by the program" (slurm.conf(5),
# HealthCheckProgram).  So this script drains the node with the first fail line as the reason,
# which `sinfo -R` then shows.  It never resumes a node: after the repair,
#   scontrol update nodename=<node> state=resume
#
# Standard folders are put on PATH (slurmd sets none); change CLUSTERBENCH for your site.

PATH="${PATH:+$PATH:}/usr/sbin:/usr/bin:/sbin:/bin"
CLUSTERBENCH="${CLUSTERBENCH:-/opt/clusterbench/bin/clusterbench}"
TAG=clusterbench-healthcheck
NODE="${SLURMD_NODENAME:-$(hostname -s)}"

out="$(timeout -k 5 30 "$CLUSTERBENCH" doctor --fast 2>&1)"
rc=$?
printf '%s\n' "$out" | logger -t "$TAG"

drain() {
    # a reason is one line; keep it short enough for sinfo -R
    scontrol update nodename="$NODE" state=drain reason="clusterbench: ${1:0:200}"
}

case "$rc" in
    0) ;;
    1)
        first="$(printf '%s\n' "$out" | grep -m 1 '^FAIL ')"
        drain "${first:-doctor --fast found a fail}" ;;
    124 | 137) drain "doctor --fast did not finish in 30 s (exit $rc)" ;;
    *) logger -t "$TAG" -p user.err "clusterbench doctor --fast could not run (exit $rc)" ;;
esac
exit 0
