"""Hardware inventory: NVML / sysfs / torch probe, the dense peak table, GPU topology."""
