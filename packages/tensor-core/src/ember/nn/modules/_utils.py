"""Helpers shared by the layer modules: ``_single``/``_pair``/``_triple`` (as in PyTorch) and an
``extra_repr`` formatter."""

from __future__ import annotations

import collections.abc
from itertools import repeat

__all__: list[str] = []


def _ntuple(n, name="parse"):
    def parse(x):
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return tuple(repeat(x, n))

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")


def _reverse_repeat_tuple(t, n):
    """Reverse ``t`` and repeat each element ``n`` times: ``(1, 2), 2 -> (2, 2, 1, 1)`` (F.pad order)."""
    return tuple(x for x in reversed(t) for _ in range(n))


def _options_repr(module, names):
    """``"a=1, b=2"``: the named attributes of ``module`` as an ``extra_repr`` fragment."""
    return ", ".join(f"{name}={getattr(module, name)}" for name in names)
