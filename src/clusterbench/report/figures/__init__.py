"""Each benchmark's figures in the HTML report: ``figures/<name>.py`` has
``figures(measurements, ctx) -> list[Plot]``, named by the benchmark's declaration in
:mod:`clusterbench.catalog` (``Benchmark.figures``).

Figures are plotly's JSON form as plain dicts (:class:`~clusterbench.views.plots.Plot`), built
by the rules of :mod:`._common`:

- every value drawn is a measurement's own ``value`` (bars, curve points and heatmap cells;
  where several devices or groups measured the same thing, the one at their median is drawn,
  the lowest and highest as its error bar, each named in the hover).  Each trace says what
  its values are in plotly's ``meta``: ``"measurement"`` (``Measurement.value``),
  ``"reference"`` (a line at ``Measurement.reference.value``, or ideal scaling's 100 %) or
  ``"base"`` (the base run's measurements in a comparison);
- every axis title, colour bar and hover carries its unit;
- one colour per dtype, collective, attribution class and copy direction in every figure;
  heatmaps are one trace each, with no per-cell annotation but the marked node;
- the slow node and the straggler are what the verdicts decide (``judging.pair_series``'s
  ``node_pair_busbw`` and ``directed_pairs``, the attribution findings' ``find_straggler``) at
  the default thresholds.

Benchmarks with nothing to plot (doctor, selftest) have no figures.
"""
