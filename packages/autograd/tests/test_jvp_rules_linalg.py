"""The linear-algebra jvp rules (ember.autograd._jvp_linalg) and a few others on op_db's samples, float64 and
complex128.

Each rule is checked twice: against the double-vjp identity (the tangent the backward formulas give,
with the rules taken out of the table) on every output, vectors included (both follow the backward's
gauge), and against central finite differences of gauge-invariant functions of the outputs.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.autograd.forward_ad as fwAD
from ember._ops._registry import registry
from ember.autograd import _jvp_linalg
from ember.autograd._jvp_rules import JVP_RULES
from ember.testing import op_db

#: ops outside linear algebra whose rules are checked here too (complex values, index writes, selections)
_OTHER_OPS = ["sgn", "polar", "float_power", "special_xlog1py", "special_i1", "special_i1e", "index_put", "median",
              "nanmedian", "scatter_reduce", "index_reduce"]
#: op_db entries that reach a rule of _jvp_linalg (directly or through their decomposition)
_OPS = [
    "linalg_det", "linalg_slogdet", "linalg_inv", "linalg_inv_ex", "linalg_cholesky", "linalg_cholesky_ex",
    "linalg_lu_solve", "linalg_pinv", "linalg_lstsq", "linalg_matrix_exp", "linalg_eigh", "linalg_eigvalsh",
    "linalg_eig", "linalg_eigvals", "linalg_svd", "linalg_svdvals", "linalg_qr", "linalg_lu", "linalg_lu_factor",
    "linalg_lu_factor_ex", "lu_unpack", "cumprod", "logdet", "det", "cholesky_solve", "cholesky_inverse", "linalg_solve", "linalg_solve_ex",
    *_OTHER_OPS,
]
#: ops that read one triangle of a Hermitian input: finite differences along Hermitian directions only
_HERMITIAN = {"linalg_eigh", "linalg_eigvalsh", "linalg_cholesky", "linalg_cholesky_ex"}
_DTYPES = [ember.float64, ember.complex128]


def _linalg_rule_ops():
    """The ops whose rules these tests take out of the table to get the double-vjp tangent."""
    ops = {op for op, rule in JVP_RULES.items() if getattr(rule, "__module__", "") == _jvp_linalg.__name__}
    return ops | {registry[name] for name in _OTHER_OPS if registry[name] in JVP_RULES}


def _random_like(t, seed):
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(tuple(t.shape))
    if t.is_complex():
        values = values + 1j * rng.standard_normal(tuple(t.shape))
    return ember.from_numpy(np.asarray(values)).to(t.dtype)


def _hermitian(t):
    return (t + (t.mT.conj() if t.is_complex() else t.mT)) * 0.5


def _samples(name, dtype):
    info = op_db[name]
    if dtype not in info.dtypes:
        return []
    out = []
    for sample in info.sample_inputs(info, "cpu", dtype, False):
        values = [sample.input, *sample.args]
        positions = [i for i, v in enumerate(values)
                     if isinstance(v, ember.Tensor) and v.dtype == dtype and v.numel() > 0]
        if positions:
            out.append((values, positions, sample.kwargs))
    return out


def _tangents(name, values, positions):
    tangents = {}
    for p in positions:
        t = _random_like(values[p], seed=p + 1)
        tangents[p] = _hermitian(t) if name in _HERMITIAN and p == 0 else t
    return tangents


def _call(name, values, kwargs):
    out = op_db[name].op(*values, **kwargs)
    return tuple(out) if isinstance(out, tuple) else (out,)


def _dual_outputs(name, values, positions, tangents, kwargs):
    with fwAD.dual_level():
        vals = list(values)
        for p in positions:
            vals[p] = fwAD.make_dual(values[p], tangents[p])
        return [fwAD.unpack_dual(o) if isinstance(o, ember.Tensor) else (o, None) for o in _call(name, vals, kwargs)]


def _differentiable(t):
    return isinstance(t, ember.Tensor) and (t.is_floating_point() or t.is_complex())


def _close(got, expected, tol):
    np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), rtol=tol, atol=tol)


#: ops whose samples sit on a pole, where the tangent is a sum of infinities (nan or inf by the order of the sum)
_POLES = {"special_xlog1py", "float_power"}
#: ops with a jump at zero (op_db samples hold zeros): finite differences are compared away from it
_JUMP_AT_ZERO = {"sgn"}
#: outputs whose double-vjp tangent is wrong (zero): the backward skips a term when its cotangent is zero
#: (``svd_backward`` the vectors' part, ``_lstsq_grads`` the residuals' part), and the double-vjp identity
#: differentiates it at a zero cotangent; the rules are checked on them by finite differences only
_DOUBLE_VJP_WRONG = {("linalg_svd", 0), ("linalg_svd", 2), ("linalg_lstsq", 1)}


@pytest.mark.parametrize("dtype", _DTYPES, ids=str)
@pytest.mark.parametrize("name", _OPS)
def test_linalg_rule_matches_double_vjp(name, dtype, monkeypatch):
    from ember.func import debug

    samples = _samples(name, dtype)
    if not samples:
        pytest.skip(f"{name} has no {dtype} samples with a differentiable tensor")
    checked = 0
    for values, positions, kwargs in samples:
        tangents = _tangents(name, values, positions)
        try:
            with debug.jvp_fallbacks() as report:
                ruled = _dual_outputs(name, values, positions, tangents, kwargs)
        except RuntimeError as error:
            if "not differentiable" in str(error) or "depends on Q" in str(error):
                continue  # qr(mode='r'), qr(mode='complete') of a tall matrix: the backward refuses too
            raise
        # a complex number (the real-only rules decline it), a prod reduction (scatter_reduce's rule declines it)
        if not any(isinstance(v, complex) or (isinstance(v, str) and v == "prod") for v in values):
            assert not set(report) & {op.name for op in _linalg_rule_ops()}, dict(report)
        with monkeypatch.context() as patch:
            for op in _linalg_rule_ops():
                patch.delitem(JVP_RULES, op)
            by_backward = _dual_outputs(name, values, positions, tangents, kwargs)
        for index, ((primal, tangent), (primal2, tangent2)) in enumerate(zip(ruled, by_backward)):
            if not _differentiable(primal) or primal.numel() == 0 or (name, index) in _DOUBLE_VJP_WRONG:
                continue
            _close(primal, primal2, 1e-12)
            if tangent2 is None:
                assert tangent is None or not bool(tangent.abs().amax() > 0), name
                continue
            assert tangent is not None, name
            # at a pole (xlog1py at y = -1) the two sums of infinities differ (nan against -inf)
            finite = ember.isfinite(tangent2)
            assert bool((ember.isfinite(tangent) == finite).all() if name not in _POLES else True), name
            _close(tangent[finite], tangent2[finite], 1e-7)
        checked += 1
    assert checked


def _invariant(name, outputs):
    """Gauge-invariant functions of the outputs: ``U diag(w) V^H`` for the SVD, ``V diag(w) V^H`` for
    ``eigh``, the weighted sum of the eigenvectors' projectors ``v v^H / (v^H v)`` for ``eig``."""
    if name == "linalg_svd":
        u, s, vh = outputs
        k = s.shape[-1]
        w = ember.arange(1, k + 1, dtype=ember.float64).to(u.dtype)
        return [s, (u[..., :, :k] * w) @ vh[..., :k, :]]
    if name == "linalg_eigh":
        values, vectors = outputs
        w = ember.arange(1, values.shape[-1] + 1, dtype=ember.float64).to(vectors.dtype)
        return [values, (vectors * w) @ (vectors.mT.conj() if vectors.is_complex() else vectors.mT)]
    if name == "linalg_eig":
        values, vectors = outputs
        w = ember.arange(1, values.shape[-1] + 1, dtype=ember.float64).to(vectors.dtype)
        norms = (vectors.conj() * vectors).sum(-2, keepdim=True)
        return [values, (vectors * w / norms) @ vectors.mT.conj()]
    if name == "linalg_lstsq":  # the rank and the singular values have no derivative (as in PyTorch)
        return list(outputs[:2])
    return [o for o in outputs if _differentiable(o)]


@pytest.mark.parametrize("dtype", _DTYPES, ids=str)
@pytest.mark.parametrize("name", _OPS)
def test_linalg_rule_matches_finite_differences(name, dtype):
    samples = _samples(name, dtype)
    if not samples:
        pytest.skip(f"{name} has no {dtype} samples with a differentiable tensor")
    step, checked = 1e-6, 0
    for values, positions, kwargs in samples:
        if name == "linalg_qr" and (values[1:2] == ["r"] or (values[1:2] == ["complete"]
                                                                  and values[0].shape[-2] > values[0].shape[-1])):
            continue  # not differentiable
        if name == "linalg_pinv" and (kwargs.get("rtol") or kwargs.get("atol")):
            continue  # singular values cut off: the rule (like the backward) is pinv's derivative at full rank
        tangents = _tangents(name, values, positions)
        ruled = _dual_outputs(name, values, positions, tangents, kwargs)

        def at(scale):
            vals = list(values)
            for p in positions:
                vals[p] = values[p] + scale * tangents[p]
            return _invariant(name, _call(name, vals, kwargs))

        with fwAD.dual_level():
            duals = [fwAD.make_dual(p, t) if t is not None else p for p, t in ruled]
            pushed = [fwAD.unpack_dual(o).tangent for o in _invariant(name, duals)]
        # the fourth-order central stencil: the samples include matrices of condition 1e4
        for tangent, up2, up, down, down2 in zip(pushed, at(2 * step), at(step), at(-step), at(-2 * step)):
            if up.numel() == 0:
                continue
            numeric = (8 * (up - down) - (up2 - down2)) / (12 * step)
            if tangent is None:  # a constant output (lu's permutation)
                assert not bool(numeric.abs().amax() > 0), name
                continue
            finite = ember.isfinite(numeric)  # logdet of a matrix with a negative determinant: nan
            if name in _JUMP_AT_ZERO:
                finite = finite & (values[0] != 0)
            scale = max(1.0, float(numeric.abs()[finite].amax())) if bool(finite.any()) else 1.0
            np.testing.assert_allclose(tangent[finite].numpy(), numeric[finite].numpy(), rtol=1e-5, atol=1e-5 * scale)
        checked += 1
    assert checked


@pytest.mark.parametrize("f", [
    lambda a: ember.linalg.det(a),
    lambda a: ember.linalg.slogdet(a)[1],
    lambda a: ember.linalg.solve(a, a.sum(-1)),
    lambda a: ember.linalg.eigh(a @ a.mT)[0],
    lambda a: ember.linalg.eigh(a + a.mT)[1].abs(),
    lambda a: ember.linalg.svdvals(a),
    lambda a: ember.linalg.qr(a)[1],
    lambda a: ember.linalg.matrix_exp(a),
    lambda a: ember.linalg.pinv(a[..., :2]),
    lambda a: ember.linalg.lu_factor(a)[0],
    lambda a: a.cumprod(-1),
])
def test_jacfwd_of_linalg_has_no_fallback(f):
    from ember.func import debug, jacfwd, jacrev

    a = ember.from_numpy(np.random.default_rng(3).standard_normal((2, 3, 3)) + 2 * np.eye(3))
    with debug.jvp_fallbacks() as report:
        got = jacfwd(f)(a)
    assert dict(report) == {}
    _close(got, jacrev(f)(a), 1e-8)


def test_det_jvp_at_singular_matrices():
    # rank n-1 and rank n-2: d det = tr(adj(A) dA), exact where det * A^-1 is 0 * inf
    from ember.func import jacfwd, jacrev

    rank_deficient = ember.tensor([[[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 1.0]],
                                   [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]], dtype=ember.float64)
    got = jacfwd(ember.linalg.det)(rank_deficient)
    _close(got, jacrev(ember.linalg.det)(rank_deficient), 1e-10)
    cofactor = np.array([[4 * 1 - 6 * 1, -(2 * 1 - 6 * 0), 2 * 1 - 4 * 0]])  # d det / d row 0 of the first
    np.testing.assert_allclose(got[0, 0, 0].numpy(), cofactor[0], atol=1e-10)


@pytest.mark.parametrize("x", [[2.0, 0.0, 3.0, 0.0, 5.0], [0.0, 1.5, -2.0, 4.0], [1.0, -2.0, 0.5]])
def test_cumprod_jvp_exact_with_zeros(x):
    from ember.func import jacfwd, jacrev

    t = ember.tensor(x, dtype=ember.float64)
    f = lambda v: (v.reshape(1, -1) * ember.tensor([[1.0], [2.0]], dtype=ember.float64)).cumprod(1)  # noqa: E731
    _close(jacfwd(f)(t), jacrev(f)(t), 1e-12)


@pytest.mark.parametrize("order", [2, 1, 3, 0.5, -1, 0, float("inf"), -float("inf")])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, False), (0, True), ((0, 1), False)])
def test_vector_norm_jvp_every_order(order, dim, keepdim):
    # real and complex (as its real and imaginary parts), with a zero entry (the p < 1 and p = 1 special cases)
    from ember.func import debug, jacfwd, jacrev

    x = ember.from_numpy(np.random.default_rng(5).standard_normal((3, 4)))
    x[0, 1] = 0.0
    y = x.flip(0).contiguous()

    def f(re, im):
        return ember.linalg.vector_norm(ember.complex(re, im), order, dim, keepdim)

    def g(re):
        return ember.linalg.vector_norm(re, order, dim, keepdim)

    with debug.jvp_fallbacks() as report:
        got_complex = jacfwd(f, argnums=(0, 1))(x, y)
        got_real = jacfwd(g)(x)
    assert dict(report) == {}
    for a, b in zip(got_complex, jacrev(f, argnums=(0, 1))(x, y)):
        _close(a, b, 1e-10)
    _close(got_real, jacrev(g)(x), 1e-10)


@pytest.mark.cuda
def test_linalg_jvp_rules_on_cuda():
    # the rules run the same ops on the device (CuPy's linalg); compared with the CPU's values
    from ember.func import debug, jacfwd, vmap

    a = ember.from_numpy(np.random.default_rng(6).standard_normal((2, 4, 4)) + 2 * np.eye(4))
    fns = [ember.linalg.det, lambda m: ember.linalg.solve(m, m.sum(-1)), lambda m: ember.linalg.eigh(m + m.mT)[0],
           lambda m: ember.linalg.svdvals(m), lambda m: ember.linalg.qr(m)[1], lambda m: m.cumprod(-1)]
    for f in fns:
        with debug.jvp_fallbacks() as report:
            got = jacfwd(f)(a.to("cuda"))
            batched = vmap(jacfwd(f))(a.to("cuda"))
        assert dict(report) == {}
        assert got.device.type == "cuda"
        expected = jacfwd(f)(a)
        np.testing.assert_allclose(got.cpu().numpy(), expected.numpy(), rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(batched.cpu().numpy(), vmap(jacfwd(f))(a).numpy(), rtol=1e-8, atol=1e-8)
