"""Control flow on shapes, dtypes and Python values: branches the tracer resolves while capturing."""

from __future__ import annotations

import ember
import ember.nn.functional as F

from ._entry import Theme, call

theme = Theme("control_flow")


@theme.fn(lambda g: g.randn(4, 3), trains=True, numpy=lambda x: x.T @ x if x.shape[0] > x.shape[1] else x @ x.T)
def gram_by_shape(x):
    """The smaller Gram matrix, chosen by the input's shape."""
    if x.shape[0] > x.shape[1]:
        return x.t() @ x
    return x @ x.t()


@theme.fn(lambda g: g.randn(2, 3, 4), trains=True)
def flatten_if_3d(x):
    if x.dim() == 3:
        x = x.reshape(x.size(0), -1)
    return F.relu(x) * 2


@theme.fn(lambda g: (g.randn(5), True))
def flag_selects_activation(x, use_relu):
    if use_relu:
        return F.relu(x)
    return ember.tanh(x)


@theme.fn(lambda g: (g.randn(5), False))
def flag_false_branch(x, use_relu):
    return F.relu(x) if use_relu else ember.sigmoid(x)


@theme.fn(lambda g: (g.randn(3, 3), "gelu"))
def string_dispatch(x, kind):
    """An activation picked by a string argument, as configs do."""
    if kind == "relu":
        return F.relu(x)
    elif kind == "gelu":
        return F.gelu(x)
    elif kind == "silu":
        return F.silu(x)
    raise ValueError(kind)


@theme.fn(lambda g: (g.randn(6), 3))
def int_argument_scales(x, n):
    y = x
    if n > 2:
        y = y * n
    if n % 2 == 1:
        y = y - 1
    return y


@theme.fn(lambda g: (g.randn(4), None))
def optional_bias_none(x, bias):
    if bias is None:
        return x * 2
    return x * 2 + bias


@theme.fn(lambda g: (g.randn(4), g.randn(4)))
def optional_bias_given(x, bias):
    if bias is not None:
        x = x + bias
    return x.exp()


@theme.fn(lambda g: g.randn(3, 4).to(ember.float64))
def dtype_branch(x):
    if x.dtype == ember.float64:
        x = x.float()
    return x.sin()


@theme.fn(lambda g: g.randn(2, 8), trains=True)
def even_width_split(x):
    """Split the last dimension in two halves when it is even (a GLU by hand)."""
    if x.shape[-1] % 2 == 0:
        a, b = x.chunk(2, dim=-1)
        return a * ember.sigmoid(b)
    return x


@theme.fn(lambda g: g.randn(3, 1, 5))
def squeeze_singleton_dims(x):
    dims = [d for d in range(x.dim()) if x.shape[d] == 1]
    for d in reversed(dims):
        x = x.squeeze(d)
    return x + 1


@theme.fn(lambda g: g.randn(2, 3), trains=True)
def numel_threshold(x):
    if x.numel() > 4:
        return x.mean()
    return x.sum()


@theme.fn(lambda g: call(g.randn(4, 4), mode="max"))
def keyword_mode(x, mode="mean"):
    if mode == "mean":
        return x.mean(dim=0)
    if mode == "max":
        return x.max(dim=0).values
    return x.min(dim=0).values


@theme.fn(lambda g: g.randn(3, 4))
def requires_grad_branch(x):
    if x.requires_grad:
        return x * 3
    return x * 5


@theme.fn(lambda g: (g.randn(2, 3), 0.5))
def float_argument_compare(x, p):
    y = x * p
    if p < 0.25:
        y = y.abs()
    elif 0.25 <= p < 0.75:
        y = y.clamp(min=-0.1, max=0.1)
    return y


@theme.fn(lambda g: g.randn(2, 3, 4))
def chained_comparisons_on_shape(x):
    b, t, c = x.shape
    if 0 < t <= c < 8:
        return x.transpose(1, 2)
    return x


@theme.fn(lambda g: g.randn(5), trains=True)
def ternary_chain(x):
    n = x.shape[0]
    scale = 1.0 if n < 3 else 2.0 if n < 6 else 3.0
    return (x * scale).cumsum(0)


@theme.fn(lambda g: (g.randn(3), g.randn(3, 3)))
def isinstance_dispatch(x, y):
    out = []
    for v in (x, y, 2.0, 3):
        if isinstance(v, ember.Tensor):
            out.append(v.sum())
        elif isinstance(v, float):
            out.append(ember.tensor(v))
    return ember.stack(out)
