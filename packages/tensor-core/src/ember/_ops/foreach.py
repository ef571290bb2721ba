"""Multi-tensor ("foreach") list ops: PyTorch's ``torch._foreach_*``, as ``ember._foreach_*``.

``ember._foreach_add_(tensors, other, alpha=1)`` is ``t.add_(o, alpha=alpha)`` for each
``t`` of ``tensors``; ``other`` is a tensor list (paired by index), a list of numbers
(paired by index) or one shared number or tensor. The ``_``-suffixed functions write
into the tensors of their first list and return None; the others return a new list.
They exist for the optimizers' ``foreach=True`` paths (``ember.optim``) and
``clip_grad_norm_(foreach=True)``: one call per step per list instead of one per
parameter.

**Not registry ops** (docs/internals.rst: the ``_foreach_*`` entry of its list of differences).
Each list op is defined as the loop over its per-tensor op, which *is* a registry op (``add_``,
``lerp_``, ...).
Wherever that loop is observed, it runs op by op through the dispatcher: under a
dispatch mode (FakeTensor, make_fx/AOT tracing, functionalization), with a tensor
subclass or FX proxy (``__ember_function__``), off the CPU (CUDA later gets the
per-tensor CuPy kernels, and a fused multi-tensor kernel can be added here as
another fast path), and when autograd records (grad mode on and a tensor requires
grad). So tracing, autograd and every backend see only per-tensor registry ops, with
their meta checks, derivative formulas and sample inputs, and the list ops need none
of their own. A registry op returning a list of tensors would need list-valued meta
functions, derivative entries, OpInfo samples and FX nodes for no behaviour that the
per-tensor ops do not already give.

Only the plain case is special: plain CPU tensors (``Tensor`` or ``nn.Parameter``),
no mode, nothing to record. The in-place ops then call the per-tensor ops' direct
CPU kernels (``_pointwise_helpers._INTO``, the kernels ``x.add_(...)`` itself runs,
hence the same bits) without the per-call dispatch, and bump each tensor's version
counter as the dispatcher does. A tensor whose operands those kernels do not take
(another dtype or shape, a tensor weight, an integer tensor) goes through its
registry op instead, which also raises the op's errors.
"""

from __future__ import annotations

from itertools import repeat

import numpy as np

from .._device import CPU as _CPU
from .._tensor import Tensor
from ._dispatch import _disabled_ember_function, ops_intercepted, profiler_recorder, state
from ._pointwise_helpers import _INTO, _direct_target
from ._registry import registry

__all__ = [
    "_foreach_abs", "_foreach_abs_", "_foreach_add", "_foreach_add_", "_foreach_addcdiv", "_foreach_addcdiv_",
    "_foreach_addcmul", "_foreach_addcmul_", "_foreach_clamp_max", "_foreach_clamp_max_", "_foreach_clamp_min",
    "_foreach_clamp_min_", "_foreach_copy_", "_foreach_div", "_foreach_div_", "_foreach_exp", "_foreach_exp_",
    "_foreach_lerp", "_foreach_lerp_", "_foreach_maximum", "_foreach_maximum_", "_foreach_minimum",
    "_foreach_minimum_", "_foreach_mul", "_foreach_mul_", "_foreach_neg", "_foreach_neg_", "_foreach_norm",
    "_foreach_reciprocal", "_foreach_reciprocal_", "_foreach_sign", "_foreach_sqrt", "_foreach_sqrt_",
    "_foreach_sub", "_foreach_sub_", "_foreach_zero_",
]

_NUMBERS = frozenset({int, float, bool, complex})
_PLAIN_TYPES = {Tensor: True}  # tensor type -> whether ops on it skip __ember_function__ (Tensor, Parameter)


def _is_plain(t):
    kind = type(t)
    plain = _PLAIN_TYPES.get(kind)
    if plain is None:
        hook = getattr(kind, "__ember_function__", None)
        plain = _PLAIN_TYPES[kind] = isinstance(t, Tensor) and getattr(hook, "__func__", None) is (
            _disabled_ember_function
        )
    return plain


def _fast(tensors, operands):
    """Whether the direct CPU kernels may run on ``tensors`` and the tensors among ``operands``."""
    if ops_intercepted():
        return False
    grad = state.grad_enabled
    for group in (tensors, *operands):
        if type(group) is not list:
            group = (group,)
        for t in group:
            if isinstance(t, Tensor):
                if not _is_plain(t) or (t._device is not _CPU and t._device.type != "cpu"):
                    return False
                if grad and t._requires_grad:
                    return False
            elif type(t) not in _NUMBERS:  # an FX proxy or another object that overrides ops
                return False
    return True


def _tensor_list(name, tensors):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{name}(): argument 'self' must be a list or tuple of Tensors, not {type(tensors).__name__}")
    if len(tensors) == 0:
        raise RuntimeError("Tensor list must have at least one tensor.")
    for t in tensors:
        if not isinstance(t, Tensor) and not hasattr(type(t), "__ember_function__"):  # FX proxies pass
            raise TypeError(f"{name}(): expected a list of Tensors, but found an element of type {type(t).__name__}")
    return list(tensors)


def _operands(name, tensors, operands):
    """``operands`` with each list (or tuple) made a list checked to pair with ``tensors``."""
    out = []
    for x in operands:
        if isinstance(x, (list, tuple)):
            if len(x) != len(tensors):
                raise RuntimeError(
                    f"{name}(): Tensor lists must have the same number of tensors, got {len(tensors)} and {len(x)}"
                )
            x = list(x)
        out.append(x)
    return out


def _rows(operands, n):
    """The per-index argument tuples of ``operands``: a list gives its i-th element, anything else itself."""
    if not operands:
        return [()] * n
    return list(zip(*[x if type(x) is list else repeat(x, n) for x in operands]))


def _same_shape(out, args):
    """Whether every tensor among ``args`` has ``out``'s shape or no dimensions (what the kernels assume)."""
    for a in args:
        if isinstance(a, Tensor) and a._data.shape != out.shape and a._data.ndim:
            return False
    return True


def _inplace(name, tensors, operands, kwargs, direct=None, slow=None):
    """``tensors[i].<name>_(*operands at i, **kwargs)`` for each ``i``, through the direct kernel when possible.

    ``direct`` (default: the op's direct kernel) and ``slow`` (default: the registry op ``<name>_``) are
    the two ways to run one index.
    """
    fname = f"_foreach_{name}_"
    tensors = _tensor_list(fname, tensors)
    operands = _operands(fname, tensors, operands)
    return _one_profiler_row(fname, tensors, _inplace_each, name, tensors, operands, kwargs, direct, slow)


def _one_profiler_row(fname, tensors, fn, *args):
    """``fn(*args)``; while a profiler records, inside one ``aten::<fname>`` row (the list op is one row of
    it, as in PyTorch, not a row per tensor)."""
    recorder = profiler_recorder()
    if recorder is None:
        return fn(*args)
    with recorder.fused_call(f"aten::{fname}", tensors):
        return fn(*args)


def _inplace_each(name, tensors, operands, kwargs, direct, slow):
    """:func:`_inplace`'s work on checked arguments."""
    if name in _CUDA_FUSED and _on_cuda(tensors[0]) and _cuda_fused(name, tensors, operands, kwargs):
        return
    if slow is None:
        slow = registry[name + "_"]
    into = direct if direct is not None else _INTO.get(name)
    fast = into is not None and _fast(tensors, operands)
    for t, args in zip(tensors, _rows(operands, len(tensors))):
        if fast:
            out = _direct_target(t)
            if out is not None and _same_shape(out, args) and into(out, *args, **kwargs):
                t._bump_version()
                continue
        slow(t, *args, **kwargs)


# -- the fused CUDA kernels (ember.cuda.kernels.foreach_kernels) --------------------------------

_CUDA_FUSED = frozenset({"add", "sub"})  # list ops with a one-launch kernel for tensor lists on the GPU


def _on_cuda(t):
    return isinstance(t, Tensor) and t._device.type == "cuda"


def _cuda_fused(name, tensors, operands, kwargs):
    """Run ``_foreach_<name>_(tensors, other_list, alpha=...)`` as one CUDA kernel when only plain cuda tensors
    take part, no mode is active and nothing records (the per-tensor ops' plain case); whether it ran."""
    if len(operands) != 1 or type(operands[0]) is not list or ops_intercepted() or (kwargs.keys() - {"alpha"}):
        return False
    grad = state.grad_enabled
    for group in (tensors, operands[0]):
        for t in group:
            if not isinstance(t, Tensor) or not _is_plain(t) or t._device.type != "cuda" or (grad and t._requires_grad):
                return False
    from ..cuda.kernels import foreach_kernels  # (imported with a cuda tensor at hand: CuPy is loaded)

    if not foreach_kernels.add_(name, tensors, operands[0], kwargs.get("alpha", 1)):
        return False
    for t in tensors:
        t._bump_version()
    return True


def _outplace(name, tensors, operands, kwargs):
    """``[<name>(tensors[i], *operands at i, **kwargs) for each i]`` through the registry op."""
    fname = f"_foreach_{name}"
    tensors = _tensor_list(fname, tensors)
    operands = _operands(fname, tensors, operands)
    op = registry[name]
    return [op(t, *args, **kwargs) for t, args in zip(tensors, _rows(operands, len(tensors)))]


# -- in-place ops without an in-place registry op ---------------------------------------------


def _binary_into(ufunc):
    """A direct kernel ``ufunc(out, other) -> out`` for another tensor of out's dtype (as the functional op)."""

    def into(out, other):
        if type(other) is not Tensor or other._data.dtype != out.dtype or type(other._data) is not np.ndarray:
            return False
        np.copyto(out, ufunc(out, other._data))  # a new array first, as t.copy_(maximum(t, o)) computes it
        return True

    return into


def _copy_into(out, src):
    if type(src) is not Tensor or src._data.dtype != out.dtype or type(src._data) is not np.ndarray:
        return False
    np.copyto(out, src._data)
    return True


def _zero_into(out):
    out.fill(0)
    return True


_SLOW = {
    "maximum": lambda t, o: t.copy_(registry["maximum"](t, o)),
    "minimum": lambda t, o: t.copy_(registry["minimum"](t, o)),
    "copy": lambda t, src: t.copy_(src),
    "zero": lambda t: t.zero_(),
    # addcmul_/addcdiv_ with a per-tensor value list: the value comes as a third positional operand
    "addcmul": lambda t, a, b, v: t.addcmul_(a, b, value=v),
    "addcdiv": lambda t, a, b, v: t.addcdiv_(a, b, value=v),
}
_DIRECT = {
    "maximum": _binary_into(np.maximum),
    "minimum": _binary_into(np.minimum),
    "copy": _copy_into,
    "zero": _zero_into,
}


# -- the list ops -------------------------------------------------------------------------------


def _foreach_add_(self, other, *, alpha=1):
    """``t.add_(o, alpha=alpha)`` for each tensor ``t`` of ``self`` (``other``: tensors, numbers or one value).

    Raises:
        RuntimeError: an empty ``self``, or a list ``other`` of another length; the per-tensor op's errors.
    """
    _inplace("add", self, (other,), {"alpha": alpha} if alpha != 1 or type(alpha) is not int else {})


def _foreach_add(self, other, *, alpha=1):
    """``[t.add(o, alpha=alpha) for each t]``; see :func:`_foreach_add_`."""
    return _outplace("add", self, (other,), {"alpha": alpha} if alpha != 1 or type(alpha) is not int else {})


def _foreach_sub_(self, other, *, alpha=1):
    """``t.sub_(o, alpha=alpha)`` for each tensor of ``self``; see :func:`_foreach_add_`."""
    _inplace("sub", self, (other,), {"alpha": alpha} if alpha != 1 or type(alpha) is not int else {})


def _foreach_sub(self, other, *, alpha=1):
    """``[t.sub(o, alpha=alpha) for each t]``; see :func:`_foreach_add_`."""
    return _outplace("sub", self, (other,), {"alpha": alpha} if alpha != 1 or type(alpha) is not int else {})


def _foreach_mul_(self, other):
    """``t.mul_(o)`` for each tensor of ``self``; see :func:`_foreach_add_`."""
    _inplace("mul", self, (other,), {})


def _foreach_mul(self, other):
    """``[t.mul(o) for each t]``; see :func:`_foreach_add_`."""
    return _outplace("mul", self, (other,), {})


def _foreach_div_(self, other):
    """``t.div_(o)`` for each tensor of ``self``; see :func:`_foreach_add_`."""
    _inplace("div", self, (other,), {})


def _foreach_div(self, other):
    """``[t.div(o) for each t]``; see :func:`_foreach_add_`."""
    return _outplace("div", self, (other,), {})


def _foreach_addcmul_(self, tensor1, tensor2, value=1):
    """``t.addcmul_(t1, t2, value=v)`` for each index (``value``: one number or a list of numbers)."""
    if isinstance(value, (list, tuple)):
        _inplace("addcmul", self, (tensor1, tensor2, list(value)), {}, _AddcValue("addcmul"), _SLOW["addcmul"])
    else:
        _inplace("addcmul", self, (tensor1, tensor2), {"value": value})


def _foreach_addcmul(self, tensor1, tensor2, value=1):
    """``[t.addcmul(t1, t2, value=v) for each index]``; see :func:`_foreach_addcmul_`."""
    return _addc_outplace("addcmul", self, tensor1, tensor2, value)


def _foreach_addcdiv_(self, tensor1, tensor2, value=1):
    """``t.addcdiv_(t1, t2, value=v)`` for each index (``value``: one number or a list of numbers)."""
    if isinstance(value, (list, tuple)):
        _inplace("addcdiv", self, (tensor1, tensor2, list(value)), {}, _AddcValue("addcdiv"), _SLOW["addcdiv"])
    else:
        _inplace("addcdiv", self, (tensor1, tensor2), {"value": value})


def _foreach_addcdiv(self, tensor1, tensor2, value=1):
    """``[t.addcdiv(t1, t2, value=v) for each index]``; see :func:`_foreach_addcdiv_`."""
    return _addc_outplace("addcdiv", self, tensor1, tensor2, value)


class _AddcValue:
    """The addcmul_/addcdiv_ call with a per-tensor ``value`` passed as a third positional operand."""

    def __init__(self, name):
        self.into = _INTO[name]
        self.name = name

    def __call__(self, out, tensor1, tensor2, value):
        return self.into(out, tensor1, tensor2, value=value)


def _addc_outplace(name, self, tensor1, tensor2, value):
    tensors = _tensor_list(f"_foreach_{name}", self)
    t1, t2, values = _operands(f"_foreach_{name}", tensors, (tensor1, tensor2, value))
    op = registry[name]
    return [op(t, a, b, value=v) for t, (a, b, v) in zip(tensors, _rows((t1, t2, values), len(tensors)))]



def _foreach_lerp_(self, tensors1, weight):
    """``t.lerp_(end, weight)`` for each index (``weight``: one number, a tensor list or a list of numbers)."""
    _inplace("lerp", self, (tensors1, weight), {})


def _foreach_lerp(self, tensors1, weight):
    """``[t.lerp(end, weight) for each index]``; see :func:`_foreach_lerp_`."""
    return _outplace("lerp", self, (tensors1, weight), {})


def _foreach_maximum_(self, other):
    """``t.copy_(ember.maximum(t, o))`` for each index (NaN wins, as ``maximum``)."""
    _inplace("maximum", self, (other,), {}, _DIRECT["maximum"], _SLOW["maximum"])


def _foreach_maximum(self, other):
    """``[ember.maximum(t, o) for each index]``."""
    return _outplace("maximum", self, (other,), {})


def _foreach_minimum_(self, other):
    """``t.copy_(ember.minimum(t, o))`` for each index (NaN wins, as ``minimum``)."""
    _inplace("minimum", self, (other,), {}, _DIRECT["minimum"], _SLOW["minimum"])


def _foreach_minimum(self, other):
    """``[ember.minimum(t, o) for each index]``."""
    return _outplace("minimum", self, (other,), {})


def _foreach_clamp_min_(self, other):
    """``t.clamp_(min=o)`` for each tensor of ``self``."""
    _foreach_clamp("clamp_min", self, other, inplace=True)


def _foreach_clamp_min(self, other):
    """``[t.clamp(min=o) for each t]``."""
    return _foreach_clamp("clamp_min", self, other, inplace=False)


def _foreach_clamp_max_(self, other):
    """``t.clamp_(max=o)`` for each tensor of ``self``."""
    _foreach_clamp("clamp_max", self, other, inplace=True)


def _foreach_clamp_max(self, other):
    """``[t.clamp(max=o) for each t]``."""
    return _foreach_clamp("clamp_max", self, other, inplace=False)


def _foreach_clamp(name, self, other, inplace):
    """``t.clamp_(min=o)`` (``clamp_min``) or ``t.clamp_(max=o)`` for each index, or their out-of-place forms."""
    key = "min" if name == "clamp_min" else "max"
    tensors = _tensor_list(f"_foreach_{name}", self)
    (bounds,) = _operands(f"_foreach_{name}", tensors, (other,))
    per_tensor = bounds if type(bounds) is list else [bounds] * len(tensors)
    if not inplace:
        clamp = registry["clamp"]
        return [clamp(t, **{key: b}) for t, b in zip(tensors, per_tensor)]
    direct = _INTO["clamp"]
    _inplace("clamp", tensors, (per_tensor,), {}, lambda out, b: direct(out, **{key: b}),
             lambda t, b: t.clamp_(**{key: b}))
    return None


def _foreach_copy_(self, src, non_blocking=False):
    """``t.copy_(s)`` for each index."""
    _inplace("copy", self, (src,), {}, _DIRECT["copy"], _SLOW["copy"])


def _foreach_zero_(self):
    """``t.zero_()`` for each tensor of ``self``."""
    _inplace("zero", self, (), {}, _DIRECT["zero"], _SLOW["zero"])


def _unary(name):
    def inplace(self):
        _inplace(name, self, (), {})

    def outplace(self):
        return _outplace(name, self, (), {})

    inplace.__name__, outplace.__name__ = f"_foreach_{name}_", f"_foreach_{name}"
    inplace.__doc__ = f"``t.{name}_()`` for each tensor of ``self``."
    outplace.__doc__ = f"``[t.{name}() for each t]``."
    return inplace, outplace


_foreach_sqrt_, _foreach_sqrt = _unary("sqrt")
_foreach_neg_, _foreach_neg = _unary("neg")
_foreach_abs_, _foreach_abs = _unary("abs")
_foreach_exp_, _foreach_exp = _unary("exp")
_foreach_reciprocal_, _foreach_reciprocal = _unary("reciprocal")


def _foreach_sign(self):
    """``[t.sign() for each t]``."""
    return _outplace("sign", self, (), {})


def _foreach_norm(self, ord=2, dtype=None):  # noqa: A002 - PyTorch's argument name
    """``[t.norm(ord) for each t]``: each tensor's vector ``ord``-norm, as 0-d tensors.

    Args:
        self (list[Tensor]): the tensors.
        ord (float): the norm's order (``inf`` for the largest absolute value).
        dtype (ember.dtype, optional): cast each tensor to it first.
    """
    tensors = _tensor_list("_foreach_norm", self)
    if dtype is None and type(ord) in (int, float) and _fast(tensors, ()):
        # plain CPU tensors, nothing recording: the norm op's CPU kernel on each (the same function, so the same
        # bits; it checks its arguments itself) without a dispatch per tensor (a GPT's clip_grad_norm_ over 15
        # gradients: about 20 us a tensor of dispatcher)
        return _one_profiler_row("_foreach_norm", tensors, _norms_direct, tensors, ord)
    norm = registry["norm"]
    return [norm(t if dtype is None else t.to(dtype), ord) for t in tensors]


def _norms_direct(tensors, ord):  # noqa: A002
    """:func:`_foreach_norm`'s direct CPU path: the norm op's CPU kernel on each tensor."""
    from .norms import _norm_cpu

    return [Tensor._make(np.asarray(_norm_cpu(t, ord)), t._device) for t in tensors]
