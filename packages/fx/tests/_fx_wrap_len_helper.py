"""A module that registers the builtin ``len`` with ember.fx.wrap (used by test_fx_trace.py).

Registration is per module: only calls of ``len`` made from this module's functions are
recorded; other modules keep the normal error.
"""

from __future__ import annotations

import ember.fx

ember.fx.wrap("len")


def scale_by_length(x):
    return x * len(x)
