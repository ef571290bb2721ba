"""The batching-rule table of :func:`ember.func.vmap`, keyed by the registry's ops.

A rule ``rule(op, level, size, args, kwargs)`` gets an op call whose arguments (normalised to the
op's signature) hold :class:`~ember.func._batched.BatchedTensor` objects of vmap level ``level``
(batch size ``size``), and computes the whole batch with registry ops on their inner tensors, so
autograd records it. What happens to an op call that meets a batched tensor:

1. a rule in :data:`RULES` (the ops below: pointwise, reductions, scans, views and shape ops,
   the matmul family, convolution, pooling and the other ops that take an ``N`` dimension,
   gathers and scatters, ``cat``, basic advanced indexing);
2. an in-place op: the in-place rule (the functional op's rule, then ``copy_``);
3. a composite op: its decomposition, whose ops reach their own rules;
4. otherwise a loop over the batch (correct, slow), counted by :mod:`ember.func.debug`.
   :data:`LOOPED` lists the ops known to take this path and why.

Random ops follow the vmap's ``randomness`` (see :func:`random_call`).
"""

from __future__ import annotations

import inspect
import math

import ember
from ember._ops._dispatch import state as _dispatch_state
from ember._ops._registry import Op, registry
from ember._tensor import Tensor
from ember.utils._pytree import tree_map

from . import debug
from ._batched import BatchedTensor, ValuesOfBatchedTensor, level_info, wrap

__all__ = ["RULES", "LOOPED", "register", "batch_call", "has_rule"]

#: op -> batching rule.
RULES: dict[Op, object] = {}

#: ops (by name) that vmap runs as a loop over the batch, with the reason.
LOOPED = {
    "as_strided": "its strides address the storage of the whole batch, not of one sample (vectorised where "
                  "each sample is one row-major block of a contiguous batch, as in autograd's CopySlices)",
    "nonzero": "the output's shape depends on each sample's values",
    "unique": "the output's shape depends on each sample's values",
    "unique_consecutive": "the output's shape depends on each sample's values",
    "bincount": "the output's length depends on each sample's values",
    "histc": "one histogram of all elements; no dim to batch over",
    "histogram": "one histogram of all elements; no dim to batch over",
    "index_put_": "writes through arbitrary index tensors (loops over in-place views of each sample)",
    "searchsorted": "its sorted-sequence and value batch shapes follow their own broadcasting rules",
    "multinomial": "draws per row; run per sample",
    "grid_sample": "input and grid are both per sample",
    "max_unpool1d": "indices are per sample", "max_unpool2d": "indices are per sample",
    "max_unpool3d": "indices are per sample",
    "allclose": "returns a Python bool", "equal": "returns a Python bool",
    "affine_grid": "its size argument names the batch (N, C, H, W); run per sample",
    "_sparse_mm": "the sparse product of compiled graphs (ember.sparse._graph); eager code never calls it",
}


def register(names, rule):
    """Register ``rule`` for each op named in ``names``.

    Raises:
        ValueError: an op already has a rule, or no op has that name.
    """
    for name in names:
        op = registry.get(name)
        if op is None:
            raise ValueError(f"no op named {name!r} to register a batching rule for")
        if op in RULES:
            raise ValueError(f"op {name} already has a batching rule")
        RULES[op] = rule


def has_rule(op):
    """Whether vmap computes ``op`` without a loop: a rule, or a composite that decomposes into ops with rules."""
    return op in RULES or (op.kind == "inplace" and op.functional is not None) or op.decomposition is not None


# ---------------------------------------------------------------------------------------------------
# helpers


def _is_batched(x, level):
    return isinstance(x, BatchedTensor) and x._level == level


def _front(x, level):
    """``(tensor, batched)``: the inner tensor with its batch dim first, or ``x`` itself when not batched here."""
    if isinstance(x, BatchedTensor) and x._level == level:
        inner = x._inner
        return (inner if x._bdim == 0 else inner.movedim(x._bdim, 0)), True
    return x, False


def _expanded(x, level, size):
    """``x`` with the batch dim first, expanded (a view) when ``x`` is not batched at this level."""
    inner, batched = _front(x, level)
    if batched:
        return inner
    return inner.expand(size, *inner.shape)


def _pad_after_batch(inner, count):
    for _ in range(count):
        inner = inner.unsqueeze(1)
    return inner


def _wrap_out(out, level, bdim=0):
    """Wrap the tensors of an op's result (a tensor, or a tuple of them) as batched at ``level``."""
    if isinstance(out, Tensor):
        return wrap(out, bdim, level)
    if isinstance(out, (tuple, list)):
        items = [_wrap_out(o, level, bdim) for o in out]
        if hasattr(out, "_fields"):
            return type(out)(*items)
        return type(out)(items)
    return out


def _wrap_dim(dim, ndim):
    """``dim`` in ``[0, ndim)`` (a zero-dim tensor takes 0 and -1, as in PyTorch)."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n


def _shift(dim, ndim):
    """A logical dim (or tuple/list of dims) as a dim of the inner tensor whose batch dim is first."""
    if dim is None:
        return None
    if isinstance(dim, (tuple, list)):
        return type(dim)(_wrap_dim(d, ndim) + 1 for d in dim)
    return _wrap_dim(dim, ndim) + 1


def _others_batched(values, level):
    return any(_is_batched(v, level) for v in _leaves(values))


def _leaves(values):
    for v in values:
        if isinstance(v, (list, tuple)):
            yield from _leaves(v)
        elif isinstance(v, dict):
            yield from _leaves(v.values())
        else:
            yield v


def _param_positions(op, names):
    params = list(op.signature.parameters)
    return [params.index(n) for n in names if n in params]


# ---------------------------------------------------------------------------------------------------
# the entry point


def _max_level(args, kwargs):
    """The highest vmap level among the arguments (batched tensors at the top or inside lists and tuples)."""
    level = 0
    for group in (args, kwargs.values()):
        for v in group:
            t = type(v)
            if t is BatchedTensor:
                if v._level > level:
                    level = v._level
            elif t is list or t is tuple:
                for w in v:
                    if type(w) is BatchedTensor and w._level > level:
                        level = w._level
    return level


def batch_call(func, args, kwargs):
    """Run one call of ``func`` that meets batched tensors (``BatchedTensor.__ember_function__``)."""
    level = _max_level(args, kwargs)
    info = level_info(level)
    if not isinstance(func, Op):  # a Python function routed here (operator.getitem with a batched index)
        rule = FUNCTION_RULES.get(getattr(func, "__name__", None))
        if rule is not None:
            result = rule(func, level, info.size, args, kwargs)
            if result is not NotImplemented:
                return result
        return _loop(func, getattr(func, "__name__", repr(func)), level, info.size, args, kwargs)
    out = kwargs.pop("out", None)
    # The calls a rule makes on inner tensors are not the user's: vmap's randomness modes must not see them
    # (and skipping them spares every inner call a trip through the mode).
    modes = _dispatch_state.modes
    saved = None
    if modes and any(getattr(m, "vmap_randomness", False) for m in modes):
        saved = modes[:]
        modes[:] = [m for m in saved if not getattr(m, "vmap_randomness", False)]
    try:
        if "random" in func.tags:
            result = random_call(func, info, args, kwargs)
        else:
            rule = RULES.get(func)
            if rule is _pointwise:  # needs no normalised arguments: spare the signature binding
                result = rule(func, level, info.size, args, kwargs)
            else:
                args, kwargs = _normalize(func, args, kwargs)
                result = _run(func, level, info.size, args, kwargs)
    finally:
        if saved is not None:
            modes[:] = saved
    if out is not None:
        out.copy_(result)
        return out
    return result


class _Binding:
    """How a call of one op binds to its signature, read once: what ``_normalize`` needs instead of ``inspect``."""

    __slots__ = ("names", "required", "defaults", "variadic", "keyword_defaults")

    def __init__(self, op):
        P = inspect.Parameter
        params = list(op._call_signature.parameters.values())
        positional = [p for p in params if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
        self.names = tuple(p.name for p in positional)
        self.required = sum(1 for p in positional if p.default is P.empty)
        self.defaults = tuple(p.default for p in positional[self.required:])
        self.variadic = any(p.kind is P.VAR_POSITIONAL for p in params)
        keyword_only = [p for p in params if p.kind is P.KEYWORD_ONLY]
        # a required keyword-only parameter or **kwargs: leave such ops to inspect
        self.keyword_defaults = None if any(p.default is P.empty for p in keyword_only) or \
            any(p.kind is P.VAR_KEYWORD for p in params) else {p.name: p.default for p in keyword_only}

    def bind(self, args, kwargs):
        """``(args, kwargs)`` as ``inspect`` binds them with defaults applied, or None where this cannot tell."""
        names, count = self.names, len(args)
        if self.keyword_defaults is None or count < self.required and self.variadic:
            return None
        keywords = dict(self.keyword_defaults)
        if self.variadic:  # f(input, *sizes): positional arguments stay as given
            if kwargs:
                if any(k not in keywords for k in kwargs):
                    return None
                keywords.update(kwargs)
            return tuple(args), keywords
        if count > len(names):
            return None
        bound = list(args)
        used = 0
        for index in range(count, len(names)):
            name = names[index]
            if name in kwargs:
                bound.append(kwargs[name])
                used += 1
            elif index >= self.required:
                bound.append(self.defaults[index - self.required])
            else:
                return None  # a required argument is missing: inspect words the error
        if used != len(kwargs):
            for k, v in kwargs.items():
                if k in keywords:
                    keywords[k] = v
                    used += 1
                elif k in names[:count]:
                    return None  # given twice: inspect words the error
            if used != len(kwargs):
                return None  # an unknown keyword
        return tuple(bound), keywords


#: op -> its _Binding
_BINDINGS = {}


def _normalize(op, args, kwargs):
    """``op.normalize(args, kwargs)``, without ``inspect``'s binding (a cached plan of the op's signature).

    Every batched call that a rule handles is normalised, and binding through ``inspect.Signature`` was
    a large part of vmap's cost per op. Calls the plan cannot tell take ``op.normalize`` (and its errors).
    """
    binding = _BINDINGS.get(op)
    if binding is None:
        binding = _BINDINGS[op] = _Binding(op)
    bound = binding.bind(args, kwargs)
    return op.normalize(args, kwargs) if bound is None else bound


def _run(op, level, size, args, kwargs):
    rule = RULES.get(op)
    if rule is not None:
        return rule(op, level, size, args, kwargs)
    if op.name in ("index_put", "index_put_", "_index_put_impl_"):  # x[mask] = v with a mask per sample
        _refuse_batched_masks(args[1], level)
    if op.kind == "inplace":
        return _inplace(op, level, size, args, kwargs)
    if op.decomposition is not None:
        global _decomposing
        _decomposing += 1
        try:
            return op.decomposition(*args, **kwargs)
        except (ValuesOfBatchedTensor, UnbatchedWrite):
            pass  # the decomposition reads values, or writes into a buffer it made: run it per sample
        finally:
            _decomposing -= 1
    return _loop(op, op.name, level, size, args, kwargs)


#: how many decompositions of batched calls are running (their views may copy: see ``_view``)
_decomposing = 0


def _select(x, level, index):
    if isinstance(x, BatchedTensor) and x._level == level:
        return x._inner.select(x._bdim, index)
    return x


def _loop(func, name, level, size, args, kwargs):
    """The fallback: call ``func`` once per sample and stack the results."""
    debug.record(name)
    results = []
    for index in range(size):
        sample_args, sample_kwargs = tree_map(lambda x, i=index: _select(x, level, i), (args, kwargs))
        results.append(func(*sample_args, **sample_kwargs))
    if isinstance(func, Op) and func.kind == "inplace":
        return args[0]  # each call wrote through a view of the sample
    return _stack(results, level, name)


def _stack(results, level, name):
    first = results[0]
    if isinstance(first, Tensor):
        try:
            return wrap(ember.stack(results), 0, level)
        except RuntimeError as exc:
            raise RuntimeError(
                f"vmap: {name} gives outputs of different shapes for different samples ({exc}); "
                "vmap needs one output shape for the whole batch"
            ) from None
    if isinstance(first, (tuple, list)):
        items = [_stack([r[i] for r in results], level, name) for i in range(len(first))]
        return type(first)(*items) if hasattr(first, "_fields") else type(first)(items)
    if first is None:
        return None
    raise ValuesOfBatchedTensor(
        f"vmap: {name} returns a Python value ({type(first).__name__}) that depends on each sample's values; "
        "vmap can only batch tensor outputs"
    )


# ---------------------------------------------------------------------------------------------------
# pointwise


def _pointwise(op, level, size, args, kwargs):
    """Broadcasting ops: batch dim first, the batched operands padded so logical dims align on the right."""
    ndim = 0
    for v in args:
        if isinstance(v, Tensor) and v._data.ndim > ndim:
            ndim = v._data.ndim
    for v in kwargs.values():
        if isinstance(v, Tensor) and v._data.ndim > ndim:
            ndim = v._data.ndim

    def prepare(v):
        if type(v) is BatchedTensor and v._level == level:
            inner = v._inner if v._bdim == 0 else v._inner.movedim(v._bdim, 0)
            return _pad_after_batch(inner, ndim - (inner.ndim - 1))
        return v

    args = [prepare(a) for a in args]
    if kwargs:
        kwargs = {k: prepare(v) for k, v in kwargs.items()}
    return _wrap_out(op(*args, **kwargs), level)


def _same_layout(op, level, size, args, kwargs):
    """Unary ops that keep every dim where it is (clone, detach, dtype casts): the batch dim stays put."""
    if _others_batched(list(args[1:]) + list(kwargs.values()), level):
        return _loop(op, op.name, level, size, args, kwargs)
    x = args[0]
    return _wrap_out(op(x._inner, *args[1:], **kwargs), level, x._bdim)


# ---------------------------------------------------------------------------------------------------
# dims: reductions, scans, sorts, softmax, views


def _dim_rule(*names, extra_dims=0):
    """Ops of one tensor whose parameters ``names`` hold logical dims: shift them past the batch dim.

    ``extra_dims``: how many dims the op adds (1 for unsqueeze), for wrapping negative dims.
    """

    def rule(op, level, size, args, kwargs):
        x, batched = _front(args[0], level)
        if not batched or _others_batched(list(args[1:]) + list(kwargs.values()), level):
            return _loop(op, op.name, level, size, args, kwargs)
        ndim = x.ndim - 1
        scalar = ndim == 0 and extra_dims == 0
        if scalar:  # a zero-dim sample: give it a dim of size 1, so dim 0 / -1 mean something
            x = x.unsqueeze(1)
        args = list(args)
        args[0] = x
        for position in _param_positions(op, names):
            if position < len(args):
                args[position] = _shift(args[position], ndim + extra_dims)
        out = op(*args, **kwargs)
        if scalar:
            out = _squeeze_scalar(out)
        return _wrap_out(out, level)

    return rule


def _squeeze_scalar(out):
    if isinstance(out, Tensor):
        return out.squeeze(1) if out.ndim == 2 else out
    if isinstance(out, tuple):
        items = [_squeeze_scalar(o) for o in out]
        return type(out)(*items) if hasattr(out, "_fields") else tuple(items)
    return out


def _reduction(op, level, size, args, kwargs):
    """Reductions over ``dim`` (None or empty: every dim, computed as a reduction of the flattened sample)."""
    x, batched = _front(args[0], level)
    if not batched or _others_batched(list(args[1:]) + list(kwargs.values()), level):
        return _loop(op, op.name, level, size, args, kwargs)
    names = list(op.signature.parameters)
    ndim = x.ndim - 1
    args = list(args)
    dim_pos = names.index("dim") if "dim" in names else None
    keep_pos = names.index("keepdim") if "keepdim" in names else None
    dim = args[dim_pos] if dim_pos is not None and dim_pos < len(args) else None
    # quantile's q: a 1-D q puts its dim first in the output, before the batch dim
    out_bdim = 1 if op.name in ("quantile", "nanquantile") and isinstance(args[1], Tensor) and args[1].ndim == 1 else 0
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        keepdim = bool(args[keep_pos]) if keep_pos is not None and keep_pos < len(args) else False
        args[0] = x.reshape(size, -1)
        if dim_pos is None:
            out = op(*args, **kwargs)
        else:
            args[dim_pos] = 1
            if keep_pos is not None and keep_pos < len(args):
                args[keep_pos] = False
            out = op(*args, **kwargs)
            if op.name in ("median", "nanmedian") and isinstance(out, tuple):
                out = out[0]  # without a dim, these return the values only
        if keepdim:
            out = _keep_all_dims(out, ndim, out_bdim)
        return _wrap_out(out, level, out_bdim)
    args[0] = x if ndim > 0 else x.unsqueeze(1)
    args[dim_pos] = _shift(dim, ndim)
    out = op(*args, **kwargs)
    if ndim == 0:  # keepdim kept the dim added for the zero-dim sample
        out = _squeeze_scalar(out)
    return _wrap_out(out, level, out_bdim)


def _keep_all_dims(out, ndim, bdim):
    if isinstance(out, Tensor):
        shape = list(out.shape[: bdim + 1]) + [1] * ndim
        return out.reshape(shape)
    return type(out)(*[_keep_all_dims(o, ndim, bdim) for o in out]) if hasattr(out, "_fields") else out


def _softmax(op, level, size, args, kwargs):
    x = args[0]
    if len(args) < 2 or args[1] is None:  # PyTorch's implicit dim
        args = list(args)
        args[1] = 0 if x.ndim in (0, 1, 3) else 1
    return _SOFTMAX_DIMS(op, level, size, tuple(args), kwargs)


_SOFTMAX_DIMS = _dim_rule("dim")


def _sizes(args):
    """The sizes of ``view(x, 2, 3)`` or ``view(x, (2, 3))``."""
    sizes = args[1:]
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    return tuple(sizes)


def _view(op, level, size, args, kwargs):
    x, _ = _front(args[0], level)
    sizes = _sizes(args)
    if op.name == "view":
        try:
            return wrap(x.view(size, *sizes), 0, level)
        except RuntimeError:
            # The samples' memory cannot take this view. A user's view raises, as in PyTorch (whose batched
            # tensors have the samples' real strides); a decomposition's view copies instead, since a batched
            # tensor reports a contiguous layout for its samples and so steers decompositions to view.
            if not _decomposing:
                raise
    return wrap(x.reshape(size, *sizes), 0, level)


def _expand(op, level, size, args, kwargs):
    x, _ = _front(args[0], level)
    sizes = _sizes(args)
    x = _pad_after_batch(x, len(sizes) - (x.ndim - 1))
    return wrap(x.expand(size, *sizes), 0, level)


def _permute(op, level, size, args, kwargs):
    x, _ = _front(args[0], level)
    dims = _sizes(args)
    return wrap(x.permute(0, *[_wrap_dim(d, x.ndim - 1) + 1 for d in dims]), 0, level)


def _squeeze(op, level, size, args, kwargs):
    if len(args) > 1 and args[1] is not None:
        return _SQUEEZE_DIMS(op, level, size, args, kwargs)
    x, _ = _front(args[0], level)
    dims = tuple(i + 1 for i, s in enumerate(x.shape[1:]) if s == 1)
    return wrap(x.squeeze(dims) if dims else x.view(tuple(x.shape)), 0, level)


_SQUEEZE_DIMS = _dim_rule("dim")


def _view_as_complex(op, level, size, args, kwargs):
    x, _ = _front(args[0], level)
    return wrap(op(x), 0, level)


def _cat(op, level, size, args, kwargs):
    tensors, dim = args[0], args[1] if len(args) > 1 else 0
    ndim = next((t.ndim for t in tensors if t.ndim > 0), 1)
    inner = [_expanded(t, level, size) for t in tensors]
    return wrap(op(inner, _wrap_dim(dim, ndim) + 1, **kwargs), 0, level)


# ---------------------------------------------------------------------------------------------------
# matmul family, convolution, linear, embedding


def _matmul(op, level, size, args, kwargs):
    a, b = args[0], args[1]
    xa, ba = _front(a, level)
    xb, bb = _front(b, level)
    na, nb = a.ndim, b.ndim
    if na == 0 or nb == 0:
        return _loop(op, op.name, level, size, args, kwargs)
    if ba and not bb:
        if nb <= 2:  # (B, ..., k) @ (k, m) or (k,): the batch dim is one more leading dim
            return wrap(op(xa, b), 0, level)
        xa = xa.unsqueeze(-2) if na == 1 else xa
        out = op(_pad_after_batch(xa, max(nb - max(na, 2), 0)), b)
        return wrap(out.squeeze(-2) if na == 1 else out, 0, level)
    if bb and not ba:
        if na == 1:
            if nb == 1:
                return wrap(op(xb, a), 0, level)
            if nb == 2:
                return wrap(op(xb.transpose(-1, -2), a), 0, level)
            return wrap(op(a.unsqueeze(0), xb).squeeze(-2), 0, level)
        if nb == 1:  # (..., n, k) @ (B, k): all samples as the columns of one matrix
            return wrap(op(a, xb.transpose(0, 1)).movedim(-1, 0), 0, level)
        return wrap(op(a, _pad_after_batch(xb, max(na - nb, 0))), 0, level)
    if na >= 1 and nb == 2 and _expanded_batch(xb):  # x @ W with W a parameter grad lifted: see _SharedWeightMatmul
        return wrap(_SharedWeightMatmul.apply(xa, xb), 0, level)
    # both batched: an operand expanded along the batch is made contiguous, since batched products over a
    # zero batch stride miss BLAS (numpy loops in C)
    xa, xb = _dense_batch(xa), _dense_batch(xb)
    if na == 1 and nb == 1:
        return wrap((xa * xb).sum(-1), 0, level)
    if na == 1:
        out = op(_pad_after_batch(xa.unsqueeze(-2), nb - 2), xb)
        return wrap(out.squeeze(-2), 0, level)
    if nb == 1:
        out = op(xa, _pad_after_batch(xb.unsqueeze(-1), na - 2))
        return wrap(out.squeeze(-1), 0, level)
    n = max(na, nb)
    return wrap(op(_pad_after_batch(xa, n - na), _pad_after_batch(xb, n - nb)), 0, level)


def _expanded_batch(inner):
    """Whether ``inner`` (batch dim first) is one tensor repeated along the batch (a zero batch stride)."""
    return type(inner) is Tensor and inner.ndim > 1 and inner.shape[0] > 1 and inner.stride(0) == 0


class _SharedWeightMatmul(ember.autograd.Function):
    """``x @ W`` per sample, where ``W`` is one matrix expanded along the batch (zero batch stride).

    This is the product of per-sample gradients: ``grad`` lifts a parameter into the vmap as an
    expanded view so that its gradient comes out per sample. The forward and the input's gradient
    use the matrix once (one BLAS product for the whole batch); only ``W``'s gradient, one outer
    product per sample, is batched. The backward is written in ember ops, so it is differentiable.
    """

    @staticmethod
    def forward(ctx, x, w):
        base = w.select(0, 0)
        ctx.save_for_backward(x, base)
        return ember.matmul(x, base)

    @staticmethod
    def backward(ctx, grad):
        x, base = ctx.saved_tensors
        grad_x = grad_w = None
        if ctx.needs_input_grad[0]:
            grad_x = ember.matmul(grad, base.t())
        if ctx.needs_input_grad[1]:
            b = x.shape[0]
            rows = x.reshape(b, -1, x.shape[-1])
            grads = grad.reshape(b, -1, grad.shape[-1])
            if rows.shape[1] == 1:  # one row per sample: an outer product (a broadcast product beats matmul there)
                grad_w = rows.transpose(1, 2) * grads
            else:
                grad_w = ember.matmul(rows.transpose(1, 2), grads)
        return grad_x, grad_w


class _SharedWeightLinear(ember.autograd.Function):
    """``linear(x, W, b)`` per sample, where ``W`` (and ``b``) are one tensor expanded along the batch.

    As :class:`_SharedWeightMatmul`, for the whole layer: the forward is one ``linear`` call on the
    whole batch; the backward gives ``x`` its gradient with one product, and ``W`` and a batched ``b``
    their per-sample gradients (outer products, or one batched product for several rows a sample).
    """

    @staticmethod
    def forward(ctx, x, w, bias):
        base = w.select(0, 0)
        shared_bias = None if bias is None else bias.select(0, 0) if bias.ndim == 2 else bias
        ctx.save_for_backward(x, base)
        ctx.batched_bias = bias is not None and bias.ndim == 2
        return ember.nn.functional.linear(x, base, shared_bias)

    @staticmethod
    def backward(ctx, grad):
        x, base = ctx.saved_tensors
        grad_x = grad_w = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_x = ember.matmul(grad, base)
        b, out_features = x.shape[0], base.shape[0]
        grads = _merge(grad, (b, -1, out_features))
        if ctx.needs_input_grad[1]:
            rows = _merge(x, (b, -1, base.shape[1]))
            if rows.shape[1] == 1:  # one row a sample: an outer product, (B, O, 1) * (B, 1, I), in W's layout
                grad_w = grads.transpose(1, 2) * rows
            else:
                grad_w = ember.matmul(grads.transpose(1, 2), rows)
        if ctx.needs_input_grad[2]:
            grad_bias = grads.sum(1) if ctx.batched_bias else grads.sum((0, 1))
        return grad_x, grad_w, grad_bias


def _shared_linear(level, args):
    """``linear`` of a batched input with a weight (and bias) that ``grad`` lifted (expanded along the batch),
    through :class:`_SharedWeightLinear`; None for other calls."""
    x, weight = args[0], args[1]
    bias = args[2] if len(args) > 2 else None
    if not (_is_batched(x, level) and _is_batched(weight, level) and x.ndim >= 1 and weight.ndim == 2):
        return None  # (a 1-d weight gives one output per row: the decomposition's matmul rule takes it)
    xw, _ = _front(weight, level)
    if not _expanded_batch(xw):
        return None
    xb = None
    if bias is not None:
        xb, batched = _front(bias, level)
        if batched and not _expanded_batch(xb):
            return None
    xi, _ = _front(x, level)
    if x.ndim == 1:  # one row a sample: give it a row dim, so the batch dim stays apart from the features
        return wrap(_SharedWeightLinear.apply(xi.unsqueeze(1), xw, xb).squeeze(1), 0, level)
    return wrap(_SharedWeightLinear.apply(xi, xw, xb), 0, level)


def _pair(value):
    return (value, value) if isinstance(value, int) else tuple(value)


class _SharedWeightConv2d(ember.autograd.Function):
    """A 2-d convolution per sample with one weight expanded along the batch (per-sample gradients).

    Everything is im2col and matrix products, batched over the images so that no copy reorders the
    columns: the forward multiplies the weight, once, with the columns of every image (``(O, CKK) @
    (B*N, CKK, L)``); the input's gradient is the transposed product, folded back (col2im); the
    weight's gradient, one per sample, is a batched product of the output gradient with each sample's
    columns. The backward is written in ember ops, so it is differentiable.
    """

    @staticmethod
    def forward(ctx, x, w, bias, stride, padding, dilation):
        base = w.select(0, 0)
        b, n = x.shape[0], x.shape[1]
        flat = _merge(x, (b * n, *x.shape[2:]))  # (B*N, C, H, W)
        kernel = tuple(base.shape[2:])
        cols = ember.nn.functional.unfold(flat, kernel, dilation, padding, stride)  # (B*N, C*k*k, L)
        out_hw = _conv_out_size(flat.shape[2:], kernel, stride, padding, dilation)
        o = base.shape[0]
        out = ember.matmul(_merge(base, (o, cols.shape[1])), cols)  # (B*N, O, L)
        if bias is not None:
            out = out + bias.reshape(o, 1)
        ctx.save_for_backward(cols, base)
        ctx.shapes = (b, n, tuple(flat.shape[2:]), kernel, stride, padding, dilation)
        return _merge(out, (b, n, o, *out_hw))

    @staticmethod
    def backward(ctx, grad):
        cols, base = ctx.saved_tensors
        b, n, in_hw, kernel, stride, padding, dilation = ctx.shapes
        o, ckk, length = base.shape[0], cols.shape[1], cols.shape[2]
        g = _merge(grad, (b * n, o, length))
        grad_x = grad_w = grad_bias = None
        if ctx.needs_input_grad[0]:  # the columns' gradient, (CKK, O) @ (B*N, O, L), then col2im
            gcols = ember.matmul(_merge(base, (o, ckk)).t(), g)
            grad_x = ember.nn.functional.fold(gcols, in_hw, kernel, dilation, padding, stride)
            grad_x = _merge(grad_x, (b, n, *grad_x.shape[1:]))
        if ctx.needs_input_grad[1]:  # per sample: (O, N*L) @ (N*L, C*k*k)
            if n == 1:
                gs, cs = g, cols
            else:
                gs = g.reshape(b, n, o, length).transpose(1, 2).reshape(b, o, n * length)
                cs = cols.reshape(b, n, ckk, length).transpose(1, 2).reshape(b, ckk, n * length)
            grad_w = _merge(ember.matmul(gs, cs.transpose(1, 2)), (b, *base.shape))
        if ctx.needs_input_grad[2]:
            grad_bias = g.sum((0, 2))
        return grad_x, grad_w, grad_bias, None, None, None


def _merge(x, shape):
    """``x.reshape(shape)``, as one view op where ``x`` is contiguous (reshape is a composite: two dispatches)."""
    return x.view(shape) if x.is_contiguous() else x.reshape(shape)


def _conv_out_size(size, kernel, stride, padding, dilation):
    st, pad, dil = (_pair(v) for v in (stride, padding, dilation))
    return tuple((size[i] + 2 * pad[i] - dil[i] * (kernel[i] - 1) - 1) // st[i] + 1 for i in range(2))


def _dense_batch(inner):
    """``inner`` (batch dim first) made contiguous when its batch dim has stride 0 (an expanded tensor)."""
    if type(inner) is Tensor and inner.ndim > 1 and inner.shape[0] > 1 and inner.stride(0) == 0:
        return inner.contiguous()
    return inner


def _convolution(op, level, size, args, kwargs):
    inp, weight, bias, stride, padding, dilation, transposed, output_padding, groups = args
    if _is_batched(bias, level):  # add the batched bias after the convolution, by the pointwise rule
        out = _convolution(op, level, size, (inp, weight, None, *args[3:]), kwargs)
        return out + bias.reshape(-1, *([1] * (weight.ndim - 2)))
    xi, bi = _front(inp, level)
    xw, bw = _front(weight, level)
    has_n = inp.ndim == weight.ndim
    if bi and bw and _expanded_batch(xw) and not transposed and groups == 1 and weight.ndim == 4 and \
            not _is_batched(bias, level) and isinstance(padding, (int, tuple, list)):
        x = xi if has_n else xi.unsqueeze(1)  # (B, N, C, H, W)
        out = _SharedWeightConv2d.apply(x, xw, bias, stride, padding, dilation)
        return wrap(out if has_n else out.squeeze(1), 0, level)
    if not bw:  # fold the vmap batch into the conv's own batch dim N
        if not has_n:
            return wrap(op(xi, weight, bias, *args[3:]), 0, level)
        out = op(xi.flatten(0, 1), weight, bias, *args[3:])
        return wrap(out.unflatten(0, (size, inp.shape[0])), 0, level)
    # per-sample weights: each sample's channels become groups of one grouped convolution
    if not has_n:
        xi = xi.unsqueeze(1) if bi else inp.unsqueeze(0)
    if bi:
        x = xi.movedim(0, 1).flatten(1, 2)  # (N, B * C, *spatial)
    else:
        n, c = xi.shape[0], xi.shape[1]
        x = xi.unsqueeze(1).expand(n, size, *xi.shape[1:]).reshape(n, size * c, *xi.shape[2:])
    w = xw.flatten(0, 1)
    b = None if bias is None else bias.repeat(size)
    out = op(x, w, b, stride, padding, dilation, transposed, output_padding, groups * size)
    out = out.unflatten(1, (size, out.shape[1] // size))  # (N, B, O, *spatial)
    if not has_n:
        return wrap(out.squeeze(0), 0, level)
    return wrap(out, 1, level)


def _linear(op, level, size, args, kwargs):
    if _others_batched(args[1:], level):
        shared = _shared_linear(level, args)
        if shared is not None:
            return shared
        return op.decomposition(*args, **kwargs)  # per-sample weights: matmul's rule batches them
    x, _ = _front(args[0], level)
    return wrap(op(x, *args[1:], **kwargs), 0, level)


def _batch_norm(op, level, size, args, kwargs):
    """Eval-mode batch norm (running statistics not batched): ``x * scale + shift`` per sample and channel.

    With ``scale = weight * rsqrt(running_var + eps)`` and ``shift = bias - running_mean * scale``
    computed on the small ``(B, C)`` tensors, the batch's values see two ops instead of four (and
    their backward as few), as PyTorch's CPU kernel computes inference. Other calls (training, batched
    running statistics, half precision) take the decomposition.
    """
    x, mean, var, weight, bias, training, _, eps = args
    if training or mean is None or var is None or _is_batched(mean, level) or _is_batched(var, level) or \
            not _is_batched(x, level) or x.ndim < 2 or x.dtype not in (ember.float32, ember.float64):
        return op.decomposition(*args, **kwargs)
    inner, _ = _front(x, level)
    scale = ember.rsqrt(var + eps)  # (C,)
    if weight is not None:
        scale = _expanded(weight, level, size) * scale if _is_batched(weight, level) else weight * scale
    shift = -mean * scale if bias is None else (_front(bias, level)[0] - mean * scale)
    channel_dim = inner.ndim - x.ndim + 1  # the channel dim of the inner tensor: (B, N, C, *) or (B, C, *)
    def as_channel(v):  # (C,) or (B, C) as a view that broadcasts against the inner tensor
        shape = [1] * inner.ndim
        shape[channel_dim] = v.shape[-1]
        if v.ndim == 2:
            shape[0] = size
        return _merge(v, tuple(shape))
    return wrap(inner * as_channel(scale) + as_channel(shift), 0, level)


def _cross_entropy(op, level, size, args, kwargs):
    """Cross entropy of ``(N, C)`` or ``(C,)`` logits per sample with class indices, no class weights and
    no label smoothing: the log-likelihoods picked from the batch's log-softmax with one gather and reduced
    per sample (half the ops of the decomposition, which other calls take)."""
    x, target, weight, size_average, ignore_index, reduce, reduction, smoothing = args
    if weight is not None or size_average is not None or reduce is not None or smoothing != 0 or \
            reduction not in ("mean", "sum", "none") or x.ndim not in (1, 2) or target.ndim != x.ndim - 1 or \
            target.dtype not in (ember.int64, ember.int32) or x.dtype not in (ember.float32, ember.float64):
        return op.decomposition(*args, **kwargs)
    xi, ti = _expanded(x, level, size), _expanded(target, level, size)
    if x.ndim == 1:  # one row a sample
        xi, ti = xi.unsqueeze(1), ti.unsqueeze(1)
    if xi.shape[1] != ti.shape[1]:
        return op.decomposition(*args, **kwargs)  # the decomposition raises PyTorch's size error
    index = ti.unsqueeze(-1)  # (B, N, 1)
    keep = index != ignore_index
    picked = ember.log_softmax(xi, -1).gather(-1, index * keep) * keep  # (B, N, 1); ignored targets give 0
    if reduction == "none":
        out = -picked.squeeze(-1)
        return wrap(out.squeeze(1) if x.ndim == 1 else out, 0, level)
    total = picked.sum((1, 2))
    if reduction == "sum":
        return wrap(-total, 0, level)
    return wrap(-total / keep.sum((1, 2)), 0, level)


def _embedding(op, level, size, args, kwargs):
    if _others_batched(args[1:], level):
        return _loop(op, op.name, level, size, args, kwargs)
    x, _ = _front(args[0], level)
    return wrap(op(x, *args[1:], **kwargs), 0, level)


# ---------------------------------------------------------------------------------------------------
# ops over (N, C, *spatial): the vmap batch is folded into N


def _fold_rule(spatial):
    """Ops whose input is ``(N, C, *spatial)`` or ``(C, *spatial)``; ``spatial`` dims, or a function of the call."""

    def rule(op, level, size, args, kwargs):
        if _others_batched(list(args[1:]) + list(kwargs.values()), level):
            return _loop(op, op.name, level, size, args, kwargs)
        x, _ = _front(args[0], level)
        n_spatial = spatial(args) if callable(spatial) else spatial
        lead = tuple(x.shape[1 : x.ndim - n_spatial - 1])  # the sample's own leading dims (N, or none)
        flat = _merge(x, (size * math.prod(lead), *x.shape[x.ndim - n_spatial - 1 :]))
        out = op(flat, *args[1:], **kwargs)
        return _wrap_out(_unfold_lead(out, size, lead), level)

    return rule


def _unfold_lead(out, size, lead):
    if isinstance(out, Tensor):
        return _merge(out, (size, *lead, *out.shape[1:]))
    items = [_unfold_lead(o, size, lead) for o in out]
    return type(out)(*items) if hasattr(out, "_fields") else type(out)(items)


def _pad(op, level, size, args, kwargs):
    mode = args[2] if len(args) > 2 else "constant"
    if mode == "constant":  # pads the last dims of any tensor: the batch dim first is enough
        if _others_batched(args[1:], level):
            return _loop(op, op.name, level, size, args, kwargs)
        x, _ = _front(args[0], level)
        return wrap(op(x, *args[1:], **kwargs), 0, level)
    return _PAD_FOLD(op, level, size, args, kwargs)


_PAD_FOLD = _fold_rule(lambda args: len(args[1]) // 2)


# ---------------------------------------------------------------------------------------------------
# gather, scatter, indexing


def _gather_like(tensor_positions, dim_position=1):
    """gather/scatter: every tensor argument gets the batch dim first (expanded where unbatched)."""

    def rule(op, level, size, args, kwargs):
        if args[0].ndim == 0 or any(_is_batched(v, level) for v in kwargs.values()):
            return _loop(op, op.name, level, size, args, kwargs)
        ndim = args[0].ndim
        args = list(args)
        for position in tensor_positions:
            if position < len(args) and isinstance(args[position], Tensor):
                args[position] = _expanded(args[position], level, size)
        args[dim_position] = _wrap_dim(args[dim_position], ndim) + 1
        return wrap(op(*args, **kwargs), 0, level)

    return rule


_MASK_ERROR = (
    "vmap: We do not support batching operators that can support dynamic shape. Attempting to batch over "
    "indexing with a boolean mask."
)


def _is_mask(i):
    return isinstance(i, Tensor) and i.dtype in (ember.bool, ember.uint8)


def _refuse_batched_masks(indices, level):
    """A boolean mask that differs per sample selects a different number of elements from each: PyTorch raises
    (a decomposition's masked writes, as in ``masked_scatter``, run per sample instead)."""
    if not _decomposing and any(_is_mask(i) and _is_batched(i, level) for i in indices):
        raise RuntimeError(_MASK_ERROR)


def _masked_fill(op, level, size, args, kwargs):
    """``masked_fill`` is ``where(mask, value, input)`` in the input's dtype: the pointwise rule batches it."""
    x, mask, value = args
    out = ember.where(mask, value, x)
    return out if out.dtype == x.dtype else out.to(x.dtype)


def _masked_select(op, level, size, args, kwargs):
    if _is_batched(args[1], level):
        raise RuntimeError(
            "vmap: Attempted to vmap over `mask` in ember.masked_select(self, mask) We cannot support this "
            "because for each batch this would return a differently shaped Tensor."
        )
    x, mask = _expanded(args[0], level, size), args[1]
    shape = ember.broadcast_shapes(tuple(args[0].shape), tuple(mask.shape))
    return wrap(x.expand(size, *shape)[:, mask.expand(shape)], 0, level)


def _mask_as_positions(indices):
    """The index list with each (unbatched) ``k``-dim boolean mask replaced by the ``k`` long index tensors of
    its true elements, as indexing itself reads it; None when a mask's values cannot be read here."""
    out = []
    for i in indices:
        if not _is_mask(i):
            out.append(i)
        elif type(i) is Tensor:
            out.extend(i.nonzero().unbind(1))
        else:
            return None  # batched at a lower level: each sample of that level has its own positions
    return out


def _index(op, level, size, args, kwargs):
    inp, indices = args[0], list(args[1])
    _refuse_batched_masks(indices, level)
    if any(_is_mask(i) for i in indices):
        indices = _mask_as_positions(indices)
        if indices is None:
            return _loop(op, op.name, level, size, args, kwargs)
    tensors = [i for i in indices if i is not None]
    if not _is_batched(inp, level) or any(_is_batched(i, level) for i in tensors):
        return _loop(op, op.name, level, size, args, kwargs)
    x, _ = _front(inp, level)
    positions = [p for p, i in enumerate(indices) if i is not None]
    adjacent = positions == list(range(positions[0], positions[-1] + 1)) if positions else True
    out = op(x, [None, *indices])
    if adjacent:
        return wrap(out, 0, level)
    # separated index tensors put their broadcast dims first, then the remaining dims (the batch dim first)
    index_ndim = len(ember.broadcast_shapes(*[tuple(i.shape) for i in tensors]))
    return wrap(out, index_ndim, level)


# ---------------------------------------------------------------------------------------------------
# in-place ops


#: in-place ops that work element by element (besides those tagged pointwise): they run on the inner tensor
#: itself, so autograd records the in-place op (relu_ saves its result, not the input it overwrites)
_ELEMENTWISE_INPLACE = frozenset({"copy_", "fill_", "relu_", "hardtanh_", "leaky_relu_", "elu_", "selu_", "celu_",
                                  "threshold_"})


class UnbatchedWrite(RuntimeError):
    """An in-place op would write a batched tensor into one that is not batched (PyTorch's error)."""


def _inplace(op, level, size, args, kwargs):
    self = args[0]
    if not _is_batched(self, level):
        raise UnbatchedWrite(
            f"vmap: {op.name}(self, *extra_args) is not possible because there exists a Tensor `other` in "
            "extra_args that has more elements than `self`. This happened due to `other` being vmapped over but "
            f"`self` not being vmapped over in a vmap. Please try to use out-of-place operators instead of "
            f"{op.name}."
        )
    if "pointwise" in op.tags or op.name in _ELEMENTWISE_INPLACE:
        x, _ = _front(self, level)
        ndim = self.ndim

        def prepare(v):
            if _is_batched(v, level):
                inner, _ = _front(v, level)
                return _pad_after_batch(inner, ndim - (inner.ndim - 1))
            return v

        op(x, *[prepare(a) for a in args[1:]], **{k: prepare(v) for k, v in kwargs.items()})
        return self
    if op.name == "zero_":
        op(self._inner)
        return self
    if op.functional is not None:
        self.copy_(op.functional(*args, **kwargs))
        return self
    return _loop(op, op.name, level, size, args, kwargs)


# ---------------------------------------------------------------------------------------------------
# random ops


_RANDOM_ERROR = (
    "vmap: called random operation while in randomness error mode. Please either use the 'same' or "
    "'different' randomness flags on vmap or perform the randomness operation out of vmap"
)

_DROPOUTS = ("dropout", "dropout1d", "dropout2d", "dropout3d")
_LIKE = ("rand_like", "randn_like", "randint_like")


def random_call(op, info, args, kwargs):
    """A random op that meets batched tensors, under the vmap's ``randomness``.

    * ``"error"``: raise, as PyTorch does (dropout and friends only when they draw: ``training=True``);
    * ``"different"``: each sample draws its own numbers (one call draws for the whole batch);
    * ``"same"``: every sample gets the same draws (``*_like`` ops, dropout, in-place fills).

    Raises:
        RuntimeError: in ``"error"`` mode, or ``"same"`` for an op that cannot share its draws.
    """
    args, kwargs = _normalize(op, args, kwargs)
    level, size = info.number, info.size
    x = args[0]
    if op.name in _TRAINING_FLAG and not _draws(op, args):
        if op.name in _DROPOUTS and not _training(op, args):
            return x  # PyTorch's dropout returns its input itself outside training
        return _run(op, level, size, args, kwargs)  # not training: no random numbers are drawn
    if info.randomness == "error":
        raise RuntimeError(_RANDOM_ERROR)
    if info.randomness == "different":
        if op.kind == "inplace":  # uniform_ and friends: one call fills the whole batch
            if not _is_batched(x, level):
                return _inplace(op, level, size, args, kwargs)  # raises: self is not batched
            op(x._inner, *args[1:], **kwargs)
            return x
        rule = _DIFFERENT.get(op.name)
        if rule is not None:
            return rule(op, level, size, args, kwargs)
        return _loop(op, op.name, level, size, args, kwargs)
    # "same": draw for one sample, use it for all
    if op.name in _LIKE:
        return op(ember.empty(tuple(x.shape), dtype=x.dtype, device=x.device), *args[1:], **kwargs)
    if op.name in _DROPOUTS and not (len(args) > 3 and args[3]):
        mask = op(ember.ones(tuple(x.shape), dtype=x.dtype, device=x.device), *args[1:3])
        return x * mask
    if op.kind == "inplace" and _is_batched(x, level):
        sample = x._inner.select(x._bdim, 0)
        op(sample, *args[1:], **kwargs)
        x._inner.copy_(sample.unsqueeze(x._bdim).expand_as(x._inner).clone())
        return x
    raise RuntimeError(
        f"vmap: randomness='same' is not supported for {op.name} with batched inputs; use randomness='different' "
        "or draw outside vmap"
    )


# ops with a ``training`` argument (position 2 for the dropouts, 3 for rrelu) that draw only when training
_TRAINING_FLAG = {"dropout": (2, True), "dropout1d": (2, True), "dropout2d": (2, True), "dropout3d": (2, True),
                  "alpha_dropout": (2, False), "feature_alpha_dropout": (2, False), "rrelu": (3, False)}


def _training(op, args):
    position, default = _TRAINING_FLAG[op.name]
    return bool(args[position] if len(args) > position else default)


def _draws(op, args):
    p = args[1] if op.name != "rrelu" and len(args) > 1 else 0.5
    return _training(op, args) and p != 0


def _keep_bdim(op, level, size, args, kwargs):
    """Elementwise random ops (dropout, rrelu, ``*_like``): one call on the inner tensor draws for every sample."""
    if _others_batched(list(args[1:]) + list(kwargs.values()), level):
        return _loop(op, op.name, level, size, args, kwargs)
    x = args[0]
    return _wrap_out(op(x._inner, *args[1:], **kwargs), level, x._bdim)


#: Rules of random ops under ``randomness="different"`` (the others loop, each sample drawing in turn).
_DIFFERENT = {
    "dropout": _keep_bdim, "alpha_dropout": _keep_bdim, "rrelu": _keep_bdim,
    "rand_like": _keep_bdim, "randn_like": _keep_bdim, "randint_like": _keep_bdim,
    "dropout1d": _fold_rule(1), "dropout2d": _fold_rule(2), "dropout3d": _fold_rule(3),
    "feature_alpha_dropout": _fold_rule(lambda args: args[0].ndim - 2),
    "gumbel_softmax": _dim_rule("dim"),
    "bernoulli": _pointwise, "normal": _pointwise,
}


# ---------------------------------------------------------------------------------------------------
# Python functions that hand themselves to __ember_function__ whole (not registry ops)


def _multi_head_attention(func, level, size, args, kwargs):
    """``multi_head_attention_forward`` with shared weights and masks: the vmap batch joins the function's own
    batch dim (``(L, N, E)`` samples become ``(L, B*N, E)``), one call for the whole batch. Per-sample weights
    or attention masks, and dropout while training, return NotImplemented (the call then runs per sample)."""
    bound = inspect.signature(func).bind(*args, **kwargs)
    bound.apply_defaults()
    a = bound.arguments
    q, k, v, padding = a["query"], a["key"], a["value"], a["key_padding_mask"]
    folded = {"query", "key", "value", "key_padding_mask"}
    others = [value for name, value in a.items() if name not in folded]
    if _others_batched(others, level) or (a["training"] and a["dropout_p"] > 0) or len({q.ndim, k.ndim, v.ndim}) > 1:
        return NotImplemented
    sample_batch = q.shape[1] if q.ndim == 3 else 1
    if q.ndim not in (2, 3) or (q.ndim == 3 and any(t.shape[1] != sample_batch for t in (k, v))):
        return NotImplemented  # the function's own checks raise in the per-sample calls

    def fold(t):  # (B, L, N, E) or (B, L, E) -> (L, B*N, E)
        t = _expanded(t, level, size).movedim(0, 1)
        return t.reshape(t.shape[0], size * sample_batch, t.shape[-1])

    a["query"], a["key"], a["value"] = fold(q), fold(k), fold(v)
    if padding is not None:  # (N, S) or (S,) per sample -> (B*N, S)
        a["key_padding_mask"] = _expanded(padding, level, size).reshape(size * sample_batch, padding.shape[-1])
    mask = a["attn_mask"]
    if mask is not None and mask.ndim == 3:  # (N*H, L, S): one block of rows per sample
        a["attn_mask"] = mask.expand(size, *mask.shape).reshape(size * mask.shape[0], *mask.shape[1:])
    out, weights = func(**a)
    out = out.reshape(out.shape[0], size, *((sample_batch,) if q.ndim == 3 else ()), out.shape[-1])
    if weights is not None:
        weights = weights.reshape(size, *((sample_batch,) if q.ndim == 3 else ()), *weights.shape[1:])
        weights = wrap(weights, 0, level)
    return wrap(out, 1, level), weights


#: name -> batching rule of Python functions that reach ``batch_call`` whole (``rule(func, level, size, args,
#: kwargs)``, returning NotImplemented for calls it leaves to the loop)
FUNCTION_RULES = {"multi_head_attention_forward": _multi_head_attention}


# ---------------------------------------------------------------------------------------------------
# the table


def _pointwise_names():
    return [
        op.name for op in registry.values()
        if "pointwise" in op.tags and op.kind == "function" and op.category == "prim"
    ]


def _fill_table():
    register(_pointwise_names() + ["complex", "polar"], _pointwise)
    register(["clone", "detach", "_to_copy"], _same_layout)
    register(["sum", "prod", "amax", "amin", "all", "any", "argmax", "argmin", "var", "median", "nanmedian",
              "mode", "quantile", "nanquantile"], _reduction)
    register(["cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "sort", "topk", "argsort", "kthvalue"],
             _dim_rule("dim"))
    register(["softmax", "log_softmax"], _softmax)
    register(["flip"], _dim_rule("dims"))
    register(["transpose"], _dim_rule("dim0", "dim1"))
    register(["select", "slice", "narrow"], _dim_rule("dim"))
    register(["diagonal"], _dim_rule("dim1", "dim2"))
    register(["unfold"], _dim_rule("dimension"))
    register(["unsqueeze"], _dim_rule("dim", extra_dims=1))
    register(["squeeze"], _squeeze)
    register(["view", "reshape"], _view)
    register(["as_strided"], _as_strided)
    register([n for n in ("_stft_frames", "_stft_frames_backward") if n in registry], _fold_into_leading_dim)
    register(["expand"], _expand)
    register(["permute"], _permute)
    register(["t"], _t)
    register(["view_as_real"], _same_layout_front)
    register(["view_as_complex"], _view_as_complex)
    register(["cat"], _cat)
    register(["matmul"], _matmul)
    register(["convolution"], _convolution)
    register(["linear"], _linear)
    register(["batch_norm"], _batch_norm)
    register(["cross_entropy"], _cross_entropy)
    register(["masked_fill"], _masked_fill)
    register([n for n in ("linalg_solve", "linalg_solve_ex") if n in registry], _linalg_solve)
    register(["masked_select"], _masked_select)
    register(["embedding"], _embedding)
    for d in (1, 2, 3):
        register([f"avg_pool{d}d", f"max_pool{d}d_with_indices", f"adaptive_avg_pool{d}d",
                  f"adaptive_max_pool{d}d_with_indices", f"lp_pool{d}d"], _fold_rule(d))
    register(["interpolate"], _fold_rule(lambda args: args[0].ndim - 2))
    register(["im2col"], _fold_rule(2))
    register(["fold"], _fold_rule(1))
    register(["pad"], _pad)
    register(["gather"], _gather_like((0, 2)))
    register(["scatter", "scatter_add", "scatter_reduce"], _gather_like((0, 2, 3)))
    register(["index"], _index)
    register([n for n in ("linalg_vector_norm",) if n in registry], _reduction)
    register([n for n in ("_standard_gamma_grad",) if n in registry], _pointwise)
    # the linear algebra prims take any leading batch dims (those over dims are reductions); composites decompose
    for op in registry.values():
        if "linalg" in op.tags and op.kind == "function" and op.category == "prim" and op not in RULES:
            params = op.signature.parameters
            if "dim" not in params:
                RULES[op] = _leading_batch
            elif "keepdim" in params:
                RULES[op] = _reduction
    register([n for n in ("_fft_c2c", "_fft_r2c", "_fft_c2r") if n in registry], _dim_rule("dim"))


def _t(op, level, size, args, kwargs):
    x = args[0]
    return x.transpose(0, 1) if x.ndim == 2 else x.view(tuple(x.shape))  # logical ops: their rules run


#: the dims of one problem in each tensor argument of the linear algebra prims that take several (their
#: other dims are batch dims, which broadcast); ``_linalg_solve_lu``'s ``B`` is a matrix here (a vector
#: right-hand side is made a one-column matrix first)
_CORE_DIMS = {"linalg_solve_triangular": (2, 2), "linalg_lu_solve": (2, 1, 2), "linalg_ldl_solve": (2, 1, 2),
              "_lu_unpack": (2, 1), "_linalg_solve_lu": (2, 2)}


def _leading_batch(op, level, size, args, kwargs):
    """Ops that take any leading batch dims (``(*, n, n)`` linear algebra): every tensor gets the batch dim first.

    When a sample's operands have batch dims of different lengths (one right-hand side for a batch of
    matrices), the shorter ones are padded with size-1 dims after the vmap batch dim, so that the vmap
    batch dims align and the sample's own batch dims broadcast as they would alone (:data:`_CORE_DIMS`
    gives each op's problem dims). Ops of several tensors not listed there run per sample in that case.
    """
    if any(_is_batched(v, level) for v in kwargs.values()):
        return _loop(op, op.name, level, size, args, kwargs)
    tensors = [a for a in args if isinstance(a, Tensor)]
    if len({a.ndim for a in tensors}) == 1:
        args = [_expanded(a, level, size) if isinstance(a, Tensor) else a for a in args]
        return _wrap_out(op(*args, **kwargs), level)
    core = _CORE_DIMS.get(op.name)
    if core is None or len(core) != len(tensors) or any(isinstance(a, Tensor) for a in args[len(core):]):
        return _loop(op, op.name, level, size, args, kwargs)
    vector = op.name == "_linalg_solve_lu" and _is_vector_rhs(tensors[0], tensors[1])
    left = kwargs.get("left", True)
    inner = [_expanded(a, level, size) for a in tensors]
    if vector:  # the right-hand side as one column (one row for left=False)
        inner[1] = inner[1].unsqueeze(-1 if left else -2)
    ranks = [t.ndim - 1 for t in inner]
    lead = max(r - c for r, c in zip(ranks, core))
    inner = [_pad_after_batch(t, lead - (r - c)) for t, r, c in zip(inner, ranks, core)]
    out = op(*inner, *args[len(core):], **kwargs)
    if op.name == "_linalg_solve_lu":  # X, then A's LU, pivots and info: A's own batch shape, without the padding
        a = tuple(tensors[0].shape)
        x = out[0].squeeze(-1 if left else -2) if vector else out[0]
        out = (x, *(_merge(t, (size, *shape)) for t, shape in zip(out[1:], (a, a[:-1], a[:-2]))))
    return _wrap_out(out, level)


def _linalg_solve(op, level, size, args, kwargs):
    """``linalg.solve`` (``solve_ex``): ``_linalg_solve_lu``'s rule, then the singularity check on the whole
    batch's ``info`` (the decomposition reads it, which a batched tensor refuses)."""
    from ember._ops._linalg_common import raise_for_info
    from ember._ops.linalg_solve import _singular_solve

    A, B = args[0], args[1]
    check = op.name == "linalg_solve" or kwargs.get("check_errors", False)
    X, _, _, info = registry["_linalg_solve_lu"](A, B, left=kwargs.get("left", True))
    inner, _ = _front(info, level)
    if type(inner) is not Tensor:  # batched at a lower level too: its values are read per sample
        return _loop(op, op.name, level, size, args, kwargs)
    if check:
        name = "torch.linalg.solve" if op.name == "linalg_solve" else "torch.linalg.solve_ex"
        raise_for_info(name, inner._data, tuple(inner.shape), _singular_solve)
    return X if op.name == "linalg_solve" else op.return_type(X, info)


def _is_vector_rhs(A, B):
    """PyTorch's rule for ``linalg.solve``: ``B`` is a vector (or a batch of them) rather than a matrix."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def _as_strided(op, level, size, args, kwargs):
    """``as_strided`` where each sample is one row-major block of a contiguous batch; else per sample.

    As in ``torch.func``, a ``storage_offset`` counts from each sample's first element.

    A batched tensor reports row-major strides for one sample (``BatchedTensor.stride``), so a geometry
    taken from them addresses one sample's block; with the batch first and contiguous, sample ``i``'s
    block starts ``i * numel`` elements further on. That is the buffer autograd's ``CopySlices`` makes
    for a batched gradient (the double backward of a slice under ``jacrev``/``hessian``).
    """
    x, size_arg, stride, offset = args[0], args[1], args[2], args[3]
    inner, batched = _front(x, level)
    if not batched or type(inner) is not Tensor or not inner.is_contiguous() or \
            _is_batched(size_arg, level) or _is_batched(stride, level):
        if offset is not None and batched:
            raise RuntimeError(
                "vmap: as_strided with a storage_offset needs each sample to be one row-major block of a "
                "contiguous batch (the offset counts from the sample's first element); call .contiguous() on the "
                "batch before vmap, or move the batch dim to the front"
            )
        return _loop(op, op.name, level, size, args, kwargs)
    numel = math.prod(x.shape)
    shape = (size, *((size_arg,) if isinstance(size_arg, int) else size_arg))
    strides = (numel, *((stride,) if isinstance(stride, int) else stride))
    start = inner.storage_offset() + (0 if offset is None else int(offset))
    return wrap(op(inner, shape, strides, start), 0, level)


def _fold_into_leading_dim(op, level, size, args, kwargs):
    """Ops over a fixed-rank input whose first dim is the op's own batch (stft's frame prims): the vmap
    batch folds into it; the other arguments must be unbatched."""
    if _others_batched(list(args[1:]) + list(kwargs.values()), level):
        return _loop(op, op.name, level, size, args, kwargs)
    x, _ = _front(args[0], level)
    out = op(x.flatten(0, 1), *args[1:], **kwargs)
    return wrap(out.unflatten(0, (size, x.shape[1])), 0, level)


def _same_layout_front(op, level, size, args, kwargs):
    x, _ = _front(args[0], level)
    return wrap(op(x), 0, level)


_fill_table()
