"""``clusterbench launch``: the command or script that runs clusterbench on many nodes
(torchrun, Slurm, Open MPI, Kubernetes, Ray)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from clusterbench.cli.common import PlainUsage, _usage_error, app

__all__ = ["launch"]


@app.command(cls=PlainUsage)
def launch(
    run_args: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="RUN_ARGS",
            help="After --: further 'clusterbench run' arguments.",
            show_default=False,
        ),
    ] = None,
    torchrun: Annotated[bool, typer.Option("--torchrun", help="torchrun command.")] = False,
    slurm: Annotated[bool, typer.Option("--slurm", help="sbatch script.")] = False,
    mpi: Annotated[bool, typer.Option("--mpi", help="Open MPI mpirun command.")] = False,
    k8s: Annotated[bool, typer.Option("--k8s", help="Kubeflow PyTorchJob manifest.")] = False,
    ray: Annotated[
        bool, typer.Option("--ray", help="Ray Train driver (python -m clusterbench.ray) commands.")
    ] = False,
    nodes: Annotated[int | None, typer.Option(metavar="N", help="Number of nodes.")] = None,
    gpus_per_node: Annotated[
        int | None, typer.Option(metavar="N", help="GPUs (ranks) per node.")
    ] = None,
    suite: Annotated[str, typer.Option(metavar="NAME", help="Suite to run.")] = "quick",
    master_addr: Annotated[
        str | None,
        typer.Option(metavar="HOST", help="First node's address (default: found at run time)."),
    ] = None,
    port: Annotated[int, typer.Option(metavar="PORT", help="Rendezvous port.")] = 29500,
    image: Annotated[
        str | None,
        typer.Option(
            metavar="IMAGE",
            help="Container image every pod runs (--k8s: required), with clusterbench and a "
            "CUDA build of torch.",
        ),
    ] = None,
    name: Annotated[
        str, typer.Option(metavar="NAME", help="Job name / rendezvous id.")
    ] = "clusterbench",
    env: Annotated[
        list[str] | None,
        typer.Option(metavar="KEY=VALUE", help="KEY=VALUE for every rank, repeatable."),
    ] = None,
    fmt: Annotated[
        str, typer.Option("--format", metavar="yaml|json", help="k8s output: yaml or json.")
    ] = "yaml",
    out: Annotated[
        Path | None,
        typer.Option("-o", "--out", metavar="FILE", help="Write to this file instead of stdout."),
    ] = None,
    results_pvc: Annotated[
        str | None,
        typer.Option(
            metavar="CLAIM",
            help="k8s: keep the run folder on this PersistentVolumeClaim (mounted at /results "
            "in the Master pod; the run's --out is /results/<name>).",
        ),
    ] = None,
    results_host_path: Annotated[
        str | None,
        typer.Option(
            metavar="DIR",
            help="k8s: keep the run folder in this folder of the Master pod's node (hostPath, "
            "mounted at /results; the run's --out is /results/<name>).",
        ),
    ] = None,
    join_timeout: Annotated[
        int | None,
        typer.Option(
            metavar="SECONDS",
            help="Seconds every node (under srun/mpirun: every rank) has to join once the first "
            "has started; a run missing one then stops, naming those that came (default 300, or "
            "the run's --timeout when shorter).",
        ),
    ] = None,
) -> None:
    """Print the command or script that runs clusterbench on many nodes."""
    from clusterbench.config import check_suite_name
    from clusterbench.job_scripts import (
        LaunchSpec,
        parse_env,
        pick_launcher,
        render,
        results_note,
    )

    try:
        launcher = pick_launcher(torchrun=torchrun, slurm=slurm, mpi=mpi, k8s=k8s, ray=ray)
        if nodes is None or gpus_per_node is None:
            raise ValueError("--nodes and --gpus-per-node are required")
        check_suite_name(suite)
        if fmt not in ("yaml", "json"):
            raise ValueError(f"--format must be yaml or json, got {fmt!r}")
        if launcher == "k8s" and image is None:
            raise ValueError(
                "--k8s needs --image IMAGE: a container image with clusterbench and a CUDA "
                "build of torch, which every pod runs"
            )
        spec = LaunchSpec(
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            suite=suite,
            master_addr=master_addr,
            port=port,
            name=name,
            env=parse_env(env or []),
            run_args=tuple(run_args or []),
            image=image,
            results_pvc=results_pvc,
            results_host_path=results_host_path,
            join_timeout_s=join_timeout,
        )
        text = render(launcher, spec, fmt="json" if fmt == "json" else "yaml")
    except ValueError as exc:
        raise _usage_error(str(exc)) from None
    note = results_note(launcher, spec)
    if out is None:
        typer.echo(text, nl=False)
    else:
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise _usage_error(f"cannot write {out}: {exc.strerror}") from None
        typer.echo(f"wrote {out}", err=True)
    if note is not None:
        typer.echo(f"clusterbench: note: {note}", err=True)
