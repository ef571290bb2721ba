"""``*args``/``**kwargs``, defaults, keyword-only arguments, unpacking at call sites."""

from __future__ import annotations

import ember
import ember.nn.functional as F

from ._entry import Theme, call

theme = Theme("args_kwargs")


def _weighted(*tensors, weights=None):
    weights = weights or [1.0] * len(tensors)
    return sum(w * t for w, t in zip(weights, tensors))


@theme.fn(lambda g: (g.randn(3), g.randn(3), g.randn(3)), trains=True, numpy=lambda a, b, c: a + b + c)
def star_args_sum(*xs):
    total = xs[0]
    for t in xs[1:]:
        total = total + t
    return total


@theme.fn(lambda g: call(g.randn(3), scale=2.0, shift=-1.0), trains=True)
def kwargs_dict(x, **options):
    y = x * options.get("scale", 1.0)
    if "shift" in options:
        y = y + options["shift"]
    return y


@theme.fn(lambda g: call(g.randn(4), g.randn(4), alpha=0.3), trains=True)
def keyword_only_argument(x, y, *, alpha=0.5):
    return alpha * x + (1 - alpha) * y


@theme.fn(lambda g: g.randn(2, 3), trains=True)
def defaults_used(x, p=2, eps=1e-6):
    return x / (x.abs().pow(p).sum(-1, keepdim=True) + eps)


@theme.fn(lambda g: (g.randn(3), g.randn(3)), trains=True)
def forward_star_args(a, b):
    return _weighted(a, b, weights=[0.25, 0.75]) + _weighted(a, b)


@theme.fn(lambda g: g.randn(4, 5), trains=True)
def unpack_kwargs_at_call(x):
    opts = {"dim": -1, "keepdim": True}
    return x.sum(**opts) + x.mean(**opts)


@theme.fn(lambda g: g.randn(2, 6), trains=True)
def unpack_list_at_call(x):
    shape = [3, 4]
    return x.reshape(*shape).t()


@theme.fn(lambda g: call(g.randn(3, 3), g.randn(3, 3), g.randn(3, 3), op="max"))
def mixed_varargs_and_kwargs(first, *rest, op="sum", **unused):
    stack = ember.stack([first, *rest])
    if op == "max":
        return stack.amax(0)
    return stack.sum(0)


@theme.fn(lambda g: call(g.randn(2, 4), g.randn(4, 3)), trains=True)
def pass_through_kwargs(x, w):
    def linear(inp, weight, **kw):
        return F.linear(inp, weight.t(), **kw)

    return linear(x, w, bias=None)


@theme.fn(lambda g: (g.randn(3), (1.0, 2.0, 3.0)), trains=True)
def tuple_argument_unpacked(x, coeffs):
    a, b, c = coeffs
    return a + b * x + c * x * x
