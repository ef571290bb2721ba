"""OpInfos of factory ops and copies. Factory samples pass the size as ``input``."""

from __future__ import annotations

import numpy as np

from ... import _dtype as D
from .._opinfo import ALL_TYPES_AND_COMPLEX, ErrorInput, OpInfo, SampleInput, register_opinfo
from ._common import maker


def _factory_samples(opinfo, device, dtype, requires_grad):
    for shape in ((), (3,), (2, 0), (2, 3)):
        yield SampleInput(shape, (), {"dtype": dtype, "device": device}, name=f"shape {shape}")


def _factory_errors(opinfo, device):
    yield ErrorInput(SampleInput((2, -1), (), {"device": device}), RuntimeError, "negative dimension -1")
    yield ErrorInput(SampleInput((2, 1.5), (), {"device": device}), TypeError, "must be a tuple of ints")


def _full_samples(opinfo, device, dtype, requires_grad):
    value = True if dtype is D.bool else 7
    for shape in ((), (2, 3)):
        yield SampleInput(shape, (value,), {"dtype": dtype, "device": device})


def _like_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, False)
    yield SampleInput(make((2, 3)), name="same dtype")
    yield SampleInput(make((4,)), (), {"dtype": D.float64}, name="dtype override")


def _clone_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 3)))
    yield SampleInput(make((3, 4), noncontiguous=True), name="noncontiguous")
    yield SampleInput(make(()), name="zero-dim")


def _arange_samples(opinfo, device, dtype, requires_grad):
    if dtype.category == D.INTEGRAL or dtype.category == D.FLOATING:
        yield SampleInput(5, (), {"dtype": dtype, "device": device}, name="end")
        yield SampleInput(2, (9, 3), {"dtype": dtype, "device": device}, name="start end step")
        yield SampleInput(9, (2, -2), {"dtype": dtype, "device": device}, name="negative step")


def _arange_errors(opinfo, device):
    yield ErrorInput(SampleInput(0, (5, 0), {"device": device}), RuntimeError, "step must be nonzero")
    yield ErrorInput(SampleInput(5, (0, 1), {"device": device}), RuntimeError, "inconsistent with step sign")


def _eye_samples(opinfo, device, dtype, requires_grad):
    yield SampleInput(3, (), {"dtype": dtype, "device": device})
    yield SampleInput(2, (4,), {"dtype": dtype, "device": device})


def _linspace_samples(opinfo, device, dtype, requires_grad):
    if dtype.category == D.FLOATING:
        yield SampleInput(0.0, (1.0, 5), {"dtype": dtype, "device": device})
        yield SampleInput(-2.0, (3.0, 1), {"dtype": dtype, "device": device}, name="one step")
        yield SampleInput(1.0, (2.0, 0), {"dtype": dtype, "device": device}, name="no steps")


def _to_copy_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, False)
    for target in (D.float64, D.int32, D.bool):
        yield SampleInput(make((2, 3)), (), {"dtype": target}, name=f"to {target.name}")


def _to_copy_ref(a, dtype=None, **kwargs):
    if dtype is None:
        return a
    if a.dtype.kind == "c" and dtype.numpy_dtype.kind != "c":
        a = a.real
    with np.errstate(invalid="ignore"):
        return a.astype(dtype.numpy_dtype)


_REAL = tuple(d for d in ALL_TYPES_AND_COMPLEX if not d.is_complex)

register_opinfo(OpInfo("zeros", _factory_samples, ref=lambda size, dtype=None, device=None: np.zeros(size, dtype.numpy_dtype),
                       error_inputs=_factory_errors, supports_autograd=False))
register_opinfo(OpInfo("ones", _factory_samples, ref=lambda size, dtype=None, device=None: np.ones(size, dtype.numpy_dtype),
                       error_inputs=_factory_errors, supports_autograd=False))
register_opinfo(OpInfo("empty", _factory_samples, error_inputs=_factory_errors, supports_autograd=False,
                       skips=(("test_out_variant", None, "empty's values are uninitialised"),)))
register_opinfo(OpInfo("full", _full_samples, ref=lambda size, v, dtype=None, device=None: np.full(size, v, dtype.numpy_dtype),
                       supports_autograd=False))
register_opinfo(OpInfo("zeros_like", _like_samples, ref=lambda a, dtype=None: np.zeros_like(a, dtype=None if dtype is None else dtype.numpy_dtype),
                       supports_autograd=False))
register_opinfo(OpInfo("ones_like", _like_samples, ref=lambda a, dtype=None: np.ones_like(a, dtype=None if dtype is None else dtype.numpy_dtype),
                       supports_autograd=False))
register_opinfo(OpInfo("clone", _clone_samples, ref=np.copy))
register_opinfo(OpInfo("arange", _arange_samples, dtypes=_REAL, error_inputs=_arange_errors, supports_autograd=False,
                       ref=lambda start, end=None, step=1, dtype=None, device=None:
                       (np.arange(start) if end is None else np.arange(start, end, step)).astype(dtype.numpy_dtype)))
register_opinfo(OpInfo("eye", _eye_samples, supports_autograd=False,
                       ref=lambda n, m=None, dtype=None, device=None: np.eye(n, m, dtype=dtype.numpy_dtype)))
register_opinfo(OpInfo("linspace", _linspace_samples, dtypes=(D.float32, D.float64), supports_autograd=False,
                       ref=lambda s, e, n, dtype=None, device=None: np.linspace(s, e, n).astype(dtype.numpy_dtype)))
register_opinfo(OpInfo("_to_copy", _to_copy_samples, ref=_to_copy_ref, torch_name="Tensor.to"))


def _complex_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, seed=4)
    yield SampleInput(make((2, 3)), (make((2, 3)),), name="same shape")
    yield SampleInput(make((2, 1)), (make((3,)),), name="broadcast")
    yield SampleInput(make(()), (make(()),), name="zero-dim")


def _complex_errors(opinfo, device):
    import ember

    yield ErrorInput(SampleInput(ember.ones(2, device=device), (ember.ones(2, dtype=ember.float64, device=device),)),
                     RuntimeError, "Expected object of scalar type")
    yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.int64, device=device), (ember.ones(2, dtype=ember.int64, device=device),)),
                     RuntimeError, "Expected both inputs to be Half, Float or Double")


def _logspace_samples(opinfo, device, dtype, requires_grad):
    yield SampleInput(0.0, (2.0, 3), {"dtype": dtype, "device": device})
    yield SampleInput(-1.0, (1.0, 5, 2.0), {"dtype": dtype, "device": device}, name="base 2")


def _empty_strided_samples(opinfo, device, dtype, requires_grad):
    yield SampleInput((2, 3), ((1, 2),), {"dtype": dtype, "device": device}, name="column major")


def _scalar_tensor_samples(opinfo, device, dtype, requires_grad):
    yield SampleInput(True if dtype is D.bool else 3, (), {"dtype": dtype, "device": device})


def _full_like_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, False)
    yield SampleInput(make((2, 3)), (True if dtype is D.bool else 5,), name="fill")


_FLOATS = (D.float32, D.float64)
register_opinfo(OpInfo("complex", _complex_samples, dtypes=_FLOATS, ref=lambda re, im: re + 1j * im,
                       error_inputs=_complex_errors))
register_opinfo(OpInfo("polar", _complex_samples, dtypes=_FLOATS, ref=lambda r, theta: r * np.exp(1j * theta),
                       error_inputs=_complex_errors))
register_opinfo(OpInfo("logspace", _logspace_samples, dtypes=_FLOATS, supports_autograd=False,
                       ref=lambda s, e, n, base=10.0, dtype=None, device=None:
                       np.power(base, np.linspace(s, e, n)).astype(dtype.numpy_dtype)))
register_opinfo(OpInfo("empty_like", _like_samples, supports_autograd=False))
register_opinfo(OpInfo("empty_strided", _empty_strided_samples, supports_autograd=False,
                       skips=(("test_out_variant", None, "empty_strided's values are uninitialised"),)))
register_opinfo(OpInfo("scalar_tensor", _scalar_tensor_samples, supports_autograd=False,
                       ref=lambda s, dtype=None, device=None: np.array(s, dtype.numpy_dtype)))
register_opinfo(OpInfo("full_like", _full_like_samples, supports_autograd=False,
                       ref=lambda a, v: np.full_like(a, v)))
