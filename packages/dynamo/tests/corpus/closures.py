"""Closures: free variables holding constants, tensors, functions; nested functions and lambdas."""

from __future__ import annotations

import functools

import ember
import ember.nn.functional as F

from ._entry import Theme

theme = Theme("closures")


def _make_scaler(factor):
    def scale(t):
        return t * factor

    return scale


_TRIPLE = _make_scaler(3.0)
_OFFSET = ember.arange(4, dtype=ember.float32)


@theme.fn(lambda g: g.randn(4), trains=True, numpy=lambda x: x * 3.0 + 1)
def call_closure_from_global(x):
    return _TRIPLE(x) + 1


@theme.fn(lambda g: g.randn(4), trains=True)
def inner_function_reads_arg(x):
    def add_x(t):
        return t + x

    return add_x(x.sin())


@theme.fn(lambda g: g.randn(4), trains=True)
def lambda_in_body(x):
    f = lambda t: t * t + 1  # noqa: E731 - a lambda is the point of the entry
    return f(x) - f(x * 2)


@theme.fn(lambda g: g.randn(3, 4), trains=True)
def closure_over_tensor(x):
    w = ember.ones(4, 2) * 0.5

    def project(t):
        return t @ w

    return project(x).relu()


@theme.fn(lambda g: g.randn(4), trains=True)
def nonlocal_counter(x):
    count = 0

    def bump(t):
        nonlocal count
        count += 1
        return t * count

    y = bump(x)
    y = bump(y)
    return y + count


@theme.fn(lambda g: g.randn(4))
def closure_over_global_tensor(x):
    def shift(t):
        return t + _OFFSET

    return shift(shift(x))


@theme.fn(lambda g: g.randn(5), trains=True)
def functools_partial(x):
    act = functools.partial(F.leaky_relu, negative_slope=0.2)
    return act(x) + act(-x)


@theme.fn(lambda g: g.randn(5), trains=True)
def returned_closure_called(x):
    def outer(k):
        def inner(t):
            return t**k

        return inner

    return outer(2)(x) + outer(3)(x)


@theme.fn(lambda g: g.randn(6), trains=True)
def higher_order_compose(x):
    def compose(*fs):
        def run(t):
            for f in fs:
                t = f(t)
            return t

        return run

    return compose(ember.sin, ember.cos, lambda t: t * 2)(x)


@theme.fn(lambda g: g.randn(3, 3), trains=True)
def map_with_lambda(x):
    rows = list(map(lambda r: r.softmax(-1), x.unbind(0)))
    return ember.stack(rows)
