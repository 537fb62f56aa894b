"""The drain list of a fleet: the nodes that the node-pair tests (three or more nodes) found
slow."""
