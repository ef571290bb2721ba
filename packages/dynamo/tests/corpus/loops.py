"""Loops: ``for`` over ranges, tensors, lists and zips, ``while`` with Python counters, ``break``/``continue``."""

from __future__ import annotations

import ember
import ember.nn.functional as F

from ._entry import Theme

theme = Theme("loops")


@theme.fn(lambda g: g.randn(4), trains=True, numpy=lambda x: x * 2**5)
def range_loop_doubles(x):
    for _ in range(5):
        x = x * 2
    return x


@theme.fn(lambda g: g.randn(3, 4), trains=True)
def loop_over_rows(x):
    """Iterating a tensor gives its rows."""
    total = ember.zeros(x.shape[1])
    for row in x:
        total = total + row.relu()
    return total


@theme.fn(lambda g: [g.randn(2, 2) for _ in range(4)], trains=True)
def loop_over_list_of_tensors(xs):
    acc = xs[0]
    for t in xs[1:]:
        acc = acc @ t
    return acc


@theme.fn(lambda g: (g.randn(3), g.randn(3)), trains=True)
def while_counter(x, y):
    i = 0
    while i < 4:
        x = x + y * i
        i += 1
    return x


@theme.fn(lambda g: g.randn(6))
def loop_with_break(x):
    for i in range(10):
        if i == 3:
            break
        x = x.sin()
    return x


@theme.fn(lambda g: g.randn(6), trains=True)
def loop_with_continue(x):
    out = x
    for i in range(6):
        if i % 2:
            continue
        out = out + x * i
    return out


@theme.fn(lambda g: (g.randn(3), g.randn(3), g.randn(3)), trains=True)
def zip_enumerate(a, b, c):
    total = 0
    for i, (u, v) in enumerate(zip([a, b], [b, c])):
        total = total + (u * v).sum() * (i + 1)
    return total


@theme.fn(lambda g: g.randn(2, 5), trains=True)
def nested_loops(x):
    y = x
    for i in range(2):
        for j in range(3):
            y = y + (i - j) * x
    return y


@theme.fn(lambda g: g.randn(4, 4))
def reversed_range(x):
    parts = []
    for i in reversed(range(x.shape[0])):
        parts.append(x[i] * i)
    return ember.stack(parts)


@theme.fn(lambda g: g.randn(8), trains=True)
def loop_over_dict_items(x):
    scales = {"a": 1.0, "b": 2.0, "c": -0.5}
    for name, s in scales.items():
        if name != "b":
            x = x * s
    return x


@theme.fn(lambda g: g.randn(10), trains=True)
def for_else(x):
    for i in range(3):
        x = F.softplus(x) - i
    else:
        x = x * 10
    return x


@theme.fn(lambda g: g.randn(4, 3), trains=True)
def loop_over_shape(x):
    y = x
    for size in x.shape:
        y = y * size
    return y


@theme.fn(lambda g: g.randn(2, 3), trains=True)
def rnn_unrolled(x):
    """A tanh recurrence over a fixed number of steps with a constant weight."""
    w = ember.eye(3) * 0.5
    h = ember.zeros(2, 3)
    for _ in range(4):
        h = ember.tanh(x + h @ w)
    return h
