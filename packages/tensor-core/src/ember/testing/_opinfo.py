"""Sample inputs per op: the one place that knows how to exercise each op.

An :class:`OpInfo` names a registry op and says which dtypes it supports, how
to make sample inputs (shapes including empty, zero-dim, broadcast,
non-contiguous and view inputs, with the keyword arguments that matter), how
to make inputs that must fail and with what error, and what reference computes
the expected values (numpy/scipy). Every package's tests iterate
:data:`op_db`: values against the reference, meta against real shapes,
``out=``/in-place variants, autograd, CUDA and the compiler, without writing
new inputs. This is PyTorch's OpInfo idea.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .. import _dtype as D
from .._ops import registry
from .._tensor import Tensor

__all__ = ["SampleInput", "ErrorInput", "OpInfo", "op_db", "register_opinfo", "make_tensor", "to_numpy_args"]

ALL_TYPES = (D.bool, D.uint8, D.int8, D.int16, D.int32, D.int64, D.float16, D.bfloat16, D.float32, D.float64)
FLOATING_TYPES = (D.float16, D.bfloat16, D.float32, D.float64)
INTEGRAL_TYPES = (D.uint8, D.int8, D.int16, D.int32, D.int64)
COMPLEX_TYPES = (D.complex64, D.complex128)
ALL_TYPES_AND_COMPLEX = ALL_TYPES + COMPLEX_TYPES


@dataclasses.dataclass
class SampleInput:
    """One call of an op: ``op(input, *args, **kwargs)``.

    Attributes:
        input: the first argument (usually a tensor).
        args (tuple): further positional arguments.
        kwargs (dict): keyword arguments.
        name (str): what the sample exercises ("broadcast", "noncontiguous", ...).
        data_dependent (bool): the output shape depends on values (boolean masks),
            so meta tensors cannot run it.
    """

    input: Any
    args: tuple = ()
    kwargs: dict = dataclasses.field(default_factory=dict)
    name: str = ""
    data_dependent: bool = False

    def call(self, fn):
        """``fn(input, *args, **kwargs)``."""
        return fn(self.input, *self.args, **self.kwargs)

    def __repr__(self):
        def show(x):
            if isinstance(x, Tensor):
                return f"Tensor{list(x.shape)}:{x.dtype.name}"
            if isinstance(x, (list, tuple)):
                return type(x)(show(v) for v in x)
            return x

        return f"SampleInput[{self.name}]({show(self.input)}, args={show(self.args)}, kwargs={self.kwargs})"


@dataclasses.dataclass
class ErrorInput:
    """A sample that must raise ``error_type`` with a message matching ``error_regex``."""

    sample: SampleInput
    error_type: type = RuntimeError
    error_regex: str = ""


def _no_errors(opinfo, device):
    return iter(())


@dataclasses.dataclass
class OpInfo:
    """How to test one registry op.

    Attributes:
        name (str): the op's registry name.
        sample_inputs (callable): ``sample_inputs(opinfo, device, dtype, requires_grad)``
            yields :class:`SampleInput`.
        dtypes (tuple[ember.dtype]): dtypes the op supports.
        ref (callable, optional): the reference on numpy values,
            ``ref(input, *args, **kwargs)`` with tensors converted by :func:`to_numpy_args`.
        error_inputs (callable): ``error_inputs(opinfo, device)`` yields :class:`ErrorInput`.
        torch_name (str, optional): dotted name of the PyTorch function for parity
            (default: ``torch.<name>``); ``torch_fn`` overrides it with a callable.
        tolerances (dict): ``{dtype: (rtol, atol)}`` overrides for comparisons.
        supports_autograd (bool): whether gradients are defined (gradcheck in ember-autograd).
        skips (tuple): ``(test_name, dtype or None, reason)`` entries: known gaps, each with a reason.
        gradcheck_wrapper (callable, optional): ``wrapper(op, input, *args, **kwargs)`` calls the op for the
            gradient tests (ember's and PyTorch's), written with methods both libraries' tensors have: it
            maps free inputs to the inputs the op's gradient is defined for (a Hermitian matrix for
            ``cholesky``) and outputs to gauge-invariant quantities (``svd``'s vectors up to a phase).
    """

    name: str
    sample_inputs: Callable[..., Iterable[SampleInput]]
    dtypes: tuple = ALL_TYPES_AND_COMPLEX
    ref: Callable | None = None
    error_inputs: Callable[..., Iterable[ErrorInput]] = _no_errors
    torch_name: str | None = None
    torch_fn: Callable | None = None
    tolerances: dict = dataclasses.field(default_factory=dict)
    supports_autograd: bool = True
    skips: tuple = ()
    gradcheck_wrapper: Callable | None = None

    @property
    def op(self):
        """The registry :class:`~ember._ops.Op`."""
        return registry[self.name]

    def skip_reason(self, test_name, dtype=None):
        """The reason ``test_name`` is skipped for ``dtype``, or None."""
        for test, skip_dtype, reason in self.skips:
            if test == test_name and (skip_dtype is None or skip_dtype is dtype):
                return reason
        return None

    def tolerance(self, dtype):
        """``(rtol, atol)`` for this op at ``dtype``, or None for the default."""
        return self.tolerances.get(dtype)


#: Every OpInfo, by op name.
op_db: dict[str, OpInfo] = {}


def register_opinfo(info):
    """Add ``info`` to :data:`op_db`.

    Raises:
        KeyError: if the op is not in the registry.
        RuntimeError: if the op already has an OpInfo.
    """
    if info.name not in registry:
        raise KeyError(f"OpInfo for unknown op {info.name!r}")
    if info.name in op_db:
        raise RuntimeError(f"op {info.name!r} already has an OpInfo")
    op_db[info.name] = info
    return info


def make_tensor(
    shape,
    dtype,
    device="cpu",
    *,
    rng,
    low=None,
    high=None,
    noncontiguous=False,
    exclude_zero=False,
    requires_grad=False,
):
    """A tensor of random values for tests.

    Args:
        shape (tuple[int]): the shape.
        dtype (ember.dtype): element type.
        device (str or ember.device): where to put it.
        rng (numpy.random.Generator): the source of values (seeded by the caller).
        low, high (float, optional): value range; defaults depend on the dtype
            (-9..9 for signed types, 0..9 for uint8, False/True for bool).
        noncontiguous (bool): return a non-contiguous view with the same values.
        exclude_zero (bool): replace zeros (e.g. divisors) by a small nonzero value.
        requires_grad (bool): for floating and complex dtypes.
    """
    import ember

    shape = tuple(shape)
    if dtype is D.bool:
        values = rng.integers(0, 2, size=shape).astype(bool)
    else:
        lo = (0 if dtype is D.uint8 else -9) if low is None else low
        hi = 9 if high is None else high
        if dtype.category == D.INTEGRAL:
            values = rng.integers(int(np.ceil(lo)), int(np.floor(hi)) + 1, size=shape)
        else:
            values = rng.uniform(lo, hi, size=shape)
            if dtype.is_complex:
                values = values + 1j * rng.uniform(lo, hi, size=shape)
        if exclude_zero:
            values = np.where(values == 0, 1 if dtype.category == D.INTEGRAL else 0.5, values)
    array = np.asarray(values).astype(dtype.numpy_dtype)
    if noncontiguous and array.ndim > 0 and array.size > 1:
        # the same values, viewed with every other element of a buffer twice as long
        wide = np.repeat(array.reshape(-1), 2).reshape(*array.shape[:-1], array.shape[-1] * 2)
        result = ember.tensor(wide, device=device)[..., ::2]
    else:
        result = ember.tensor(array, device=device)
    if requires_grad and dtype.category >= D.FLOATING:
        result.requires_grad_(True)
    return result


def to_numpy_args(value):
    """``value`` with every tensor replaced by a numpy array of its values (recursively)."""
    if isinstance(value, Tensor):
        return np.array(value._host_array(), copy=True)
    if isinstance(value, tuple):
        return tuple(to_numpy_args(v) for v in value)
    if isinstance(value, list):
        return [to_numpy_args(v) for v in value]
    if isinstance(value, dict):
        return {k: to_numpy_args(v) for k, v in value.items()}
    return value
