"""Two runs compared, or a run and a baseline: the rows matched, each change judged against
its practical limit and its run-to-run noise, the false alarms held down over the whole
comparison, and what changed between the runs."""
