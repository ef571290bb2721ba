"""Dict and list manipulation: building, mutating (inputs too: replayed side effects), slicing, sorting."""

from __future__ import annotations

import collections

import ember

from ._entry import Theme

theme = Theme("containers")


@theme.fn(lambda g: g.randn(3), trains=True)
def build_list_then_stack(x):
    out = []
    out.append(x)
    out.append(x * 2)
    out.extend([x + 1, x - 1])
    out.insert(0, x.neg())
    return ember.stack(out)


@theme.fn(lambda g: ([g.randn(2)], g.randn(2)))
def append_to_input_list(acc, x):
    """Mutates its argument: the caller sees the appended tensor after the call."""
    acc.append(x * 3)
    return len(acc)


@theme.fn(lambda g: ({"a": g.randn(2)}, g.randn(2)))
def setitem_on_input_dict(d, x):
    d["b"] = d["a"] + x
    d["count"] = len(d)
    return d["b"].sum()


@theme.fn(lambda g: g.randn(4), trains=True)
def dict_update_and_pop(x):
    d = {"x": x, "y": x * 2}
    d.update(z=x * 3)
    y = d.pop("y")
    return d["x"] + d["z"] - y + len(d)


@theme.fn(lambda g: (g.randn(3), g.randn(3)), trains=True)
def return_dict(x, y):
    return {"sum": x + y, "prod": x * y, "n": 2}


@theme.fn(lambda g: g.randn(3), trains=True)
def return_nested_structure(x):
    return [x, (x * 2, {"deep": [x * 3]})], 7


@theme.fn(lambda g: [g.randn(2) for _ in range(5)], trains=True)
def list_slicing(xs):
    first, *middle, last = xs
    return ember.stack(middle[::2] + [first, last] + xs[-2:])


@theme.fn(lambda g: g.randn(4))
def sort_python_list(x):
    keys = [3, 1, 2]
    order = sorted(keys, reverse=True)
    return ember.stack([x * k for k in order])


@theme.fn(lambda g: (g.randn(3), g.randn(3)), trains=True)
def tuple_swap_and_index(a, b):
    a, b = b, a
    pair = (a, b)
    return pair[0] * 2 + pair[-1]


@theme.fn(lambda g: g.randn(4))
def list_pop_and_remove(x):
    vals = [1, 2, 3, 4]
    vals.pop()
    vals.remove(2)
    vals.reverse()
    return x * vals[0] + len(vals)


@theme.fn(lambda g: g.randn(3), trains=True)
def ordered_dict_iteration(x):
    d = collections.OrderedDict()
    d["double"] = 2
    d["half"] = 0.5
    for k, v in d.items():
        x = x * v if k != "skip" else x
    return x


@theme.fn(lambda g: g.randn(2, 2), trains=True)
def defaultdict_counts(x):
    groups = collections.defaultdict(list)
    for i in range(4):
        groups[i % 2].append(x * i)
    return sum(groups[0]) + sum(groups[1])


@theme.fn(lambda g: ({"w": g.randn(3), "b": g.randn(3)}, g.randn(3)), trains=True)
def dict_of_tensors_argument(params, x):
    return x * params["w"] + params["b"]


@theme.fn(lambda g: g.randn(4))
def membership_tests(x):
    names = ["relu", "tanh"]
    y = x
    if "relu" in names:
        y = y.relu()
    if "gelu" not in names:
        y = y + 1
    return y


@theme.fn(lambda g: [g.randn(3), g.randn(3)])
def list_setitem_on_input(xs):
    xs[0] = xs[0] + xs[1]
    del xs[1]
    return xs[0].sum()


@theme.fn(lambda g: g.randn(2, 3), trains=True)
def dict_keys_values(x):
    d = {"a": x, "b": x.exp()}
    keys = list(d.keys())
    vals = list(d.values())
    return vals[0] * len(keys) + vals[1]
