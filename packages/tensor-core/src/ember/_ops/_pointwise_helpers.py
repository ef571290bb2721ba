"""One-line definitions for pointwise ops: the rule table reads like a list.

``binary(name, np_fn, ...)`` and ``unary(name, np_fn, ...)`` create the op
(meta: broadcasting, PyTorch promotion and the dtypes PyTorch accepts; CPU
kernel: the numpy function) and its in-place variant ``name_``.
``make_inplace(op)`` adds the in-place variant of any op and ``alias(name,
target)`` registers a second public name for an op.

The dtype sets (``ALL``, ``NO_BOOL``, ``NO_COMPLEX``, ``FLOATING``, ...) name
what an op supports; :func:`check_supported` refuses the others with
PyTorch's ``NotImplementedError`` (``"abs" not implemented for 'Bool'``).
"""

from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from .._tensor import Tensor
from . import _cpu_pointwise, _float_errors
from ._array_module import as_array as _as_array  # numpy or CuPy arrays (the CUDA backend)
from ._binary_plan import BinaryRule
from ._float_errors import quiet
from ._registry import COMPOSITE, defop
from ._shapes import broadcast_shapes
from .creation import copy_

__all__ = [
    "binary", "unary", "binary_dtype", "operand", "make_inplace", "alias", "check_supported", "not_implemented",
    "compute_dtype", "check_tensor", "number_keeps_dtype", "ALL", "NO_BOOL", "NO_COMPLEX", "REAL_NO_BOOL", "FLOATING",
    "FLOATING_AND_COMPLEX", "INTEGRAL", "INTEGRAL_AND_BOOL", "COMPLEX", "unary_doc", "binary_doc", "is_int_scalar",
    "operator_methods",
]

_FROM_NP = D.from_numpy_dtype
_BOOL = np.dtype(np.bool_)
_EXTENSION_FLOATS = D.numpy_dtype_set((D.bfloat16,))  # (a set that learns bfloat16 when ml_dtypes loads)

# dtype sets for ``supported=``: the dtypes PyTorch's CPU kernels accept.
ALL = frozenset(D.ALL_DTYPES)
COMPLEX = frozenset({D.complex64, D.complex128})
FLOATING = frozenset({D.float16, D.bfloat16, D.float32, D.float64})
INTEGRAL = frozenset({D.uint8, D.int8, D.int16, D.int32, D.int64})
INTEGRAL_AND_BOOL = INTEGRAL | {D.bool}
NO_BOOL = ALL - {D.bool}
NO_COMPLEX = ALL - COMPLEX
REAL_NO_BOOL = NO_BOOL - COMPLEX
FLOATING_AND_COMPLEX = FLOATING | COMPLEX

# float16 and bfloat16 compute in float32 and round once, as PyTorch's CPU kernels do
# (numpy would round every intermediate step; ml_dtypes' bfloat16 lacks many loops).
_UPCAST = D.numpy_dtype_set((D.float16, D.bfloat16))  # (learns bfloat16 when ml_dtypes loads)
_F32 = np.dtype(np.float32)


def compute_dtype(np_dtype):
    """The numpy dtype to compute ``np_dtype`` values in: float32 for float16/bfloat16, else itself."""
    return _F32 if np_dtype in _UPCAST else np_dtype


def binary_dtype(a, b):
    """PyTorch's result dtype of a binary op on ``a`` and ``b`` (tensors or Python numbers)."""
    if type(a) is Tensor:
        tb = type(b)
        if tb is Tensor:
            da = a._data.dtype
            if da is b._data.dtype and a._data.ndim and b._data.ndim:
                return _FROM_NP(da)
        else:
            dtype = _FROM_NP(a._data.dtype)
            if number_keeps_dtype(dtype, b):
                return dtype
    return D.result_type_of((a, b))


# numpy's error state, set around the unary checked kernels' calls as :func:`~ember._ops._float_errors.quiet` does
# (without the extra call); None where numpy keeps it elsewhere, and the checked kernels are then left out
# (and nothing set where it is already ignore-all: inside another kernel or the backward engine)
_error_state = getattr(_float_errors, "_error_state", None)
if _error_state is not None:
    _IGNORE_ALL = _float_errors.IGNORE_ALL
    _get_error_state, _set_error_state, _reset_error_state = _error_state.get, _error_state.set, _error_state.reset


_NUMBER_CATEGORY = {bool: D.BOOL, int: D.INTEGRAL, float: D.FLOATING, complex: D.COMPLEX}


def number_keeps_dtype(dtype, x):
    """Whether ``x`` (None or a Python number) leaves a tensor's ``dtype`` unchanged in promotion (a fast path)."""
    if x is None:
        return True
    category = _NUMBER_CATEGORY.get(type(x))
    return category is not None and dtype.category >= category


def operand(x, np_dtype):
    """``x`` as something a numpy ufunc computing in ``np_dtype`` accepts.

    Tensors give their array (cast if the dtype differs); Python integers are
    wrapped into the range of an integer ``np_dtype`` like a C cast, since
    numpy refuses out-of-range Python integers.
    """
    if isinstance(x, Tensor):
        data = x._data
        return data if data.dtype == np_dtype else data.astype(np_dtype)
    if np_dtype.kind in "iu" and isinstance(x, int):
        info = np.iinfo(np_dtype)
        if not info.min <= x <= info.max:
            return np.array(x).astype(np_dtype)[()]
    elif np_dtype in _EXTENSION_FLOATS:  # ml_dtypes' bfloat16 takes no Python scalars in its loops
        return np_dtype.type(x)
    return x


def _shape(x):
    return x._data.shape if isinstance(x, Tensor) else ()


_NUMBER_TYPES = (Tensor, bool, int, float, complex, np.number, np.bool_)


def _check_operand(name, arg, x):
    if not isinstance(x, _NUMBER_TYPES):
        raise TypeError(f"{name}(): argument '{arg}' must be Tensor or Number, not {type(x).__name__}")


def check_tensor(name, arg, position, x):
    """Raise PyTorch's ``TypeError`` unless ``x`` is a tensor (``arg`` is the argument's name)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument '{arg}' (position {position}) must be Tensor, not {type(x).__name__}")


def not_implemented(name, dtype):
    """PyTorch's error for a dtype an op has no kernel for: ``"name" not implemented for 'Bool'``."""
    return NotImplementedError(f'"{name}" not implemented for \'{_torch_name(dtype)}\'')


def check_supported(name, dtype, supported):
    """Raise :func:`not_implemented` unless ``dtype`` is in ``supported`` (None: every dtype)."""
    if supported is not None and dtype not in supported:
        raise not_implemented(name, dtype)


def _float_result(dtype):
    return D.get_default_dtype() if dtype.category < D.FLOATING else dtype


_RESULTS = {
    "same": lambda dtype: dtype,
    "float": _float_result,
    "bool": lambda dtype: D.bool,
    "real": lambda dtype: dtype.to_real(),
}


def binary(name, np_fn, *, result="promote", doc, has_inplace=True, has_out=True, tags=("pointwise",), check=None,
           supported=None, scalars="both", upcast=False):
    """Define a broadcasting binary pointwise op ``name(input, other)``.

    Args:
        np_fn: the numpy function computing it, called as ``np_fn(a, b)`` on
            operands converted to the computation dtype.
        result: ``"promote"`` (the promoted dtype), ``"bool"`` (comparisons) or
            ``"float"`` (integers promote to the default float, as true division).
        check: optional extra argument check ``check(input, other, dtype)``.
        supported: the computation dtypes PyTorch accepts (None: all); others
            raise ``NotImplementedError``.
        scalars: which operands may be Python numbers: ``"both"`` (either,
            as ``add``), ``"other"`` (``input`` must be a tensor, as ``eq``) or
            ``"none"`` (both tensors, as ``maximum``); else ``TypeError``.
        upcast: compute float16/bfloat16 in float32 (for multi-step ``np_fn``).
    """
    if scalars not in ("both", "other", "none"):
        raise ValueError(f"binary {name}: scalars must be 'both', 'other' or 'none', got {scalars!r}")
    float_result = result == "float"
    # numpy dtypes the kernel's fast path hands to np_fn as they are (no cast before, none after)
    direct = D.numpy_dtype_set(
        d for d in (supported if supported is not None else ALL)
        if not (float_result and d.category < D.FLOATING) and not (upcast and d in (D.float16, D.bfloat16))
    )

    # the calls without promotion, for the meta function, the kernel and the checked kernel alike; an op
    # with an extra check of its own takes the general path every time
    rule = None
    if check is None:
        rule = BinaryRule(np_fn, result=result, supported=supported, direct=direct, scalars=scalars)
    # large calls in ember._C where np_fn has a C++ twin: through the plan, or (no plan) for operands of one dtype
    code = _cpu_pointwise.BINARY_OPS.get(np_fn)
    into = None
    if code is not None:
        into = _cpu_pointwise.binary_into(rule, code) if rule is not None else _cpu_pointwise.same_dtype_into(code)

    def compute(input, other):
        dtype = binary_dtype(input, other)
        if float_result and dtype.category < D.FLOATING:
            dtype = D.get_default_dtype()
        return dtype

    def meta(input, other):
        plan = rule.plan(input, other) if rule is not None else None
        if plan is not None:  # no promotion (see _binary_plan)
            return MetaArray(plan.shape or _shape(input if type(input) is Tensor else other), plan.dtype)
        if scalars == "both":
            _check_operand(name, "input", input)
            _check_operand(name, "other", other)
            if not isinstance(input, Tensor) and not isinstance(other, Tensor):
                raise TypeError(f"{name}(): expected at least one Tensor argument, got two numbers")
        else:
            check_tensor(name, "input", 1, input)
            if scalars == "none":
                check_tensor(name, "other", 2, other)
            else:
                _check_operand(name, "other", other)
        shape = broadcast_shapes(_shape(input), _shape(other))  # shapes are checked first, as in PyTorch
        dtype = compute(input, other)
        if supported is not None and dtype not in supported:
            raise not_implemented(name, dtype)
        if check is not None:
            check(input, other, dtype)
        out = D.bool if result == "bool" else dtype
        return MetaArray(shape, out.numpy_dtype)

    def cpu(input, other):
        if rule is not None:
            value = rule.direct(input, other)  # the checked kernel's computation (see _binary_plan)
            if value is not None:
                return value
        if result == "bool" and code is not None and type(other) in (int, float):  # a large tensor and a number
            value = _cpu_pointwise.compare_number(code, input, other)
            if value is not None:
                return value
        np_dtype = compute(input, other).numpy_dtype
        if rule is None and into is not None and result != "bool" and _cpu_pointwise.large(input, other):
            shape = broadcast_shapes(_shape(input), _shape(other))
            value = _cpu_pointwise.new_result(into, shape, np_dtype, input, other)
            if value is not None:
                return value
        work = compute_dtype(np_dtype) if upcast else np_dtype
        # PyTorch computes inf/nan silently (1/0, 0/0)
        value = _as_array(quiet(np_fn, operand(input, work), operand(other, work)))
        if result != "bool" and value.dtype != np_dtype:  # upcast, or a function that widened (scipy)
            value = value.astype(np_dtype)
        return value

    meta.__name__ = name
    meta.__doc__ = doc
    op = defop(name, meta, cpu=cpu, has_out=has_out, tags=tags)
    if rule is not None:
        op.register_checked_kernel("cpu", rule.direct)
    op.binary_rule = rule
    if into is not None:
        op.cpu_into = into  # out= and in-place writes (see ember._ops._out, make_inplace)
    op.result_dtype = lambda input, other: D.bool if result == "bool" else compute(input, other)
    if has_inplace:
        make_inplace(op)
    return op


def unary(name, np_fn, *, doc, result="same", has_inplace=True, has_out=True, tags=("pointwise",), check=None,
          supported=None, upcast=False, inplace_check=None):
    """Define a unary pointwise op ``name(input)``.

    Args:
        result: ``"same"`` (input dtype), ``"float"`` (integers -> default float),
            ``"bool"`` (predicates), ``"real"`` (complex -> its real dtype, e.g. abs)
            or a function from the input dtype to the result dtype.
        supported: the input dtypes PyTorch accepts (None: all); others raise
            ``NotImplementedError``.
        upcast: compute float16/bfloat16 in float32 and round once (``"float"``
            results always compute integers in the default float dtype).
        check: optional extra argument check ``check(input)``.
        inplace_check: optional extra check of the in-place variant, ``inplace_check(self)``.
    """
    result_dtype = _RESULTS[result] if isinstance(result, str) else result
    float_result = result == "float"
    native = name in _cpu_pointwise.UNARY_OPS  # a C++ twin for large arrays (neg, abs)
    # input numpy dtype (with the default dtype for "float" results of integers) -> (supported, result numpy
    # dtype, numpy dtype to compute in)
    plans = {}

    def plan(np_dtype):
        """What this op does with an input of ``np_dtype``, worked out once per dtype."""
        found = plans.get(np_dtype)
        if found is not None:
            return found
        dtype = _FROM_NP(np_dtype)
        # only a "float" result of an integer input depends on the default dtype
        key = (np_dtype, D.get_default_dtype()) if float_result and dtype.category < D.FLOATING else np_dtype
        found = plans.get(key)
        if found is None:
            target = result_dtype(dtype).numpy_dtype
            work = target if float_result else np_dtype
            if upcast:
                work = compute_dtype(work)
            found = plans[key] = (supported is None or dtype in supported, target, work)
        return found

    def meta(input):
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
        ok, target, _ = plan(input._data.dtype)
        if not ok:
            raise not_implemented(name, input.dtype)
        if check is not None:
            check(input)
        return MetaArray(input._data.shape, target)

    def cpu(input):
        _, target, work = plan(input._data.dtype)
        data = input._data
        if native and data.size >= _cpu_pointwise.MIN_ELEMENTS and target is data.dtype:
            value = _cpu_pointwise.unary_array(name, data)
            if value is not None:
                return value
        if data.dtype != work:
            data = data.astype(work)
        value = quiet(np_fn, data)
        if type(value) is not np.ndarray:  # numpy gives scalars for zero-dim inputs
            value = _as_array(value)
        return value if value.dtype is target else value.astype(target, copy=False)

    def checked_cpu(input):
        # The meta function's checks and the kernel in one.
        if type(input) is not Tensor:
            return None
        data = input._data
        ok, target, work = plans.get(data.dtype) or plan(data.dtype)
        if not ok:
            return None  # the meta function raises
        if check is not None:
            check(input)
        if native and data.size >= _cpu_pointwise.MIN_ELEMENTS and target is data.dtype:
            value = _cpu_pointwise.unary_array(name, data)
            if value is not None:
                return value
        if data.dtype is not work:
            data = data.astype(work)
        if _get_error_state() is _IGNORE_ALL:  # quiet(np_fn, data), inlined
            value = np_fn(data)
        else:
            token = _set_error_state(_IGNORE_ALL)
            try:
                value = np_fn(data)
            finally:
                _reset_error_state(token)
        if type(value) is not np.ndarray:  # numpy gives scalars for zero-dim inputs
            value = np.asarray(value)
        return value if value.dtype is target else value.astype(target, copy=False)

    meta.__name__ = name
    meta.__doc__ = doc
    op = defop(name, meta, cpu=cpu, has_out=has_out, tags=tags)
    if _error_state is not None:
        compiled = _compiled_unary(np_fn, checked_cpu, plan, check, native)
        op.register_checked_kernel("cpu", compiled or checked_cpu)
    if native:
        op.cpu_into = _cpu_pointwise.unary_into(name)  # out= and in-place writes
    if has_inplace:
        make_inplace(op, check=inplace_check)
    return op


def _compiled_unary(np_fn, checked_cpu, plan, check, native):
    """``checked_cpu`` with its common call (a float32/float64 tensor whose plan computes in and returns its own
    dtype, no extra check, below the native kernel's size) in C (``ember._C.make_unary_fast``,
    csrc/pointwise_fast.h), which hands every other call to ``checked_cpu``; None without the extension."""
    try:
        from .. import _C
    except ImportError:
        return None
    make = getattr(_C, "make_unary_fast", None)
    if make is None or check is not None:
        return None
    as_is = set()
    for dtype in (np.dtype(np.float32), np.dtype(np.float64)):
        ok, target, work = plan(dtype)
        if ok and target is dtype and work is dtype:
            as_is.add(dtype)
    if not as_is:
        return None
    return make({
        "np_fn": np_fn, "reference": checked_cpu, "as_is": frozenset(as_is),
        "native_min": _cpu_pointwise.MIN_ELEMENTS if native else None, "error_state": _error_state,
        "ignore": _IGNORE_ALL, "tensor_type": Tensor, "ndarray_type": np.ndarray, "result_dtype": None,
    })


def make_inplace(op, check=None, self_index=0):
    """Register ``op.name + "_"``: compute ``op`` and write the result into the first argument.

    The in-place op checks that the result broadcasts to the first argument's
    shape and that its dtype can be cast to the first argument's dtype
    (PyTorch's rule: an int tensor can't take a float result in place). An op
    with a ``result_dtype(*args, **kwargs)`` attribute gets the cast checked
    before a dtype refusal of its meta function, as PyTorch orders them.

    On CPU, the ops of ``_INTO`` (add_, sub_, mul_, div_, lerp_, addcmul_, addcdiv_,
    clamp_, relu_ and common unary ops) write into ``self``'s float32/float64 buffer
    directly, with the same numpy operations as the functional kernel (so the
    same bits); other ops, dtypes or operands compute the functional result and
    copy it into ``self``. The autograd layer records every in-place op as its
    functional op and a copy, whichever kernel runs.

    Args:
        check: optional extra check ``check(self, *args, **kwargs)``, run first
            (for rules of one op, e.g. ``abs_`` refusing complex tensors).
        self_index: where ``self`` goes among ``op``'s arguments (``x.polygamma_(n)``
            computes ``polygamma(n, x)``: index 1).
    """

    def call_args(self, args):
        if self_index == 0:
            return (self, *args)
        return (*args[:self_index], self, *args[self_index:])

    def meta(self, *args, **kwargs):
        if check is not None:
            check(self, *args, **kwargs)
        try:
            result = op.meta(*call_args(self, args), **kwargs)
        except NotImplementedError:
            # PyTorch checks the cast into self before looking for a kernel (int_tensor &= 2.5 is a cast error)
            promoted = getattr(op, "result_dtype", None)
            if promoted is not None and not D.can_cast(promoted(*call_args(self, args), **kwargs), self.dtype):
                _cast_error(promoted(*call_args(self, args), **kwargs), self.dtype)
            raise
        if tuple(result.shape) != tuple(self._data.shape):
            raise RuntimeError(
                f"output with shape {list(self._data.shape)} doesn't match the broadcast shape {list(result.shape)}"
            )
        result_dtype = _FROM_NP(result.dtype)
        if not D.can_cast(result_dtype, self.dtype):
            _cast_error(result_dtype, self.dtype)
        return self._data

    into = _INTO.get(op.name) if self_index == 0 else None

    def cpu(self, *args, **kwargs):
        # Fast path: write straight into self's buffer (no result array, no copy pass). Meta has run:
        # the shapes and dtypes are valid, so only the kernel's own preconditions are left to check.
        # Large arrays first try the op's C++ writer (ember._ops._cpu_pointwise), any dtype it takes.
        data = self._data
        if self_index == 0 and type(data) is np.ndarray and data.size >= _cpu_pointwise.MIN_ELEMENTS:
            native = getattr(op, "cpu_into", None)
            if native is not None and native(data, self, *args, **kwargs):
                return
        if into is not None:
            out = _direct_target(self)
            if out is not None and into(out, *args, **kwargs):
                return
        value = op.kernels["cpu"](*call_args(self, args), **kwargs)
        np.copyto(self._data, value, casting="unsafe")

    def decomposition(self, *args, **kwargs):
        meta(self, *args, **kwargs)
        return copy_(self, op(*call_args(self, args), **kwargs))

    meta.__name__ = op.name + "_"
    meta.__doc__ = f"In-place version of :func:`ember.{op.name}`: writes the result into ``self`` and returns it."
    # Composite: any backend with the functional op and copy_ runs it; CPU has a fused kernel.
    inplace = defop(
        op.name + "_", meta, cpu=cpu if "cpu" in op.kernels else None, kind="inplace", category=COMPOSITE,
        decomposition=decomposition, tags=op.tags,
    )
    inplace.functional = op
    op.inplace = inplace
    inplace.self_index = self_index  # autograd records x.op_(...) as op(...) with x at this position
    return inplace


# -- make_inplace's direct kernels ---------------------------------------------------------
# Each ``_into_<op>(out, *args, **kwargs)`` writes ``op(out, *args, **kwargs)`` into ``out`` (self's array)
# and returns True, or returns False, having written nothing, for operands it doesn't take (the caller then
# runs the functional kernel and copies). Each repeats its functional kernel's numpy calls for float32/float64
# operands of self's dtype and real Python numbers, so the result is bitwise the same; self is written only
# by the last ufunc call, and numpy buffers that call's inputs when they overlap its output.

_DIRECT_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})


def _direct_target(self):
    """``self``'s numpy array when the direct kernels may write into it, else None.

    It must be a writable float32/float64 numpy array without repeated elements (a stride-0
    broadcast view keeps the copy path and its behaviour).
    """
    a = self._data
    if type(a) is np.ndarray and a.dtype in _DIRECT_DTYPES and a.flags.writeable:
        if a.ndim == 0 or 0 not in a.strides:
            return a
    return None


def _direct_operand(x, np_dtype):
    """``x``'s array when it is a tensor of ``np_dtype``, ``x`` when it is a real Python number, else None."""
    if type(x) is Tensor:
        data = x._data
        return data if type(data) is np.ndarray and data.dtype == np_dtype else None
    if type(x) is float or type(x) is int:
        return x
    return None


def _is_real_number(x):
    return type(x) is float or type(x) is int


def _into_add_sub(ufunc):
    def into(out, other, *, alpha=1):
        b = _direct_operand(other, out.dtype)
        if b is None or not _is_real_number(alpha):
            return False
        if alpha != 1:
            b = np.multiply(b, alpha, dtype=out.dtype)
        quiet(ufunc, out, b, out)
        return True

    return into


def _into_binary(ufunc):
    def into(out, other):
        b = _direct_operand(other, out.dtype)
        if b is None:
            return False
        quiet(ufunc, out, b, out)
        return True

    return into


def _into_div(out, other, *, rounding_mode=None):
    b = _direct_operand(other, out.dtype)
    if b is None or rounding_mode is not None:
        return False
    quiet(np.true_divide, out, b, out)
    return True


def _lerp_scalar_weight(out, stop, w):
    diff = np.subtract(stop, out)
    # the functional kernel's two formulas, each exact at its end point
    if abs(w) < 0.5:
        diff *= w
        np.add(diff, out, out=out)
    else:
        diff *= 1 - w
        np.subtract(stop, diff, out=out)


def _into_lerp(out, end, weight):
    stop = _direct_operand(end, out.dtype)
    if type(end) is not Tensor or stop is None or not _is_real_number(weight):
        return False
    quiet(_lerp_scalar_weight, out, stop, weight)
    return True


def _addcmul_into(out, value, t1, t2):
    np.add(out, value * t1 * t2, out=out)


def _addcdiv_into(out, value, t1, t2):
    np.add(out, value * (t1 / t2), out=out)


def _into_addc(kernel):
    def into(out, tensor1, tensor2, *, value=1):
        a, b = _direct_operand(tensor1, out.dtype), _direct_operand(tensor2, out.dtype)
        if type(tensor1) is not Tensor or type(tensor2) is not Tensor or a is None or b is None:
            return False
        if not _is_real_number(value):
            return False
        quiet(kernel, out, value, a, b)
        return True

    return into


def _clip_into(out, low, high):
    np.clip(out, low, high, out=out)


def _into_clamp(out, min=None, max=None):  # noqa: A002 - PyTorch's argument names
    if not (min is None or _is_real_number(min)) or not (max is None or _is_real_number(max)):
        return False
    quiet(_clip_into, out, min, max)
    return True


def _into_unary(ufunc):
    def into(out):
        quiet(ufunc, out, out)
        return True

    return into


def _into_relu(out):
    np.maximum(out, out.dtype.type(0), out=out)  # relu's kernel: maximum with a zero of out's dtype (NaN stays)
    return True


# op name -> direct kernel; unary entries are the numpy functions the ops' CPU kernels call for float32/float64
_INTO = {
    "add": _into_add_sub(np.add),
    "sub": _into_add_sub(np.subtract),
    "mul": _into_binary(np.multiply),
    "div": _into_div,
    "lerp": _into_lerp,
    "addcmul": _into_addc(_addcmul_into),
    "addcdiv": _into_addc(_addcdiv_into),
    "clamp": _into_clamp,
    "relu": _into_relu,
    **{name: _into_unary(fn) for name, fn in {
        "neg": np.negative, "abs": np.abs, "sqrt": np.sqrt, "exp": np.exp, "log": np.log,
        "reciprocal": np.reciprocal, "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
    }.items()},
}


def _cast_error(result_dtype, self_dtype):
    raise RuntimeError(
        f"result type {_torch_name(result_dtype)} can't be cast to the desired output type {_torch_name(self_dtype)}"
    )


def alias(name, target, *, doc=None):
    """Register ``name`` as a second public name of op ``target`` (``clip`` for ``clamp``).

    The alias is a composite op whose decomposition calls ``target``, with the
    same signature, checks and ``out=``; it shows up as ``ember.<name>`` and
    needs an OpInfo like any op. Tensor method aliases of an op (``x.clip``)
    are listed in an op module's ``ALIASES`` instead.
    """

    def meta(*args, **kwargs):
        return target.meta(*args, **kwargs)

    def decomposition(*args, **kwargs):
        return target(*args, **kwargs)

    meta.__signature__ = target._call_signature
    meta.__name__ = name
    meta.__doc__ = doc or f"Alias of :func:`ember.{target.name}`."
    op = defop(name, meta, category=COMPOSITE, kind=target.kind, decomposition=decomposition, has_out=target.has_out,
               tags=target.tags, return_type=target.return_type)
    op.alias_of = target
    return op


_TORCH_NAMES = {
    "bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long",
    "float16": "Half", "bfloat16": "BFloat16", "float32": "Float", "float64": "Double",
    "complex64": "ComplexFloat", "complex128": "ComplexDouble",
}


def _torch_name(dtype):
    """PyTorch's scalar-type name for ``dtype`` (``Float``), as its error messages use."""
    return _TORCH_NAMES[dtype.name]


# -- docstrings and operator methods shared by the pointwise op modules ------------------------------------


def unary_doc(summary, example_input, example_output, *, name, note="", raises=""):
    """The docstring of a unary op: summary, Args, Returns, optional Raises, and an example."""
    raises = f"\n\n    Raises:\n        {raises}" if raises else ""
    note = f"\n\n    {note}" if note else ""
    return f"""{summary}{note}

    Args:
        input (Tensor): the input.

    Returns:
        Tensor: the result, of the input's shape.{raises}

    Example:
        >>> import ember
        >>> ember.{name}(ember.tensor({example_input}))
        {example_output}
    """


def binary_doc(summary, args, example, output, *, raises=""):
    """The docstring of a binary op."""
    raises = f"\n\n    Raises:\n        {raises}" if raises else ""
    return f"""{summary}

    Args:
        {args}

    Returns:
        Tensor: the result, of the broadcast shape.{raises}

    Example:
        >>> import ember
        >>> ember.{example}
        {output}
    """


def is_int_scalar(x):
    """Whether ``x`` is a Python or numpy integer (not a bool)."""
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def operator_methods(symbol, op):
    """Tensor's ``__<symbol>__``, ``__r<symbol>__`` and ``__i<symbol>__`` for binary op ``op``, by name."""

    def forward(self, other):
        return op(self, other)

    def reflected(self, other):
        return op(other, self)

    def inplace(self, other):
        return op.inplace(self, other)

    return {f"__{symbol}__": forward, f"__r{symbol}__": reflected, f"__i{symbol}__": inplace}
