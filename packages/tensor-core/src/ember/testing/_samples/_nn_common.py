"""Helpers of the nn.functional OpInfo modules (``ember.testing._samples.nn_*``).

References are written directly from the definitions (in float64, loops where that
is clearer), independently of the kernels. Every OpInfo names its PyTorch
counterpart as ``torch.nn.functional.<name>``, because several ``torch.<name>``
functions (``torch.dropout``, ``torch.batch_norm``, ``torch.embedding``, ...) have
other signatures. Ops that draw random numbers are sampled only in their
deterministic settings (``training=False``, ``p=0``).
"""

from __future__ import annotations

import numpy as np

from ... import _dtype as D
from .._opinfo import (
    COMPLEX_TYPES,
    FLOATING_TYPES,
    INTEGRAL_TYPES,
    ErrorInput,
    OpInfo,
    SampleInput,
    register_opinfo,
)

_FLOATS = FLOATING_TYPES
_FLOATS_AND_COMPLEX = FLOATING_TYPES + COMPLEX_TYPES
_REAL_NO_BOOL = INTEGRAL_TYPES + FLOATING_TYPES
_NO_BOOL = INTEGRAL_TYPES + FLOATING_TYPES + COMPLEX_TYPES
_F32_F64 = (D.float32, D.float64)


def _nn(name, sample_inputs, dtypes, ref=None, error_inputs=None, **kwargs):
    """Register the OpInfo of an nn op, compared with ``torch.nn.functional.<name>``."""
    extra = {"error_inputs": error_inputs} if error_inputs is not None else {}
    register_opinfo(OpInfo(name, sample_inputs, dtypes=dtypes, ref=ref, torch_name=f"nn.functional.{name}",
                           **extra, **kwargs))


def _f64(x):
    """A numpy array (or number) in float64, or complex128 for complex values."""
    x = np.asarray(x)
    if x.dtype.kind == "c":
        return x.astype(np.complex128)
    return x.astype(np.float64)


def _t(device, values, dtype=None):
    import ember

    return ember.tensor(values, dtype=dtype, device=device)


def _errors(*cases):
    """Error inputs from ``(make_args, kwargs, error, regex)`` tuples.

    ``make_args(device)`` gives the positional arguments; callable values of ``kwargs`` are called
    with the device too.
    """

    def gen(opinfo, device):
        for make_args, kwargs, error, regex in cases:
            args = make_args(device)
            if not isinstance(args, tuple):
                args = (args,)
            kwargs = {k: v(device) if callable(v) else v for k, v in kwargs.items()}
            yield ErrorInput(SampleInput(args[0], tuple(args[1:]), kwargs), error, regex)

    return gen


def _z(*shape, dtype=None):
    """A factory of zero tensors for error inputs."""

    def make(device):
        import ember

        return ember.zeros(shape, dtype=dtype or ember.float32, device=device)

    return make


def _args(*factories):
    return lambda device: tuple(f(device) if callable(f) else f for f in factories)


def _reduce(loss, reduction):
    loss = np.asarray(loss)
    if reduction == "mean":
        return loss.mean() if loss.size else np.float64("nan")
    if reduction == "sum":
        return loss.sum()
    return loss


def _sigmoid64(x):
    return 1 / (1 + np.exp(-x))
