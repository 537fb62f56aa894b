"""The run pipeline, in the order a run goes through it:

- :mod:`.plan`: what each benchmark will do and how long it should take (its budget share);
- :mod:`.start`: ``run()``: check the input, plan, then start the workers (clusterbench's own
  launch; :mod:`.workers`: on which device, how many) or join the launcher's world (torchrun,
  srun, mpirun, Ray);
- :mod:`.join`: a rank joins the world and the ranks agree that the run may start;
- :mod:`.rank`: the per-rank loop: join, probe, each benchmark under its deadline, record;
- :mod:`.collect`: how each rank's records reach the process that finishes the run;
- :mod:`.assemble`: records -> :class:`~clusterbench.schema.Results`;
- :mod:`.finish`: ``finish()``, once per run: analyse, compare with the baseline and the
  history when asked, write results.json, summary.md and report.html, record the history, export.

:mod:`.options` is what a run is asked to do (:class:`~.options.RunOptions`, the one argument
of :func:`clusterbench.run`); :mod:`.spec` is what travels from the start to every rank.
Nothing here is imported by the commands that measure nothing.

Every way into a run (the command line, :func:`clusterbench.run`, a worker process, the Ray
driver) comes through this package, which registers the built-in benchmarks first, before a
plugin's, in the catalog's order.
"""

from clusterbench import catalog

catalog.register_builtin()
