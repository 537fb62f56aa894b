"""Each benchmark's part of the summary: ``section(measurements, multi_host) -> Section``."""
