"""Python language features around tensor code: walrus, ``match``, f-strings as keys, star-unpacking,
generators, user context managers, ``sorted(key=...)``, default-argument closures, chained methods on
Python values, ``del``, ``type()`` checks, ``Size`` arithmetic."""

from __future__ import annotations

import contextlib
import operator

import ember
import ember.nn.functional as F

from ._entry import Theme, call

theme = Theme("python_features")


@theme.fn(lambda g: g.randn(6), trains=True)
def walrus_in_condition(x):
    if (n := x.shape[0]) > 4:
        x = x * n
    return x


@theme.fn(lambda g: (g.randn(3), "double"))
def match_statement(x, op):
    match op:
        case "double":
            return x * 2
        case "square":
            return x * x
        case _:
            return x


@theme.fn(lambda g: (g.randn(3, 2), (3, 2)))
def match_on_shape_tuple(x, shape):
    match shape:
        case (rows, 2):
            return x.sum(0) * rows
        case (rows, cols):
            return x.sum(1) * cols
    return x


@theme.fn(lambda g: g.randn(4), trains=True)
def fstring_keys(x):
    d = {}
    for i in range(3):
        d[f"layer_{i}"] = x * i
    return d["layer_2"] - d[f"layer_{1}"]


@theme.fn(lambda g: g.randn(2, 3, 4), trains=True)
def star_unpacking_of_shape(x):
    *batch, last = x.shape
    return x.reshape(-1, last).sum(0) * len(batch)


def _squares(t, n):
    for i in range(n):
        yield t * i


@theme.fn(lambda g: g.randn(3), trains=True)
def generator_function_consumed(x):
    return sum(_squares(x, 4))


@theme.fn(lambda g: g.randn(3), trains=True)
def generator_to_list(x):
    return ember.stack(list(_squares(x, 3)))


@contextlib.contextmanager
def _scaled(log):
    log.append("enter")
    yield 2.0
    log.append("exit")


@theme.fn(lambda g: g.randn(3), trains=True)
def user_context_manager(x):
    log = []
    with _scaled(log) as factor:
        y = x * factor
    return y, len(log)


class _Timer:
    def __init__(self):
        self.entered = 0

    def __enter__(self):
        self.entered += 1
        return self

    def __exit__(self, *exc):
        return False


@theme.fn(lambda g: g.randn(3), trains=True)
def user_class_context_manager(x):
    t = _Timer()
    with t:
        y = x.exp()
    return y * t.entered


@theme.fn(lambda g: [g.randn(2) * k for k in (3.0, 1.0, 2.0)], trains=True)
def sorted_with_key(xs):
    ranked = sorted(range(len(xs)), key=lambda i: -i)
    return ember.stack([xs[i] for i in ranked])


@theme.fn(lambda g: g.randn(4), trains=True)
def closures_in_loop_default_args(x):
    fns = [lambda t, k=k: t * k for k in range(3)]
    return sum(f(x) for f in fns)


@theme.fn(lambda g: g.randn(4))
def del_local(x):
    y = x * 2
    z = y + 1
    del y
    return z


@theme.fn(lambda g: (g.randn(3), 2))
def type_checks(x, n):
    if type(n) is int and type(x).__name__ == "Tensor":
        return x * n
    return x


@theme.fn(lambda g: g.randn(2, 3), trains=True)
def size_tuple_ops(x):
    s = x.shape
    if s == (2, 3) and s[::-1] == (3, 2) and x.size() == ember.Size([2, 3]):
        return x.reshape(s[1], s[0]) + 1
    return x


@theme.fn(lambda g: g.randn(3), trains=True)
def operator_module(x):
    ops = [operator.add, operator.mul, operator.sub]
    y = x
    for op in ops:
        y = op(y, x)
    return y + operator.neg(x)


@theme.fn(lambda g: g.randn(5), trains=True)
def enumerate_with_start_and_zip(x):
    names = ["a", "b", "c"]
    total = x
    for i, (name, k) in enumerate(zip(names, [1.0, 2.0, 3.0]), start=1):
        total = total + x * k * i * len(name)
    return total


@theme.fn(lambda g: call(g.randn(4), g.randn(4), weights={"a": 0.3, "b": 0.7}), trains=True)
def dict_argument_get_default(a, b, weights=None):
    weights = weights or {}
    return a * weights.get("a", 1.0) + b * weights.get("b", 1.0) + weights.get("c", 0.0)


@theme.fn(lambda g: g.randn(3, 4), trains=True)
def string_methods_pick_dim(x):
    layout = "NC"
    dim = layout.index("C")
    return F.softmax(x, dim=dim) if layout.upper().startswith("N") else x


@theme.fn(lambda g: g.randn(4), trains=True)
def min_max_builtins_on_shapes(x):
    k = min(x.shape[0], 2)
    m = max(len(x), 1)
    return x[:k].sum() * m + abs(-k)


@theme.fn(lambda g: g.randn(6), trains=True)
def slice_objects(x):
    head = slice(0, 3)
    tail = slice(3, None)
    return x[head] * x[tail]


@theme.fn(lambda g: g.randn(4), trains=True)
def conditional_expression_chain_with_and_or(x):
    scale = x.shape[0] > 3 and 2.0 or 1.0
    shift = None or 0.5
    return x * scale + shift


@theme.fn(lambda g: (g.randn(3), [1, 2, 3]))
def list_argument_changes_length(x, values):
    values.append(len(values) + 1)
    return x * sum(values)
