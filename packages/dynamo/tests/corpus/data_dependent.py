"""Entries MEANT to graph-break: tensor values read into Python, output shapes that depend on values,
printing, and calls the tracer cannot see into. Compiled must still equal eager, with the graphs before
and after the break captured."""

from __future__ import annotations

import struct

import ember
import ember.nn as nn

from ._entry import Theme

theme = Theme("data_dependent")


@theme.fn(lambda g: g.randn(4), trains=True, breaks=1, reason="item")
def item_scales(x):
    s = x.abs().sum().item()
    return x * s + 1


@theme.fn(lambda g: g.randn(4), trains=True, breaks=1, reason="bool")
def if_on_tensor(x):
    y = x * 2
    if y.sum() > 0:
        return y.relu()
    return y.tanh()


@theme.fn(lambda g: g.randn(4) - 10, trains=True, breaks=1, reason="bool")
def if_on_tensor_other_branch(x):
    y = x * 2
    if y.sum() > 0:
        return y.relu()
    return y.tanh()


@theme.fn(lambda g: g.randn(3), trains=True, breaks=1, reason="print")
def print_in_the_middle(x):
    y = x.sin()
    print("intermediate shape", tuple(y.shape))
    return y.cos()


@theme.fn(lambda g: g.randn(4), breaks=1, reason="tolist")
def tolist_values(x):
    vals = (x * 10).round().tolist()
    return x * len(vals) + vals[0]


@theme.fn(lambda g: g.randn(3), trains=True, breaks=1, reason="float")
def float_of_tensor(x):
    m = float(x.mean())
    return x - m


@theme.fn(lambda g: g.randn(3, 3), breaks=1, reason="numpy")
def numpy_round_trip(x):
    arr = (x * 2).numpy()
    return ember.from_numpy(arr.copy()) + x


@theme.fn(lambda g: g.randn(3) * 0.1, trains=True, breaks=3, reason="bool")
def loop_with_tensor_condition(x):
    """Each iteration reads the tensor to decide: one break per iteration (never taken here)."""
    for _ in range(3):
        x = x * 2
        if x.abs().max() > 100:
            break
    return x


@theme.fn(lambda g: g.randn(6), trains=True, breaks=1, reason="data-dependent")
def boolean_mask_index(x):
    return (x[x > 0] * 2).sum() + x.sum()


@theme.fn(lambda g: g.randint(4, 10), breaks=1, reason="data-dependent")
def unique_values(x):
    return ember.unique(x).float().sum() + x.float()


@theme.fn(lambda g: g.randn(2), trains=True, breaks=1, reason="pack")
def unsupported_c_function(x):
    packed = struct.pack("f", 1.5)
    return x * len(packed)


@theme.fn(lambda g: g.randn(3), trains=True, breaks=1, reason="bool")
def assert_on_tensor(x):
    y = x.exp()
    assert (y > 0).all(), "exp is positive"
    return y.log()


class SkipSmallUpdates(nn.Module):
    """Applies the residual update only when it is large enough (a value-dependent branch)."""

    def __init__(self):
        super().__init__()
        self.update = nn.Linear(4, 4)

    def forward(self, x):
        delta = self.update(x)
        if delta.norm() < 1e-3:
            return x
        return x + delta


@theme.module(lambda g: g.randn(2, 4), trains=True, breaks=1, reason="bool")
def skip_small_updates():
    return SkipSmallUpdates()


@theme.fn(lambda g: g.randn(5), trains=True, breaks=1, reason="item")
def item_used_as_size(x):
    k = int((x > 0).sum().item())
    return x * (k + 1)


@theme.fn(lambda g: g.randn(4), trains=True, breaks=1, reason="nonzero")
def nonzero_indices(x):
    idx = (x > 0).nonzero()
    return x * 2 + idx.numel()
