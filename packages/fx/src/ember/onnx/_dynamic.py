"""Dynamic axes: which integers of a traced graph are sizes, written in terms of the axes.

``make_fx`` runs the model on real tensors, so every size it records is a plain integer:
``reshape(x, 16, 8, 8)`` for a batch of 2 and 4 heads. To export a graph whose batch
axis is dynamic, we must know that the ``8`` is ``4 * batch``. We find out by tracing
again with the dynamic axes resized (one trace per axis, plus one with all of them
resized to check the fit) and fitting each integer that changed to a
:class:`DimExpr`, ``offset + coeff * prod(axis ** power)``: a product of axes
(``batch * seq``, ``4 * batch``), or an affine function of one axis (``seq - 1``).
An integer that fits neither is an error that names the node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

__all__ = ["DynamicAxis", "DimExpr", "SymInt", "fit", "trial_sizes"]


@dataclass(frozen=True)
class DynamicAxis:
    """A named dynamic axis (``"batch"``) and the first graph input axis that carries it.

    Attributes:
        name (str): the ONNX ``dim_param``.
        input_index (int): which flat graph input has the axis.
        axis (int): the axis of that input (non-negative).
        size (int): its size in the example inputs.
    """

    name: str
    input_index: int
    axis: int
    size: int


@dataclass(frozen=True)
class DimExpr:
    """``offset + coeff * prod(axis ** power for axis, power in powers)`` over dynamic axis names."""

    coeff: Fraction
    powers: tuple  # ((axis name, power), ...), powers >= 1
    offset: int = 0

    def evaluate(self, sizes):
        """The value for ``sizes`` (dict: axis name -> size)."""
        value = self.coeff
        for name, power in self.powers:
            value *= sizes[name] ** power
        return value + self.offset

    def __str__(self):
        terms = [f"{name}**{p}" if p > 1 else name for name, p in self.powers]
        text = "*".join(([str(self.coeff)] if self.coeff != 1 else []) + terms) or str(self.coeff)
        return f"{text}{self.offset:+d}" if self.offset else text


@dataclass(frozen=True)
class SymInt:
    """An integer argument of a graph node that depends on dynamic axes.

    Attributes:
        value (int): its value in the example trace.
        expr (DimExpr): how it is computed from the dynamic axes.
    """

    value: int
    expr: DimExpr

    def _static_use(self, *_):
        # A rule that reads this as a plain number would bake the example's size into the graph.
        raise TypeError(
            f"this argument is {self.expr} (dynamic axes; {self.value} in the example) but the op's ONNX rule "
            "needs a constant; declare those axes static"
        )

    __index__ = __int__ = __float__ = __bool__ = _static_use

    def __repr__(self):
        return f"SymInt({self.value}={self.expr})"


def trial_sizes(size):
    """Two other sizes to trace a dynamic axis of example size ``size`` with, smaller ones first.

    Smaller sizes come first because models often cap a length (a transformer's
    context); sizes below 2 are avoided because size-1 axes broadcast.
    """
    candidates = [size - 1, size - 2, size + 1, size + 2]
    chosen = [c for c in candidates if c >= 2 and c != size][:2]
    return chosen[0], chosen[1]


def _power(v0, v1, s0, s1):
    """The integer power p with v1 / v0 == (s1 / s0) ** p, or None."""
    if v0 == 0 or v1 == 0 or (v0 > 0) != (v1 > 0):
        return None
    p = math.log(v1 / v0) / math.log(s1 / s0)
    rounded = round(p)
    if rounded < 1 or abs(p - rounded) > 1e-9:
        return None
    return rounded


def fit(base, single, verify, axes, base_sizes, single_sizes, verify_sizes):
    """Fit one traced integer to a :class:`DimExpr`.

    Args:
        base (int): its value in the example trace.
        single (list[int]): its value in the trace where only ``axes[j]`` changed.
        verify (int): its value in the trace where every axis changed.
        axes (list[str]): the dynamic axis names.
        base_sizes, single_sizes, verify_sizes (dict[str, int]): the axis sizes of those
            traces (``single_sizes[name]`` is ``name``'s size in its own trace).

    Returns:
        DimExpr or None: None when neither form reproduces all the traced values.
    """
    changed = [j for j, v in enumerate(single) if v != base]
    candidates = []
    powers = []
    for j in changed:
        name = axes[j]
        p = _power(base, single[j], base_sizes[name], single_sizes[name])
        if p is None:
            break
        powers.append((name, p))
    else:
        denominator = math.prod(base_sizes[name] ** p for name, p in powers)
        candidates.append(DimExpr(Fraction(base, denominator), tuple(powers)))
    if len(changed) == 1:
        name = axes[changed[0]]
        slope = Fraction(single[changed[0]] - base, single_sizes[name] - base_sizes[name])
        offset = base - slope * base_sizes[name]
        if offset.denominator == 1:
            candidates.append(DimExpr(slope, ((name, 1),), int(offset)))
    for expr in candidates:
        points = [(verify_sizes, verify)]
        points += [({**base_sizes, axes[j]: single_sizes[axes[j]]}, single[j]) for j in range(len(axes))]
        if all(expr.evaluate(sizes) == value for sizes, value in points):
            return expr
    return None
