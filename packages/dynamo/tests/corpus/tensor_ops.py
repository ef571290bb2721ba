"""Tensor programs: indexing, views, in-place updates (of locals and of inputs), reductions, broadcasting,
creation ops, dtype casts, ``einsum``, ``where``: the leaf calls the tracer records."""

from __future__ import annotations

import ember
import ember.nn.functional as F

from ._entry import Theme

theme = Theme("tensor_ops")


@theme.fn(lambda g: g.randn(4, 5), trains=True, numpy=lambda x: x[1:3, ::2] * 2)
def basic_slicing(x):
    return x[1:3, ::2] * 2


@theme.fn(lambda g: g.randn(2, 3, 4), trains=True)
def ellipsis_and_none_index(x):
    return x[..., None, 1] + x[:, None, :, 0]


@theme.fn(lambda g: (g.randn(5, 3), g.randint(5, 4)), trains=True)
def integer_tensor_index(x, idx):
    return x[idx].sum(0)


@theme.fn(lambda g: g.randn(3, 4))
def inplace_on_local(x):
    y = x.clone()
    y.mul_(2).add_(1)
    y[0] = 0.0
    y.clamp_(min=-1)
    return y


@theme.fn(lambda g: g.randn(3))
def inplace_on_input(x):
    """Mutates its argument: after the call the caller's tensor holds the update."""
    x.add_(1)
    x.mul_(3)
    return x.sum()


@theme.fn(lambda g: (g.randn(4, 4), g.randn(4)))
def setitem_on_input(x, row):
    x[1] = row
    x[:, 0] = 0.0
    return x.mean()


@theme.fn(lambda g: g.randn(2, 6), trains=True)
def views_and_reshapes(x):
    a = x.view(2, 3, 2).permute(2, 0, 1)
    b = a.reshape(-1).unsqueeze(0).expand(2, -1)
    return b.flatten() + x.flatten().repeat(2)


@theme.fn(lambda g: (g.randn(3, 1), g.randn(1, 4)), trains=True)
def broadcasting_ops(a, b):
    return (a + b) * (a - b) / (1 + b.abs())


@theme.fn(lambda g: g.randn(3, 5), trains=True)
def reductions(x):
    return ember.stack([x.sum(), x.mean(), x.amax(), x.var(), x.logsumexp(dim=1).sum(), x.norm()])


@theme.fn(lambda g: g.randn(4, 3))
def creation_ops(x):
    z = ember.zeros_like(x)
    o = ember.ones(x.shape[1])
    r = ember.arange(x.shape[0]).float().unsqueeze(1)
    f = ember.full((1, 3), 2.5)
    return x + z + o + r * f + ember.eye(4, 3)


@theme.fn(lambda g: g.randn(3, 3), trains=True)
def where_and_masks(x):
    mask = x > 0
    return ember.where(mask, x, x * 0.1) + mask.float() + x.masked_fill(~mask, 0.0)


@theme.fn(lambda g: (g.randn(2, 3, 4), g.randn(2, 4, 5)), trains=True)
def einsum_and_bmm(a, b):
    return ember.einsum("bij,bjk->bik", a, b) - ember.bmm(a, b) + a.sum() * 0


@theme.fn(lambda g: g.randn(3, 4), trains=True)
def dtype_casts(x):
    y = x.to(ember.float64) * 2
    i = (x * 10).long()
    return y.float() + i.float() / 10, i.dtype == ember.int64


@theme.fn(lambda g: g.randn(6, 4), trains=True)
def split_and_cat(x):
    a, b, c = x.split([1, 2, 3], dim=0)
    return ember.cat([c, a * 2, b], dim=0) + ember.cat(x.unbind(0)).view(6, 4)


@theme.fn(lambda g: g.randn(5), trains=True)
def sort_topk_cumsum(x):
    vals, idx = x.sort(descending=True)
    top = x.topk(2).values
    return vals.cumsum(0)[:2] + top, idx


@theme.fn(lambda g: g.randn(4, 4), trains=True)
def triangular_mask(x):
    mask = ember.tril(ember.ones(4, 4, dtype=ember.bool))
    return x.masked_fill(~mask, float("-inf")).softmax(-1)


@theme.fn(lambda g: g.randn(3, 4), trains=True)
def size_arithmetic(x):
    b, n = x.shape
    half = n // 2
    return x[:, :half] * x[:, half:] * (b * n) ** 0.5


@theme.fn(lambda g: g.randn(2, 3, 4, 4), trains=True)
def functional_ops(x):
    y = F.avg_pool2d(x, 2)
    y = F.interpolate(y, scale_factor=2, mode="nearest")
    y = F.pad(y, (1, 1, 0, 0))
    return F.softmax(y, dim=-1).sum()


@theme.fn(lambda g: g.randn(3), trains=True)
def python_scalar_math(x):
    n = x.shape[0]
    scale = (n * 2 + 1) / 7 - n % 2 + abs(-n) + max(n, 1) + min(2, n) + round(2.6)
    return x * scale


@theme.fn(lambda g: g.randn(2, 3))
def tensor_attributes(x):
    return x.new_zeros(x.shape) + x.ndim + x.numel() + x.size(-1) + x.is_contiguous() + x.element_size()


@theme.fn(lambda g: (g.randn(3, 4), g.randn(3, 4)), trains=True)
def operator_overloads(a, b):
    return (a @ b.t()) @ a + (a**2) - (b // 1) + (-a) % 2 + abs(b) + (a != b).float() + (a >= b).float()


@theme.fn(lambda g: g.randn(4), trains=True)
def augmented_assignment_rebinds(x):
    y = x * 1
    y += 1
    y *= 2
    y /= 3
    y **= 2
    return y
