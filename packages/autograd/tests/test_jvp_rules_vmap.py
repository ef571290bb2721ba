"""Dual tensors inside vmap: ``vmap(jvp(f))``, ``vmap(jacfwd(f))``, ``jacfwd`` of functions that call vmap,
and dual tensors made inside a vmapped function, each against a Python loop over the samples."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.autograd.forward_ad as fwAD
from ember.func import grad, hessian, jacfwd, jvp, vmap


def _f64(*shape, seed=0):
    return ember.from_numpy(np.random.default_rng(seed).standard_normal(shape))


def _close(a, b, tol=1e-9):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


#: functions of one (3, 3) matrix, over the rule groups: elementwise, selections, reductions, the linalg rules
_FUNCTIONS = {
    "elementwise": lambda a: a.sin() * a.exp() + a.tanh(),
    "selection": lambda a: a.amax(0) + a.sort(0)[0].sum(0) + a.clamp(-0.5, 0.5).sum(1),
    "cumprod": lambda a: a.cumprod(1),
    "det": ember.linalg.det,
    "slogdet": lambda a: ember.linalg.slogdet(a)[1],
    "inv": ember.linalg.inv,
    "solve": lambda a: ember.linalg.solve(a, a.sum(-1)),
    "solve_matrix_right": lambda a: ember.linalg.solve(a, a.mT.exp(), left=False),
    "cholesky": lambda a: ember.linalg.cholesky(a @ a.mT + 3 * ember.eye(3, dtype=a.dtype)),
    "eigh": lambda a: ember.linalg.eigh(a @ a.mT)[0],
    "eigh_vectors": lambda a: ember.linalg.eigh(a + a.mT)[1].abs(),
    "svdvals": ember.linalg.svdvals,
    "qr": lambda a: ember.linalg.qr(a)[1],
    "lu_factor": lambda a: ember.linalg.lu_factor(a)[0],
    "lu_solve": lambda a: ember.linalg.lu_solve(*ember.linalg.lu_factor(a), a.exp()),
    "matrix_exp": ember.linalg.matrix_exp,
    "pinv": lambda a: ember.linalg.pinv(a[:, :2]),
    "eigvals": lambda a: ember.linalg.eigvals(a @ a.mT).real,
    "eig": lambda a: ember.linalg.eig(a)[0].abs(),
    "svd": lambda a: (lambda u, s, vh: (u * s.unsqueeze(-2)) @ vh)(*ember.linalg.svd(a, full_matrices=False)),
    "lstsq": lambda a: ember.linalg.lstsq(a, a.sum(-1, keepdim=True)).solution,
    "logdet": lambda a: ember.logdet(a @ a.mT),
    "cholesky_solve": lambda a: ember.cholesky_solve(a, ember.linalg.cholesky(a @ a.mT + 3 * ember.eye(3, dtype=a.dtype))),
    # ops that still take the double-vjp path: it runs on the lifted (plain) primals inside vmap
    "double_vjp": lambda a: ember.float_power(a.abs() + 1, 1.5) + ember.special.i1(a) + ember.sgn(a) * a,
    # reverse mode inside forward mode inside vmap: ForwardOverReverse sees through the batch
    "hessian": lambda a: hessian(lambda z: (z.sin() * z).sum())(a).sum((0, 1)),
    # in-place writes of dual tensors (index_put_ carries the values' tangent)
    "index_put": lambda a: a.clone().index_put_((ember.tensor([0, 2]),), a[1:3] * 2),
    "setitem": lambda a: _setitem(a.clone(), a),
    "inplace_after_add": lambda a: _inplace_after_add(a),
    # transforms inside: a dual of an outer level under the vmap wrappers (jacfwd(vmap(jvp)))
    "jvp_inside": lambda a: jvp(lambda z: z.exp() * ember.linalg.det(z), (a,), (a.cos(),))[1],
    "grad_inside": lambda a: grad(lambda z: (z ** 3).sum() + ember.linalg.slogdet(z)[1])(a),
}


def _inplace_after_add(a):
    # b's tangent is a fresh copy of a's: the in-place ops on b must leave a's tangent alone
    b = ember.zeros(3, 3, dtype=a.dtype) + a
    b.mul_(a)
    c = ember.addcmul(a, a.detach(), a.detach() * 0)  # a one-sided addcmul: the same for its tangent
    c.clamp_(-0.5, 0.5)
    return b + c + a


def _setitem(b, a):
    b[:, 1] = a[:, 0] ** 2
    return b


def _jacobian_by_rows(f, x):
    """The reverse-mode Jacobian one row at a time (no vmap: svd's backward branches on the cotangent's values)."""
    return ember.autograd.functional.jacobian(f, x, vectorize=False)


@pytest.fixture(scope="module")
def batch():
    return _f64(4, 3, 3) + 2 * ember.eye(3, dtype=ember.float64), _f64(4, 3, 3, seed=1)


@pytest.mark.parametrize("name", sorted(_FUNCTIONS))
def test_vmap_of_jvp_matches_loop(name, batch):
    f = _FUNCTIONS[name]
    x, v = batch
    primal, tangent = vmap(lambda a, t: jvp(f, (a,), (t,)))(x, v)
    for i in range(x.shape[0]):
        p_i, t_i = jvp(f, (x[i],), (v[i],))
        _close(primal[i], p_i)
        _close(tangent[i], t_i)


@pytest.mark.parametrize("name", sorted(_FUNCTIONS))
def test_vmap_of_jacfwd_matches_loop(name, batch):
    f = _FUNCTIONS[name]
    x, _ = batch
    got = vmap(jacfwd(f))(x)
    for i in range(x.shape[0]):
        _close(got[i], _jacobian_by_rows(f, x[i]))


@pytest.mark.parametrize("name", sorted(_FUNCTIONS))
def test_jacfwd_of_function_calling_vmap(name, batch):
    f = _FUNCTIONS[name]
    x, _ = batch
    got = jacfwd(lambda a: vmap(f)(a))(x)
    expected = _jacobian_by_rows(lambda a: ember.stack([f(a[i]) for i in range(a.shape[0])]), x)
    _close(got, expected)


def test_vmap_of_jvp_in_dims_and_unbatched_tangent(batch):
    x, v = batch
    f = _FUNCTIONS["solve"]
    # the batch along dim 2 of the primals, one tangent shared by every sample
    primal, tangent = vmap(lambda a: jvp(f, (a,), (v[0],)), in_dims=2)(x.permute(1, 2, 0))
    for i in range(x.shape[0]):
        p_i, t_i = jvp(f, (x[i].mT,), (v[0],))
        _close(primal[i], p_i)
        _close(tangent[i], t_i)


def test_nested_vmap_of_jvp(batch):
    x, v = batch
    f = _FUNCTIONS["det"]
    xs, vs = x.reshape(2, 2, 3, 3), v.reshape(2, 2, 3, 3)
    got = vmap(vmap(lambda a, t: jvp(f, (a,), (t,))[1]))(xs, vs)
    for i in range(2):
        for j in range(2):
            _close(got[i, j], jvp(f, (xs[i, j],), (vs[i, j],))[1])


def test_dual_tensors_made_inside_vmap(batch):
    x, v = batch

    def tangent_of(a, t):
        with fwAD.dual_level():
            out = ember.linalg.eigh(fwAD.make_dual(a, t) @ a.mT)[0].cumprod(0)
            return fwAD.unpack_dual(out).tangent

    got = vmap(tangent_of)(x, v)
    for i in range(x.shape[0]):
        _close(got[i], tangent_of(x[i], v[i]))


def test_vmap_over_dual_tensors_made_outside(batch):
    # the dual level is entered outside vmap: vmap batches dual tensors
    x, v = batch
    f = _FUNCTIONS["slogdet"]
    with fwAD.dual_level():
        out = vmap(f)(fwAD.make_dual(x, v))
        primal, tangent = fwAD.unpack_dual(out)
    for i in range(x.shape[0]):
        p_i, t_i = jvp(f, (x[i],), (v[i],))
        _close(primal[i], p_i)
        _close(tangent[i], t_i)


def test_det_jvp_inside_vmap_at_singular_matrices():
    # inside vmap the adjugate is chosen per matrix without a branch on values: a singular sample beside a regular one
    x = ember.stack([ember.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=ember.float64),
                     ember.tensor([[2.0, 1.0], [0.5, 3.0]], dtype=ember.float64)])
    v = _f64(2, 2, 2, seed=4)
    got = vmap(lambda a, t: jvp(ember.linalg.det, (a,), (t,))[1])(x, v)
    for i in range(2):
        _close(got[i], jvp(ember.linalg.det, (x[i],), (v[i],))[1])
    # d det = tr(adj(A) dA), adj([[a, b], [c, d]]) = [[d, -b], [-c, a]]
    a = x[0].numpy()
    adj = np.array([[a[1, 1], -a[0, 1]], [-a[1, 0], a[0, 0]]])
    np.testing.assert_allclose(got[0].item(), np.trace(adj @ v[0].numpy()), atol=1e-12)


def test_in_place_on_a_sum_keeps_the_operand_tangent():
    # without vmap too: b = a + 1 must not share a's tangent memory (b.mul_ wrote through it)
    x, v = _f64(3, seed=7), _f64(3, seed=8)

    def f(a):
        b = a + 1
        b.mul_(a)
        return b + a

    _, tangent = jvp(f, (x,), (v,))
    _close(tangent, (2 * x + 1) * v + v)


def test_vmap_of_vmap_of_jvp_with_an_unbatched_outer_level(batch):
    # the primals are batched at the inner level only: the dual is built inside both levels
    x, v = batch
    scales = ember.tensor([1.0, 2.0], dtype=ember.float64)

    def f(a):
        return ember.logdet(a @ a.mT) + ember.float_power(a.abs() + 1, 1.5).sum()

    got = vmap(lambda c: vmap(lambda p, t: jvp(lambda a: f(a) * c, (p,), (t,))[1])(x, v))(scales)
    for j in range(2):
        for i in range(x.shape[0]):
            _close(got[j, i], jvp(lambda a: f(a) * scales[j], (x[i],), (v[i],))[1])
