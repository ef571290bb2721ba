"""Binary pointwise math: ``atan2``, ``xlogy``, ``maximum``, ``minimum``, ``fmax``, ``fmin``,
``hypot``, ``logaddexp``, ``logaddexp2``, ``copysign`` and ``heaviside``.
"""

from __future__ import annotations

import numpy as np

from .._meta import MetaArray
from ._pointwise_helpers import (
    FLOATING,
    FLOATING_AND_COMPLEX,
    NO_COMPLEX,
    binary,
    binary_doc,
    check_tensor,
    make_inplace,
)
from ._registry import defop, registry
from ._shapes import broadcast_shapes
from ._special_functions import special as _special

__all__ = []

_FIRST_OP = len(registry)  # the ops registered from here on are this module's (see METHODS at the end)


# -- binary math ---------------------------------------------------------------------------


_TENSORS_ARGS = "input (Tensor): the first operand.\n        other (Tensor): the second operand."
_SCALAR_ARGS = "input (Tensor or Number): the first operand.\n        other (Tensor or Number): the second operand."


def _check_not_complex_binary(name):
    def check(input, other, dtype):
        if dtype.is_complex:
            raise RuntimeError(f"{name} not implemented for complex tensors.")

    return check


atan2 = binary("atan2", np.arctan2, result="float", supported=NO_COMPLEX, scalars="none", upcast=True, doc=binary_doc(
    "Elementwise angle of the point ``(other, input)``: ``atan(input / other)`` in the right quadrant.",
    _TENSORS_ARGS, "atan2(ember.tensor([1., -1.]), ember.tensor([-1., -1.]))", "tensor([ 2.3562, -2.3562])",
    raises="NotImplementedError: for complex inputs."))
xlogy = binary("xlogy", _special("xlogy"), result="float", supported=NO_COMPLEX, upcast=True, doc=binary_doc(
    "Elementwise ``input * log(other)``, with 0 where ``input`` is 0 (unless ``other`` is NaN).",
    _SCALAR_ARGS, "xlogy(ember.tensor([0., 2.]), ember.tensor([0., 4.]))", "tensor([0.0000, 2.7726])",
    raises="NotImplementedError: for complex inputs."))


def _minmax(name, np_fn, summary, output):
    return binary(name, np_fn, scalars="none", has_inplace=False, check=_check_not_complex_binary(name), doc=binary_doc(
        summary, _TENSORS_ARGS, f"{name}(ember.tensor([1., float('nan'), 3.]), ember.tensor([2., 2., float('nan')]))",
        output, raises="RuntimeError: for complex inputs."))


maximum = _minmax("maximum", np.maximum, "Elementwise maximum; NaN wins.", "tensor([2., nan, nan])")
minimum = _minmax("minimum", np.minimum, "Elementwise minimum; NaN wins.", "tensor([1., nan, nan])")
fmax = _minmax("fmax", np.fmax, "Elementwise maximum ignoring NaN (NaN only where both are NaN).",
               "tensor([2., 2., 3.])")
fmin = _minmax("fmin", np.fmin, "Elementwise minimum ignoring NaN (NaN only where both are NaN).",
               "tensor([1., 2., 3.])")

hypot = binary("hypot", np.hypot, supported=FLOATING, scalars="none", upcast=True, doc=binary_doc(
    "Elementwise ``sqrt(input ** 2 + other ** 2)``, without overflow in the squares.", _TENSORS_ARGS,
    "hypot(ember.tensor([3.]), ember.tensor([4.]))", "tensor([5.])",
    raises="NotImplementedError: unless the promoted dtype is floating."))


def _logaddexp_np(a, b):
    if np.result_type(a, b).kind != "c":
        return np.logaddexp(a, b)
    a, b = np.broadcast_arrays(a, b)
    big = np.where(a.real >= b.real, a, b)
    small = np.where(a.real >= b.real, b, a)
    with np.errstate(all="ignore"):
        value = big + np.log1p(np.exp(small - big))
    # both -inf (real parts): the sum of two zeros is zero, whose log is -inf
    return np.where(np.isneginf(big.real), big, value)


logaddexp = binary("logaddexp", _logaddexp_np, supported=FLOATING_AND_COMPLEX, scalars="none", has_inplace=False,
                   upcast=True, doc=binary_doc(
                       "Elementwise ``log(exp(input) + exp(other))``, computed without overflow.", _TENSORS_ARGS,
                       "logaddexp(ember.tensor([0., 100.]), ember.tensor([0., 100.]))",
                       "tensor([  0.6931, 100.6931])",
                       raises="NotImplementedError: for integer or bool inputs."))
logaddexp2 = binary("logaddexp2", np.logaddexp2, supported=FLOATING, scalars="none", has_inplace=False, upcast=True,
                    doc=binary_doc("Elementwise ``log2(2 ** input + 2 ** other)``, computed without overflow.",
                              _TENSORS_ARGS, "logaddexp2(ember.tensor([0., 3.]), ember.tensor([0., 3.]))",
                              "tensor([1., 4.])", raises="NotImplementedError: for integer, bool or complex inputs."))
copysign = binary("copysign", np.copysign, result="float", supported=NO_COMPLEX, scalars="other", upcast=True,
                  doc=binary_doc("Elementwise magnitude of ``input`` with the sign of ``other``.",
                            "input (Tensor): the magnitudes.\n        other (Tensor or Number): the signs.",
                            "copysign(ember.tensor([1., -2.]), -1.)", "tensor([-1., -2.])",
                            raises="NotImplementedError: for complex inputs."))


def _heaviside_meta(input, values):
    """Elementwise Heaviside step: 0 where ``input < 0``, ``values`` where ``input == 0``, 1 where ``input > 0``.

    Args:
        input (Tensor): the points.
        values (Tensor): the value at 0, of the same dtype as ``input``, broadcasting.

    Returns:
        Tensor: of the common dtype and broadcast shape.

    Raises:
        RuntimeError: for complex tensors or tensors of different dtypes.

    Example:
        >>> import ember
        >>> ember.heaviside(ember.tensor([-1.5, 0.0, 2.0]), ember.tensor([0.5]))
        tensor([0.0000, 0.5000, 1.0000])
    """
    check_tensor("heaviside", "input", 1, input)
    check_tensor("heaviside", "values", 2, values)
    if input.dtype.is_complex or values.dtype.is_complex:
        raise RuntimeError("heaviside is not yet implemented for complex tensors.")
    if input.dtype is not values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    return MetaArray(broadcast_shapes(input._data.shape, values._data.shape), input._data.dtype)


def _heaviside_cpu(input, values):
    x = input._data
    with np.errstate(invalid="ignore"):
        return np.where(x == 0, values._data, x > 0).astype(x.dtype, copy=False)


heaviside = defop("heaviside", _heaviside_meta, cpu=_heaviside_cpu, has_out=True, tags=("pointwise",))
make_inplace(heaviside)


#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS = list(registry)[_FIRST_OP:]
