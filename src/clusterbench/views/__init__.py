"""What a benchmark's (or a run part's) summary section and figures are made of: tables
(:class:`~clusterbench.views.cells.Section`, ``Grid``, ``Matrix``) and plots
(:class:`~clusterbench.views.plots.Plot`), with the cell formatting and plot styling they share.
The report renders them (console, markdown, HTML); nothing here renders or does I/O."""
