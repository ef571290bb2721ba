"""Neural-network building blocks. ``ember.nn.functional`` holds the functional ops;
modules (``Linear``, ``Conv2d``, ...) arrive with the nn issue."""

from . import functional  # noqa: F401

__all__ = ["functional"]
