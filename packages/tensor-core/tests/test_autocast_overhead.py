"""What an op costs inside an autocast region: ops without a policy skip the mode's normalising, and
weight casts are made once per region (issue 22's autocast per-op overhead)."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import _autocast
from ember._ops._registry import Op
from ember.utils._python_dispatch import DispatchMode


@pytest.fixture
def normalized(monkeypatch):
    """The names of the ops whose arguments the dispatcher normalises, in call order."""
    names = []
    original = Op.normalize

    def counting(self, args, kwargs):
        names.append(self.name)
        return original(self, args, kwargs)

    monkeypatch.setattr(Op, "normalize", counting)
    return names


@pytest.fixture
def casts(monkeypatch):
    """The tensors the autocast mode casts (each a call of ``_to_copy``)."""
    made = []
    original = _autocast._to_copy

    def counting(tensor, **kwargs):
        made.append(tensor)
        return original(tensor, **kwargs)

    monkeypatch.setattr(_autocast, "_to_copy", counting)
    return made


def test_ops_without_a_policy_are_not_normalised(normalized):
    a = ember.randn(3, 4)
    b = ember.randn(3, 4)
    with ember.autocast("cpu"):
        total = (ember.relu(a + b) * 2).sum()  # no cpu policy (sum has one on cuda only)
        product = ember.mm(a, b.t())  # lower
    assert "add" not in normalized and "relu" not in normalized and "sum" not in normalized
    assert "mul" not in normalized
    assert normalized.count("mm") == 1
    assert total.dtype is ember.float32
    assert product.dtype is ember.bfloat16
    np.testing.assert_allclose(total.item(), (np.maximum(a.numpy() + b.numpy(), 0) * 2).sum(), rtol=1e-5)


def test_an_inner_disabled_region_passes_everything(normalized):
    a = ember.randn(2, 2)
    with ember.autocast("cpu"), ember.autocast("cpu", enabled=False):
        out = ember.mm(a, a)
    assert out.dtype is ember.float32
    assert normalized == []


def test_a_mode_below_autocast_still_sees_passed_ops():
    seen = []

    class Record(DispatchMode):
        def __ember_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func.name)
            return func(*args, **(kwargs or {}))

    a = ember.randn(2, 2)
    with Record(), ember.autocast("cpu"):
        ember.relu(a)
        ember.mm(a, a)
    assert seen[0] == "relu"
    assert seen.count("_to_copy") == 2 and seen[-1] == "mm"


def test_weight_casts_are_cached_within_a_region_and_dropped_after(casts):
    weight = ember.randn(4, 4, requires_grad=True)
    x = ember.randn(2, 4)
    with ember.autocast("cpu"):
        first = ember.mm(x, weight)
        second = ember.mm(x, weight)
        assert id(weight) in _autocast._state.cache
    # the weight is cast once; x (no grad, no mode below) is cast per call without the dispatcher
    assert sum(t is weight for t in casts) == 1
    assert sum(t is x for t in casts) == 0
    assert _autocast._state.cache == {}
    np.testing.assert_array_equal(first.detach().float().numpy(), second.detach().float().numpy())
    (first.float().sum() + second.float().sum()).backward()
    assert weight.grad.dtype is ember.float32
    np.testing.assert_allclose(weight.grad.numpy(), 2 * np.repeat(x.numpy().sum(0)[:, None], 4, axis=1), rtol=2e-2)
    with ember.autocast("cpu"):
        ember.mm(x, weight)
    assert sum(t is weight for t in casts) == 2  # a new region casts again


def test_cache_disabled_casts_every_time(casts):
    weight = ember.randn(4, 4, requires_grad=True)
    x = ember.randn(2, 4)
    with ember.autocast("cpu", cache_enabled=False):
        ember.mm(x, weight)
        ember.mm(x, weight)
    assert sum(t is weight for t in casts) == 2
    assert _autocast._state.cache == {}


def test_set_autocast_enabled_updates_the_ops_the_mode_sees(normalized):
    a = ember.randn(2, 2)
    ember.set_autocast_enabled("cpu", True)
    try:
        assert ember.mm(a, a).dtype is ember.bfloat16
        ember.set_autocast_enabled("cpu", False)
        assert ember.mm(a, a).dtype is ember.float32
    finally:
        ember.set_autocast_enabled("cpu", False)
    assert normalized == ["mm"]


def test_plain_casts_equal_to_copy(casts):
    x = ember.tensor([[1.0, -2.5e-8, 7e4], [3.3333333, 1e6, float("nan")]])
    y = x.t().contiguous()
    with ember.autocast("cpu", dtype=ember.float16):
        product = ember.mm(x, y)
    assert casts == []  # no grad, no mode below: no _to_copy call
    with ember.autocast("cpu", dtype=ember.float16):
        ember.mm(x, x.t())
    assert len(casts) == 1  # a non-contiguous tensor takes _to_copy (it keeps the layout)
    want = ember.mm(x.to(ember.float16), y.to(ember.float16))
    np.testing.assert_array_equal(product.numpy(), want.numpy())
    for dtype in (ember.float16, ember.bfloat16):
        np.testing.assert_array_equal(
            _autocast._plain_cast(x, dtype).float().numpy(), x.to(dtype).float().numpy()
        )


def test_casts_that_autograd_records_take_to_copy(casts):
    x = ember.randn(2, 3, requires_grad=True) * 1.0  # not a leaf: no cache
    with ember.autocast("cpu"):
        out = ember.mm(x, x.t())
    assert sum(t is x for t in casts) == 1  # x.t() is another tensor
    out.float().sum().backward()
    with ember.no_grad(), ember.autocast("cpu"):
        ember.mm(x, x.t())
    assert sum(t is x for t in casts) == 1  # under no_grad nothing records: the plain cast
    big = ember.randn(200, 200)
    with ember.autocast("cpu"):
        ember.mm(big, big)
    assert sum(t is big for t in casts) == 2  # from 32,768 elements: _to_copy's threaded copy
