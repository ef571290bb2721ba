"""ember.autograd.forward_ad: dual tensors, the jvp rule table against reverse-mode Jacobians on op_db samples."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.autograd.forward_ad as fwAD
from ember.autograd._jvp_rules import JVP_RULES
from ember.func import jacrev
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


def _reverse_jvp(f, primals, tangents):
    """``J t`` from reverse mode: the Jacobians by jacrev, contracted with the tangents."""
    jacs = jacrev(f, argnums=tuple(range(len(primals))))(*primals)
    out = None
    for jac, t in zip(jacs, tangents):
        term = (jac.reshape(-1, t.numel()) @ t.reshape(-1)).reshape(jac.shape[: jac.ndim - t.ndim])
        out = term if out is None else out + term
    return out


def _duplicate_writes(name, sample):
    """``index_put`` with repeated indices and no accumulation: the last write wins, in the tangent as in the
    value, while the backward credits every duplicate (PyTorch's too), so reverse mode is no oracle there."""
    if name != "index_put" or (len(sample.args) > 2 and sample.args[2]):
        return False
    return any(isinstance(i, ember.Tensor) and i.numel() != len(set(i.reshape(-1).tolist())) for i in sample.args[0])


@pytest.mark.parametrize("name", _rule_ops())
def test_jvp_rules_match_reverse_mode(name):
    info = op_db[name]
    if ember.float64 not in info.dtypes:
        pytest.skip(f"{name} has no float64 samples")
    checked = 0
    for sample in info.sample_inputs(info, "cpu", ember.float64, False):
        positions = _float_positions(sample)
        if not positions or sample.data_dependent or _duplicate_writes(name, sample):
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
            expected_out = f(*primals)
            if not bool(ember.isfinite(expected_out).all()):
                continue  # nan/inf values: the contraction below would smear them over every element
            if not expected_out.is_floating_point():
                continue  # complex from real inputs (a real Jacobian cannot express it), or integer results
            expected = _reverse_jvp(f, primals, [tangents[p] for p in positions])
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


#: ops whose tangents still come from the double-vjp identity (two backward passes) on op_db's first float64
#: samples, with the reason each has no rule of its own (see docs/internals.rst, forward mode)
_EXPECTED_JVP_FALLBACKS = {
    "as_strided": "its strides address the storage, and a tangent need not share the primal's layout",
    "grid_sample": "a tangent on the grid (the rule covers the input only): the sampling weights' derivative",
    "lp_pool1d": "the pooled p-th powers and root are one fused op; its backward is written for it",
    "lp_pool2d": "as lp_pool1d", "lp_pool3d": "as lp_pool1d",
    "quantile": "interpolates two order statistics whose positions are not returned", "nanquantile": "as quantile",
    "scatter_reduce": "the prod reduction (products of the others, with zeros): index_reduce's first samples",
    "special_gammainc": "a tangent on the first argument: not differentiable there (the backward raises, as PyTorch)",
    "special_gammaincc": "as special_gammainc", "special_zeta": "as special_gammainc",
    "max_unpool1d": "indices may repeat (overlapping windows): the value keeps one write, the backward gathers at "
                    "every index; the double-vjp tangent follows the backward",
    "max_unpool2d": "as max_unpool1d", "max_unpool3d": "as max_unpool1d",
    "histogram": "not differentiable (the backward raises NotImplementedError, as PyTorch)",
    "unique": "as histogram", "unique_consecutive": "as histogram",
}


def test_which_ops_fall_back_to_double_vjp():
    from ember.func import debug

    fallen = set()
    for name in sorted(op_db):
        info = op_db[name]
        if ember.float64 not in info.dtypes:
            continue
        for sample in list(info.sample_inputs(info, "cpu", ember.float64, False))[:2]:
            values = [sample.input, *sample.args]
            positions = _float_positions(sample)
            if not positions:
                continue
            with debug.jvp_fallbacks() as report:
                try:
                    with fwAD.dual_level():
                        for p in positions:
                            values[p] = fwAD.make_dual(values[p], ember.ones_like(values[p]))
                        info.op(*values, **sample.kwargs)
                except NotImplementedError:
                    pass  # ops without a derivative at all
            fallen |= set(report)
    assert fallen == set(_EXPECTED_JVP_FALLBACKS), (sorted(fallen - set(_EXPECTED_JVP_FALLBACKS)),
                                                     sorted(set(_EXPECTED_JVP_FALLBACKS) - fallen))


def test_common_layers_have_jvp_rules():
    from ember.func import debug, jacfwd, jacrev

    F = ember.nn.functional
    rng = np.random.default_rng(0)
    w = ember.from_numpy(rng.standard_normal((3, 2, 3, 3)))
    lin = ember.from_numpy(rng.standard_normal((5, 12)))
    target = ember.tensor([1, 4])

    def f(x):
        h = F.conv2d(x, w, padding=1)
        h = F.layer_norm(F.gelu(h), h.shape[1:])
        h = F.max_pool2d(F.relu(h), 2).flatten(1)
        logits = F.softmax(h @ lin.t(), 1) + F.log_softmax(h @ lin.t(), 1).tanh()
        return (F.cross_entropy(logits, target) + F.mse_loss(logits, logits.detach() * 0.5)
                + h.var() + h.amax() + h.mean(1).sum())

    x = ember.from_numpy(rng.standard_normal((2, 2, 4, 4)))
    with debug.jvp_fallbacks() as report:
        got = jacfwd(f)(x)
    assert dict(report) == {}
    _close(got, jacrev(f)(x), tol=1e-6)


@pytest.mark.parametrize("name", ["sin", "amax", "sort", "var", "max_pool2d_with_indices", "atan2", "lerp", "logit",
                                  "clamp", "addcdiv", "maximum", "cummax", "interpolate"])
def test_jacfwd_matches_jacrev_and_finite_differences(name):
    from ember.func import jacfwd

    if name not in op_db:
        pytest.skip(f"{name} is not in op_db")
    info = op_db[name]
    checked = 0
    for sample in info.sample_inputs(info, "cpu", ember.float64, False):
        if not isinstance(sample.input, ember.Tensor) or sample.input.numel() == 0 or sample.data_dependent:
            continue

        def f(x):
            out = info.op(x, *sample.args, **sample.kwargs)
            return out[0] if isinstance(out, tuple) else out

        x = sample.input
        fwd, rev = jacfwd(f)(x), jacrev(f)(x)
        _close(fwd, rev, tol=1e-7)
        flat = x.detach().numpy().reshape(-1).copy()
        numeric = []
        for i in range(flat.size):  # central differences, one input element at a time
            step = np.zeros_like(flat)
            step[i] = 1e-6
            up = f(ember.from_numpy((flat + step).reshape(x.shape))).numpy()
            down = f(ember.from_numpy((flat - step).reshape(x.shape))).numpy()
            numeric.append(((up - down) / 2e-6).reshape(-1))
        np.testing.assert_allclose(fwd.numpy().reshape(-1, flat.size), np.stack(numeric, 1), rtol=1e-4, atol=1e-4)
        checked += 1
        if checked == 2:
            break
    assert checked


#: ops whose batched tangents vmap runs per sample (vmap's LOOPED list, or decompositions that write
#: into a buffer they make): jacfwd is right for them, but not vectorised
_LOOPED_UNDER_VMAP = {"affine_grid", "grid_sample", "block_diag", "diag_embed", "index_put"}


@pytest.mark.parametrize("name", _rule_ops())
def test_jacfwd_matches_jacrev_over_rule_ops(name):
    # jacfwd runs each jvp rule on batched tangents (vmap over the identity's columns)
    from ember.func import debug, jacfwd

    info = op_db[name]
    if ember.float64 not in info.dtypes:
        pytest.skip(f"{name} has no float64 samples")
    checked = 0
    for sample in info.sample_inputs(info, "cpu", ember.float64, False):
        x = sample.input
        if not isinstance(x, ember.Tensor) or x.dtype != ember.float64 or not 0 < x.numel() <= 64 \
                or sample.data_dependent:
            continue

        def f(t):
            out = info.op(t, *sample.args, **sample.kwargs)
            return out[0] if isinstance(out, tuple) else out

        try:
            value = f(x)
            if not value.is_floating_point() or not bool(ember.isfinite(value).all()):
                continue
            expected = jacrev(f)(x)
        except (RuntimeError, NotImplementedError):
            continue  # not differentiable at this sample
        with debug.fallbacks() as loops:
            got = jacfwd(f)(x)
        _close(got, expected, tol=1e-6)
        if name not in _LOOPED_UNDER_VMAP:
            assert name not in loops, f"{name}'s tangents looped under vmap"
        checked += 1
        if checked == 2:
            break


def test_linalg_jvp_rules():
    from ember.func import debug, jacfwd

    r = np.random.default_rng(0).standard_normal((2, 3, 3))
    a = ember.from_numpy(r @ r.transpose(0, 2, 1) + 3 * np.eye(3))  # a batch of positive definite matrices
    for f in [ember.linalg.cholesky, lambda t: ember.linalg.cholesky_ex(t)[0], lambda t: ember.linalg.slogdet(t)[1],
              ember.linalg.inv, lambda t: ember.linalg.cholesky(t @ t.mT + t.mT)]:
        with debug.jvp_fallbacks() as report:
            got = jacfwd(f)(a)
        assert dict(report) == {}
        _close(got, jacrev(f)(a), tol=1e-9)


@pytest.mark.parametrize("upper,left,unit", [(False, True, False), (True, False, False), (True, True, True)])
def test_solve_triangular_jvp(upper, left, unit):
    from ember.func import debug, jacfwd

    rng = np.random.default_rng(1)
    a = ember.from_numpy(rng.standard_normal((3, 3)) + 3 * np.eye(3))
    b = ember.from_numpy(rng.standard_normal((3, 2) if left else (2, 3)))

    def f(m, rhs):
        return ember.linalg.solve_triangular(m, rhs, upper=upper, left=left, unitriangular=unit)

    with debug.jvp_fallbacks() as report:
        got = jacfwd(f, argnums=(0, 1))(a, b)
    assert dict(report) == {}
    for g, e in zip(got, jacrev(f, argnums=(0, 1))(a, b)):
        _close(g, e, tol=1e-9)


# (a 1-D right-hand side with left=False is refused by PyTorch: "Incompatible shapes ... XA = B")
@pytest.mark.parametrize("left,rhs_shape", [(True, (2, 3, 2)), (False, (2, 2, 3)), (True, (2, 3)), (True, (3,)),
                                            (False, (1, 3))])
def test_solve_jvp(left, rhs_shape):
    from ember.func import debug, jacfwd

    rng = np.random.default_rng(2)
    a = ember.from_numpy(rng.standard_normal((2, 3, 3)) + 2 * np.eye(3))
    b = ember.from_numpy(rng.standard_normal(rhs_shape))

    def f(m, rhs):
        return ember.linalg.solve(m, rhs, left=left)

    with debug.jvp_fallbacks() as report:
        got = jacfwd(f, argnums=(0, 1))(a, b)
    assert dict(report) == {}
    for g, e in zip(got, jacrev(f, argnums=(0, 1))(a, b)):
        _close(g, e, tol=1e-9)


def test_prod_jvp_at_zeros():
    from ember.func import jacfwd

    x = ember.tensor([[2.0, 0.0, 3.0], [0.0, 0.0, 1.5], [1.0, -2.0, 4.0]], dtype=ember.float64)
    for f in [lambda t: t.prod(), lambda t: t.prod(1), lambda t: t.prod(0, keepdim=True), lambda t: t[0, 0].prod()]:
        _close(jacfwd(f)(x), jacrev(f)(x), tol=1e-12)
