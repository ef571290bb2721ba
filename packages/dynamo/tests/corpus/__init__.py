"""The ember-dynamo capture corpus: realistic functions and modules grouped by theme (issue 26, Checks).

Each theme module registers its entries on its ``theme`` (see :mod:`._entry`); :data:`ENTRIES` lists
them all, in theme order. ``test_corpus.py`` compiles every entry and compares it with eager, and
``benchmarks/dynamo_capture_rate.py`` reports the fraction of ops captured in graphs.
"""

from __future__ import annotations

from . import (
    args_kwargs,
    closures,
    comprehensions,
    containers,
    contexts,
    control_flow,
    data_dependent,
    exceptions,
    globals_state,
    loops,
    methods,
    models,
    nn_features,
    python_features,
    recursion,
    rng,
    side_effects,
    tensor_ops,
)
from ._entry import Args, Entry, Gen

THEMES = (
    control_flow,
    loops,
    closures,
    comprehensions,
    args_kwargs,
    containers,
    methods,
    globals_state,
    contexts,
    exceptions,
    recursion,
    tensor_ops,
    nn_features,
    models,
    python_features,
    rng,
    side_effects,
    data_dependent,
)

#: Every entry of the corpus.
ENTRIES: tuple[Entry, ...] = tuple(e for module in THEMES for e in module.theme.entries)

__all__ = ["ENTRIES", "THEMES", "Args", "Entry", "Gen"]
