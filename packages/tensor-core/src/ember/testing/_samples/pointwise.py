"""OpInfos of the pointwise ops."""

from __future__ import annotations

import numpy as np

from ... import _dtype as D
from .._opinfo import ALL_TYPES_AND_COMPLEX, ErrorInput, OpInfo, SampleInput, register_opinfo
from ._common import maker, scalar_for


def binary_samples(opinfo, device, dtype, requires_grad, *, exclude_zero=False, low=None, high=None):
    """Shapes every broadcasting binary op should handle."""
    make = maker(device, dtype, requires_grad, exclude_zero=exclude_zero, low=low, high=high)
    yield SampleInput(make(()), (make(()),), name="zero-dim")
    yield SampleInput(make((5,)), (make((5,)),), name="1-d")
    yield SampleInput(make((2, 3)), (make((2, 3)),), name="2-d")
    yield SampleInput(make((2, 1, 3)), (make((4, 3)),), name="broadcast")
    yield SampleInput(make((0, 3)), (make((3,)),), name="empty")
    yield SampleInput(make((3, 4), noncontiguous=True), (make((3, 4), noncontiguous=True),), name="noncontiguous")
    yield SampleInput(make((4, 3)).t(), (make((3, 4)),), name="transposed view")
    yield SampleInput(make((3,)), (scalar_for(dtype),), name="python scalar")
    yield SampleInput(make((3,)), (make(()),), name="zero-dim other")


def unary_samples(opinfo, device, dtype, requires_grad, *, low=None, high=None):
    """Shapes every unary op should handle."""
    make = maker(device, dtype, requires_grad, low=low, high=high)
    yield SampleInput(make(()), name="zero-dim")
    yield SampleInput(make((5,)), name="1-d")
    yield SampleInput(make((2, 3, 4)), name="3-d")
    yield SampleInput(make((0, 2)), name="empty")
    yield SampleInput(make((3, 4), noncontiguous=True), name="noncontiguous")
    yield SampleInput(make((4, 3)).t(), name="transposed view")


def _binary_errors(name):
    def errors(opinfo, device):
        import ember

        a, b = ember.ones(2, 3, device=device), ember.ones(4, device=device)
        yield ErrorInput(SampleInput(a, (b,)), RuntimeError, r"size of tensor a \(3\) must match the size of tensor b \(4\)")
        yield ErrorInput(SampleInput(a, ("text",)), TypeError, "must be Tensor or Number")

    return errors


def _add_errors(opinfo, device):
    import ember

    yield from _binary_errors("add")(opinfo, device)
    ints = ember.tensor([1, 2], device=device)
    yield ErrorInput(SampleInput(ints, (ints,), {"alpha": 0.5}), RuntimeError, "alpha must not be a floating point")


def _sub_errors(opinfo, device):
    import ember

    yield from _binary_errors("sub")(opinfo, device)
    flags = ember.tensor([True, False], device=device)
    yield ErrorInput(SampleInput(flags, (flags,)), RuntimeError, "Subtraction, the `-` operator, with two bool tensors")


def _neg_errors(opinfo, device):
    import ember

    yield ErrorInput(SampleInput(ember.tensor([True], device=device)), RuntimeError, "Negation, the `-` operator")


def _alpha_samples(opinfo, device, dtype, requires_grad):
    yield from binary_samples(opinfo, device, dtype, requires_grad)
    if dtype is not D.bool:
        make = maker(device, dtype, requires_grad, seed=1)
        alpha = 2 if dtype.category == D.INTEGRAL else 0.5
        yield SampleInput(make((2, 3)), (make((3,)),), {"alpha": alpha}, name="alpha")


_NO_BOOL = tuple(d for d in ALL_TYPES_AND_COMPLEX if d is not D.bool)

register_opinfo(OpInfo("add", _alpha_samples, ref=lambda a, b, alpha=1: np.add(a, np.multiply(b, alpha)), error_inputs=_add_errors))
register_opinfo(OpInfo("sub", _alpha_samples, dtypes=_NO_BOOL, ref=lambda a, b, alpha=1: np.subtract(a, np.multiply(b, alpha)),
                       error_inputs=_sub_errors))
register_opinfo(OpInfo("mul", binary_samples, ref=np.multiply, error_inputs=_binary_errors("mul")))
register_opinfo(OpInfo(
    "div",
    lambda *a: binary_samples(*a, exclude_zero=True),
    ref=lambda a, b: np.true_divide(np.asarray(a, np.float64 if np.asarray(a).dtype.kind in "biu" else None), b),
    error_inputs=_binary_errors("div"),
))
for _name, _fn in (("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                   ("gt", np.greater), ("ge", np.greater_equal)):
    _dtypes = ALL_TYPES_AND_COMPLEX if _name in ("eq", "ne") else tuple(d for d in ALL_TYPES_AND_COMPLEX if not d.is_complex)
    register_opinfo(OpInfo(_name, binary_samples, dtypes=_dtypes, ref=_fn, error_inputs=_binary_errors(_name),
                           supports_autograd=False))
register_opinfo(OpInfo("neg", unary_samples, dtypes=_NO_BOOL, ref=np.negative, error_inputs=_neg_errors))
register_opinfo(OpInfo("abs", unary_samples, dtypes=_NO_BOOL, ref=np.abs))
register_opinfo(OpInfo("logical_not", unary_samples, ref=np.logical_not, supports_autograd=False))
