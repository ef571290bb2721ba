"""ember.special against scipy.special: values over grids with edge values, dtypes, errors, meta tensors.

op_db (``ember.testing``) runs the generic op tests on every ``special_*`` op; this file checks the
module's names, each function on a dense grid (0, negative values, +-inf, NaN, large arguments) in
float64 and float32, integer promotion, the degree rules of the polynomials and the error messages.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sp

import ember
import ember.special as S

_NAN, _INF = float("nan"), float("inf")
#: a grid with the edge values: zeros of both signs, negatives, infinities, NaN and large magnitudes
_GRID = np.concatenate([
    np.linspace(-12.0, 12.0, 97),
    [0.0, -0.0, 1e-300, -1e-300, 1e-8, 30.0, -30.0, 120.0, 700.0, -700.0, 1e10, -1e10, _INF, -_INF, _NAN],
])
_UNIT = np.concatenate([np.linspace(0.0, 1.0, 41), [-0.5, 1.5, 1e-300, 1 - 1e-12, _INF, -_INF, _NAN]])
_POSITIVE = np.concatenate([np.linspace(0.0, 20.0, 41), [1e-6, 300.0, -1.0, _INF, _NAN]])

UNARY = [
    # (ember.special name, scipy reference, grid)
    ("airy_ai", lambda x: sp.airy(x)[0], _GRID),
    ("bessel_j0", sp.j0, _GRID),
    ("bessel_j1", sp.j1, _GRID),
    ("bessel_y0", sp.y0, _POSITIVE),
    ("bessel_y1", sp.y1, _POSITIVE),
    ("modified_bessel_i0", sp.i0, _GRID),
    ("modified_bessel_i1", sp.i1, _GRID),
    ("modified_bessel_k0", sp.k0, _POSITIVE),
    ("modified_bessel_k1", sp.k1, _POSITIVE),
    ("scaled_modified_bessel_k0", sp.k0e, _POSITIVE),
    ("scaled_modified_bessel_k1", sp.k1e, _POSITIVE),
    ("spherical_bessel_j0", lambda x: sp.spherical_jn(0, x), _GRID),
    ("entr", sp.entr, _GRID),
    ("erfcx", sp.erfcx, _GRID),
    ("i0e", sp.i0e, _GRID),
    ("i1", sp.i1, _GRID),
    ("i1e", sp.i1e, _GRID),
    ("ndtr", sp.ndtr, _GRID),
    ("ndtri", sp.ndtri, _UNIT),
    ("log_ndtr", sp.log_ndtr, _GRID),
    # the ember ops under their torch.special names
    ("expit", sp.expit, _GRID),
    ("gammaln", sp.gammaln, _POSITIVE),
    ("psi", sp.psi, _POSITIVE),
    ("digamma", sp.psi, _POSITIVE),
    ("erf", sp.erf, _GRID),
    ("erfc", sp.erfc, _GRID),
    ("erfinv", sp.erfinv, _UNIT * 2 - 1),
    ("i0", sp.i0, _GRID[np.isfinite(_GRID)]),
    ("exp2", np.exp2, _GRID),
    ("expm1", np.expm1, _GRID),
    ("log1p", np.log1p, _POSITIVE - 1),
    ("sinc", np.sinc, _GRID[np.isfinite(_GRID)]),
]


def _close(actual, expected, rtol, atol=0.0):
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)


@pytest.mark.parametrize("name, ref, grid", UNARY, ids=[u[0] for u in UNARY])
def test_unary_float64_grid(name, ref, grid):
    with np.errstate(all="ignore"):
        expected = ref(grid)
    actual = getattr(S, name)(ember.tensor(grid, dtype=ember.float64))
    assert actual.dtype == ember.float64
    _close(actual.numpy(), expected, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("name, ref, grid", UNARY, ids=[u[0] for u in UNARY])
def test_unary_float32_grid(name, ref, grid):
    x = grid.astype(np.float32)
    with np.errstate(all="ignore"):
        expected = ref(x.astype(np.float64)).astype(np.float32)
    actual = getattr(S, name)(ember.tensor(x))
    assert actual.dtype == ember.float32
    _close(actual.numpy(), expected, rtol=2e-6, atol=2e-7)  # (absolute near the zeros of oscillating functions)


@pytest.mark.parametrize("dtype", [ember.int64, ember.int32, ember.uint8, ember.bool])
@pytest.mark.parametrize("name", ["erfcx", "i0e", "i1", "ndtr", "bessel_j0", "entr", "log_ndtr"])
def test_integer_and_bool_inputs_give_the_default_float(name, dtype):
    values = [0, 1] if dtype is ember.bool else [0, 1, 3]
    x = ember.tensor(values, dtype=dtype)
    ref = dict((u[0], u[1]) for u in UNARY)[name]
    out = getattr(S, name)(x)
    assert out.dtype == ember.float32
    _close(out.numpy(), ref(np.array(values, dtype=np.float64)).astype(np.float32), rtol=1e-6)
    saved = ember.get_default_dtype()
    ember.set_default_dtype(ember.float64)
    try:
        assert getattr(S, name)(x).dtype == ember.float64
    finally:
        ember.set_default_dtype(saved)


@pytest.mark.parametrize("name", ["i0e", "i1", "i1e", "ndtr", "entr"])
@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16])
def test_half_precision_computes_in_float32(name, dtype):
    x = ember.tensor([-3.0, -0.5, 0.0, 0.25, 2.0, 7.0], dtype=dtype)
    ref = dict((u[0], u[1]) for u in UNARY)[name]
    expected = ref(x.float().numpy().astype(np.float64))
    out = getattr(S, name)(x)
    assert out.dtype == dtype
    _close(out.float().numpy(), expected, rtol=1e-2 if dtype is ember.bfloat16 else 2e-3, atol=1e-3)


@pytest.mark.parametrize("name", ["erfcx", "ndtri", "log_ndtr", "bessel_j0", "airy_ai", "modified_bessel_k1",
                                  "spherical_bessel_j0"])
def test_half_precision_refused_as_pytorch(name):
    with pytest.raises(NotImplementedError, match="not implemented for 'Half'"):
        getattr(S, name)(ember.ones(2, dtype=ember.float16))


@pytest.mark.parametrize("name", ["erfcx", "i0e", "ndtr", "entr", "bessel_y1"])
def test_complex_refused(name):
    with pytest.raises(NotImplementedError, match="not implemented for 'ComplexFloat'"):
        getattr(S, name)(ember.ones(2, dtype=ember.complex64))


def test_not_a_tensor():
    with pytest.raises(TypeError, match=r"special_erfcx\(\): argument 'input' \(position 1\) must be Tensor, not list"):
        S.erfcx([1.0, 2.0])


# -- binary functions -----------------------------------------------------------------------------------


def _pairs(a, b):
    a, b = np.meshgrid(np.asarray(a, np.float64), np.asarray(b, np.float64))
    return a.ravel(), b.ravel()


_EDGES = [0.0, -0.0, 0.5, 1.0, 2.5, 10.0, 80.0, -1.0, -2.5, _INF, -_INF, _NAN]


def _nan_shape(fn, at_zero, at_inf):
    """scipy's incomplete gamma function with PyTorch's values for a NaN shape at x = 0 and x = inf."""

    def ref(a, x):
        value = fn(a, x)
        value = np.where(np.isnan(a) & (x == 0), at_zero, value)
        return np.where(np.isnan(a) & (x == np.inf), at_inf, value)

    return ref


@pytest.mark.parametrize("name, ref, a, b", [
    ("xlog1py", sp.xlog1py, _EDGES, [-1.0, -0.5, 0.0, 0.3, 5.0, 1e10, -2.0, _INF, _NAN]),
    ("zeta", sp.zeta, [1.0, 1.5, 2.0, 3.0, 10.0, 0.5, -1.0, _INF, _NAN], [0.1, 1.0, 2.5, 50.0, 0.0, -1.5, _INF, _NAN]),
    ("gammainc", _nan_shape(sp.gammainc, 0.0, 1.0), [0.0, 0.1, 1.0, 3.5, 40.0, -1.0, _INF, _NAN], [0.0, 0.2, 1.0, 4.0, 60.0, -1.0, _INF, _NAN]),
    ("gammaincc", _nan_shape(sp.gammaincc, 1.0, 0.0), [0.0, 0.1, 1.0, 3.5, 40.0, -1.0, _INF, _NAN], [0.0, 0.2, 1.0, 4.0, 60.0, -1.0, _INF, _NAN]),
    ("xlogy", sp.xlogy, _EDGES, [0.0, 0.5, 3.0, -1.0, _INF, _NAN]),
])
def test_binary_float64_grid(name, ref, a, b):
    a, b = _pairs(a, b)
    with np.errstate(all="ignore"):
        expected = ref(a, b)
    actual = getattr(S, name)(ember.tensor(a), ember.tensor(b))
    assert actual.dtype == ember.float64
    _close(actual.numpy(), expected, rtol=1e-12, atol=1e-300)


def test_binary_promotion_and_python_numbers():
    x = ember.tensor([1, 2, 3])
    assert S.xlog1py(x, x).dtype == ember.float32
    assert S.zeta(x + 1, 2.0).dtype == ember.float32
    assert S.zeta(3.0, ember.tensor([1.0, 2.0], dtype=ember.float64)).dtype == ember.float64
    _close(S.zeta(2.0, ember.tensor([1.0, 2.0], dtype=ember.float64)).numpy(), sp.zeta(2.0, [1.0, 2.0]), 1e-14)
    _close(S.xlog1py(2, ember.tensor([0.5])).numpy(), [2 * np.log1p(0.5)], 1e-6)
    assert S.gammainc(ember.ones(2, dtype=ember.float64), ember.ones(2)).dtype == ember.float64


def test_gammainc_refuses_integers_and_numbers():
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        S.gammainc(ember.tensor([1, 2]), ember.tensor([1, 2]))
    with pytest.raises(TypeError, match=r"special_gammaincc\(\): argument 'other' \(position 2\) must be Tensor"):
        S.gammaincc(ember.ones(2), 2.0)
    with pytest.raises(TypeError, match=r"argument 'input' \(position 1\) must be Tensor"):
        S.gammainc(2.0, ember.ones(2))


def test_binary_broadcast_error():
    with pytest.raises(RuntimeError, match=r"size of tensor a \(3\) must match the size of tensor b \(4\)"):
        S.xlog1py(ember.ones(2, 3), ember.ones(4))


# -- polynomials ----------------------------------------------------------------------------------------


def _u(n, x):
    return sp.eval_chebyu(n, x)


POLYNOMIALS = [
    ("chebyshev_polynomial_t", sp.eval_chebyt, 1.0),
    ("chebyshev_polynomial_u", sp.eval_chebyu, 1.0),
    ("chebyshev_polynomial_v", lambda n, x: _u(n, x) - (_u(n - 1, x) if n > 0 else 0), 1.0),
    ("chebyshev_polynomial_w", lambda n, x: _u(n, x) + (_u(n - 1, x) if n > 0 else 0), 1.0),
    ("shifted_chebyshev_polynomial_t", sp.eval_sh_chebyt, 0.5),
    ("shifted_chebyshev_polynomial_u", sp.eval_sh_chebyu, 0.5),
    ("shifted_chebyshev_polynomial_v", lambda n, x: _u(n, 2 * x - 1) - (_u(n - 1, 2 * x - 1) if n > 0 else 0), 0.5),
    ("shifted_chebyshev_polynomial_w", lambda n, x: _u(n, 2 * x - 1) + (_u(n - 1, 2 * x - 1) if n > 0 else 0), 0.5),
    ("hermite_polynomial_h", sp.eval_hermite, 1.0),
    ("hermite_polynomial_he", sp.eval_hermitenorm, 1.0),
    ("laguerre_polynomial_l", sp.eval_laguerre, 2.0),
    ("legendre_polynomial_p", sp.eval_legendre, 1.0),
]


@pytest.mark.parametrize("name, ref, scale", POLYNOMIALS, ids=[p[0] for p in POLYNOMIALS])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 6, 11, 20])
def test_polynomial_degrees(name, ref, scale, n):
    x = np.concatenate([np.linspace(-1.2, 1.2, 25) * scale, [0.0, 1.0, -1.0, 0.5]])
    actual = getattr(S, name)(ember.tensor(x), n)
    assert actual.dtype == ember.float64
    _close(actual.numpy(), [ref(n, v) for v in x], rtol=1e-9, atol=1e-9)
    # a tensor of degrees, the keyword ``n``, and ``out=``
    out = ember.empty(len(x), dtype=ember.float64)
    getattr(S, name)(ember.tensor(x), n=ember.full((len(x),), n), out=out)
    _close(out.numpy(), actual.numpy(), rtol=1e-12)


def test_polynomial_degree_rules():
    x = ember.tensor([0.5, 0.5, 0.5, 0.5, 0.5])
    n = ember.tensor([-1.0, 2.5, 2.0, 3.9, _NAN])
    # truncated toward zero; negative and NaN degrees give 0 (PyTorch's values)
    _close(S.chebyshev_polynomial_t(x, n).numpy(), [0.0, -0.5, -0.5, -1.0, 0.0], 1e-6)
    assert S.hermite_polynomial_h(ember.tensor([1, 2]), ember.tensor([2, 3])).dtype == ember.float32
    _close(S.legendre_polynomial_p(2.0, ember.tensor([0, 1, 3])).numpy(), [1.0, 2.0, 17.0], 1e-6)
    with pytest.raises(NotImplementedError, match="not implemented for 'Half'"):
        S.chebyshev_polynomial_t(ember.ones(2, dtype=ember.float16), 2)


# -- multigammaln, re-exports, meta ---------------------------------------------------------------------


@pytest.mark.parametrize("p", [1, 2, 3, 7])
def test_multigammaln(p):
    a = np.linspace(p / 2 + 0.1, 30.0, 40)
    expected = [sp.multigammaln(v, p) for v in a]
    _close(S.multigammaln(ember.tensor(a), p).numpy(), expected, rtol=1e-12)
    assert S.multigammaln(ember.tensor([4, 5]), p).dtype == ember.float32


def test_multigammaln_errors():
    with pytest.raises(RuntimeError, match="p has to be greater than or equal to 1"):
        S.multigammaln(ember.ones(2), 0)
    with pytest.raises(RuntimeError, match="may not be a boolean tensor"):
        S.multigammaln(ember.tensor([True]), 2)
    with pytest.raises(TypeError, match="argument 'p' \\(position 2\\) must be int, not float"):
        S.multigammaln(ember.ones(2), 2.0)


def test_reexports_are_the_ember_ops():
    assert S.erf is ember.erf and S.digamma is ember.digamma and S.psi is ember.digamma
    assert S.expit is ember.sigmoid and S.gammaln is ember.lgamma and S.xlogy is ember.xlogy
    assert S.logsumexp is ember.logsumexp and S.round is ember.round and S.polygamma is ember.polygamma
    x = ember.tensor([[1.0, 2.0, 3.0]])
    _close(S.softmax(x, 1).numpy(), sp.softmax(x.numpy(), axis=1), 1e-6)
    _close(S.log_softmax(x, -1, dtype=ember.float64).numpy(), sp.log_softmax(x.numpy(), axis=1), 1e-6)
    assert S.log_softmax(x, -1, dtype=ember.float64).dtype == ember.float64


def test_every_name_of_the_module_is_callable():
    assert sorted(S.__all__) == sorted(set(S.__all__))
    for name in S.__all__:
        assert callable(getattr(S, name)), name
    assert not hasattr(ember, "erfcx") and not hasattr(ember, "special_erfcx")  # exported from ember.special only


@pytest.mark.parametrize("call, shape, dtype", [
    (lambda x: S.erfcx(x), (2, 3), ember.float32),
    (lambda x: S.zeta(x, 2.0), (2, 3), ember.float32),
    (lambda x: S.chebyshev_polynomial_t(x, ember.ones(4, 1, 1, device="meta")), (4, 2, 3), ember.float32),
    (lambda x: S.multigammaln(x.double(), 3), (2, 3), ember.float64),
    (lambda x: S.gammainc(x, x), (2, 3), ember.float32),
])
def test_meta_tensors(call, shape, dtype):
    out = call(ember.empty(2, 3, device="meta"))
    assert out.device.type == "meta" and tuple(out.shape) == shape and out.dtype == dtype


def test_out_argument():
    x = ember.tensor([0.0, 1.0, -2.0])
    out = ember.empty(3)
    assert S.i1e(x, out=out) is out
    _close(out.numpy(), sp.i1e(x.numpy().astype(np.float64)), 1e-6)
