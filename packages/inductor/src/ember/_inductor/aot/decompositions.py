"""The decomposition table: which registry ops the compiler sees, and what the others become.

The registry marks every op ``"prim"`` (a backend implements it) or ``"composite"`` (it
has a decomposition into other ops). Before lowering, AOT tracing replaces ops by their
decompositions until only the **core set** (:data:`CORE_OPS`) is left: the closed list of
ops the lowering must handle, either as loop IR (pointwise, reductions, views, indexing)
or as an extern call to the eager kernel (matmul, convolution, sorting, linalg, fft).

:func:`inductor_decompositions` builds the table, a ``dict[Op, callable]`` for
``make_fx(..., decomposition_table=...)``:

* every composite op, with the registry's own decomposition, except the families listed
  in :data:`KEEP_WHOLE` (each with its reason) and those :data:`OVERRIDES` gives a
  fusion-friendlier decomposition of our own (``masked_fill`` as ``where`` instead of a
  clone and an in-place write);
* a few **prims** split into simpler prims so the compiler fuses them with their
  neighbours (``sigmoid``, ``addcmul``, ``lerp``, ``clamp``, ``var``, the ``*_backward``
  pointwise ops): one code path in the lowering instead of one per op.

``reaches_lowering(op)`` answers "does this op reach the compiler undecomposed?", a
table look-up that tests assert over the whole registry.

Example:
    >>> import ember
    >>> from ember.fx.experimental.proxy_tensor import make_fx
    >>> from ember._inductor.aot.decompositions import inductor_decompositions
    >>> gm = make_fx(ember.sigmoid, decomposition_table=inductor_decompositions())(ember.randn(3))
    >>> [n.target.name for n in gm.graph.nodes if n.op == "call_function"]
    ['neg', 'exp', 'add', 'reciprocal']
"""

from __future__ import annotations

import functools

import ember
from ember._dtype import result_type_of
from ember._ops import registry
from ember._ops._registry import COMPOSITE, Op

from .functionalize import traced_device

__all__ = [
    "CORE_OPS",
    "KEEP_WHOLE",
    "OVERRIDES",
    "PRIM_DECOMPOSITIONS",
    "inductor_decompositions",
    "get_decompositions",
    "reaches_lowering",
]

# -- the core set ------------------------------------------------------------------------------

# Factories: a fresh buffer from sizes and a fill rule (loop IR: a pointwise of the index).
_FACTORIES = (
    "empty", "zeros", "ones", "full", "empty_strided", "arange", "linspace", "logspace", "eye",
    "scalar_tensor", "tril_indices", "triu_indices",
)

# Copies and conversions: pointwise in the loop IR (a load, a cast, a store).
_COPIES = ("clone", "_to_copy", "complex", "polar")

# Views: no computation, a new indexing formula over the same buffer.
_VIEWS = (
    "view", "as_strided", "transpose", "permute", "unsqueeze", "squeeze", "expand", "select", "slice",
    "diagonal", "unfold", "view_as_real", "view_as_complex", "detach",
)

# Pointwise prims: one loop-IR expression each, fused with their neighbours.
_POINTWISE = (
    "add", "sub", "mul", "div", "floor_divide", "remainder", "fmod", "pow", "float_power", "neg", "abs",
    "sign", "sgn", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal",
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf",
    "erfc", "erfinv", "lgamma", "digamma", "i0", "sinc", "square", "deg2rad", "rad2deg", "floor", "ceil",
    "trunc", "frac", "round", "logit", "polygamma", "nan_to_num", "angle", "conj_physical", "eq", "ne", "lt",
    "le", "gt", "ge", "isnan", "isinf", "isfinite", "isposinf", "isneginf", "isreal", "isclose",
    "logical_not", "logical_and", "logical_or", "logical_xor", "bitwise_not", "bitwise_and", "bitwise_or",
    "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "atan2", "xlogy", "maximum", "minimum",
    "fmax", "fmin", "hypot", "logaddexp", "logaddexp2", "copysign", "heaviside", "where",
)

# Special functions: pointwise too, but series/recurrences a lowering may keep extern.
_SPECIAL = tuple(op.name for op in registry.values() if op.name.startswith("special_") and op.category != COMPOSITE)

# Reductions the loop IR reduces itself (sum, max, argmax, norms...).
_REDUCTIONS = ("sum", "prod", "amax", "amin", "argmax", "argmin", "all", "any", "linalg_vector_norm")

# Scans, order statistics, sorting, histograms: extern calls (no loop-IR form yet).
_ORDER_AND_SCANS = (
    "cumsum", "cumprod", "cummax", "cummin", "sort", "topk", "median", "nanmedian", "mode", "quantile",
    "nanquantile", "searchsorted", "bincount", "histc", "histogram",
)

# Outputs whose shape depends on the values: extern calls, the graph's shapes come from their result.
_DATA_DEPENDENT = ("nonzero", "unique", "unique_consecutive")

# Data movement: concatenation, padding, flipping, gathers and scatters (indexing loops).
_DATA_MOVEMENT = ("cat", "flip", "pad", "gather", "scatter", "scatter_add", "scatter_reduce", "index")

# Extern compute: BLAS, convolution and spatial kernels, whose eager kernels beat a generated loop.
_EXTERN_COMPUTE = (
    "matmul", "convolution", "im2col", "fold", "max_pool1d_with_indices", "max_pool2d_with_indices",
    "max_pool3d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d",
    "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d_with_indices",
    "adaptive_max_pool2d_with_indices", "adaptive_max_pool3d_with_indices", "lp_pool1d", "lp_pool2d",
    "lp_pool3d", "max_unpool1d", "max_unpool2d", "max_unpool3d", "interpolate", "grid_sample", "affine_grid",
    "_sparse_mm",  # sparse @ dense with a sparse graph input (ember.sparse._graph): never lowered to loops
)

# FFT prims: extern (pocketfft/cuFFT).
_FFT = ("_fft_c2c", "_fft_r2c", "_fft_c2r", "_stft_frames", "_stft_frames_backward")

# Dense linear algebra prims: extern (LAPACK/cuSOLVER).
_LINALG = tuple(
    op.name for op in registry.values() if "linalg" in op.tags and op.category != COMPOSITE
    and op.name != "linalg_vector_norm"
) + ("_standard_gamma_grad",)

# Random prims: extern draws from the eager generator (never recomputed, see partitioners.is_random).
_RANDOM = (
    "rand", "randn", "randint", "randperm", "normal", "bernoulli", "multinomial", "_standard_gamma", "poisson",
    "binomial",
)

# Ops returning Python values (bools): extern; a capturing frontend usually breaks the graph before them.
_PYTHON_VALUES = ("allclose", "equal")

#: Composite ops kept whole, by name, with the reason (they reach lowering as they are).
KEEP_WHOLE: dict[str, str] = {
    # Their decompositions write into a fresh buffer with index_put_/copy_: a functional graph
    # cannot hold that, and the op itself is one scatter/gather the lowering handles (or externs).
    "index_put": "decomposes to clone + index_put_ (a mutation); one functional scatter instead",
    "index_add": "decomposes to clone + index_put_ (a mutation); one functional scatter instead",
    "index_copy": "decomposes to clone + index_put_ (a mutation); one functional scatter instead",
    "index_fill": "decomposes to clone + index_put_ (a mutation); one functional scatter instead",
    "masked_scatter": "decomposes to clone + index_put_ with a data-dependent index; extern",
    "put": "decomposes to clone + index_put_ (a mutation); one functional scatter instead",
    "embedding_bag": "decomposes to index_put_ into a fresh buffer; extern (one pass over the bags)",
    "diag": "decomposes to copy_ into a slice of a fresh buffer; one functional op instead",
    "diag_embed": "decomposes to copy_ into a slice of a fresh buffer; one functional op instead",
    "diagflat": "decomposes to copy_ into a slice of a fresh buffer; one functional op instead",
    "block_diag": "decomposes to copy_ into slices of a fresh buffer; one functional op instead",
    # Python loops in their decompositions: O(length) graph nodes; one extern call is smaller and faster.
    "ctc_loss": "its decomposition loops over time steps in Python (hundreds of nodes); extern",
    "linalg_householder_product": "loops over reflectors with in-place writes; extern (LAPACK orgqr)",
    "orgqr": "loops over reflectors with in-place writes; extern (LAPACK orgqr)",
    # Eager autograd differentiates these as functions of the whole factor matrix, their decompositions
    # (triangular solves) read one triangle only: the grads of the other triangle would differ.
    "cholesky_solve": "eager grads treat the factor as a full matrix; the decomposition reads one triangle",
    "cholesky_inverse": "eager grads treat the factor as a full matrix; the decomposition reads one triangle",
    # Its decomposition checks the LU factors' values (singular input -> LinAlgError), which a
    # trace over meta tensors cannot do: the op stays whole and runs as one LAPACK call.
    "linalg_solve": "its decomposition reads the LU factors' values to raise LinAlgError; extern",
    # Attention: one extern call that never materialises the (L, S) score matrix in the caller's graph.
    "scaled_dot_product_attention": "one fused extern kernel; decomposing materialises the score matrix",
}

# Composites the table decomposes with our own functional decomposition (see OVERRIDES below).
_OVERRIDDEN = ("masked_fill", "tril", "triu")

#: The closed core set: every op name that may reach the lowering (loop IR or extern call).
CORE_OPS: frozenset[str] = frozenset(
    _FACTORIES + _COPIES + _VIEWS + _POINTWISE + _SPECIAL + _REDUCTIONS + _ORDER_AND_SCANS + _DATA_DEPENDENT
    + _DATA_MOVEMENT + _EXTERN_COMPUTE + _FFT + _LINALG + _RANDOM + _PYTHON_VALUES + tuple(KEEP_WHOLE)
)


# -- decompositions of our own -----------------------------------------------------------------
# Each is a small function in ember ops, checked against the eager op on op_db's samples
# (tests/test_decompositions.py). Half-precision values are computed in float32 and rounded once
# at the end, as the eager kernels do, so the chain of prims rounds like the fused op.

_HALF = (ember.float16, ember.bfloat16)


def _work(t):
    """``t`` in the dtype the arithmetic runs in (float32 for half types)."""
    return t.to(ember.float32) if t.dtype in _HALF else t


def _sigmoid(input):
    """``1 / (1 + exp(-x))``; integer and bool inputs promote to the default float dtype first."""
    dtype = input.dtype
    if not (dtype.is_floating_point or dtype.is_complex):
        dtype = ember.get_default_dtype()
        input = input.to(dtype)
    x = _work(input)
    return ember.reciprocal(ember.add(ember.exp(ember.neg(x)), 1)).to(dtype)


def _tanh_backward(grad_output, output):
    """``grad * conj(1 - y*y)``: the derivative of tanh from its output ``y``."""
    dtype = grad_output.dtype
    y = _work(output)
    factor = ember.sub(1, ember.mul(y, y))
    if factor.dtype.is_complex:
        factor = ember.conj_physical(factor)
    return ember.mul(_work(grad_output), factor).to(dtype)


def _sigmoid_backward(grad_output, output):
    """``grad * conj(y * (1 - y))``: the derivative of sigmoid from its output ``y``."""
    dtype = grad_output.dtype
    y = _work(output)
    factor = ember.mul(y, ember.sub(1, y))
    if factor.dtype.is_complex:
        factor = ember.conj_physical(factor)
    return ember.mul(_work(grad_output), factor).to(dtype)


def _threshold_backward(grad_output, self, threshold):
    """``where(self <= threshold, 0, grad)`` in the promoted dtype: relu/threshold's backward as a select."""
    dtype = result_type_of((grad_output, self))
    zero = ember.zeros((), dtype=dtype)
    return ember.where(ember.le(self, threshold), zero, grad_output.to(dtype))


def _addc_value(value, dtype):
    """``value`` as the eager kernel uses it: truncated for integer results."""
    if not (dtype.is_floating_point or dtype.is_complex):
        return int(value)
    return value


def _addcmul(input, tensor1, tensor2, *, value=1):
    """``input + (value * tensor1) * tensor2`` in the promoted dtype."""
    dtype = result_type_of((input, tensor1, tensor2))
    a, b, c = (_work(t.to(dtype)) for t in (input, tensor1, tensor2))
    product = ember.mul(ember.mul(b, _addc_value(value, dtype)), c)
    return ember.add(a, product).to(dtype)


def _addcdiv(input, tensor1, tensor2, *, value=1):
    """``input + value * (tensor1 / tensor2)`` in the promoted dtype."""
    dtype = result_type_of((input, tensor1, tensor2))
    a, b, c = (_work(t.to(dtype)) for t in (input, tensor1, tensor2))
    return ember.add(a, ember.mul(ember.div(b, c), _addc_value(value, dtype))).to(dtype)


def _lerp(input, end, weight):
    """Linear interpolation with two formulas, each exact at its end (weight 0 or 1)::

        |w| < 0.5:  start + w * (end - start)
        otherwise:  end - (end - start) * (1 - w)
    """
    dtype = input.dtype
    start, stop = _work(input), _work(end)
    w = _work(weight) if isinstance(weight, ember.Tensor) else weight
    diff = ember.sub(stop, start)
    low = ember.add(start, ember.mul(diff, w))
    high = ember.sub(stop, ember.mul(diff, ember.sub(1, w) if isinstance(w, ember.Tensor) else 1 - w))
    if not isinstance(w, ember.Tensor):
        return (low if abs(w) < 0.5 else high).to(dtype)
    return ember.where(ember.lt(ember.abs(w), 0.5), low, high).to(dtype)


def _bound(value, dtype):
    """A clamp bound as a tensor of the result dtype (a 0-dim one for a number)."""
    if isinstance(value, ember.Tensor):
        return value.to(dtype)
    return ember.scalar_tensor(value, dtype=dtype)


def _clamp(input, min=None, max=None):  # noqa: A002 - PyTorch's argument names
    """``minimum(max, maximum(min, x))`` in the promoted dtype (NaN propagates; min > max gives max).

    The bound comes first: ``maximum``/``minimum`` return their second argument on a tie, and eager
    clamp keeps ``x`` there (``clamp(-0.0, 0, 6)`` is ``-0.0``)."""
    dtype = result_type_of((input, min, max))
    x = input.to(dtype)
    if min is not None:
        x = ember.maximum(_bound(min, dtype), x)
    if max is not None:
        x = ember.minimum(_bound(max, dtype), x)
    return x


def _reduced_dims(input, dim):
    """The sorted non-negative dims ``dim`` names (all of them for None or ``[]``) and their element count."""
    ndim = input.dim()
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        dims = list(range(ndim))
    else:
        dims = sorted({d % max(ndim, 1) for d in ((dim,) if isinstance(dim, int) else dim)})
    count = 1
    for d in dims:
        count *= input.shape[d] if ndim else 1
    return dims, count


def _moments_dtype(x):
    """The dtype :func:`_moments` sums in: float64 on the cpu; on a GPU float32 for float32 and narrower
    inputs (float64 arithmetic and registers halve a GPU kernel's throughput - the (8192, 8192)
    layer_norm ran 6x slower than PyTorch's - and PyTorch's cuda kernels accumulate in float32 too)."""
    if traced_device().type != "cpu" and x.dtype != ember.float64:
        return ember.float32
    return ember.float64


def _moments(x, dims, count):
    """``(mean, m2)`` of real ``x`` over ``dims`` (kept, as size-1 dims), in one pass.

    ``m2`` is the sum of squared deviations from the mean. Both come from one reading of ``x``: the
    sums of ``d = x - k`` and ``d * d`` in the dtype of :func:`_moments_dtype` (float64 on the cpu),
    with ``k`` the first element of each reduced slice (shifting by a value of the data keeps the
    cancellation in ``sum(d*d) - sum(d)^2 / n`` small: its relative error is about
    ``eps * (1 + (k - mean)^2 / var)``, so in float64 mean 1e4 with std 1e-2 loses nothing float32
    can show, and in float32 a first element within a few standard deviations of the mean costs a few
    ulps). The two sums are sibling reductions the C++ runs in one loop; the two-pass form (mean, then
    ``sum((x - mean)^2)``) reads ``x`` twice.
    """
    acc = _moments_dtype(x)
    shift = x
    for d in dims:
        shift = ember.narrow(shift, d, 0, 1)
    shift = shift.to(acc)
    diff = ember.sub(x.to(acc), shift)
    s1 = ember.sum(diff, dims, True)
    s2 = ember.sum(ember.mul(diff, diff), dims, True)
    mean = ember.add(shift, ember.div(s1, count))
    m2 = ember.sub(s2, ember.div(ember.mul(s1, s1), count))
    return mean, ember.maximum(m2, ember.zeros((), dtype=acc))  # rounding can leave it just below 0


def _var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``sum(|x - mean|^2) / (N - correction)``: for real inputs the one pass of :func:`_moments`
    (sums of the shifted values and their squares, fused into one loop); complex inputs (and
    empty reductions) take the two-pass form."""
    if isinstance(dim, bool):  # the var(input, unbiased) overload
        dim, unbiased = None, dim
    if correction is None:
        correction = 0 if unbiased is False else 1
    dims, count = _reduced_dims(input, dim)
    dtype = input.dtype
    x = _work(input)
    if not dtype.is_complex and count > 0:
        _, m2 = _moments(x, dims, count)
        if not keepdim and dims and input.dim():
            m2 = ember.squeeze(m2, dims)
        return ember.div(m2, max(count - correction, 0)).to(dtype)
    mean = ember.div(ember.sum(x, dims, True), count)
    diff = ember.sub(x, mean)
    if diff.dtype.is_complex:
        parts = ember.view_as_real(diff)
        squares = ember.sum(ember.mul(parts, parts), [-1])
        dtype = ember.real(ember.empty((), dtype=dtype)).dtype
    else:
        squares = ember.mul(diff, diff)
    total = ember.sum(squares, dims, keepdim)
    return ember.div(total, max(count - correction, 0)).to(dtype)


def _var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``(var, mean)`` from the one pass of :func:`_moments` for real inputs (the registry's decomposition
    reduces ``x`` twice: its ``var``, then its ``mean``). layer_norm's backward formula recomputes both
    statistics with ``var_mean``, so a compiled backward reads the activation once for them."""
    if isinstance(dim, bool):  # the var_mean(input, unbiased) overload
        dim, unbiased = None, dim
    dims, count = _reduced_dims(input, dim)
    if input.dtype.is_complex or count == 0 or not input.dtype.is_floating_point:
        return registry["var_mean"].decomposition(input, dim, unbiased, keepdim, correction=correction)
    if correction is None:
        correction = 0 if unbiased is False else 1
    dtype = input.dtype
    mean, m2 = _moments(_work(input), dims, count)
    if not keepdim and dims and input.dim():
        mean, m2 = ember.squeeze(mean, dims), ember.squeeze(m2, dims)
    return ember.div(m2, max(count - correction, 0)).to(dtype), mean.to(dtype)


def _layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05):
    """``(x - mean) * rsqrt(var + eps) * weight + bias`` with the mean and the variance from one pass
    (:func:`_moments`; the registry's decomposition computes the mean, then the variance, which
    computes the mean again and reads ``x`` a second time)."""
    dims = list(range(input.dim() - len(normalized_shape), input.dim()))
    count = 1
    for d in dims:
        count *= input.shape[d]
    if count == 0 or input.dtype.is_complex:
        return registry["layer_norm"].decomposition(input, normalized_shape, weight, bias, eps)
    x = _work(input)
    mean, m2 = _moments(x, dims, count)
    rstd = ember.rsqrt(ember.add(ember.div(m2, count), eps)).to(x.dtype)
    out = ember.mul(ember.sub(x, mean.to(x.dtype)), rstd)
    if weight is not None:
        out = ember.mul(out, weight)
    if bias is not None:
        out = ember.add(out, bias)
    return out.to(input.dtype)


def _masked_fill(input, mask, value):
    """``where(mask, value, input)`` in ``input``'s dtype (no clone, no in-place write)."""
    fill = value.to(input.dtype) if isinstance(value, ember.Tensor) else ember.scalar_tensor(value, dtype=input.dtype)
    return ember.where(mask, fill, input)


def _triangle_keep(input, diagonal, lower):
    """The bool mask of the kept triangle of the last two dims: ``col - row <= diagonal`` (lower)."""
    rows, cols = input.shape[-2], input.shape[-1]
    row = ember.unsqueeze(ember.arange(rows), -1)
    col = ember.arange(cols)
    offset = ember.sub(col, row)
    return ember.le(offset, diagonal) if lower else ember.ge(offset, diagonal)


def _tril(input, diagonal=0):
    """``where(col - row <= diagonal, x, 0)``: a pointwise select the compiler fuses."""
    zero = ember.zeros((), dtype=input.dtype)
    return ember.where(_triangle_keep(input, diagonal, True), input, zero)


def _triu(input, diagonal=0):
    """``where(col - row >= diagonal, x, 0)``."""
    zero = ember.zeros((), dtype=input.dtype)
    return ember.where(_triangle_keep(input, diagonal, False), input, zero)


#: Prims split into simpler prims where that helps fusion, by op name.
PRIM_DECOMPOSITIONS: dict[str, callable] = {
    "sigmoid": _sigmoid,
    "tanh_backward": _tanh_backward,
    "sigmoid_backward": _sigmoid_backward,
    "threshold_backward": _threshold_backward,
    "addcmul": _addcmul,
    "addcdiv": _addcdiv,
    "lerp": _lerp,
    "clamp": _clamp,
    "var": _var,
}

#: Composites decomposed with our own function instead of the registry's, by op name.
OVERRIDES: dict[str, callable] = {
    "layer_norm": _layer_norm,
    "var_mean": _var_mean,
    "masked_fill": _masked_fill,
    "tril": _tril,
    "triu": _triu,
}


# -- the table ---------------------------------------------------------------------------------


def _as_op(op):
    if isinstance(op, Op):
        return op
    if isinstance(op, str) and op in registry:
        return registry[op]
    raise TypeError(f"expected a registry Op or an op name, got {op!r}")


def _checked(op, decomposition):
    """``decomposition`` preceded by ``op``'s meta function, so a traced call raises the errors the
    eager op raises (a tracer calls table entries directly, where the dispatcher would check first)."""
    if op.decomposition_checks and decomposition is op.decomposition:
        return decomposition  # the registry's decomposition raises them itself

    @functools.wraps(decomposition)
    def checked(*args, **kwargs):
        op.meta(*args, **kwargs)
        return decomposition(*args, **kwargs)

    return checked


@functools.lru_cache(maxsize=1)
def _table():
    table = {}
    for op in registry.values():
        if op.name in OVERRIDES:
            table[op] = _checked(op, OVERRIDES[op.name])
        elif op.category == COMPOSITE and op.name not in KEEP_WHOLE:
            table[op] = _checked(op, op.decomposition)
        elif op.name in PRIM_DECOMPOSITIONS:
            table[op] = _checked(op, PRIM_DECOMPOSITIONS[op.name])
    return table


def inductor_decompositions():
    """The decomposition table the compiler traces with.

    Returns:
        dict[Op, callable]: registry op -> a function in ember ops with the op's signature.
        A fresh dict each call (callers may add or remove entries).

    Example:
        >>> import ember
        >>> from ember._inductor.aot.decompositions import inductor_decompositions
        >>> table = inductor_decompositions()
        >>> ember._ops.registry["gelu"] in table, ember._ops.registry["matmul"] in table
        (True, False)
    """
    return dict(_table())


def get_decompositions(ops):
    """The entries of :func:`inductor_decompositions` for ``ops``.

    Args:
        ops (Iterable[Op or str]): registry ops (or their names).

    Returns:
        dict[Op, callable]: the entries found; ops the table keeps whole are left out.

    Raises:
        TypeError: for something that is neither an ``Op`` nor a registry op name.
    """
    table = _table()
    result = {}
    for op in ops:
        op = _as_op(op)
        if op in table:
            result[op] = table[op]
    return result


def reaches_lowering(op):
    """Whether ``op`` reaches the compiler undecomposed (else the table decomposes it).

    Args:
        op (Op or str): a registry op or its name.

    Returns:
        bool: True when ``op`` is not decomposed and is in :data:`CORE_OPS`.

    Raises:
        TypeError: for something that is neither an ``Op`` nor a registry op name.
    """
    op = _as_op(op)
    return op not in _table() and op.name in CORE_OPS
