"""Utilities: dispatch modes, out-of-tree backend registration, benchmarking, data."""
