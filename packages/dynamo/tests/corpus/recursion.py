"""Recursion on Python values: depth fixed by arguments or by the structure of the input."""

from __future__ import annotations

import ember

from ._entry import Theme

theme = Theme("recursion")


def _power(x, n):
    if n == 0:
        return ember.ones_like(x)
    half = _power(x, n // 2)
    return half * half * (x if n % 2 else 1)


@theme.fn(lambda g: g.randn(3), trains=True, numpy=lambda x: x**5)
def fast_power(x):
    return _power(x, 5)


def _tree_sum(tree):
    if isinstance(tree, ember.Tensor):
        return tree.sum()
    if isinstance(tree, dict):
        return sum(_tree_sum(v) for v in tree.values())
    return sum(_tree_sum(v) for v in tree)


@theme.fn(lambda g: ({"a": g.randn(2), "b": [g.randn(3), (g.randn(1), g.randn(2))]},), trains=True)
def nested_structure_sum(tree):
    return _tree_sum(tree)


def _tree_map(f, tree):
    if isinstance(tree, (list, tuple)):
        return type(tree)(_tree_map(f, v) for v in tree)
    if isinstance(tree, dict):
        return {k: _tree_map(f, v) for k, v in tree.items()}
    return f(tree)


@theme.fn(lambda g: ([g.randn(2), {"k": g.randn(2)}],), trains=True)
def tree_map_structure(tree):
    return _tree_map(lambda t: t * 2 + 1, tree)


def _fib(n):
    return n if n < 2 else _fib(n - 1) + _fib(n - 2)


@theme.fn(lambda g: g.randn(3), trains=True)
def python_recursion_constant(x):
    return x * _fib(7)


def _halve_until(x, size):
    if x.shape[-1] <= size:
        return x
    a, b = x.chunk(2, dim=-1)
    return _halve_until(a + b, size)


@theme.fn(lambda g: g.randn(2, 16), trains=True)
def recursive_shape_reduction(x):
    return _halve_until(x, 2)


def _chain(x, depth):
    return x if depth == 0 else _chain(ember.tanh(x) + x, depth - 1)


@theme.fn(lambda g: g.randn(4), trains=True)
def recursive_residual_chain(x):
    return _chain(x, 4)
