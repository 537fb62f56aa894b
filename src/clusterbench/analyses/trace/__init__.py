"""``clusterbench analyze``: a training job's own profiler traces read (many ranks at once) and
attributed per rank and step: compute, memory, communication and coordination."""
