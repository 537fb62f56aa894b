"""Level 3: real distributed training workloads, and what costs hide outside the step."""
