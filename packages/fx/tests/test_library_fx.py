"""ember.library's custom ops in FX: ``make_fx`` records one node per call (the kernel's own ops are not
traced), the generated code runs again, and the fake implementation gives the node's metadata on meta
tensors.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import ember
from ember import Tensor
from ember._ops import registry
from ember.fx.experimental.proxy_tensor import make_fx
from ember.library import custom_op

_COUNTER = itertools.count()


@pytest.fixture(autouse=True)
def _remove_new_ops():
    before = set(registry)
    yield
    for name in set(registry) - before:
        ember.library._delete_op(name)


def _numpy_clip():
    @custom_op(f"emberfx::numpy_clip{next(_COUNTER)}", mutates_args=())
    def numpy_clip(x: Tensor, low: float) -> Tensor:
        data = x.numpy()
        return ember.from_numpy(np.maximum(data, low) * 1.0 + 0.0)  # several numpy steps: none may be traced

    numpy_clip.register_fake(lambda x, low: ember.empty_like(x))
    return numpy_clip


def test_make_fx_records_one_node():
    op = _numpy_clip()
    x = ember.tensor([-1.0, 0.5, 2.0])
    gm = make_fx(lambda t: op(t, 0.0) * 2)(x)
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    assert [n.target for n in calls] == [op.op, ember._ops.registry["mul"]]
    np.testing.assert_array_equal(gm(x).numpy(), [0.0, 1.0, 4.0])
    np.testing.assert_array_equal(gm(ember.tensor([3.0, -3.0, 0.25])).numpy(), [6.0, 0.0, 0.5])


def test_make_fx_on_meta_tensors_uses_the_fake():
    op = _numpy_clip()
    gm = make_fx(lambda t: op(t, 1.0) + 1)(ember.empty(2, 5, device="meta"))
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    assert calls[0].target is op.op
    out = gm(ember.empty(3, 4, device="meta"))
    assert out.device.type == "meta" and tuple(out.shape) == (3, 4)
