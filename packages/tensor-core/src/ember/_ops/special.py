"""The ``torch.special`` functions that have no ``ember.<name>`` op: registry ops ``special_<name>``.

They are pointwise ops made with :mod:`ember._ops._pointwise_helpers` (``unary``/``binary``), so they
share the dtype rules of the other pointwise ops: integer and bool inputs compute in the default float
dtype, float16/bfloat16 in float32 (rounded once), and each op refuses the dtypes PyTorch's CPU
kernels refuse (complex everywhere; float16/bfloat16 for the Bessel functions, ``erfcx``, ``ndtri``,
``log_ndtr``, ``zeta`` and the polynomials). Values come from :mod:`scipy.special` on the CPU and
from ``cupyx.scipy.special`` on CUDA arrays where CuPy has the function, with scipy's values where the
two differ (see :mod:`ember._ops._special_functions`). The values are computed on the host and copied
back where CuPy lacks the function, and for ``i0e``, ``i1e``, ``k0e``, ``k1e``, whose CuPy kernels
multiply ``exp(-+|x|)`` by the unscaled function and give NaN (``0 * inf``) at +-inf and for large
``|x|``. The orthogonal polynomials are evaluated by their three-term recurrences (the array functions
run on numpy and CuPy arrays alike).

The ops are tagged ``"submodule"``: they are exported from :mod:`ember.special` only.
"""

from __future__ import annotations

import importlib
import math

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from ._array_module import array_namespace as _array_namespace
from ._array_module import as_array as _as_array
from ._pointwise_helpers import NO_COMPLEX, binary, check_tensor, not_implemented, unary
from ._registry import defop, registry
from ._special_functions import special as _special

__all__ = []

_FIRST_OP = len(registry)
_TAGS = ("pointwise", "special", "submodule")

#: Input dtypes of the functions whose PyTorch CPU kernels also take float16 and bfloat16.
_WITH_HALF = NO_COMPLEX
#: Input dtypes of the functions whose PyTorch CPU kernels refuse float16 and bfloat16.
_NO_HALF = NO_COMPLEX - {D.float16, D.bfloat16}
#: Computation dtypes of the binary functions that refuse float16/bfloat16 (integers compute in float).
_SINGLE_DOUBLE = frozenset({D.float32, D.float64})
_FLOATS = frozenset({D.float16, D.bfloat16, D.float32, D.float64})


#: scipy.special functions computed on a host copy of CUDA arrays although CuPy has them: CuPy computes the
#: scaled Bessel functions as ``exp(-+|x|) * f(x)``, which is ``0 * inf = NaN`` once ``f`` overflows (or
#: underflows): at +-inf, and for ``|x|`` above about 90 in float32 (700 in float64) where scipy is finite.
_HOST_ON_CUDA = frozenset({"i0e", "i1e", "k0e", "k1e"})


def _scipy(name):
    """scipy.special's ``name`` (imported on first call); on CUDA arrays CuPy's, or scipy's on a host copy."""
    host = _special(name)

    def call(*args):
        if _array_namespace(*args) is np:
            return host(*args)
        if name not in _HOST_ON_CUDA and hasattr(importlib.import_module("cupyx.scipy.special"), name):
            return host(*args)  # (ember._ops._special_functions: CuPy's function, with scipy's values)
        cupy = importlib.import_module("cupy")  # CuPy lacks it or errs: compute on the host, copy back
        return cupy.asarray(host(*(cupy.asnumpy(a) if isinstance(a, cupy.ndarray) else a for a in args)))

    call.__name__ = name
    return call


def _doc(summary, name, *, args="input (Tensor): the input.", example="", raises="", note=""):
    """A docstring for ``ember.special.<name>``."""
    text = f"{summary}\n\n"
    if note:
        text += f"{note}\n\n"
    text += f"    Args:\n        {args}\n\n    Returns:\n"
    text += "        Tensor: of the input's floating dtype (the default float dtype for integer and bool inputs).\n"
    text += "\n    Raises:\n        TypeError: if a tensor argument is not a tensor.\n"
    text += "        NotImplementedError: for complex inputs" + (f"; {raises}" if raises else "") + ".\n"
    if example:
        call, output = example.split(" -> ")
        text += "\n    Example:\n        >>> import ember\n"
        text += f"        >>> ember.special.{name}({call})\n        {output}\n"
    return text


_HALF_RAISES = "for float16 and bfloat16 inputs (as PyTorch's CPU kernel)"


def _unary(name, fn, summary, *, half=True, example="", note=""):
    return unary(
        f"special_{name}", fn, result="float", upcast=True, supported=_WITH_HALF if half else _NO_HALF,
        has_inplace=False, tags=_TAGS,
        doc=_doc(summary, name, example=example, note=note, raises="" if half else _HALF_RAISES),
    )


# -- unary functions --------------------------------------------------------------------------------------


def _airy_ai(x):
    return _scipy("airy")(x)[0]


def _spherical_bessel_j0(x):
    """sin(x) / x, 1 at 0 (scipy's spherical_jn(0, x); 0 at +-inf)."""
    at_zero = x == 0
    safe = np.where(at_zero, 1, x)
    value = np.where(np.isinf(x), 0, np.sin(safe) / safe)
    return np.where(at_zero, 1, value).astype(x.dtype, copy=False)


def _entr(x):
    """-x log(x) for x > 0, 0 at 0, -inf below 0, NaN at NaN."""
    positive = x > 0
    safe = np.where(positive, x, 1)
    value = np.where(positive, -safe * np.log(safe), np.where(x == 0, 0, -np.inf))
    return np.where(np.isnan(x), np.nan, value).astype(x.dtype, copy=False)


_UNARY = [
    # (name, function, summary, float16/bfloat16 accepted, example "input -> output")
    ("airy_ai", _airy_ai, "Elementwise Airy function ``Ai(input)``.", False,
     "ember.tensor([0.0, 1.0]) -> tensor([0.3550, 0.1353])"),
    ("bessel_j0", _scipy("j0"), "Elementwise Bessel function of the first kind of order 0.", False,
     "ember.tensor([0.0, 1.0]) -> tensor([1.0000, 0.7652])"),
    ("bessel_j1", _scipy("j1"), "Elementwise Bessel function of the first kind of order 1.", False,
     "ember.tensor([0.0, 1.0]) -> tensor([0.0000, 0.4401])"),
    ("bessel_y0", _scipy("y0"), "Elementwise Bessel function of the second kind of order 0 (-inf at 0, NaN below).",
     False, "ember.tensor([1.0, 2.0]) -> tensor([0.0883, 0.5104])"),
    ("bessel_y1", _scipy("y1"), "Elementwise Bessel function of the second kind of order 1 (-inf at 0, NaN below).",
     False, "ember.tensor([1.0, 2.0]) -> tensor([-0.7812, -0.1070])"),
    ("modified_bessel_i0", _scipy("i0"), "Elementwise modified Bessel function of the first kind of order 0.", False,
     "ember.tensor([0.0, 1.0]) -> tensor([1.0000, 1.2661])"),
    ("modified_bessel_i1", _scipy("i1"), "Elementwise modified Bessel function of the first kind of order 1.", False,
     "ember.tensor([0.0, 1.0]) -> tensor([0.0000, 0.5652])"),
    ("modified_bessel_k0", _scipy("k0"),
     "Elementwise modified Bessel function of the second kind of order 0 (inf at 0, NaN below).", False,
     "ember.tensor([1.0, 2.0]) -> tensor([0.4210, 0.1139])"),
    ("modified_bessel_k1", _scipy("k1"),
     "Elementwise modified Bessel function of the second kind of order 1 (inf at 0, NaN below).", False,
     "ember.tensor([1.0, 2.0]) -> tensor([0.6019, 0.1399])"),
    ("scaled_modified_bessel_k0", _scipy("k0e"), "Elementwise ``exp(input) * K0(input)``.", False,
     "ember.tensor([1.0, 2.0]) -> tensor([1.1445, 0.8416])"),
    ("scaled_modified_bessel_k1", _scipy("k1e"), "Elementwise ``exp(input) * K1(input)``.", False,
     "ember.tensor([1.0, 2.0]) -> tensor([1.6362, 1.0335])"),
    ("spherical_bessel_j0", _spherical_bessel_j0, "Elementwise spherical Bessel function of the first kind of "
     "order 0, ``sin(input) / input`` (1 at 0).", False, "ember.tensor([0.0, 1.0]) -> tensor([1.0000, 0.8415])"),
    ("entr", _entr, "Elementwise entropy term ``-input * log(input)``: 0 at 0, -inf below 0.", True,
     "ember.tensor([0.0, 0.5]) -> tensor([0.0000, 0.3466])"),
    ("erfcx", _scipy("erfcx"), "Elementwise scaled complementary error function ``exp(input**2) * erfc(input)``.",
     False, "ember.tensor([0.0, 10.0]) -> tensor([1.0000, 0.0561])"),
    ("i0e", _scipy("i0e"), "Elementwise exponentially scaled modified Bessel function of order 0, "
     "``exp(-abs(input)) * i0(input)``.", True, "ember.tensor([0.0, 1.0]) -> tensor([1.0000, 0.4658])"),
    ("i1", _scipy("i1"), "Elementwise modified Bessel function of the first kind of order 1.", True,
     "ember.tensor([0.0, 1.0]) -> tensor([0.0000, 0.5652])"),
    ("i1e", _scipy("i1e"), "Elementwise exponentially scaled modified Bessel function of order 1, "
     "``exp(-abs(input)) * i1(input)``.", True, "ember.tensor([0.0, 1.0]) -> tensor([0.0000, 0.2079])"),
    ("ndtr", _scipy("ndtr"), "Elementwise standard normal cumulative distribution function.", True,
     "ember.tensor([0.0, 1.0]) -> tensor([0.5000, 0.8413])"),
    ("ndtri", _scipy("ndtri"), "Elementwise inverse of ``ndtr`` (the normal quantile function): "
     "-inf at 0, inf at 1, NaN outside [0, 1].", False, "ember.tensor([0.5, 0.975]) -> tensor([0.0000, 1.9600])"),
    ("log_ndtr", _scipy("log_ndtr"), "Elementwise ``log(ndtr(input))``, accurate in the left tail.", False,
     "ember.tensor([0.0, -10.0]) -> tensor([ -0.6931, -53.2313])"),
]

for _name, _fn, _summary, _half, _example in _UNARY:
    globals()[_name] = _unary(_name, _fn, _summary, half=_half, example=_example)


# -- binary functions -------------------------------------------------------------------------------------


def _binary(name, fn, summary, *, supported, scalars="both", result="float", args, raises, example):
    return binary(
        f"special_{name}", fn, result=result, supported=supported, scalars=scalars, upcast=True, has_inplace=False,
        tags=_TAGS, doc=_doc(summary, name, args=args, raises=raises, example=example),
    )


_TWO_ARGS = "input (Tensor or Number): the first operand.\n        other (Tensor or Number): the second operand."
xlog1py = _binary(
    "xlog1py", _scipy("xlog1py"), "Elementwise ``input * log1p(other)``, 0 where ``input`` is 0 (unless ``other`` "
    "is NaN).", supported=NO_COMPLEX, args=_TWO_ARGS, raises="",
    example="ember.tensor([0.0, 2.0]), ember.tensor([-1.0, 1.0]) -> tensor([0.0000, 1.3863])")
zeta = _binary(
    "zeta", _scipy("zeta"), "Elementwise Hurwitz zeta function ``sum_k (other + k) ** -input``.",
    supported=_SINGLE_DOUBLE, args="input (Tensor or Number): the exponent ``x``.\n        "
    "other (Tensor or Number): the shift ``q``.", raises=_HALF_RAISES,
    example="ember.tensor([2.0, 4.0]), 1.0 -> tensor([1.6449, 1.0823])")
_GAMMAINC_ARGS = ("input (Tensor): the shape ``a`` (positive).\n        other (Tensor): the upper limit ``x`` "
                  "(non-negative); both floating tensors.")
_FLOAT_ONLY = "for integer and bool inputs (PyTorch's kernel refuses them)"
def _incomplete_gamma(name, at_zero, at_inf):
    """scipy's ``gammainc``/``gammaincc`` with PyTorch's values for a NaN shape: the value at x = 0 and x = inf
    does not depend on the shape (scipy gives NaN there)."""
    fn = _scipy(name)

    def call(a, x):
        value = fn(a, x)
        nan_shape = np.isnan(a)
        value = np.where(nan_shape & (x == 0), at_zero, value)
        return np.where(nan_shape & (x == np.inf), at_inf, value)

    return call


gammainc = _binary(
    "gammainc", _incomplete_gamma("gammainc", 0, 1), "Elementwise regularized lower incomplete gamma function "
    "``P(input, other)``.", supported=_FLOATS, scalars="none", result="promote", args=_GAMMAINC_ARGS,
    raises=_FLOAT_ONLY, example="ember.tensor([1.0, 2.0]), ember.tensor([1.0, 1.0]) -> tensor([0.6321, 0.2642])")
gammaincc = _binary(
    "gammaincc", _incomplete_gamma("gammaincc", 1, 0), "Elementwise regularized upper incomplete gamma function "
    "``Q(input, other) = 1 - P(input, other)``.", supported=_FLOATS, scalars="none", result="promote",
    args=_GAMMAINC_ARGS, raises=_FLOAT_ONLY,
    example="ember.tensor([1.0, 2.0]), ember.tensor([1.0, 1.0]) -> tensor([0.3679, 0.7358])")


# -- orthogonal polynomials -------------------------------------------------------------------------------


def _recurrence(first, step):
    """A polynomial family ``p_n(x)`` by its three-term recurrence, for integer degrees ``n`` per element.

    ``first(x)`` is ``p_1`` (``p_0`` is 1) and ``step(k, x, p_k, p_km1)`` is ``p_{k+1}``. Degrees are
    truncated toward zero (as PyTorch casts them to integers); negative (and NaN) degrees give 0.
    """

    def evaluate(x, n):
        xp = _array_namespace(x, n)  # numpy or CuPy (which keeps Python numbers as they are)
        if not hasattr(x, "dtype"):  # a Python number: of the (floating) degrees' computation dtype
            x = xp.full_like(n, x)
        if not hasattr(n, "dtype"):
            n = xp.asarray(n)
        x, n = xp.broadcast_arrays(x, n)
        valid = xp.isfinite(n) & (n >= 0) if n.dtype.kind == "f" else n >= 0
        degree = xp.where(valid, xp.trunc(n) if n.dtype.kind == "f" else n, 0).astype(np.int64)
        top = int(degree.max()) if degree.size else 0
        previous, current = xp.ones_like(x), first(x)
        value = xp.where(degree == 0, previous, current)
        for k in range(1, top):
            previous, current = current, step(k, x, current, previous)
            value = xp.where(degree == k + 1, current, value)
        return xp.where(valid, value, 0).astype(x.dtype, copy=False)

    return evaluate


def _twice(x):
    return 2 * x


def _chebyshev_step(k, x, p, q):
    return 2 * x * p - q


def _shifted(family):
    """``p_n(2x - 1)``: the family shifted from [-1, 1] to [0, 1]."""
    return lambda x, n: family(2 * x - 1, n)


_chebyshev_t = _recurrence(lambda x: x, _chebyshev_step)
_chebyshev_u = _recurrence(_twice, _chebyshev_step)
_chebyshev_v = _recurrence(lambda x: 2 * x - 1, _chebyshev_step)
_chebyshev_w = _recurrence(lambda x: 2 * x + 1, _chebyshev_step)
_POLYNOMIALS = [
    # (name, evaluator, summary, example "x, n -> output")
    ("chebyshev_polynomial_t", _chebyshev_t, "Chebyshev polynomial of the first kind ``T_n(input)``.",
     "ember.tensor([0.5, 2.0]), 3 -> tensor([-1., 26.])"),
    ("chebyshev_polynomial_u", _chebyshev_u, "Chebyshev polynomial of the second kind ``U_n(input)``.",
     "ember.tensor([0.5, 2.0]), 3 -> tensor([-1., 56.])"),
    ("chebyshev_polynomial_v", _chebyshev_v, "Chebyshev polynomial of the third kind ``V_n(input)``.",
     "ember.tensor([0.5, 2.0]), 3 -> tensor([-1., 41.])"),
    ("chebyshev_polynomial_w", _chebyshev_w, "Chebyshev polynomial of the fourth kind ``W_n(input)``.",
     "ember.tensor([0.5, 2.0]), 3 -> tensor([-1., 71.])"),
    ("shifted_chebyshev_polynomial_t", _shifted(_chebyshev_t), "Shifted Chebyshev polynomial of the first kind "
     "``T_n(2 input - 1)``.", "ember.tensor([0.25, 1.0]), 3 -> tensor([1., 1.])"),
    ("shifted_chebyshev_polynomial_u", _shifted(_chebyshev_u), "Shifted Chebyshev polynomial of the second kind "
     "``U_n(2 input - 1)``.", "ember.tensor([0.25, 1.0]), 3 -> tensor([1., 4.])"),
    ("shifted_chebyshev_polynomial_v", _shifted(_chebyshev_v), "Shifted Chebyshev polynomial of the third kind "
     "``V_n(2 input - 1)``.", "ember.tensor([0.25, 1.0]), 3 -> tensor([1., 1.])"),
    ("shifted_chebyshev_polynomial_w", _shifted(_chebyshev_w), "Shifted Chebyshev polynomial of the fourth kind "
     "``W_n(2 input - 1)``.", "ember.tensor([0.25, 1.0]), 3 -> tensor([1., 7.])"),
    ("hermite_polynomial_h", _recurrence(_twice, lambda k, x, p, q: 2 * x * p - 2 * k * q),
     "Physicists' Hermite polynomial ``H_n(input)``.", "ember.tensor([0.5, 2.0]), 3 -> tensor([-5., 40.])"),
    ("hermite_polynomial_he", _recurrence(lambda x: x, lambda k, x, p, q: x * p - k * q),
     "Probabilists' Hermite polynomial ``He_n(input)``.", "ember.tensor([0.5, 2.0]), 3 -> tensor([-1.3750,  2.0000])"),
    ("laguerre_polynomial_l", _recurrence(lambda x: 1 - x, lambda k, x, p, q: ((2 * k + 1 - x) * p - k * q) / (k + 1)),
     "Laguerre polynomial ``L_n(input)``.", "ember.tensor([0.5, 2.0]), 3 -> tensor([-0.1458, -0.3333])"),
    ("legendre_polynomial_p", _recurrence(lambda x: x, lambda k, x, p, q: ((2 * k + 1) * x * p - k * q) / (k + 1)),
     "Legendre polynomial ``P_n(input)``.", "ember.tensor([0.5, 2.0]), 3 -> tensor([-0.4375, 17.0000])"),
]
_POLYNOMIAL_ARGS = ("input (Tensor or Number): the point ``x``.\n        other (Tensor or Number): the degree ``n`` "
                    "(truncated to an integer; negative degrees give 0). ``ember.special`` calls it ``n``.")
for _name, _fn, _summary, _example in _POLYNOMIALS:
    globals()[_name] = _binary(_name, _fn, _summary, supported=_SINGLE_DOUBLE, args=_POLYNOMIAL_ARGS,
                               raises=_HALF_RAISES, example=_example)


# -- multigammaln -----------------------------------------------------------------------------------------


def _multigammaln_meta(input, p):
    """Elementwise multivariate log-gamma function of dimension ``p``.

    ``log Gamma_p(a) = p (p - 1) / 4 * log(pi) + sum_{j < p} lgamma(a - j / 2)``.

    Args:
        input (Tensor): the values ``a`` (integer inputs give the default float dtype).
        p (int): the dimension, at least 1.

    Returns:
        Tensor: of the input's floating dtype.

    Raises:
        TypeError: if ``input`` is not a tensor or ``p`` is not an int.
        RuntimeError: if ``p < 1``, or for a bool input.
        NotImplementedError: for complex inputs.

    Example:
        >>> import ember
        >>> ember.special.multigammaln(ember.tensor([3.0, 4.0]), 2)
        tensor([1.5502, 3.5651])
    """
    check_tensor("special_multigammaln", "input", 1, input)
    if isinstance(p, bool) or not isinstance(p, (int, np.integer)):
        raise TypeError(f"special_multigammaln(): argument 'p' (position 2) must be int, not {type(p).__name__}")
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    if input.dtype is D.bool:
        raise RuntimeError("The input tensor may not be a boolean tensor.")
    if input.dtype.is_complex:
        raise not_implemented("special_multigammaln", input.dtype)
    dtype = input.dtype if input.dtype.category == D.FLOATING else D.get_default_dtype()
    return MetaArray(input._data.shape, dtype.numpy_dtype)


_gammaln = _scipy("gammaln")


def _multigammaln_cpu(input, p):
    target = _multigammaln_meta(input, p).dtype
    work = np.float64 if target == np.float64 else np.float32
    a = input._data.astype(work)
    with np.errstate(all="ignore"):
        value = np.full_like(a, p * (p - 1) / 4 * math.log(math.pi))
        for j in range(p):
            value = value + _gammaln(a - j / 2)
    return _as_array(value).astype(target, copy=False)  # (numpy gives scalars for zero-dim inputs)


multigammaln = defop("special_multigammaln", _multigammaln_meta, cpu=_multigammaln_cpu, has_out=True, tags=_TAGS)

#: The registry names of this module's ops.
OPS = tuple(list(registry)[_FIRST_OP:])
