"""Utilities: dispatch modes, out-of-tree backend registration, benchmarking, data."""
from . import data  # noqa: E402,F401 - ember.utils.data after `import ember`, as in PyTorch
