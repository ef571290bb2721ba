"""The forward-mode (jvp) rule table, keyed by the registry's ops, beside the derivative table.

A rule ``rule(op, primals, tangents, result)`` gets the call's arguments normalised to the op's
signature twice: ``primals`` (plain values) and ``tangents`` (for each argument, its tangent or
None), plus the op's ``result`` on the primals, and returns the result's tangent. Groups:

* **linear** ops (views, shape ops, ``add``, ``cat``, ``sum``, ``where``, indexing, pooling that
  averages, casts): the tangent is the op applied to the tangents (zeros for arguments without one);
* **bilinear** ops (``mul``, ``matmul``, ``convolution``): the product rule;
* **elementwise** functions with their derivative written out (``exp``, ``sin``, ``tanh``, ...);
* **selections** (``sort``, ``topk``, ``cummax``, max pooling, ``amax``, ``maximum``, ``clamp``):
  the tangent gathered at the chosen elements (split evenly among ties for ``amax``/``maximum``);
* **piecewise constant** functions (``floor``, ``sign``, ...): a zero tangent;
* a few **reductions** and binary functions with their derivatives written out (``var``, vector
  norms of every order, ``atan2``, ``lerp``, ``addcmul``, ...), and some that reuse their backward
  formula with the tangent in place of the gradient where that is exact (``float_power``,
  ``xlog1py``, ``multigammaln``, ``zeta``/``gammainc`` in their second argument);
* **linear algebra** (factorisations, solvers, ``det``, ``matrix_exp``) and ``cumprod``: the
  matrix-calculus pushforwards in :mod:`ember.autograd._jvp_linalg`, registered from here.

A rule may return :data:`FALLBACK` for a call it does not cover (complex values, a tangent on an
argument it treats as constant); that call then takes the double-vjp path.

Ops without a rule (:mod:`ember.autograd.forward_ad`): a composite op runs its decomposition on the
dual tensors; any other op that has a derivative in :mod:`ember.autograd._table` gets its tangent
from the backward formulas by the double-vjp identity (exact: ``u -> J^T u`` is linear, and its vjp
with cotangent ``t`` is ``J t``); ops without derivatives give outputs without tangents.
"""

from __future__ import annotations

import math

import ember
from ember._ops._registry import registry
from ember._tensor import Tensor

from . import _jvp_linalg

__all__ = ["JVP_RULES", "register_jvp", "FALLBACK"]

#: returned by a rule for a call it does not cover (a complex input, a tangent on a bound): the op's
#: tangent then comes from the double-vjp identity, counted in :func:`ember.func.debug.jvp_fallbacks`
FALLBACK = object()

#: op -> jvp rule
JVP_RULES: dict = {}


def register_jvp(names, rule):
    """Register ``rule`` for the ops named in ``names``.

    Raises:
        ValueError: no such op, or the op already has a rule.
    """
    for name in names:
        op = registry.get(name)
        if op is None:
            raise ValueError(f"no op named {name!r} to register a jvp rule for")
        if op in JVP_RULES:
            raise ValueError(f"op {name} already has a jvp rule")
        JVP_RULES[op] = rule


def _differentiable(value):
    return isinstance(value, Tensor) and (value.is_floating_point() or value.is_complex())


def _tangent_or_zero(primal, tangent):
    if tangent is not None:
        return tangent
    if _differentiable(primal):
        return ember.zeros_like(primal)
    return primal


def _map_args(primals, tangents, fn):
    """Apply ``fn(primal, tangent)`` to each argument, looking inside lists and tuples (cat's tensors)."""
    out = []
    for p, t in zip(primals, tangents):
        if isinstance(p, (list, tuple)) and not isinstance(p, Tensor):
            ts = t if isinstance(t, (list, tuple)) else [None] * len(p)
            out.append(type(p)(fn(a, b) for a, b in zip(p, ts)))
        else:
            out.append(fn(p, t))
    return out


def _linear(op, primals, tangents, result):
    """Ops linear in their differentiable tensor arguments: the op of the tangents."""
    args, kwargs = primals
    targs, tkwargs = tangents
    new_args = _map_args(args, targs, _tangent_or_zero)
    new_kwargs = {k: _tangent_or_zero(v, tkwargs.get(k)) for k, v in kwargs.items()}
    return op(*new_args, **new_kwargs)


def _linear_first(op, primals, tangents, result):
    """Ops linear in their first argument only (the others are indices or sizes)."""
    args, kwargs = primals
    return op(tangents[0][0], *args[1:], **kwargs)


def _pad(op, primals, tangents, result):
    args, kwargs = primals
    mode = args[2] if len(args) > 2 else "constant"
    rest = list(args[1:])
    if mode == "constant" and len(rest) > 2:
        rest[2] = 0.0  # the padding value is constant: its tangent is zero
    return op(tangents[0][0], *rest, **kwargs)


def _to_copy(op, primals, tangents, result):
    args, kwargs = primals
    dtype = kwargs.get("dtype")
    t = tangents[0][0]
    if dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
        return None
    return op(t, **kwargs)


def _add_sub(op, primals, tangents, result):
    """``x + alpha * y`` (or minus): constants, numbers among them, have no tangent."""
    args, kwargs = primals
    tx, ty = tangents[0][0], tangents[0][1]
    alpha = kwargs.get("alpha", 1)
    if ty is not None:
        ty = ty * alpha if alpha != 1 else ty
        if op.name == "sub":
            ty = -ty
    if tx is None:
        return _fresh(ty, result) if ty is not None else None
    return _fresh(tx, result) if ty is None else tx + ty


def _fresh(tangent, result):
    """An input's tangent as the tangent of a new result: a copy in ``result``'s shape, never the input's own
    memory, which an in-place op on the result would otherwise write through (``b = a + 1; b.mul_(2)``)."""
    return tangent.expand_as(result).clone()


def _where(op, primals, tangents, result):
    args, _ = primals
    cond = args[0]
    tx = _tangent_or_zero(args[1], tangents[0][1]) if isinstance(args[1], Tensor) else None
    ty = _tangent_or_zero(args[2], tangents[0][2]) if isinstance(args[2], Tensor) else None
    zero = ember.zeros_like(result)
    return ember.where(cond, zero if tx is None else tx, zero if ty is None else ty)


def _mul(op, primals, tangents, result):
    x, y = primals[0][0], primals[0][1]
    tx, ty = tangents[0][0], tangents[0][1]
    out = None
    if tx is not None:
        out = tx * y
    if ty is not None:
        out = x * ty if out is None else out + x * ty
    return out


def _div(op, primals, tangents, result):
    args, kwargs = primals
    if kwargs.get("rounding_mode") is not None:
        return ember.zeros_like(result)
    y = args[1]
    tx, ty = tangents[0][0], tangents[0][1]
    out = None
    if tx is not None:
        out = tx / y
    if ty is not None:
        term = -ty * result / y
        out = term if out is None else out + term
    return out


def _matmul_like(op, primals, tangents, result):
    """Bilinear products: ``op(tx, y) + op(x, ty)``."""
    args, kwargs = primals
    x, y = args[0], args[1]
    tx, ty = tangents[0][0], tangents[0][1]
    out = None
    if tx is not None:
        out = op(tx, y, *args[2:], **kwargs)
    if ty is not None:
        term = op(x, ty, *args[2:], **kwargs)
        out = term if out is None else out + term
    return out


def _convolution(op, primals, tangents, result):
    args, kwargs = primals
    x, w = args[0], args[1]
    tx, tw, tb = tangents[0][0], tangents[0][1], tangents[0][2]
    rest = args[3:]
    out = None
    if tx is not None:
        out = op(tx, w, None, *rest)
    if tw is not None:
        term = op(x, tw, None, *rest)
        out = term if out is None else out + term
    if tb is not None:
        term = tb.reshape(-1, *([1] * (result.ndim - 2)))
        out = term.expand_as(result) if out is None else out + term
    return out


def _pow(op, primals, tangents, result):
    args, _ = primals
    x, y = args[0], args[1]
    tx, ty = tangents[0][0], tangents[0][1]
    out = None
    if tx is not None:
        if isinstance(y, Tensor):
            out = tx * y * ember.where(y == 0, ember.ones_like(result), x ** (y - 1))
        else:
            out = tx * (y * x ** (y - 1)) if y != 0 else ember.zeros_like(result)
    if ty is not None:
        base = x if isinstance(x, Tensor) else ember.full_like(result, x)
        term = ty * result * base.log()
        out = term if out is None else out + term
    return out


def _unary(derivative):
    """Elementwise ``f``: tangent ``t * f'(x)``, with ``derivative(x, result)``."""

    def rule(op, primals, tangents, result):
        t = tangents[0][0]
        if t is None:
            return None
        return t * derivative(primals[0][0], result)

    return rule


_LN2, _LN10 = math.log(2.0), math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

_UNARY = {
    "exp": lambda x, r: r,
    "exp2": lambda x, r: r * _LN2,
    "expm1": lambda x, r: r + 1,
    "log": lambda x, r: 1 / x,
    "log2": lambda x, r: 1 / (x * _LN2),
    "log10": lambda x, r: 1 / (x * _LN10),
    "log1p": lambda x, r: 1 / (1 + x),
    "sin": lambda x, r: x.cos(),
    "cos": lambda x, r: -x.sin(),
    "tan": lambda x, r: 1 + r * r,
    "sinh": lambda x, r: x.cosh(),
    "cosh": lambda x, r: x.sinh(),
    "tanh": lambda x, r: 1 - r * r,
    "sigmoid": lambda x, r: r * (1 - r),
    "sqrt": lambda x, r: 0.5 / r,
    "rsqrt": lambda x, r: -0.5 * r * r * r,
    "reciprocal": lambda x, r: -r * r,
    "square": lambda x, r: 2 * x,
    "erf": lambda x, r: _TWO_OVER_SQRT_PI * (-(x * x)).exp(),
    "atan": lambda x, r: 1 / (1 + x * x),
    "asin": lambda x, r: (1 - x * x).rsqrt(),
    "acos": lambda x, r: -(1 - x * x).rsqrt(),
}


# ---------------------------------------------------------------------------------------------------
# rules added for the ops that took the double-vjp path (each costs two backward passes there)


def _zero(op, primals, tangents, result):
    """Piecewise constant functions: the tangent is zero (where it exists)."""
    first = result[0] if isinstance(result, tuple) else result
    return ember.zeros_like(first) if _differentiable(first) else None


def _real_only(rule):
    """``rule`` for real inputs; complex ones take the double-vjp path."""

    def wrapped(op, primals, tangents, result):
        if any(isinstance(v, Tensor) and v.is_complex() for v in primals[0]):
            return FALLBACK
        return rule(op, primals, tangents, result)

    return wrapped


def _gather_along(op, primals, tangents, result):
    """``(values, indices)`` results along ``dim`` (sort, topk, cummax, median/mode over a dim)."""
    args, kwargs = primals
    t = tangents[0][0]
    if t is not None and not isinstance(result, tuple) and op.name in ("median", "nanmedian"):
        return _evenly_shared(args[0], t, result)
    if t is None or not isinstance(result, tuple):
        return FALLBACK if t is not None else None
    indices = result[1]
    dim = {"topk": 2}.get(op.name, 1)
    dim = args[dim] if len(args) > dim else -1
    if dim is None:
        return FALLBACK
    if t.ndim == 0:
        return t.clone(), None
    if indices.ndim < t.ndim:  # a reduction without keepdim
        out = t.gather(dim, indices.unsqueeze(dim)).squeeze(dim)
    else:
        out = t.gather(dim, indices)
    return out, None


def _evenly_shared(x, t, value):
    """A full reduction that picks ``value`` (``median()``): the mean tangent of its copies (of the NaNs for a
    NaN value), as the backward splits the gradient evenly among them."""
    mask = (x == value) | (x.isnan() & value.isnan())
    return ember.where(mask, t, ember.zeros_like(t)).sum() / mask.sum().to(t.dtype)


def _max_pool_with_indices(op, primals, tangents, result):
    """Max pooling: the indices count positions in each (N, C) plane of the input."""
    t = tangents[0][0]
    out, indices = result
    spatial = int(op.name.split("max_pool")[1][0])
    planes = t.flatten(t.ndim - spatial)
    picked = planes.gather(-1, indices.flatten(indices.ndim - spatial))
    return picked.reshape(out.shape), None


def _reduced_dims(dim, ndim):
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return list(range(ndim))
    dims = [dim] if isinstance(dim, int) else list(dim)
    return sorted(d % max(ndim, 1) for d in dims)


def _keep(result, dims, ndim, keepdim):
    if keepdim or ndim == 0:
        return result
    for d in dims:
        result = result.unsqueeze(d)
    return result


def _amax_amin(op, primals, tangents, result):
    """The tangent averaged over the elements that attain the extreme (ties split evenly, as the backward does)."""
    args, _ = primals
    x, dim, keepdim = args[0], args[1], args[2]
    t = tangents[0][0]
    dims = _reduced_dims(dim, x.ndim)
    mask = (x == _keep(result, dims, x.ndim, keepdim)).to(t.dtype)
    if x.ndim == 0:
        return t.clone()
    return (t * mask).sum(dims, keepdim=keepdim) / mask.sum(dims, keepdim=keepdim)


def _maximum_minimum(op, primals, tangents, result):
    """``maximum``/``fmax`` and friends: the chosen argument's tangent, the mean of both at ties."""
    x, y = primals[0][0], primals[0][1]
    tx, ty = tangents[0][0], tangents[0][1]
    px = (x == result).to(result.dtype) if isinstance(x, Tensor) else None
    py = (y == result).to(result.dtype) if isinstance(y, Tensor) else None
    if px is not None and py is not None:
        share = px + py
        share = ember.where(share == 0, ember.ones_like(share), share)
        px, py = px / share, py / share
    out = ember.zeros_like(result)
    if tx is not None:
        out = out + tx * px
    if ty is not None:
        out = out + ty * py
    return out


def _clamp(op, primals, tangents, result):
    args, _ = primals
    x, lo, hi = args[0], args[1], args[2]
    if any(t is not None for t in tangents[0][1:3]):
        return FALLBACK  # a tangent on a bound
    t = tangents[0][0]
    inside = ember.ones_like(result, dtype=ember.bool)
    if lo is not None:
        inside = inside & (x >= lo)
    if hi is not None:
        inside = inside & (x <= hi)
    return t * inside.to(t.dtype)


def _var(op, primals, tangents, result):
    """``2 * sum((x - mean) * t) / (N - correction)`` over the reduced dims."""
    args, kwargs = primals
    x, dim, unbiased, keepdim = args[0], args[1], args[2], args[3]
    correction = kwargs.get("correction")
    if correction is None:
        correction = 0 if unbiased is False else 1
    dims = _reduced_dims(dim, x.ndim)
    t = tangents[0][0]
    if x.ndim == 0:
        return ember.zeros_like(result)
    centred = x - x.mean(dims, keepdim=True)
    n = math.prod(x.shape[d] for d in dims)
    return (centred * t).sum(dims, keepdim=keepdim) * (2.0 / max(n - correction, 0))


def _vector_norm(op, primals, tangents, result):
    """``d ||x||_p = sum_i w_i Re(conj(sgn x_i) t_i)``, the weights of the backward formula: ``|x_i|^(p-1) /
    ||x||^(p-1)`` (``x_i / ||x||`` for p = 2, 1 for p = 1, the ties split evenly for +-inf, none for p = 0), zero
    where the norm is zero (and at zero entries for p < 1), as the backward has it."""
    args, kwargs = primals
    x, order, dim, keepdim = args[0], args[1], args[2], args[3]
    t = tangents[0][0]
    dtype = kwargs.get("dtype")
    if dtype is not None and dtype != x.dtype:
        x, t = x.to(dtype), t.to(dtype)
    if order == 0:
        return ember.zeros_like(result)
    dims = _reduced_dims(dim, x.ndim)
    norm = _keep(result, dims, x.ndim, keepdim)
    along = (x.conj() * t).real if x.is_complex() else x * t  # Re(conj(x) t) = |x| Re(conj(sgn x) t)
    magnitude = x.abs()
    safe_magnitude = ember.where(magnitude == 0, ember.ones_like(magnitude), magnitude)
    zero_norm = norm == 0
    safe_norm = ember.where(zero_norm, ember.ones_like(norm), norm)
    if order == 2:
        change = along / safe_norm
    elif math.isinf(order):
        hits = (magnitude == norm).to(magnitude.dtype)
        change = along / safe_magnitude * hits / hits.sum(dims, keepdim=True)
    elif order == 1:
        change = along / safe_magnitude
    else:
        weight = magnitude.pow(order - 1) / safe_norm.pow(order - 1)
        change = ember.where((magnitude == 0) & (order < 1), ember.zeros_like(weight), along / safe_magnitude * weight)
    if order != 1 and not math.isinf(order):
        change = ember.where(zero_norm, ember.zeros_like(change), change)
    return change.sum(dims, keepdim=keepdim) if x.ndim else change


def _scatter(op, primals, tangents, result):
    args, kwargs = primals
    if kwargs.get("reduce") is not None:
        return FALLBACK
    x, dim, index, src = args[0], args[1], args[2], args[3]
    tx = _tangent_or_zero(x, tangents[0][0])
    if isinstance(src, Tensor):
        return op(tx, dim, index, _tangent_or_zero(src, tangents[0][3]))
    return op(tx, dim, index, value=0.0)


def _scatter_reduce(op, primals, tangents, result):
    """``sum``/``mean``: linear, the same reduction of the tangents; ``amax``/``amin``: the mean tangent of the
    values equal to the result (the backward's even split among ties); ``prod`` takes the double-vjp path."""
    (x, dim, index, src, reduce), kwargs = primals
    include_self = kwargs.get("include_self", True)
    tx = _tangent_or_zero(x, tangents[0][0])
    ts = _tangent_or_zero(src, tangents[0][3])
    if reduce in ("sum", "mean"):
        return op(tx, dim, index, ts, reduce, include_self=include_self)
    if reduce not in ("amax", "amin"):
        return FALLBACK
    input_hits = (x == result).to(result.dtype)
    src_hits = (src == result.gather(dim, index)).to(result.dtype)
    ties = input_hits.scatter_add(dim, index, src_hits)
    if not include_self:  # the positions that received values do not read the input
        tx = tx.scatter(dim, index, 0.0)
    return (input_hits * tx).scatter_add(dim, index, src_hits * ts) / ties


def _scatter_add(op, primals, tangents, result):
    args, _ = primals
    x, dim, index, src = args
    return op(_tangent_or_zero(x, tangents[0][0]), dim, index, _tangent_or_zero(src, tangents[0][3]))


def _block_diag(op, primals, tangents, result):
    """Linear in every block; blocks without a tangent (integer ones among them) contribute zeros."""
    blocks = [ember.zeros_like(p, dtype=result.dtype) if t is None else t for p, t in zip(primals[0], tangents[0])]
    return op(*blocks)


def _grid_sample(op, primals, tangents, result):
    if tangents[0][1] is not None:
        return FALLBACK  # linear in the input only
    return _linear_first(op, primals, tangents, result)


def _sum_terms(*terms):
    out = None
    for term in terms:
        if term is not None:
            out = term if out is None else out + term
    return out


def _binary(dx, dy):
    """Elementwise ``f(x, y)``: ``tx * dx(x, y, r) + ty * dy(x, y, r)`` (real values)."""

    def rule(op, primals, tangents, result):
        x, y = primals[0][0], primals[0][1]
        if any(isinstance(v, Tensor) and v.is_complex() for v in (x, y)):
            return FALLBACK
        tx, ty = tangents[0][0], tangents[0][1]
        out = _sum_terms(None if tx is None else tx * dx(x, y, result),
                         None if ty is None else ty * dy(x, y, result))
        return None if out is None else out.expand_as(result)

    return rule


def _lerp(op, primals, tangents, result):
    x, end, weight = primals[0]
    tx, te, tw = tangents[0]
    out = _sum_terms(tx, None if te is None else te * weight, None if tx is None else -tx * weight,
                     None if tw is None else tw * (end - x))
    return out.expand_as(result)


def _addc(op, primals, tangents, result):
    (x, a, b), kwargs = primals
    (tx, ta, tb), value = tangents[0], kwargs.get("value", 1)
    if op.name == "addcmul":
        rest = _sum_terms(None if ta is None else ta * b, None if tb is None else a * tb)
    else:
        rest = _sum_terms(None if ta is None else ta / b, None if tb is None else -a * tb / (b * b))
    if rest is None:
        return _fresh(tx, result)
    out = _sum_terms(tx, rest * value)
    return out.expand_as(result)


def _polygamma(op, primals, tangents, result):
    n, x = primals[0][0], primals[0][1]
    t = tangents[0][1]
    return None if t is None else t * ember.polygamma(n + 1, x)


def _sigmoid_backward(op, primals, tangents, result):
    g, out = primals[0]
    tg, tout = tangents[0]
    return _sum_terms(None if tg is None else tg * out * (1 - out), None if tout is None else g * (1 - 2 * out) * tout)


def _tanh_backward(op, primals, tangents, result):
    g, out = primals[0]
    tg, tout = tangents[0]
    return _sum_terms(None if tg is None else tg * (1 - out * out), None if tout is None else -2 * g * out * tout)


def _threshold_backward(op, primals, tangents, result):
    g, x, threshold = primals[0]
    tg = tangents[0][0]
    return ember.zeros_like(result) if tg is None else op(tg, x, threshold)


def _solve_triangular(op, primals, tangents, result):
    """``A X = B``: ``dX = A^-1 (dB - dA X)`` (``X A = B`` on the right), ``dA`` cut to the triangle read."""
    (a, b), kwargs = primals
    ta, tb = tangents[0]
    upper, left, unit = kwargs["upper"], kwargs.get("left", True), kwargs.get("unitriangular", False)
    rhs = tb
    if ta is not None:
        ta = ta.triu() if upper else ta.tril()
        if unit:
            ta = ta - ember.diag_embed(ta.diagonal(0, -2, -1))
        term = -(ta @ result) if left else -(result @ ta)
        rhs = term if rhs is None else rhs + term
    return op(a, rhs.expand_as(result), upper=upper, left=left, unitriangular=unit)


def _solve_lu(op, primals, tangents, result):
    """``linalg.solve``'s prim: ``dX = A^-1 (dB - dA X)`` (``X A = B`` on the right) by the LU it returned."""
    (a, b), kwargs = primals
    ta, tb = tangents[0]
    left = kwargs.get("left", True)
    x, lu, pivots = result[0], result[1], result[2]
    vector = x.ndim == a.ndim - 1
    if vector:
        x = x.unsqueeze(-1) if left else x.unsqueeze(-2)
        tb = None if tb is None else (tb.unsqueeze(-1) if left else tb.unsqueeze(-2))
    rhs = tb
    if ta is not None:
        term = -(ta @ x) if left else -(x @ ta)
        rhs = term if rhs is None else rhs + term
    dx = registry["linalg_lu_solve"](lu, pivots, rhs.expand_as(x), left=left)
    if vector:
        dx = dx.squeeze(-1) if left else dx.squeeze(-2)
    return dx, None, None, None


def _prod(op, primals, tangents, result):
    """``sum_i t_i * prod_{j != i} x_j`` by exclusive prefix and suffix products: exact at zeros, no division."""
    args, kwargs = primals
    x, dim, keepdim = args[0], args[1], args[2]
    if kwargs.get("dtype") is not None:
        return FALLBACK
    t = tangents[0][0]
    if x.ndim == 0:
        return t.clone()
    if dim is None:
        x, t, d = x.reshape(-1), t.reshape(-1), 0
    else:
        d = dim % x.ndim
    n = x.shape[d]
    ones = ember.ones_like(x.narrow(d, 0, 1))
    before = ember.cat([ones, x.narrow(d, 0, n - 1)], d).cumprod(d)  # prod_{j < i}
    after = ember.cat([x.narrow(d, 1, n - 1), ones], d).flip(d).cumprod(d).flip(d)  # prod_{j > i}
    out = (t * (before * after)).sum(d, keepdim=keepdim and dim is not None)
    return out.reshape(result.shape)


def _logit(op, primals, tangents, result):
    """``t / (x (1 - x))`` inside the domain; outside NaN (no eps) or 0 (eps clamped the input), as the backward."""
    (x, eps), _ = primals
    if x.is_complex():
        return FALLBACK
    value = tangents[0][0] / (x * (1 - x))
    if eps is None:
        return ember.where((x >= 0) & (x <= 1), value, math.nan)
    return ember.where((x >= eps) & (x <= 1 - eps), value, 0.0)


def _xlogy(op, primals, tangents, result):
    """``tx log y + ty x / y``; the first term is 0 where ``x == 0`` and ``y <= 0`` (the backward's choice)."""
    (x, y), _ = primals
    tx, ty = tangents[0]
    if any(isinstance(v, Tensor) and v.is_complex() for v in (x, y)):
        return FALLBACK
    out = None
    if tx is not None:
        out = ember.where((x == 0) & (y <= 0), 0.0, ember.xlogy(tx, y))
    if ty is not None:
        out = _sum_terms(out, ty * x / y)
    return out.expand_as(result)


def _binary_from_backward(first, second, holomorphic=False):
    """Elementwise binary ops whose backward formulas ``first(g, x, y)``/``second(g, x, y)`` are ``g`` times the
    conjugated partial derivative: ``conj(first(conj(t), x, y))`` is the jvp, exact for real values and, when
    the op is ``holomorphic``, for complex ones (PyTorch's convention: the gradient is ``g * conj(f')``)."""

    def rule(op, primals, tangents, result):
        (x, y), _ = primals
        complex_values = result.is_complex() or any(isinstance(v, (Tensor, complex)) and
                                                    (not isinstance(v, Tensor) or v.is_complex()) for v in (x, y))
        if complex_values and not holomorphic:
            return FALLBACK

        def push(formula, t):
            t = t.to(result.dtype)
            return formula(t.conj(), x, y).conj() if result.is_complex() else formula(t, x, y)

        tx, ty = tangents[0]
        out = _sum_terms(None if tx is None else push(first, tx), None if ty is None else push(second, ty))
        return None if out is None else out.expand_as(result)

    return rule


def _sgn(op, primals, tangents, result):
    """Real: ``sign``, zero tangent. Complex ``z / |z|``: ``(t - sgn Re(conj(sgn) t)) / |z|``, 0 at ``z = 0``."""
    (z,), _ = primals
    t = tangents[0][0]
    if not z.is_complex():
        return ember.zeros_like(result)
    modulus = z.abs()
    along = (result.conj() * t).real.to(result.dtype)
    value = (t - result * along) / ember.where(modulus == 0, 1.0, modulus).to(result.dtype)
    return ember.where(modulus == 0, ember.zeros_like(value), value)


def _polar(op, primals, tangents, result):
    """``r e^{i theta}``: ``t_r e^{i theta} + i r e^{i theta} t_theta``."""
    (r, theta), _ = primals
    tr, ttheta = tangents[0]
    cos, sin = theta.cos(), theta.sin()
    zero = ember.zeros_like(r)
    tr = zero if tr is None else tr
    ttheta = zero if ttheta is None else ttheta
    return ember.complex(cos * tr - r * sin * ttheta, sin * tr + r * cos * ttheta)


def _i1_derivative(x, r):
    """``I1'(x) = I0(x) - I1(x) / x``, 1/2 at 0."""
    safe = ember.where(x == 0, ember.ones_like(x), x)
    return ember.where(x == 0, ember.full_like(x, 0.5), ember.i0(x) - r / safe)


def _i1e_derivative(x, r):
    """``d[e^-|x| I1(x)] = i0e(x) - i1e(x) (sign(x) + 1/x)``, 1/2 at 0."""
    safe = ember.where(x == 0, ember.ones_like(x), x)
    return ember.where(x == 0, ember.full_like(x, 0.5), ember.special.i0e(x) - r * (x.sign() + 1 / safe))


def _index_put(op, primals, tangents, result):
    """Linear in the input and the values (indices fixed): the same write into the tangents (zeros for a side
    without one). A rule of the composite's own: its decomposition writes dual values into a plain clone."""
    (x, indices, values, accumulate), _ = primals
    tx, tv = tangents[0][0], tangents[0][2]
    tx = ember.zeros_like(result) if tx is None else tx
    tv = ember.zeros_like(values, dtype=result.dtype) if tv is None else tv
    return op(tx, indices, tv, accumulate)


def _second_argument_only(formula):
    """Real ``f(x, y)`` differentiable in ``y`` only (``zeta``'s shift, the incomplete gamma functions' ``x``):
    ``formula(t, x, y)`` is the backward's, linear in ``t``; a tangent on ``x`` takes the double-vjp path, whose
    backward raises PyTorch's NotImplementedError."""

    def rule(op, primals, tangents, result):
        (x, y), _ = primals
        tx, ty = tangents[0]
        if tx is not None or result.is_complex():
            return FALLBACK
        return None if ty is None else formula(ty, x, y).expand_as(result)

    return rule


def _fill_from_backward():
    from .derivatives.pointwise import _pow_base, _pow_exponent
    from .derivatives.special import _gamma_density, _multigammaln_input, _xlog1py_input

    register_jvp(["float_power"], _binary_from_backward(lambda t, x, y: _pow_base(t, x, y, ember.float_power),
                                                        lambda t, x, y: _pow_exponent(t, x, y, ember.float_power),
                                                        holomorphic=True))
    register_jvp(["special_xlog1py"], _binary_from_backward(_xlog1py_input, lambda t, x, y: t * x / (y + 1)))
    register_jvp(["special_gammainc"], _second_argument_only(lambda t, x, y: t * _gamma_density(x, y)))
    register_jvp(["special_gammaincc"], _second_argument_only(lambda t, x, y: -t * _gamma_density(x, y)))
    register_jvp(["special_zeta"], _second_argument_only(lambda t, x, y: -t * x * ember.special.zeta(x + 1, y)))
    register_jvp(["special_multigammaln"], _real_only(
        lambda op, primals, tangents, result: _multigammaln_input(tangents[0][0], primals[0][0], primals[0][1])))
    register_jvp(["sgn"], _sgn)
    register_jvp(["polar"], _polar)
    register_jvp(["special_i1"], _real_only(_unary(_i1_derivative)))
    register_jvp(["special_i1e"], _real_only(_unary(_i1e_derivative)))
    register_jvp(["index_put"], _index_put)


_SQRT_2PI = math.sqrt(2.0 * math.pi)

_MORE_UNARY = {
    "acosh": lambda x, r: (x * x - 1).rsqrt(),
    "asinh": lambda x, r: (x * x + 1).rsqrt(),
    "atanh": lambda x, r: 1 / (1 - x * x),
    "deg2rad": lambda x, r: math.pi / 180.0,
    "rad2deg": lambda x, r: 180.0 / math.pi,
    "erfc": lambda x, r: -_TWO_OVER_SQRT_PI * (-(x * x)).exp(),
    "erfinv": lambda x, r: (r * r).exp() / _TWO_OVER_SQRT_PI,
    "lgamma": lambda x, r: x.digamma(),
    "digamma": lambda x, r: ember.polygamma(1, x),
    "frac": lambda x, r: 1.0,
    "special_ndtr": lambda x, r: (-0.5 * x * x).exp() / _SQRT_2PI,
    "special_log_ndtr": lambda x, r: (-0.5 * x * x - r).exp() / _SQRT_2PI,
    "special_ndtri": lambda x, r: (0.5 * r * r).exp() * _SQRT_2PI,
    "special_erfcx": lambda x, r: 2 * x * r - _TWO_OVER_SQRT_PI,
    "special_entr": lambda x, r: -(x.log() + 1),
    "i0": lambda x, r: ember.special.i1(x),
    "special_i0e": lambda x, r: ember.special.i1e(x) - x.sign() * r,
    "sinc": lambda x, r: ember.where(x == 0, ember.zeros_like(x), ((math.pi * x).cos() - r) / x),
    "nan_to_num": lambda x, r: x.isfinite().to(x.dtype),
}

_BINARY = {
    "atan2": (lambda x, y, r: y / (x * x + y * y), lambda x, y, r: -x / (x * x + y * y)),
    "hypot": (lambda x, y, r: x / r, lambda x, y, r: y / r),
    "copysign": (lambda x, y, r: ember.where(x == 0, ember.zeros_like(r), r / x), lambda x, y, r: 0.0),
    "fmod": (lambda x, y, r: 1.0, lambda x, y, r: -(x / y).trunc()),
    "remainder": (lambda x, y, r: 1.0, lambda x, y, r: -(x / y).floor()),
    "logaddexp": (lambda x, y, r: (x - r).exp(), lambda x, y, r: (y - r).exp()),
    "logaddexp2": (lambda x, y, r: (x - r).exp2(), lambda x, y, r: (y - r).exp2()),
}


def _fill_more():
    register_jvp(["ceil", "floor", "round", "trunc", "sign", "floor_divide", "heaviside"], _zero)
    register_jvp(["abs"], _real_only(_unary(lambda x, r: x.sign())))
    register_jvp(["angle"], _real_only(_zero))
    register_jvp(["sort", "topk", "cummax", "cummin", "median", "nanmedian", "mode"], _gather_along)
    register_jvp([f"{kind}max_pool{d}d_with_indices" for kind in ("", "adaptive_") for d in (1, 2, 3)],
                 _max_pool_with_indices)
    register_jvp(["amax", "amin"], _amax_amin)
    register_jvp(["maximum", "minimum", "fmax", "fmin"], _maximum_minimum)
    register_jvp(["clamp"], _clamp)
    register_jvp(["var"], _real_only(_var))
    register_jvp(["linalg_vector_norm"], _vector_norm)
    register_jvp(["scatter"], _scatter)
    register_jvp(["scatter_add"], _scatter_add)
    register_jvp(["scatter_reduce"], _scatter_reduce)
    # linear composites whose decompositions write into a fresh buffer (an in-place write of a dual
    # tensor into a plain one, which forward AD refuses)
    register_jvp(["conj_physical", "diag", "diag_embed", "diagflat"], _linear)
    register_jvp(["block_diag"], _block_diag)
    register_jvp(["interpolate", "affine_grid", "_fft_c2c", "_fft_r2c", "_fft_c2r"], _linear_first)
    register_jvp([n for n in ("_stft_frames", "_stft_frames_backward") if n in registry], _linear_first)
    register_jvp(["grid_sample"], _grid_sample)
    register_jvp(["lerp"], _real_only(_lerp))
    register_jvp(["addcmul", "addcdiv"], _real_only(_addc))
    register_jvp(["polygamma"], _polygamma)
    register_jvp(["sigmoid_backward"], _sigmoid_backward)
    register_jvp(["tanh_backward"], _tanh_backward)
    register_jvp(["threshold_backward"], _threshold_backward)
    register_jvp(["linalg_solve_triangular"], _solve_triangular)
    register_jvp(["_linalg_solve_lu"], _solve_lu)
    register_jvp(["prod"], _prod)
    register_jvp(["logit"], _logit)
    register_jvp(["xlogy"], _xlogy)
    for name, derivative in _MORE_UNARY.items():
        register_jvp([name], _real_only(_unary(derivative)))
    for name, (dx, dy) in _BINARY.items():
        register_jvp([name], _binary(dx, dy))
    _fill_from_backward()


def _fill_table():
    register_jvp(
        ["view", "reshape", "expand", "permute", "transpose", "select", "slice", "squeeze", "unsqueeze", "diagonal",
         "unfold", "flip", "clone", "neg", "cat", "sum", "cumsum", "conj", "real", "imag",
         "view_as_real", "view_as_complex", "roll", "complex"],
        _linear,
    )
    register_jvp(["index", "gather", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d",
                  "adaptive_avg_pool2d", "adaptive_avg_pool3d", "im2col", "fold", "take"], _linear_first)
    register_jvp(["pad"], _pad)
    register_jvp(["_to_copy"], _to_copy)
    register_jvp(["add", "sub"], _add_sub)
    register_jvp(["where"], _where)
    register_jvp(["mul"], _mul)
    register_jvp(["div"], _div)
    register_jvp(["matmul", "mm", "bmm", "mv", "dot"], _matmul_like)
    register_jvp(["convolution"], _convolution)
    register_jvp(["pow"], _pow)
    for name, derivative in _UNARY.items():
        register_jvp([name], _unary(derivative))
    _fill_more()


_fill_table()
_jvp_linalg.fill(register_jvp, FALLBACK)
