"""Derivatives of the creation and copy ops (``ember._ops.creation``).

Factories (``zeros``, ``arange``, ``full``, the ``*_like`` ops, ...) take no
tensor to differentiate: ``zeros_like(x)`` does not require grad even when
``x`` does, as in PyTorch, so they are non-differentiable (a factory called with
``requires_grad=True`` still makes a leaf that requires grad). The in-place
writes ``copy_``, ``fill_`` and ``zero_`` overwrite ``self``: its old values get
a zero gradient, and the written value (``src``, a tensor ``value``) gets the
gradient of what it became.
"""

from __future__ import annotations

import ember

from .._table import derivative, nondifferentiable


def _zeros(grad):
    """The gradient of values that an op overwrote or ignored: zeros, as PyTorch gives (not "unused")."""
    return ember.zeros_like(grad)


nondifferentiable(
    "empty", "zeros", "ones", "full", "empty_strided", "empty_like", "zeros_like", "ones_like", "full_like",
    "arange", "linspace", "logspace", "eye", "scalar_tensor",
)  # fmt: skip

# complex(re, im) = re + i im: re gets Re(grad) (the engine takes the real part for a real input), im gets Im(grad).
derivative("complex", real=lambda grad: grad, imag=lambda grad: ember.imag(grad))


def _polar(grad, abs, angle, output_mask):  # noqa: A002 - the op's argument names
    """polar(r, t) = r e^{it}: r gets Re(conj(g) e^{it}), t gets Re(conj(g) i r e^{it}).

    Written with ``cos``/``sin`` of the angle rather than PyTorch's ``sgn(result)``,
    which differs from the derivative where ``abs <= 0``.
    """
    g_re, g_im = ember.real(grad), ember.imag(grad)
    cos, sin = ember.cos(angle), ember.sin(angle)
    grad_abs = g_re * cos + g_im * sin if output_mask[0] else None
    grad_angle = abs * (g_im * cos - g_re * sin) if output_mask[1] else None
    return grad_abs, grad_angle


derivative("polar", joint={("abs", "angle"): _polar})
derivative("clone", input=lambda grad: grad)
# The engine converts the gradient back to the input's dtype and device (a real part for complex -> real).
derivative("_to_copy", input=lambda grad: grad)
derivative("copy_", self=_zeros, src=lambda grad: grad)
# A tensor value (0-dim) fills every element: the engine sums the gradient down to its shape.
derivative("fill_", self=_zeros, value=lambda grad: grad)
derivative("zero_", self=_zeros)
