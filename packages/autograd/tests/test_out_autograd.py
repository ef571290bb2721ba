"""``out=`` does not support automatic differentiation, as in PyTorch.

With grad mode on, a call with ``out=`` whose inputs (or whose ``out``) require
grad raises PyTorch's RuntimeError instead of recording a copy into ``out``;
with grad mode off, or when nothing requires grad, ``out=`` works. Checked for
every op of op_db that takes ``out=``, over a float64 sample whose result
requires grad.
"""

from __future__ import annotations

import numpy as np
import pytest
from _grad_samples import GradCase, flatten_outputs

import ember
from ember.testing import op_db

_MESSAGE = r"functions with out=\.\.\. arguments don't support automatic differentiation"


def _out_ops():
    return sorted(n for n, info in op_db.items() if info.op.has_out and info.supports_autograd and ember.float64 in info.dtypes)


def _case(info):
    """A float64 sample of ``info`` whose output requires grad, and that output (or None)."""
    for sample in info.sample_inputs(info, "cpu", ember.float64, False):
        if "out" in sample.kwargs:
            continue
        case = GradCase(info, sample)
        if not case.leaves:
            continue
        try:
            result = case.call(*case.leaves)
        except Exception:  # noqa: BLE001 - a sample this test cannot use; another one may do
            continue
        outputs = flatten_outputs(result)
        if outputs and any(o.requires_grad for o in outputs):
            return case, result
    return None, None


def _empty_like(result):
    if isinstance(result, ember.Tensor):
        return ember.empty(result.shape, dtype=result.dtype)
    return tuple(_empty_like(r) for r in result)


@pytest.mark.parametrize("name", _out_ops())
def test_out_with_an_input_requiring_grad_raises(name):
    info = op_db[name]
    case, result = _case(info)
    if case is None:
        pytest.skip(f"{name}: no float64 sample with an output that requires grad")
    input, args, kwargs = case.arguments(case.leaves)
    out = _empty_like(result)
    with pytest.raises(RuntimeError, match=_MESSAGE) as raised:
        info.op(input, *args, **kwargs, out=out)
    assert str(raised.value).startswith(f"{info.op.name}(): ")
    with ember.no_grad():  # without grad mode: out= is written (compared with the same call without out=)
        expected = info.op(input, *args, **kwargs)
        returned = info.op(input, *args, **kwargs, out=_empty_like(expected))
    for o, r in zip(flatten_outputs(returned), flatten_outputs(expected), strict=True):
        np.testing.assert_allclose(o.numpy(), r.detach().numpy(), rtol=1e-12, atol=1e-12, equal_nan=True)
        assert not o.requires_grad


def test_out_ops_are_found():
    """The parametrisation above is not empty: the common ops take out=."""
    assert {"add", "mul", "sum", "cat", "matmul"} <= set(_out_ops())


def test_out_requiring_grad_raises_and_plain_calls_work():
    a = ember.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match=_MESSAGE):
        ember.add(a, 1, out=ember.empty(2, requires_grad=True))
    out = ember.empty(2)
    assert ember.add(a, 1, out=out) is out
    np.testing.assert_array_equal(out.numpy(), [2.0, 3.0])
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    assert ember.argmax(x, out=ember.empty((), dtype=ember.int64)).item() == 1  # not differentiable: no error
