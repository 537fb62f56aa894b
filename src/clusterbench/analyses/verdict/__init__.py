"""A verdict per node: healthy, or what falls short of the known-good figures; and the line of
findings that concern no one node."""
