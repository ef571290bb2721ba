"""ember.autograd.forward_ad: dual tensors, the jvp rule table against double-vjp products on op_db samples."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.autograd.forward_ad as fwAD
from ember.autograd._jvp_rules import JVP_RULES
from ember.func import jacrev, jvp
from ember.testing import op_db


def _close(a, b, tol=1e-6):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


def _f64(*shape, seed=0):
    return ember.from_numpy(np.random.default_rng(seed).standard_normal(shape))


def _rule_ops():
    return sorted(op.name for op in JVP_RULES if op.name in op_db)


def _float_positions(sample):
    values = [sample.input, *sample.args]
    return [i for i, v in enumerate(values)
            if isinstance(v, ember.Tensor) and v.dtype == ember.float64 and v.numel() > 0]


@pytest.mark.parametrize("name", _rule_ops())
def test_jvp_rules_match_double_vjp(name):
    info = op_db[name]
    if ember.float64 not in info.dtypes:
        pytest.skip(f"{name} has no float64 samples")
    checked = 0
    for sample in info.sample_inputs(info, "cpu", ember.float64, False):
        positions = _float_positions(sample)
        if not positions or sample.data_dependent:
            continue
        values = [sample.input, *sample.args]
        tangents = {p: _f64(*values[p].shape, seed=p) for p in positions}

        def f(*xs):
            vals = list(values)
            for p, x in zip(positions, xs):
                vals[p] = x
            out = info.op(*vals, **sample.kwargs)
            return out[0] if isinstance(out, tuple) else out

        primals = tuple(values[p] for p in positions)
        try:
            expected_out, expected = jvp(f, primals, tuple(tangents[p] for p in positions))
        except (RuntimeError, NotImplementedError):
            continue  # not differentiable at this sample (integer outputs and the like)
        with fwAD.dual_level():
            duals = [fwAD.make_dual(values[p], tangents[p]) for p in positions]
            primal, tangent = fwAD.unpack_dual(f(*duals))
        _close(primal, expected_out)
        assert tangent is not None, name
        _close(tangent, expected, tol=1e-5)
        checked += 1
        if checked == 4:
            break


@pytest.mark.parametrize("f", [
    lambda x: ember.nn.functional.softmax(x, 0) * x.amax(),
    lambda x: ember.nn.functional.layer_norm(x[None], (4,))[0],
    lambda x: x.cumprod(0) + x.sort()[0],
    lambda x: ember.nn.functional.gelu(x) / (1 + x**2).sqrt(),
    lambda x: ember.where(x > 0, x, 2.0) + (x - 1) * 3,
])
def test_composites_and_fallbacks_match_jacobian(f):
    x, v = _f64(4), _f64(4, seed=1)
    with fwAD.dual_level():
        primal, tangent = fwAD.unpack_dual(f(fwAD.make_dual(x, v)))
    _close(primal, f(x))
    _close(tangent, jacrev(f)(x) @ v, tol=1e-5)


def test_in_place_on_dual_and_levels():
    x, v = _f64(4), _f64(4, seed=1)
    with fwAD.dual_level():
        y = fwAD.make_dual(x, v).clone()
        y.mul_(2).add_(1)
        _close(fwAD.unpack_dual(y).tangent, 2 * v)
        with pytest.raises(RuntimeError, match="tangent"):
            ember.zeros(4, dtype=ember.float64).copy_(y)
    assert fwAD.unpack_dual(y).tangent is None  # the level exited


def test_make_dual_errors():
    with pytest.raises(RuntimeError, match="dual_level"):
        fwAD.make_dual(_f64(2), _f64(2))
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="different size"):
            fwAD.make_dual(_f64(2), _f64(3))


def test_forward_ad_under_reverse_mode():
    # the tangent is differentiable: d/dx of (jvp of x**3 along v) = 6 x v
    x = _f64(3).requires_grad_()
    v = _f64(3, seed=2)
    with fwAD.dual_level():
        tangent = fwAD.unpack_dual(fwAD.make_dual(x, v) ** 3).tangent
    (g,) = ember.autograd.grad(tangent.sum(), x)
    _close(g, 6 * x.detach() * v)
