"""ember.special against torch.special (run with ``nox -s parity``): every public name exists, values on
grids with edge values (zeros, negatives, infinities, NaN, large magnitudes) agree, result dtypes of
integer, bool and mixed inputs agree, and the errors are of the same type.

op_db's generic parity test compares the ``special_*`` registry ops on their samples; this file goes
through the public ``ember.special`` names (keywords such as the polynomials' ``n`` included).
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.special as S

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_NAN, _INF = float("nan"), float("inf")
_GRID = np.concatenate([np.linspace(-9.0, 9.0, 73), [0.0, -0.0, 25.0, -25.0, 300.0, -300.0, _NAN]])
_WITH_INF = np.concatenate([_GRID, [_INF, -_INF]])
_POSITIVE = np.concatenate([np.linspace(0.0, 15.0, 31), [1e-6, 200.0, -1.0, _INF, _NAN]])
_UNIT = np.concatenate([np.linspace(0.0, 1.0, 21), [-0.5, 1.5, 1e-200, _NAN]])

#: PyTorch's float64 Airy and Bessel J/Y functions agree with scipy's (and mpmath's) to ~1e-5 relative only
_LOOSE = {"airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1"}

UNARY = [
    ("airy_ai", _GRID),  # PyTorch's Ai(+-inf) is NaN where the limit (ember's, scipy's) is 0
    ("bessel_j0", _WITH_INF), ("bessel_j1", _WITH_INF), ("bessel_y0", _POSITIVE), ("bessel_y1", _POSITIVE),
    ("modified_bessel_i0", _WITH_INF), ("modified_bessel_i1", _WITH_INF), ("modified_bessel_k0", _POSITIVE),
    ("modified_bessel_k1", _POSITIVE), ("scaled_modified_bessel_k0", _POSITIVE),
    ("scaled_modified_bessel_k1", _POSITIVE), ("spherical_bessel_j0", _WITH_INF), ("entr", _WITH_INF),
    ("erfcx", _WITH_INF), ("i0e", _WITH_INF), ("i1", _WITH_INF), ("i1e", _WITH_INF), ("ndtr", _WITH_INF),
    ("ndtri", _UNIT), ("log_ndtr", _WITH_INF), ("expit", _WITH_INF), ("gammaln", _POSITIVE), ("psi", _POSITIVE),
    ("digamma", _POSITIVE), ("erf", _WITH_INF), ("erfc", _WITH_INF), ("erfinv", _UNIT * 2 - 1), ("exp2", _GRID),
    ("expm1", _GRID), ("log1p", _POSITIVE - 1), ("sinc", _GRID), ("i0", _GRID), ("logit", _UNIT),
]


def _compare(ours, theirs, name, rtol=1e-10, atol=1e-12):
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1], name
    if name in _LOOSE:
        rtol = max(rtol, 1e-4 if ours.dtype == ember.float64 else 1e-3)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=rtol, atol=atol, equal_nan=True, err_msg=name)


def test_every_torch_special_name_exists():
    theirs = {n for n in dir(torch.special) if not n.startswith("_") and callable(getattr(torch.special, n))}
    theirs -= {"Tensor"}  # (torch.special re-exports the Tensor class)
    assert sorted(theirs - set(S.__all__)) == []


@pytest.mark.parametrize("name, grid", UNARY, ids=[u[0] for u in UNARY])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_unary_values(name, grid, dtype):
    x = grid.astype(dtype)
    ours = getattr(S, name)(ember.tensor(x))
    theirs = getattr(torch.special, name)(torch.tensor(x))
    # (PyTorch's float32 ndtr flushes the left tail below ~1e-8 to 0, where ember's computes it: absolute there)
    _compare(ours, theirs, name, rtol=1e-10 if dtype == "float64" else 2e-5, atol=1e-12 if dtype == "float64" else 2e-8)


@pytest.mark.parametrize("name", ["erfcx", "i0e", "i1", "ndtr", "entr", "bessel_j0", "log_ndtr", "spherical_bessel_j0"])
@pytest.mark.parametrize("dtype", ["int64", "uint8", "bool"])
def test_integer_inputs(name, dtype):
    values = [0, 1] if dtype == "bool" else [0, 1, 2, 5]
    ours = getattr(S, name)(ember.tensor(values, dtype=getattr(ember, dtype)))
    theirs = getattr(torch.special, name)(torch.tensor(values, dtype=getattr(torch, dtype)))
    _compare(ours, theirs, name, rtol=2e-6)


BINARY = [
    ("xlog1py", [0.0, 0.5, 2.0, -1.5, _NAN], [-1.0, -0.5, 0.0, 3.0, -2.0, _INF, _NAN]),
    ("zeta", [1.0, 1.5, 2.0, 4.0, 0.5, -1.0, _NAN], [0.1, 1.0, 2.5, 40.0, 0.0, -1.5, _NAN]),
    ("gammainc", [0.1, 1.0, 3.5, 40.0, -1.0, _NAN], [0.0, 0.2, 1.0, 4.0, 60.0, -1.0, _INF, _NAN]),
    ("gammaincc", [0.1, 1.0, 3.5, 40.0, -1.0, _NAN], [0.0, 0.2, 1.0, 4.0, 60.0, -1.0, _INF, _NAN]),
    ("xlogy", [0.0, 0.5, 2.0, -1.5, _NAN], [0.0, 0.5, 3.0, -1.0, _INF, _NAN]),
]


@pytest.mark.parametrize("name, a, b", BINARY, ids=[b[0] for b in BINARY])
def test_binary_values(name, a, b):
    a, b = (v.ravel() for v in np.meshgrid(np.array(a), np.array(b)))
    ours = getattr(S, name)(ember.tensor(a), ember.tensor(b))
    theirs = getattr(torch.special, name)(torch.tensor(a), torch.tensor(b))
    _compare(ours, theirs, name, rtol=1e-9)


@pytest.mark.parametrize("args", [
    lambda lib: (lib.tensor([1, 2, 3]), lib.tensor([1, 2, 3])),
    lambda lib: (lib.tensor([1, 2, 3]), 2.0),
    lambda lib: (2, lib.tensor([1.0, 2.0], dtype=lib.float64)),
    lambda lib: (lib.tensor([1.5, 2.5]), lib.tensor([1, 2], dtype=lib.int32)),
])
@pytest.mark.parametrize("name", ["xlog1py", "zeta", "chebyshev_polynomial_t", "hermite_polynomial_he"])
def test_binary_result_dtypes(name, args):
    ours = getattr(S, name)(*args(ember))
    theirs = getattr(torch.special, name)(*args(torch))
    _compare(ours, theirs, name, rtol=1e-5)


POLYNOMIALS = [n for n in S.__all__ if "polynomial" in n]


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomials(name):
    x = np.concatenate([np.linspace(-1.5, 1.5, 31), [0.0, 1.0, -1.0, 0.5]])
    scale = 0.5 if name.startswith("shifted") else 1.0
    x = x * scale + (0.5 if name.startswith("shifted") else 0.0)
    for n in (0, 1, 2, 3, 5, 8, 13):
        ours = getattr(S, name)(ember.tensor(x), n=n)
        theirs = getattr(torch.special, name)(torch.tensor(x), n=n)
        _compare(ours, theirs, f"{name} n={n}", rtol=1e-8)
    degrees = [-2.0, 0.0, 2.5, 3.9, 6.0]
    ours = getattr(S, name)(ember.tensor([0.3]), ember.tensor(degrees))
    theirs = getattr(torch.special, name)(torch.tensor([0.3]), torch.tensor(degrees))
    _compare(ours, theirs, name, rtol=1e-5)


@pytest.mark.parametrize("p", [1, 2, 5])
def test_multigammaln(p):
    a = np.linspace(p / 2 + 0.2, 20.0, 25)
    _compare(S.multigammaln(ember.tensor(a), p), torch.special.multigammaln(torch.tensor(a), p), "multigammaln")
    _compare(S.multigammaln(ember.tensor([3, 4]), p), torch.special.multigammaln(torch.tensor([3, 4]), p),
             "multigammaln", rtol=1e-6)


@pytest.mark.parametrize("call", [
    lambda lib: lib.special.erfcx(lib.ones(2, dtype=lib.float16)),
    lambda lib: lib.special.i0e(lib.ones(2, dtype=lib.complex64)),
    lambda lib: lib.special.gammainc(lib.tensor([1, 2]), lib.tensor([1, 2])),
    lambda lib: lib.special.gammainc(lib.ones(2), 2.0),
    lambda lib: lib.special.multigammaln(lib.ones(2), 0),
    lambda lib: lib.special.multigammaln(lib.tensor([True]), 2),
    lambda lib: lib.special.zeta(lib.ones(2, dtype=lib.float16), lib.ones(2, dtype=lib.float16)),
    lambda lib: lib.special.chebyshev_polynomial_t(lib.ones(2, dtype=lib.bfloat16), 2),
    lambda lib: lib.special.xlog1py(lib.ones(2, 3), lib.ones(4)),
    lambda lib: lib.special.erfcx([1.0]),
])
def test_errors_of_the_same_type(call):
    with pytest.raises(Exception) as theirs:
        call(torch)
    with pytest.raises(type(theirs.value)):
        call(ember)
