"""Side effects and aliasing: what the caller sees after the call. Mutations of arguments (lists, dicts,
objects, tensors through views), of module attributes, in an order that crosses a graph break; returned
objects that are the arguments themselves; nested compiled and disabled functions."""

from __future__ import annotations

import ember
import ember.nn as nn

from ._entry import Theme

theme = Theme("side_effects")


@theme.fn(lambda g: g.randn(3))
def return_input_itself(x):
    """Eager returns the caller's tensor object: so must compiled code."""
    return x


@theme.fn(lambda g: (g.randn(3), g.randn(3)))
def return_inputs_and_a_new_tensor(x, y):
    return y, x + y, x


@theme.fn(lambda g: ([g.randn(2)], g.randn(2)))
def return_mutated_input_list(acc, x):
    acc.append(x * 2)
    return acc, len(acc)


@theme.fn(lambda g: g.randn(3))
def same_new_tensor_twice(x):
    y = x * 2
    return y, y


@theme.fn(lambda g: g.randn(4, 3))
def inplace_through_view_of_input(x):
    x[0].add_(1)
    x.view(-1)[::2].zero_()
    return x.sum()


@theme.fn(lambda g: (g.randn(3), g.randn(3)))
def inplace_then_read_input(x, y):
    x.mul_(2)
    return x + y


@theme.fn(lambda g: g.randn(3))
def inplace_returns_input(x):
    """``add_`` returns its self: the result is the argument object."""
    return x.add_(1)


class Box:
    def __init__(self):
        self.value = None
        self.history = []


@theme.fn(lambda g: (Box(), g.randn(3)))
def set_tensor_attribute_on_input_object(box, x):
    box.value = x * 2
    box.history.append("set")
    return box.value.sum()


class CallCounter(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.lin(x) * self.calls


@theme.module(lambda g: g.randn(2, 3), trains=True, recompiles=1)
def module_python_counter():
    """``self.calls`` is a Python int the graph depends on: each call changes it, so each call recompiles."""
    return CallCounter()


@theme.fn(lambda g: ([], g.randn(3)), breaks=1, reason="print")
def mutations_across_a_break(log, x):
    """Appends before and after a graph break land in order."""
    log.append(x * 1)
    print("between")
    log.append(x * 2)
    log.insert(0, "start")
    return len(log)


@theme.fn(lambda g: ({"a": g.randn(2), "b": g.randn(2), "keep": [1]},))
def dict_delete_and_nested_append(d):
    del d["a"]
    d["keep"].append(2)
    d["b"] = d["b"] * 3
    return sorted(d)


@theme.fn(lambda g: g.randn(3))
def new_list_shared_with_result(x):
    items = [x]
    out = {"items": items, "again": items}
    items.append(x * 2)
    return out


def _helper(t):
    return t.sin() * 2


_COMPILED_HELPER = ember.compile(_helper, backend="eager")


@theme.fn(lambda g: g.randn(3), trains=True)
def calls_a_compiled_function(x):
    """A compiled function called inside another: inlined when the outer one is traced."""
    return _COMPILED_HELPER(x + 1) + 1


@ember.compiler.disable
def _opaque(t):
    return t * 3


@theme.fn(lambda g: g.randn(3), trains=True, breaks=1, reason="disable")
def calls_a_disabled_function(x):
    """``ember.compiler.disable`` keeps a function out of graphs: a break around the call."""
    y = x.cos()
    return _opaque(y) + 1


@theme.fn(lambda g: ({"n": 0}, g.randn(2)))
def counter_in_input_dict_in_loop(state, x):
    for _ in range(3):
        state["n"] += 1
        x = x * state["n"]
    return x


@theme.fn(lambda g: (g.randn(3), g.randn(3)))
def swap_contents_with_copy_(a, b):
    tmp = a.clone()
    a.copy_(b)
    b.copy_(tmp)
    return a - b
