"""OpInfos of ember._ops.special: the ``torch.special`` functions that have no ``ember.<name>`` op.

References are scipy.special's functions in float64 (the orthogonal polynomials of the third and fourth
kind, which scipy lacks, from ``U_n -+ U_{n-1}``). Samples take the shapes of the other pointwise ops,
each function's domain (positive arguments for ``y0``/``k0``/``zeta``/``gammainc``, ``(0, 1)`` for
``ndtri``), NaN and infinities where PyTorch's values there agree with scipy's, integer degrees (Python
numbers and tensors, negative and fractional ones included) for the polynomials.
"""

from __future__ import annotations

import numpy as np
import scipy.special as sp

from ... import _dtype as D
from .._opinfo import ALL_TYPES_AND_COMPLEX, OpInfo, SampleInput, register_opinfo
from ._common import maker
from .pointwise import (
    _BROADCAST_ERROR,
    _NOT_A_TENSOR,
    _binary_dtype_error,
    _errors,
    _float_ref,
    _range,
    _scalar_other_error,
    _specials,
    _t,
    _unary,
    _unary_dtype_error,
    binary_samples,
)

_NO_COMPLEX = tuple(d for d in ALL_TYPES_AND_COMPLEX if not d.is_complex)
_NO_HALF = tuple(d for d in _NO_COMPLEX if d not in (D.float16, D.bfloat16))
_FLOATING = (D.float16, D.bfloat16, D.float32, D.float64)
_NAN, _INF = float("nan"), float("inf")


def _torch(name):
    return f"special.{name}"


def _unary_errors(half):
    cases = [_NOT_A_TENSOR, _unary_dtype_error(D.complex64, "not implemented for 'ComplexFloat'")]
    if not half:
        cases.append(_unary_dtype_error(D.float16, "not implemented for 'Half'"))
    return _errors(*cases)


# -- unary functions --------------------------------------------------------------------------------------

_UNARY = [
    # (name, reference, sample kwargs, float16/bfloat16 accepted)
    ("airy_ai", lambda x: sp.airy(x)[0], {"low": -5, "high": 5}, False),  # PyTorch's Ai(+-inf) is NaN, scipy's 0
    ("bessel_j0", sp.j0, {"specials": True}, False),
    ("bessel_j1", sp.j1, {"specials": True}, False),
    ("bessel_y0", sp.y0, {"low": 0.1}, False),
    ("bessel_y1", sp.y1, {"low": 0.1}, False),
    ("modified_bessel_i0", sp.i0, {"low": -5, "high": 5}, False),
    ("modified_bessel_i1", sp.i1, {"low": -5, "high": 5}, False),
    ("modified_bessel_k0", sp.k0, {"low": 0.1}, False),
    ("modified_bessel_k1", sp.k1, {"low": 0.1}, False),
    ("scaled_modified_bessel_k0", sp.k0e, {"low": 0.1}, False),
    ("scaled_modified_bessel_k1", sp.k1e, {"low": 0.1}, False),
    ("spherical_bessel_j0", lambda x: sp.spherical_jn(0, x), {"specials": True}, False),
    ("entr", sp.entr, {"specials": True}, True),
    ("erfcx", sp.erfcx, {"specials": True}, False),
    ("i0e", sp.i0e, {"specials": True}, True),
    ("i1", sp.i1, {"low": -5, "high": 5}, True),
    ("i1e", sp.i1e, {"specials": True}, True),
    ("ndtr", sp.ndtr, {"specials": True}, True),
    ("ndtri", sp.ndtri, {"low": 0.02, "high": 0.98}, False),
    ("log_ndtr", sp.log_ndtr, {"specials": True}, False),
]
#: float16/bfloat16 results of exponentially growing functions carry a few ulps of float32 rounding more
_HALF_TOLERANCES = {D.float16: (2e-3, 1e-3), D.bfloat16: (1.6e-2, 1e-2)}
#: Not differentiable in PyTorch (their outputs never require grad): no gradient tests
_NOT_DIFFERENTIABLE = ("airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0",
                       "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
                       "scaled_modified_bessel_k1", "spherical_bessel_j0")

#: PyTorch's float64 Airy and Bessel J/Y functions agree with scipy's (and mpmath's) to ~1e-5 relative only,
#: its float32 erfcx computes in float32 (scipy's in float64, rounded once): the parity run compares at these
_LOOSE = {
    "airy_ai": {D.float64: (1e-4, 1e-6)},
    "bessel_j0": {D.float64: (1e-4, 1e-6)},
    "bessel_j1": {D.float64: (1e-4, 1e-6)},
    "bessel_y0": {D.float64: (1e-4, 1e-6)},
    "bessel_y1": {D.float64: (1e-4, 1e-6)},
    "erfcx": {D.float32: (1e-5, 1e-5)},
}

for _name, _ref, _kwargs, _half in _UNARY:
    register_opinfo(OpInfo(
        f"special_{_name}", _unary(**_kwargs), dtypes=_NO_COMPLEX if _half else _NO_HALF, ref=_float_ref(_ref),
        torch_name=_torch(_name), error_inputs=_unary_errors(_half),
        tolerances={**(_HALF_TOLERANCES if _half else {}), **_LOOSE.get(_name, {})},
        supports_autograd=_name not in _NOT_DIFFERENTIABLE,
    ))


def _multigammaln_samples(opinfo, device, dtype, requires_grad):
    low, high = _range(dtype, 2, 9)
    make = maker(device, dtype, requires_grad, low=low, high=high)
    for p in (1, 2, 3, 5):
        yield SampleInput(make((2, 3)), (p,), name=f"p={p}")
    yield SampleInput(make(()), (2,), name="zero-dim")
    yield SampleInput(make((0, 2)), (2,), name="empty")
    yield SampleInput(make((3, 4), noncontiguous=True), (3,), name="noncontiguous")


def _multigammaln_ref(a, p):
    a = np.asarray(a, dtype=np.float64)
    return p * (p - 1) / 4 * np.log(np.pi) + sum(sp.gammaln(a - j / 2) for j in range(p))


register_opinfo(OpInfo(
    "special_multigammaln", _multigammaln_samples, dtypes=tuple(d for d in _NO_COMPLEX if d is not D.bool), ref=_multigammaln_ref,
    torch_name=_torch("multigammaln"), tolerances={D.float16: (2e-3, 2e-3), D.bfloat16: (1.6e-2, 2e-2)},
    error_inputs=_errors(
        (lambda e, d: (e.ones(2, device=d), (0,), {}), RuntimeError, "p has to be greater than or equal to 1"),
        (lambda e, d: (e.ones(2, device=d), (1.5,), {}), TypeError, "must be int, not float"),
        (lambda e, d: (_t(e, d, [1j]), (2,), {}), NotImplementedError, "ComplexFloat"),
        (lambda e, d: ([1.0], (2,), {}), TypeError, "must be Tensor"),
        (lambda e, d: (_t(e, d, [True]), (2,), {}), RuntimeError, "may not be a boolean tensor"),
    ),
))


# -- binary functions -------------------------------------------------------------------------------------


def _xlog1py_samples(opinfo, device, dtype, requires_grad):
    yield from binary_samples(opinfo, device, dtype, requires_grad, other_low=-0.9)
    if dtype.category == D.FLOATING:
        import ember

        x = ember.tensor([0.0, 0.0, 0.0, 2.0, -1.5, 0.0], dtype=dtype, device=device)
        y = _specials([-1.0, _NAN, -2.0, -1.0, _INF, _INF], dtype, device)
        yield SampleInput(x, (y,), name="zeros and specials")


register_opinfo(OpInfo(
    "special_xlog1py", _xlog1py_samples, dtypes=_NO_COMPLEX, ref=_float_ref(sp.xlog1py), torch_name=_torch("xlog1py"),
    error_inputs=_errors(_BROADCAST_ERROR, _binary_dtype_error(D.complex64)),
))


def _zeta_samples(opinfo, device, dtype, requires_grad):
    # x > 1 (the series converges), q > 0
    yield from binary_samples(opinfo, device, dtype, requires_grad, low=1.1, high=6, other_low=0.2, other_high=5)


register_opinfo(OpInfo(
    "special_zeta", _zeta_samples, dtypes=_NO_HALF, ref=_float_ref(sp.zeta), torch_name=_torch("zeta"),
    error_inputs=_errors(_BROADCAST_ERROR, _binary_dtype_error(D.complex64), _binary_dtype_error(D.float16)),
))


def _gammainc_samples(opinfo, device, dtype, requires_grad):
    yield from binary_samples(opinfo, device, dtype, requires_grad, scalars="none", low=0.2, high=6, mixed=False)


for _name, _ref in (("gammainc", sp.gammainc), ("gammaincc", sp.gammaincc)):
    register_opinfo(OpInfo(
        f"special_{_name}", _gammainc_samples, dtypes=_FLOATING, ref=_float_ref(_ref), torch_name=_torch(_name),
        tolerances={D.bfloat16: (1.6e-2, 1e-2)},
        error_inputs=_errors(_BROADCAST_ERROR, _scalar_other_error(), _binary_dtype_error(D.int64),
                             _binary_dtype_error(D.complex64)),
    ))


# -- orthogonal polynomials -------------------------------------------------------------------------------


def _polynomial_samples(low, high):
    def gen(opinfo, device, dtype, requires_grad):
        import ember

        x_low, x_high = _range(dtype, low, high)
        make = maker(device, dtype, requires_grad, low=x_low, high=x_high)
        for n in (0, 1, 2, 5, 9):
            yield SampleInput(make((2, 3)), (n,), name=f"n={n}")
        yield SampleInput(make((4,)), (ember.tensor([0, 3, 7, 12], device=device),), name="degree per element")
        yield SampleInput(make((2, 1)), (ember.tensor([1.0, 4.0, 6.0], dtype=D.float64, device=device),),
                          name="float degrees, broadcast")
        yield SampleInput(make((3,)), (ember.tensor([-2.0, 2.5, 3.7], device=device),), name="negative and fractional")
        yield SampleInput(make(()), (3,), name="zero-dim")
        yield SampleInput(make((0, 2)), (2,), name="empty")
        yield SampleInput(make((3, 4), noncontiguous=True), (4,), name="noncontiguous")
        yield SampleInput(2, (make((3,), low=0, high=6).to(D.int64),), name="python scalar input")

    return gen


def _degree_ref(fn):
    """``fn(n, x)`` (scipy's argument order) with PyTorch's degrees: truncated, 0 below 0."""

    def ref(x, n):
        x, n = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(n, np.float64))
        degree = np.trunc(np.where(n >= 0, n, 0)).astype(np.int64)
        with np.errstate(all="ignore"):
            return np.where(n >= 0, fn(degree, x), 0.0)

    return ref


def _chebyshev_v(n, x):
    return sp.eval_chebyu(n, x) - np.where(n > 0, sp.eval_chebyu(np.maximum(n - 1, 0), x), 0)


def _chebyshev_w(n, x):
    return sp.eval_chebyu(n, x) + np.where(n > 0, sp.eval_chebyu(np.maximum(n - 1, 0), x), 0)


_POLYNOMIALS = [
    # (name, scipy-order reference fn(n, x), x range)
    ("chebyshev_polynomial_t", sp.eval_chebyt, (-1.5, 1.5)),
    ("chebyshev_polynomial_u", sp.eval_chebyu, (-1.5, 1.5)),
    ("chebyshev_polynomial_v", _chebyshev_v, (-1.5, 1.5)),
    ("chebyshev_polynomial_w", _chebyshev_w, (-1.5, 1.5)),
    ("shifted_chebyshev_polynomial_t", sp.eval_sh_chebyt, (-0.2, 1.2)),
    ("shifted_chebyshev_polynomial_u", sp.eval_sh_chebyu, (-0.2, 1.2)),
    ("shifted_chebyshev_polynomial_v", lambda n, x: _chebyshev_v(n, 2 * x - 1), (-0.2, 1.2)),
    ("shifted_chebyshev_polynomial_w", lambda n, x: _chebyshev_w(n, 2 * x - 1), (-0.2, 1.2)),
    ("hermite_polynomial_h", sp.eval_hermite, (-2, 2)),
    ("hermite_polynomial_he", sp.eval_hermitenorm, (-2, 2)),
    ("laguerre_polynomial_l", sp.eval_laguerre, (-2, 4)),
    ("legendre_polynomial_p", sp.eval_legendre, (-1.5, 1.5)),
]
for _name, _fn, (_low, _high) in _POLYNOMIALS:
    register_opinfo(OpInfo(
        f"special_{_name}", _polynomial_samples(_low, _high), dtypes=_NO_HALF, ref=_degree_ref(_fn),
        torch_name=_torch(_name), tolerances={D.float32: (1e-4, 1e-4)}, supports_autograd=False,
        error_inputs=_errors(_BROADCAST_ERROR, _binary_dtype_error(D.complex64), _binary_dtype_error(D.float16)),
    ))
