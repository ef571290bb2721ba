"""The plan of a binary pointwise op: one rule for the calls that need no type promotion.

Most calls of ``add``, ``mul``, ``eq``... pass two tensors of one dtype, or a tensor and
a Python number that leaves its dtype as it is. Such a call needs none of the general
path's work (promotion, casts, the argument checks of a number given for a tensor):
its result dtype is the tensors' (bool for comparisons) and its shape the broadcast
shape. When numpy computes in that dtype as it is (the op's *direct* dtypes: not
float16 for ops that compute it in float32, say), the op's numpy function gives the
result in one call.

That rule is written here once. A :class:`BinaryRule` is made per op; its three
readers are the op's meta function (:meth:`BinaryRule.plan`: the result's dtype and
shape), its CPU kernel and its checked CPU kernel (both :attr:`BinaryRule.direct`: the
result array, or None for the general path). So the meta device, a call with keywords
(``add(x, y, alpha=1)``, ``out=``) and the plain call take the same decisions, and
compute the same bits under the same floating-point error state: numpy's warnings are
off while the function runs (PyTorch computes overflow, ``inf - inf`` and ``1 / 0``
silently), whoever called.

For results of at least :data:`ember._ops._cpu_pointwise.MIN_ELEMENTS` elements, ``direct``
computes with ``ember._C``'s threaded kernel instead of ``fn`` where ``fn`` has one (see
:mod:`ember._ops._cpu_pointwise`: ``np.add``, ``np.multiply``, the comparisons...): the same
bits, in place of numpy's single thread.

Plans are cached per op, keyed by the operands' dtypes and shapes (or the type of the
number): working one out costs a broadcast and a few dtype questions, looking one up a
dict access. The cache forgets everything once it holds :data:`CACHE_LIMIT` plans.
"""

from __future__ import annotations

import contextlib
import weakref

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from . import _cpu_pointwise, _float_errors
from ._float_errors import IGNORE_ALL as _IGNORE_ALL
from ._float_errors import get_error_state as _get_error_state
from ._float_errors import reset_error_state as _reset_error_state
from ._float_errors import set_error_state as _set_error_state
from ._shapes import broadcast_shapes

__all__ = ["BinaryRule", "Plan", "CACHE_LIMIT", "plans_disabled"]

#: How many plans one op keeps before it starts over (a program meets few shapes; a sweep meets many).
CACHE_LIMIT = 512

_FROM_NP = D.from_numpy_dtype
_BOOL = np.dtype(np.bool_)
_NUMBER_CATEGORY = {bool: D.BOOL, int: D.INTEGRAL, float: D.FLOATING, complex: D.COMPLEX}
_EXACT = 2**53  # Python ints below this in magnitude convert to float64 exactly


_RULES = weakref.WeakSet()  # every BinaryRule (for plans_disabled)


class _NoPlans(dict):
    """A plan cache that finds no plan and keeps none (see :func:`plans_disabled`)."""

    def get(self, key, default=None):
        return None

    def __setitem__(self, key, value):
        pass


def _returns(fn, np_dtype):
    """The dtype numpy ufunc ``fn`` gives for two operands of ``np_dtype``, or None (not a ufunc, or it can't say)."""
    resolve = getattr(fn, "resolve_dtypes", None)
    if resolve is None:
        return None
    try:
        return resolve((np_dtype, np_dtype, None))[-1]
    except (TypeError, ValueError):  # no loop for the dtype (numpy's _UFuncNoLoopError is a TypeError)
        return None


@contextlib.contextmanager
def plans_disabled():
    """Within the block, no binary op finds a plan: every call takes its op's general path (for tests).

    Not thread-safe. The caches are emptied on the way out.
    """
    rules = list(_RULES)
    for rule in rules:
        rule._same = rule._plans = _NoPlans()  # so nothing is added to _as_is either (see _make_same)
        rule._as_is.clear()  # (in place: `direct` holds it)
    try:
        yield
    finally:
        for rule in rules:
            rule._same, rule._plans = {}, {}


class Plan:
    """How one binary call without promotion computes.

    Attributes:
        dtype (numpy.dtype): the result's dtype.
        shape (tuple or None): the result's shape; None where it is the tensor operand's own
            (two tensors of one shape, or a tensor and a number), read from the call.
        direct (bool): whether the op's numpy function computes the result from the operands as
            they are (a cast to ``dtype`` after it, where it computed wider, is all that is left).
        exact_ints (bool): for a tensor and a Python int: the int must convert to the tensor's
            float dtype exactly (below 2**53 in magnitude) for ``direct`` to hold.
    """

    __slots__ = ("dtype", "shape", "direct", "exact_ints")

    def __init__(self, dtype, shape, direct, exact_ints=False):
        self.dtype = dtype
        self.shape = shape
        self.direct = direct
        self.exact_ints = exact_ints

    def __repr__(self):
        return f"Plan(dtype={self.dtype}, shape={self.shape}, direct={self.direct})"


class BinaryRule:
    """The no-promotion rule of one binary pointwise op ``name(input, other)``.

    Args:
        fn: the numpy function computing the op, ``fn(a, b)``.
        result: ``"promote"`` (the operands' dtype), ``"bool"`` (comparisons) or ``"float"``
            (integer operands would give the default float dtype: those calls take the general path).
        supported: the computation dtypes the op accepts (a set of ember dtypes; None: all).
        direct: the numpy dtypes ``fn`` computes in as they are.
        scalars: which operand may be a Python number: ``"both"``, ``"other"`` or ``"none"``.
        refused: ember dtypes the op's extra check refuses (``sub`` of bools): their calls take the
            general path, which raises.
    """

    def __init__(self, fn, *, result="promote", supported=None, direct, scalars="both", refused=()):
        if result not in ("promote", "bool", "float"):
            raise ValueError(f"BinaryRule: result must be 'promote', 'bool' or 'float', got {result!r}")
        if scalars not in ("both", "other", "none"):
            raise ValueError(f"BinaryRule: scalars must be 'both', 'other' or 'none', got {scalars!r}")
        self.fn = fn
        self.result = result
        self.supported = supported
        self.direct_dtypes = direct  # (a numpy_dtype_set learns bfloat16 when ml_dtypes loads: not copied)
        self.scalars = scalars
        self.refused = frozenset(refused)
        self.native = _cpu_pointwise.BINARY_OPS.get(fn)  # the C++ kernel's op code, or None (numpy only)
        self._same = {}  # two tensors of one dtype and one shape with dims: numpy dtype -> Plan or None
        self._plans = {}  # every other call: (dtype, dtype or number type, shape, shape or None) -> Plan or None
        # the numpy dtypes whose same-shape plan is direct and for which fn returns the result's dtype itself
        # (no cast to check for): the hot path of `direct` asks only this
        self._as_is = set()
        #: ``direct(input, other)``: the result array computed by ``fn`` in one call, or None for the general
        #: path; the op's checked CPU kernel and its CPU kernel's first step (see :meth:`_direct_function`)
        self.direct = self._direct_function()
        self.direct = _compiled_direct(self) or self.direct  # its common call in C, this one as the reference
        _RULES.add(self)

    def plan(self, input, other):
        """The :class:`Plan` of ``op(input, other)``, or None when the call takes the general path.

        ``input`` and ``other`` are the call's arguments (tensors of any device, Python numbers,
        anything else); only plain :class:`~ember.Tensor` objects and Python numbers get a plan.
        """
        if type(input) is Tensor:
            a = input._data
            if type(other) is Tensor:
                b = other._data
                da = a.dtype
                if da is b.dtype and a.ndim:
                    shape = a.shape
                    if shape == b.shape:  # the common call, looked up by its dtype alone
                        plan = self._same.get(da, False)
                        return self._make_same(da) if plan is False else plan
                    key = (da, da, shape, b.shape)
                else:
                    key = (da, b.dtype, a.shape, b.shape)
            elif type(other) in _NUMBER_CATEGORY and self.scalars != "none":
                key = (a.dtype, type(other), a.shape, None)
            else:
                return None
        elif type(other) is Tensor and type(input) in _NUMBER_CATEGORY and self.scalars == "both":
            key = (type(input), other._data.dtype, None, other._data.shape)
        else:
            return None
        plan = self._plans.get(key, False)
        return self._make(key) if plan is False else plan

    def _direct_function(self):
        """The rule's :attr:`direct` function (a closure: the hot path of ``a + b`` inlines its steps)."""
        rule, fn, as_is = self, self.fn, self._as_is
        native, bool_result = self.native, self.result == "bool"
        native_min, native_arrays = _cpu_pointwise.MIN_ELEMENTS, _cpu_pointwise.binary_arrays

        def direct(input, other):
            """``op(input, other)`` computed by the numpy function in one call, or None for the general path.

            The op's checked CPU kernel (it does the meta function's checks: a plan exists only for
            arguments the meta function accepts) and its CPU kernel's first step. numpy's floating-point
            errors are ignored while it computes, as PyTorch computes overflow and ``1 / 0`` silently.
            """
            if type(input) is Tensor and type(other) is Tensor:
                a, b = input._data, other._data
                da = a.dtype
                if da is b.dtype and da in as_is and a.ndim and a.shape == b.shape:
                    # the common call: fn gives the result's dtype as it is (see _make_same)
                    if native is not None and a.size >= native_min and type(a) is np.ndarray:
                        value = native_arrays(native, a, b, _BOOL if bool_result else da, a.shape)
                        if value is not None:
                            return value
                    if _get_error_state() is _IGNORE_ALL:
                        return fn(a, b)
                    token = _set_error_state(_IGNORE_ALL)
                    try:
                        return fn(a, b)
                    finally:
                        _reset_error_state(token)
                plan = rule.plan(input, other)
                if plan is None or not plan.direct:
                    return None
            else:
                plan = rule.plan(input, other)
                if plan is None or not plan.direct:
                    return None
                if type(input) is Tensor:
                    a, b = input._data, other
                    number = b
                else:
                    a, b = input, other._data
                    number = a
                if plan.exact_ints and type(number) is int and not -_EXACT < number < _EXACT:
                    return None  # not exact in float64: the general path converts it (as it did before plans)
            if native is not None:
                value = _cpu_pointwise.plan_arrays(native, plan, a, b)
                if value is not None:
                    return value
            if _get_error_state() is _IGNORE_ALL:  # already quiet: inside run_backend or the backward engine
                value = fn(a, b)
            else:  # _float_errors.quiet(fn, a, b), inlined: one frame less on the hot path
                token = _set_error_state(_IGNORE_ALL)
                try:
                    value = fn(a, b)
                finally:
                    _reset_error_state(token)
            target = plan.dtype
            return value if value.dtype is target else value.astype(target)

        return direct

    # -- working plans out (once per key) -----------------------------------------------------------

    def _result_dtype(self, np_dtype):
        """The result's numpy dtype for operands of ``np_dtype`` (no promotion), or None for the general path."""
        dtype = _FROM_NP(np_dtype)
        if self.supported is not None and dtype not in self.supported:
            return None  # the general path raises NotImplementedError
        if dtype in self.refused:
            return None  # the general path's extra check raises
        if self.result == "float" and dtype.category < D.FLOATING:
            return None  # the default float dtype: the general path reads it
        return _BOOL if self.result == "bool" else np_dtype

    def _make_same(self, np_dtype):
        target = self._result_dtype(np_dtype)
        plan = None if target is None else Plan(target, None, np_dtype in self.direct_dtypes)
        self._store(self._same, np_dtype, plan)
        if plan is not None and plan.direct and _returns(self.fn, np_dtype) is target:
            self._as_is.add(np_dtype)
        return plan

    def _make(self, key):
        da, db, sa, sb = key
        if sa is None or sb is None:  # a Python number and a tensor
            plan = self._number_plan(db if sa is None else da, da if sa is None else db, sb if sa is None else sa)
        elif da is not db:
            plan = None  # promotion
        else:
            plan = self._tensors_plan(da, sa, sb)
        self._store(self._plans, key, plan)
        return plan

    def _tensors_plan(self, np_dtype, sa, sb):
        target = self._result_dtype(np_dtype)
        if target is None:
            return None
        try:
            shape = broadcast_shapes(sa, sb)
        except RuntimeError:
            return None  # the general path raises PyTorch's error
        if not shape:
            return None  # two zero-dim tensors: numpy would give a scalar; the general path wraps it
        return Plan(target, shape, np_dtype in self.direct_dtypes)

    def _number_plan(self, np_dtype, number_type, shape):
        dtype = _FROM_NP(np_dtype)
        if dtype.category < _NUMBER_CATEGORY[number_type]:
            return None  # the number promotes the tensor (int tensor * 2.5)
        target = self._result_dtype(np_dtype)
        if target is None:
            return None
        # numpy >= 2 computes a float tensor with a Python int/float in the tensor's dtype (weak scalars,
        # as PyTorch); other pairs (an int tensor and an int numpy refuses to fit, bool) take the general path
        # (comparisons with a number keep the general path, as before the plan existed; so does a zero-dim
        # tensor, of which numpy would give a scalar)
        direct = (
            self.result != "bool" and np_dtype.kind in "fc" and number_type in (int, float)
            and np_dtype in self.direct_dtypes and len(shape) > 0
        )
        return Plan(target, None, direct, exact_ints=number_type is int)

    @staticmethod
    def _store(cache, key, plan):
        if len(cache) >= CACHE_LIMIT:
            cache.clear()
        cache[key] = plan


def _compiled_direct(rule):
    """``rule.direct`` with its common call (two tensors of one shape and one dtype in ``rule._as_is``, below the
    native kernel's size) in C (``ember._C.make_binary_fast``, csrc/pointwise_fast.h), which hands every other
    call to ``rule.direct``; None without the extension."""
    try:
        from .. import _C
    except ImportError:
        return None
    make = getattr(_C, "make_binary_fast", None)
    error_state = getattr(_float_errors, "_error_state", None)
    if make is None or error_state is None:
        return None
    return make({
        "np_fn": rule.fn, "reference": rule.direct, "as_is": rule._as_is,
        "native_min": _cpu_pointwise.MIN_ELEMENTS if rule.native is not None else None,
        "error_state": error_state, "ignore": _IGNORE_ALL, "tensor_type": Tensor, "ndarray_type": np.ndarray,
        "result_dtype": _BOOL if rule.result == "bool" else None,
    })
