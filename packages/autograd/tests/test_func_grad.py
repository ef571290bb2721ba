"""ember.func's reverse-mode transforms (grad, grad_and_value, vjp), against finite differences and closed forms."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.func import grad, grad_and_value, vjp, vmap


def _f64(*shape, seed=0):
    return ember.from_numpy(np.random.default_rng(seed).standard_normal(shape))


def _numeric_grad(f, x, eps=1e-6):
    """Central differences of scalar ``f`` at ``x`` (float64)."""
    base = x.numpy().copy()
    out = np.zeros_like(base)
    for i in np.ndindex(base.shape):
        plus, minus = base.copy(), base.copy()
        plus[i] += eps
        minus[i] -= eps
        out[i] = (f(ember.from_numpy(plus)).item() - f(ember.from_numpy(minus)).item()) / (2 * eps)
    return out


def _close(a, b, tol=1e-6):
    np.testing.assert_allclose(np.asarray(a.numpy() if isinstance(a, ember.Tensor) else a),
                               np.asarray(b.numpy() if isinstance(b, ember.Tensor) else b), rtol=tol, atol=tol)


def test_grad_matches_finite_differences():
    f = lambda x: (x.sin() * x.exp()).sum() / (1 + (x**2).sum())  # noqa: E731
    x = _f64(3, 2)
    _close(grad(f)(x), _numeric_grad(f, x))


def test_grad_of_grad_nests():
    x = ember.tensor(1.5, dtype=ember.float64)
    _close(grad(grad(lambda t: t**4))(x), 12 * 1.5**2)
    _close(grad(grad(grad(lambda t: t.sin())))(x), -np.cos(1.5))


def test_grad_argnums_and_pytrees():
    x, y = _f64(3), _f64(3, seed=1)
    gx, gy = grad(lambda a, b: (a * b).sum(), argnums=(0, 1))(x, y)
    _close(gx, y)
    _close(gy, x)
    g = grad(lambda p: (p["w"] * p["b"][0]).sum())({"w": x, "b": [y]})
    _close(g["w"], y)
    _close(g["b"][0], x)
    _close(grad(lambda a, b: (a * b).sum(), argnums=-1)(x, y), x)


def test_grad_and_value_has_aux():
    x = _f64(4)
    g, (value, aux) = grad_and_value(lambda t: ((t**2).sum(), t.mean()), has_aux=True)(x)
    _close(g, 2 * x)
    _close(value, (x**2).sum())
    _close(aux, x.mean())
    assert not value.requires_grad


def test_grad_closure_over_outer_variable():
    # d/dy [ d/dx (x * y) at x ] = 1: the inner grad must not confuse x and y
    y = ember.tensor(3.0, dtype=ember.float64)
    out = grad(lambda yy: grad(lambda xx: xx * yy)(ember.tensor(2.0, dtype=ember.float64)))(y)
    _close(out, 1.0)


def test_grad_errors():
    with pytest.raises(RuntimeError, match="scalar Tensor"):
        grad(lambda t: t * 2)(_f64(3))
    with pytest.raises(RuntimeError, match="argnums"):
        grad(lambda t: t.sum(), argnums=3)(_f64(3))
    with pytest.raises(RuntimeError, match="floating point"):
        grad(lambda t: t.sum())(ember.ones(3, dtype=ember.int64))


def test_vjp_matches_jacobian_transpose():
    x = _f64(4)
    out, fn = vjp(lambda t: t.sin() * t, x)
    v = _f64(4, seed=2)
    (g,) = fn(v)
    _close(out, x.sin() * x)
    _close(g, v * (x.cos() * x + x.sin()))


def test_vjp_under_vmap_gives_jacobian_rows():
    x = _f64(5)
    _, fn = vjp(lambda t: (t[:, None] * t[None, :]).sum(0), x)
    jac = vmap(fn)(ember.eye(5, dtype=ember.float64))[0]
    expected = np.eye(5) * x.numpy().sum() + x.numpy()[:, None]  # row i: d/dx of x_i * sum(x)
    _close(jac, expected)


def test_per_sample_gradients_match_a_loop():
    w = _f64(3, 4)
    xs, ys = _f64(6, 4, seed=1), _f64(6, 3, seed=2)

    def loss(w, x, y):
        return ((ember.nn.functional.linear(x, w).tanh() - y) ** 2).sum()

    batched = vmap(grad(loss), in_dims=(None, 0, 0))(w, xs, ys)
    looped = ember.stack([grad(loss)(w, xs[i], ys[i]) for i in range(6)])
    _close(batched, looped)


def test_grad_of_vmap_and_vmap_of_grad_of_grad():
    xs = _f64(4, 3)
    _close(grad(lambda x: vmap(lambda r: (r**2).sum())(x).sum())(xs), 2 * xs)
    _close(vmap(grad(grad(lambda t: t**3)))(xs[0]), 6 * xs[0])


def test_import_through_the_distribution_table():
    from ember import _extensions

    assert _extensions._PROVIDER["ember.func"] == "ember-autograd"
    assert ember.func.grad is grad
