"""OpInfos of ember._ops.fft: the three FFT prims and the eighteen ``ember.fft`` transforms.

References are ``scipy.fft`` (NumPy's conventions; it has the n-D Hermitian transforms that
``numpy.fft`` lacks), computed in double precision on the sample's values. Samples cover odd and
prime sizes, batch dims, trimming and zero-padding through ``n``/``s``, explicit and negative dims,
every norm and non-contiguous inputs. Empty batches are tested in ``tests/test_fft.py`` instead:
PyTorch's MKL transforms reject them, which would make the parity run xfail the whole op.
"""

from __future__ import annotations

import numpy as np

from ... import _dtype as D
from .._opinfo import ALL_TYPES_AND_COMPLEX, ErrorInput, OpInfo, SampleInput, register_opinfo
from ._common import maker

#: PyTorch's CPU transforms refuse float16/bfloat16 (error inputs check it).
_FFT_TYPES = tuple(d for d in ALL_TYPES_AND_COMPLEX if d not in (D.float16, D.bfloat16))
_REAL_FFT_TYPES = tuple(d for d in _FFT_TYPES if not d.is_complex)
#: single-precision results (float32/complex64, and the bool and integer inputs computed in them) round
#: each of the ~log2(n) butterfly stages
_TOL = {d: (1e-4, 1e-4) for d in _FFT_TYPES if d not in (D.float64, D.complex128)}
_NORMS = (None, "ortho", "forward")


def _exact(a):
    """``a`` in double precision (the reference's computing precision)."""
    a = np.asarray(a)
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


# -- the public transforms ------------------------------------------------------------------------------


def _one_d_samples(c2r):
    def gen(opinfo, device, dtype, requires_grad):
        make = maker(device, dtype, requires_grad)
        yield SampleInput(make((8,)), name="power of two")
        yield SampleInput(make((3, 7)), name="prime, batched")
        yield SampleInput(make((2, 3, 5)), kwargs={"dim": 1, "norm": "ortho"}, name="middle dim")
        yield SampleInput(make((4, 6)), kwargs={"n": 4, "dim": 0, "norm": "forward"}, name="trim")
        yield SampleInput(make((5, 6)), kwargs={"n": 11}, name="zero-pad to a prime")
        yield SampleInput(make((4, 5), noncontiguous=True), kwargs={"dim": -2}, name="noncontiguous")
        if c2r:
            yield SampleInput(make((3, 4)), kwargs={"n": 7}, name="odd output")

    return gen


def _two_d_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((4, 6)), name="matrix")
    yield SampleInput(make((2, 5, 3)), kwargs={"norm": "ortho"}, name="batched")
    yield SampleInput(make((3, 4, 5)), kwargs={"s": (3, 7), "dim": (0, 2)}, name="sizes and dims")
    yield SampleInput(make((4, 6)), kwargs={"s": (-1, 5), "norm": "forward"}, name="keep a size")
    yield SampleInput(make((5, 4), noncontiguous=True), kwargs={"dim": (1, 0)}, name="reversed dims")


def _n_d_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 3, 4)), name="all dims")
    yield SampleInput(make((7,)), kwargs={"norm": "ortho"}, name="one dim")
    yield SampleInput(make((3, 4, 5)), kwargs={"s": (6, 3)}, name="last len(s) dims")
    yield SampleInput(make((3, 4, 5)), kwargs={"dim": (0, -1), "norm": "forward"}, name="chosen dims")
    yield SampleInput(make((4, 3), noncontiguous=True), kwargs={"s": (5,), "dim": 0}, name="one dim of several")


def _scipy(name):
    """The scipy.fft function of an ember.fft transform, in double precision."""

    def ref(input, *args, **kwargs):
        import scipy.fft

        kwargs = dict(kwargs)
        if "dim" in kwargs:
            dim = kwargs.pop("dim")
            if name[-1] in "2n":
                kwargs["axes"] = (dim,) if isinstance(dim, int) else tuple(dim)
            else:
                kwargs["axis"] = dim
        if name[-1] == "n" and "s" in kwargs and "axes" not in kwargs:
            kwargs["axes"] = tuple(range(-len(kwargs["s"]), 0))
        if "s" in kwargs and "axes" in kwargs:  # -1 keeps a size (PyTorch); scipy wants the size
            a = np.asarray(input)
            kwargs["s"] = tuple(a.shape[d] if n == -1 else n for n, d in zip(kwargs["s"], kwargs["axes"]))
        elif "s" in kwargs:
            a = np.asarray(input)
            kwargs["s"] = tuple(a.shape[d - 2] if n == -1 else n for d, n in enumerate(kwargs["s"]))
        return getattr(scipy.fft, name)(_exact(input), *args, **kwargs)

    return ref


def _transform_errors(name, real_only):
    def gen(opinfo, device):
        import ember

        x = ember.ones(4, 6, device=device)
        n_name = "n" if name[-1] not in "2n" else "s"
        bad_size = 0 if n_name == "n" else (0, 4)
        yield ErrorInput(SampleInput(x, kwargs={"norm": "bad"}), RuntimeError, 'Invalid normalization mode: "bad"')
        yield ErrorInput(SampleInput(x, kwargs={n_name: bad_size}), RuntimeError,
                         r"Invalid number of data points \(0\) specified")
        yield ErrorInput(SampleInput(x, kwargs={"dim": 2 if n_name == "n" else (0, 2)}), IndexError,
                         "Dimension out of range")
        yield ErrorInput(SampleInput(ember.ones(4, 6, dtype=ember.float16, device=device)), RuntimeError,
                         "Unsupported dtype Half")
        if n_name == "s":
            yield ErrorInput(SampleInput(x, kwargs={"s": (4, 6), "dim": (0,)}), RuntimeError,
                             "dim and shape arguments must have the same length")
            yield ErrorInput(SampleInput(x, kwargs={"dim": (1, 1)}), RuntimeError, "FFT dims must be unique")
        else:
            yield ErrorInput(SampleInput(x, kwargs={"dim": (0,)}), TypeError, "argument 'dim' must be int")
        if real_only:
            yield ErrorInput(SampleInput(ember.ones(4, 6, dtype=ember.complex64, device=device)), RuntimeError,
                             "expects a real input tensor")

    return gen


def _torch_transform(name):
    """``torch.fft.<name>``, with PyTorch's lazy conjugation (``ifft`` of real input, ``ihfft``) resolved."""

    def call(*args, **kwargs):
        import torch

        return getattr(torch.fft, name)(*args, **kwargs).resolve_conj()

    return call


for _base, _real_only, _c2r in (
    ("fft", False, False), ("ifft", False, False), ("rfft", True, False), ("irfft", False, True),
    ("hfft", False, True), ("ihfft", True, False),
):
    for _suffix, _samples in (("", _one_d_samples(_c2r)), ("2", _two_d_samples), ("n", _n_d_samples)):
        _name = _base + _suffix
        register_opinfo(OpInfo(
            f"fft_{_name}", _samples, dtypes=_REAL_FFT_TYPES if _real_only else _FFT_TYPES, ref=_scipy(_name),
            error_inputs=_transform_errors(_name, _real_only), torch_fn=_torch_transform(_name), tolerances=_TOL,
        ))


# -- the prims ------------------------------------------------------------------------------------------

#: PyTorch's ``torch._fft_*`` take the normalisation as an int: 0 none, 1 by sqrt(n), 2 by n.
_TORCH_NORM = {True: {"backward": 0, "ortho": 1, "forward": 2}, False: {"backward": 2, "ortho": 1, "forward": 0}}


def _prim_samples(family):
    def gen(opinfo, device, dtype, requires_grad):
        make = maker(device, dtype, requires_grad)
        yield SampleInput(make((3, 8)), args=((1,), "backward", True), name="last dim")
        yield SampleInput(make((2, 5, 3)), args=((0, 2), "ortho", False), name="two dims")
        yield SampleInput(make((4, 6), noncontiguous=True), args=((0,), "forward", True), name="noncontiguous")
        if family == "c2c":
            yield SampleInput(make((2, 3)), args=((), "backward", True), name="no dims")

    def c2r_gen(opinfo, device, dtype, requires_grad):
        make = maker(device, dtype, requires_grad)
        yield SampleInput(make((3, 5)), args=((1,), "backward", 8), name="even output")
        yield SampleInput(make((3, 4, 2)), args=((0, 1), "ortho", 7), name="odd output, two dims")
        yield SampleInput(make((4, 3), noncontiguous=True), args=((0,), "forward", 6), name="noncontiguous")

    return c2r_gen if family == "c2r" else gen


def _prim_ref(family):
    def ref(input, dim, norm, flag):
        import scipy.fft

        x = _exact(input)
        if family == "c2c":
            if not dim:
                return x
            return (scipy.fft.fftn if flag else scipy.fft.ifftn)(x, axes=dim, norm=norm)
        if family == "r2c":
            return (scipy.fft.rfftn if flag else scipy.fft.fftn)(x, axes=dim, norm=norm)
        sizes = [x.shape[d] for d in dim[:-1]] + [flag]
        return scipy.fft.irfftn(x, s=sizes, axes=dim, norm=norm)

    return ref


def _prim_torch(family):
    def call(input, dim, norm, flag):
        import torch

        if norm not in _TORCH_NORM[True]:  # PyTorch's int modes have no invalid name to reject
            raise RuntimeError(f'Invalid normalization mode: "{norm}"')
        if family == "c2c":
            return torch._fft_c2c(input, list(dim), _TORCH_NORM[flag][norm], flag)
        if family == "r2c":
            return torch._fft_r2c(input, list(dim), _TORCH_NORM[True][norm], flag)
        return torch._fft_c2r(input, list(dim), _TORCH_NORM[False][norm], flag)

    return call


def _prim_errors(family):
    def gen(opinfo, device):
        import ember

        real = ember.ones(4, 6, device=device)
        complex_ = ember.ones(4, 6, dtype=ember.complex64, device=device)
        good = real if family == "r2c" else complex_
        flag = 10 if family == "c2r" else True
        yield ErrorInput(SampleInput(good, args=((1,), "bad", flag)), RuntimeError, "Invalid normalization mode")
        # (repeated or out-of-range dims: ember's prims refuse them, PyTorch's internal ones do not check their
        # dims; tests/test_fft.py covers these errors)
        if family == "r2c":
            yield ErrorInput(SampleInput(complex_, args=((1,), "backward", True)), RuntimeError, "float32 or float64")
        else:
            yield ErrorInput(SampleInput(real, args=((1,), "backward", flag)), RuntimeError, "complex input")
        if family == "c2r":
            yield ErrorInput(SampleInput(complex_, args=((1,), "backward", 20)), RuntimeError, "expected 11 bins")

    return gen


for _family, _types in (("c2c", (D.complex64, D.complex128)), ("r2c", (D.float32, D.float64)),
                        ("c2r", (D.complex64, D.complex128))):
    register_opinfo(OpInfo(
        f"_fft_{_family}", _prim_samples(_family), dtypes=_types, ref=_prim_ref(_family),
        error_inputs=_prim_errors(_family), torch_fn=_prim_torch(_family), tolerances=_TOL,
    ))
