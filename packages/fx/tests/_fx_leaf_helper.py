"""Leaf modules defined in an importable module, for GraphModule.to_folder tests."""

from __future__ import annotations

import ember
import ember.nn as nn


class Gate(nn.Module):
    """A layer with data-dependent control flow (so it must stay a leaf) and a no-argument constructor."""

    def __init__(self, width=3, threshold=0.0):
        super().__init__()
        self.weight = nn.Parameter(ember.ones(width))
        self.inner = nn.Linear(width, width)
        self.threshold = threshold

    def forward(self, x):
        h = self.inner(x) * self.weight
        return h if float(h.sum()) > self.threshold else -h


class GateTracer(ember.fx.Tracer):
    def is_leaf_module(self, m, module_qualified_name):
        return isinstance(m, Gate) or super().is_leaf_module(m, module_qualified_name)
