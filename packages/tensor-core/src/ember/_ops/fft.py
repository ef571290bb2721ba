"""Discrete Fourier transforms: three prims and the ``ember.fft`` functions built from them.

The prims are the transforms a backend implements, each over a given tuple of dims with a
normalisation mode (``"backward"``, ``"ortho"`` or ``"forward"``, NumPy's meaning):

* ``_fft_c2c(input, dim, norm, forward)``: complex to complex, forward (``exp(-2 pi i jk/n)``) or
  inverse;
* ``_fft_r2c(input, dim, norm, onesided)``: real to complex, forward; ``onesided`` keeps the
  ``n // 2 + 1`` non-redundant bins of the last transformed dim;
* ``_fft_c2r(input, dim, norm, last_dim_size)``: the inverse of a one-sided spectrum (Hermitian
  symmetry implied), real output of ``last_dim_size`` points along the last transformed dim, whose
  input size must be ``last_dim_size // 2 + 1``.

The CPU kernels call ``scipy.fft`` (pocketfft), with as many workers as ``ember.get_num_threads()``,
or ``ducc0.fft`` (pocketfft's faster successor) when that optional package is installed; the CUDA
kernels call cuFFT plans directly (:mod:`ember.cuda.kernels.fft_plans`, ember's own plan cache) when the
transformed dims are the trailing ones (at most three), else ``cupyx.scipy.fft``. Their derivatives are
in ember-autograd (``ember.autograd.derivatives.fft``).

The eighteen public transforms (``fft``, ``ifft``, ``rfft``, ``irfft``, ``hfft``, ``ihfft`` in 1-D,
2-D and n-D forms) are composites, registered as ``fft_<name>`` (PyTorch's ATen names) and exported
from :mod:`ember.fft`: each one's meta function resolves ``n``/``s``, ``dim`` and ``norm`` with
PyTorch's checks, and its decomposition trims or zero-pads the input to the requested sizes and
calls one prim. Meta tensors, FX graphs and the compiler therefore meet three transforms.

dtypes follow PyTorch on CPU: bool and integer inputs compute in the default float dtype
(``float32`` -> ``complex64``), float16 and bfloat16 raise ``RuntimeError("Unsupported dtype Half")``.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from .._tensor import Tensor
from ._pointwise_helpers import _torch_name
from ._registry import COMPOSITE, defop
from ._shapes import wrap_dim

__all__ = ["NORMS", "DUAL_NORM"]

#: No Tensor methods: PyTorch has the transforms only as ``torch.fft.*`` functions.
METHODS: list[str] = []

#: The normalisation modes; ``None`` means ``"backward"``.
NORMS = ("backward", "ortho", "forward")
#: The mode that scales the opposite transform the same way: a transform with ``norm`` and the inverse
#: transform with ``DUAL_NORM[norm]`` are adjoint (their scales agree), which the derivatives use.
DUAL_NORM = {"backward": "forward", "forward": "backward", "ortho": "ortho"}

_TAGS = ("fft", "submodule")  # exported from ember.fft, not from the ember namespace


# -- shared checks -------------------------------------------------------------------------------------


def _check_tensor(fn, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument 'input' (position 1) must be Tensor, not {type(x).__name__}")


def _check_norm(norm):
    """``norm`` as one of :data:`NORMS` (``None`` is ``"backward"``).

    Raises:
        RuntimeError: 'Invalid normalization mode: "bad"', as PyTorch words it.
    """
    if norm is None:
        return "backward"
    if not isinstance(norm, str) or norm not in NORMS:
        raise RuntimeError(f'Invalid normalization mode: "{norm}"')
    return norm


def _prim_dims(fn, dim, ndim):
    """The prims' ``dim``: a sequence of distinct dims, wrapped."""
    if isinstance(dim, int):
        dim = (dim,)
    if not isinstance(dim, (tuple, list)):
        raise TypeError(f"{fn}(): dim must be a tuple of ints, got {type(dim).__name__}")
    dims = tuple(wrap_dim(d, ndim, scalar_ok=False) for d in dim)
    if len(set(dims)) != len(dims):
        raise RuntimeError("FFT dims must be unique")
    return dims


def _dtype_name(np_dtype):
    """PyTorch's name (``ComplexFloat``) of a numpy dtype."""
    return _torch_name(D.from_numpy_dtype(np_dtype))


def _compute_dtype(fn, x_dtype, family):
    """The ember dtype a transform of family ``family`` computes in, from the input's numpy dtype.

    ``"c2c"`` and ``"c2r"`` compute in a complex dtype, ``"r2c"`` in a real one.

    Raises:
        RuntimeError: for float16/bfloat16 ("Unsupported dtype Half", as PyTorch's CPU transforms say),
            and for complex inputs of a real-input transform.
    """
    dtype = D.from_numpy_dtype(x_dtype)
    if dtype is D.float16 or dtype is D.bfloat16:
        raise RuntimeError(f"Unsupported dtype {_torch_name(dtype)}")
    if dtype.category < D.FLOATING:  # bool and integers: the default float dtype, as in PyTorch
        dtype = D.get_default_dtype()
    if family == "r2c":
        if dtype.is_complex:
            raise RuntimeError(f"{fn} expects a real input tensor, but got {_torch_name(dtype)}")
        return dtype
    return dtype.to_complex()


# -- the prims -----------------------------------------------------------------------------------------


def _fft_c2c_meta(input, dim, norm, forward):
    """Complex-to-complex DFT of ``input`` over the dims ``dim`` (a prim of the ember.fft functions).

    Args:
        input (Tensor): complex64 or complex128, any shape.
        dim (tuple[int]): the distinct dims to transform (may be empty: a copy).
        norm (str): ``"backward"``, ``"ortho"`` or ``"forward"``, in NumPy's sense for the direction.
        forward (bool): the forward transform (``exp(-2 pi i jk/n)``) or the inverse.

    Returns:
        Tensor: ``input``'s shape and dtype.

    Raises:
        RuntimeError: for a real input, repeated dims or an invalid ``norm``.
        IndexError: for a dim out of range.
    """
    _check_tensor("_fft_c2c", input)
    x = input._data
    if x.dtype.kind != "c":
        raise RuntimeError(f"_fft_c2c expects a complex input tensor, but got {_dtype_name(x.dtype)}")
    _prim_dims("_fft_c2c", dim, x.ndim)
    _check_norm(norm)
    return MetaArray(x.shape, x.dtype)


def _fft_r2c_meta(input, dim, norm, onesided):
    """Real-to-complex forward DFT of ``input`` over the dims ``dim`` (a prim of the ember.fft functions).

    Args:
        input (Tensor): float32 or float64, any shape.
        dim (tuple[int]): the distinct dims to transform, at least one.
        norm (str): ``"backward"``, ``"ortho"`` or ``"forward"``.
        onesided (bool): keep only the ``n // 2 + 1`` non-redundant bins of the last dim of ``dim``.

    Returns:
        Tensor: complex64 for float32 input, complex128 for float64; ``input``'s shape, with the last
        transformed dim ``n // 2 + 1`` when ``onesided``.

    Raises:
        RuntimeError: for a non-float input, no dims, repeated dims or an invalid ``norm``.
    """
    _check_tensor("_fft_r2c", input)
    x = input._data
    if x.dtype not in _REAL_PRIM_TYPES:
        raise RuntimeError(f"_fft_r2c expects a float32 or float64 input, but got {_dtype_name(x.dtype)}")
    dims = _prim_dims("_fft_r2c", dim, x.ndim)
    if not dims:
        raise RuntimeError("_fft_r2c must transform at least one dim")
    _check_norm(norm)
    shape = list(x.shape)
    if onesided:
        shape[dims[-1]] = shape[dims[-1]] // 2 + 1
    return MetaArray(tuple(shape), np.result_type(x.dtype, np.complex64))


def _fft_c2r_meta(input, dim, norm, last_dim_size):
    """Complex-to-real inverse DFT of a one-sided spectrum over ``dim`` (a prim of the ember.fft functions).

    The input holds the ``last_dim_size // 2 + 1`` non-redundant bins of a Hermitian-symmetric
    spectrum along the last dim of ``dim``; the imaginary parts of the zero (and, for even sizes,
    the Nyquist) bins are ignored.

    Args:
        input (Tensor): complex64 or complex128.
        dim (tuple[int]): the distinct dims to transform, at least one.
        norm (str): ``"backward"``, ``"ortho"`` or ``"forward"``.
        last_dim_size (int): the output size along the last dim of ``dim`` (at least 1).

    Returns:
        Tensor: float32 for complex64 input, float64 for complex128; ``input``'s shape with the last
        transformed dim ``last_dim_size``.

    Raises:
        RuntimeError: for a real input, no dims, repeated dims, an invalid ``norm`` or a last dim whose
            size is not ``last_dim_size // 2 + 1``.
    """
    _check_tensor("_fft_c2r", input)
    x = input._data
    if x.dtype.kind != "c":
        raise RuntimeError(f"_fft_c2r expects a complex input tensor, but got {_dtype_name(x.dtype)}")
    dims = _prim_dims("_fft_c2r", dim, x.ndim)
    if not dims:
        raise RuntimeError("_fft_c2r must transform at least one dim")
    _check_norm(norm)
    if not isinstance(last_dim_size, int) or last_dim_size < 1:
        raise RuntimeError(f"Invalid number of data points ({last_dim_size}) specified")
    if x.shape[dims[-1]] != last_dim_size // 2 + 1:
        raise RuntimeError(
            f"_fft_c2r: expected {last_dim_size // 2 + 1} bins along dim {dims[-1]} for last_dim_size={last_dim_size}, "
            f"but got {x.shape[dims[-1]]}"
        )
    shape = list(x.shape)
    shape[dims[-1]] = last_dim_size
    return MetaArray(tuple(shape), np.dtype(x.dtype.char.lower()))  # F -> f, D -> d


_REAL_PRIM_TYPES = frozenset((np.dtype(np.float32), np.dtype(np.float64)))


class _SciPyFFT:
    """The transforms through a ``scipy.fft``-like module: scipy.fft (pocketfft) on CPU, with ember's
    thread count as ``workers``; cupyx.scipy.fft (cuFFT, through CuPy's plan cache) on GPU arrays."""

    def __init__(self, module, threads):
        self.module = module
        self.extra = {"workers": threads} if threads else {}

    def c2c(self, x, axes, norm, forward):
        transform = self.module.fftn if forward else self.module.ifftn
        return transform(x, axes=axes, norm=norm, **self.extra)

    def r2c(self, x, axes, norm, onesided):
        transform = self.module.rfftn if onesided else self.module.fftn
        return transform(x, axes=axes, norm=norm, **self.extra)

    def c2r(self, x, axes, norm, last_dim_size):
        sizes = [x.shape[a] for a in axes[:-1]] + [last_dim_size]
        return self.module.irfftn(x, s=sizes, axes=axes, norm=norm, **self.extra)


class _DuccFFT:
    """The transforms through ``ducc0.fft`` (pocketfft's successor, by its author), used on CPU when the
    optional package is installed (``pip install "ember-core[fft]"``): about 1.6x faster than scipy.fft
    on batched power-of-two sizes, on par with PyTorch's MKL transforms. Same values as scipy.fft up to
    rounding."""

    #: ducc0's ``inorm``: 0 no scaling, 1 by 1/sqrt(n), 2 by 1/n; by direction and norm name
    _INORM = {True: {"backward": 0, "ortho": 1, "forward": 2}, False: {"backward": 2, "ortho": 1, "forward": 0}}

    def __init__(self, module, threads):
        self.fft = module.fft
        self.threads = threads

    def c2c(self, x, axes, norm, forward):
        return self.fft.c2c(x, axes=axes, forward=forward, inorm=self._INORM[forward][norm], nthreads=self.threads)

    def r2c(self, x, axes, norm, onesided):
        if not onesided:  # ducc0's r2c is one-sided only: a complex copy through c2c
            return self.c2c(x.astype(np.result_type(x.dtype, np.complex64)), axes, norm, True)
        return self.fft.r2c(x, axes=axes, forward=True, inorm=self._INORM[True][norm], nthreads=self.threads)

    def c2r(self, x, axes, norm, last_dim_size):
        return self.fft.c2r(x, axes=axes, lastsize=last_dim_size, forward=False, inorm=self._INORM[False][norm],
                            nthreads=self.threads)


_ducc = None  # ducc0 once looked up: the module, or False when it is not installed


def _cpu_ducc0():
    global _ducc
    if _ducc is None:
        try:
            import ducc0
        except ImportError:
            ducc0 = False
        _ducc = ducc0
    return _ducc


def _backend(x):
    """The transforms for array ``x``: ducc0 (if installed) or scipy.fft on CPU, cupyx.scipy.fft on GPU."""
    if type(x) is np.ndarray:
        import ember

        ducc0 = _cpu_ducc0()
        if ducc0:
            return _DuccFFT(ducc0, ember.get_num_threads())
        import scipy.fft

        return _SciPyFFT(scipy.fft, ember.get_num_threads())
    import cupyx.scipy.fft

    return _SciPyFFT(cupyx.scipy.fft, None)


def _contiguous(a):
    """``a`` row-major (the meta functions promise contiguous outputs)."""
    if a.flags.c_contiguous:
        return a
    return a.copy(order="C")  # numpy and CuPy both take order=


def _cuda_plans():
    """:mod:`ember.cuda.kernels.fft_plans` (cuFFT plans called directly), imported on the first GPU call."""
    from ..cuda.kernels import fft_plans

    return fft_plans


def _fft_c2c_kernel(input, dim, norm, forward):
    x = input._data
    axes = _prim_dims("_fft_c2c", dim, x.ndim)
    if not axes or x.size == 0:  # nothing to transform: a copy (pocketfft refuses empty arrays)
        return x.copy()
    if type(x) is not np.ndarray:
        out = _cuda_plans().transform(x, axes, norm, "c2c", forward)
        if out is not None:
            return out
    return _contiguous(_backend(x).c2c(x, axes, norm, forward))


def _fft_r2c_kernel(input, dim, norm, onesided):
    x = input._data
    axes = _prim_dims("_fft_r2c", dim, x.ndim)
    out_dtype = np.result_type(x.dtype, np.complex64)
    if x.size == 0:
        shape = list(x.shape)
        if onesided:
            shape[axes[-1]] = shape[axes[-1]] // 2 + 1
        return _zeros_like_backend(x, tuple(shape), out_dtype)
    if onesided and type(x) is not np.ndarray:
        out = _cuda_plans().transform(x, axes, norm, "r2c")
        if out is not None:
            return out
    return _contiguous(_backend(x).r2c(x, axes, norm, onesided))


def _fft_c2r_kernel(input, dim, norm, last_dim_size):
    x = input._data
    axes = _prim_dims("_fft_c2r", dim, x.ndim)
    out_dtype = np.dtype(x.dtype.char.lower())
    if x.size == 0:
        full = list(x.shape)
        full[axes[-1]] = last_dim_size
        return _zeros_like_backend(x, tuple(full), out_dtype)
    if type(x) is not np.ndarray:
        out = _cuda_plans().transform(x, axes, norm, "c2r", last_dim_size=last_dim_size)
        if out is not None:
            return out
    return _contiguous(_backend(x).c2r(x, axes, norm, last_dim_size))


def _zeros_like_backend(x, shape, dtype):
    if type(x) is np.ndarray:
        return np.zeros(shape, dtype)
    import cupy

    return cupy.zeros(shape, dtype)


_fft_c2c = defop("_fft_c2c", _fft_c2c_meta, cpu=_fft_c2c_kernel, tags=("fft",))
_fft_r2c = defop("_fft_r2c", _fft_r2c_meta, cpu=_fft_r2c_kernel, tags=("fft",))
_fft_c2r = defop("_fft_c2r", _fft_c2r_meta, cpu=_fft_c2r_kernel, tags=("fft",))
# the same code runs on CuPy arrays: _backend picks cupyx.scipy.fft
_fft_c2c.register_kernel("cuda", _fft_c2c_kernel)
_fft_r2c.register_kernel("cuda", _fft_r2c_kernel)
_fft_c2r.register_kernel("cuda", _fft_c2r_kernel)


# -- checked CUDA kernels: the common calls straight to a cuFFT plan ----------------------------------------
# A transform's host time on the GPU is its Python: the composite's argument resolution, the prim's meta
# function and kernel. These checked kernels (see Op.register_checked_kernel) take the common calls whole:
# a CUDA tensor already of the compute dtype, no resizing, the trailing dims, a valid norm; they check
# exactly that and hand everything else back (None) to the usual path, which raises the errors.

_CUDA_COMPLEX = frozenset((np.dtype(np.complex64), np.dtype(np.complex128)))


def _fast_dims(dim, ndim):
    """``dim`` (an int, or a tuple/list of ints) wrapped into a tuple of distinct dims, or None if it isn't one."""
    if type(dim) is int:
        dim = (dim,)
    elif type(dim) is not tuple and type(dim) is not list:
        return None
    axes = []
    for d in dim:
        if type(d) is not int or not -ndim <= d < ndim:
            return None
        axes.append(d + ndim if d < 0 else d)
    return tuple(axes) if len(set(axes)) == len(axes) else None


def _fast_array(input, family):
    """``input``'s CuPy array when it is a plain CUDA tensor of ``family``'s input dtype, with elements."""
    if type(input) is not Tensor:
        return None
    x = input._data
    if type(x) is np.ndarray or x.size == 0 or x.ndim == 0:
        return None
    if (x.dtype in _REAL_PRIM_TYPES) if family == "r2c" else (x.dtype in _CUDA_COMPLEX):
        return x
    return None


def _fast_norm(norm):
    if norm is None:
        return "backward"
    return norm if type(norm) is str and norm in NORMS else None


def _prim_checked_kernel(family):
    """The checked cuda kernel of prim ``_fft_<family>``: ``(input, dim, norm, flag)``, ``flag`` being
    ``forward`` (c2c), ``onesided`` (r2c, True only) or ``last_dim_size`` (c2r)."""

    def kernel(*args):
        if len(args) != 4:
            return None
        input, dim, norm, flag = args
        x = _fast_array(input, family)
        if x is None or type(norm) is not str or norm not in NORMS:
            return None
        axes = _fast_dims(dim, x.ndim)
        if not axes:
            return None
        if family == "c2c":
            if type(flag) is not bool:
                return None
            return _cuda_plans().transform(x, axes, norm, family, flag)
        if family == "r2c":
            return _cuda_plans().transform(x, axes, norm, family) if flag is True else None
        if type(flag) is not int or flag < 1:
            return None
        return _cuda_plans().transform(x, axes, norm, family, last_dim_size=flag)

    kernel.__name__ = f"_fft_{family}_cuda_checked"
    return kernel


def _transform_checked_kernel(spec):
    """The checked cuda kernel of the public transform ``spec`` (not the Hermitian ones): calls without
    ``n``/``s`` whose input needs no conversion, over trailing dims (the transform computes in the input's
    dtype and at its sizes, so the composite would call the prim unchanged)."""
    default_dim = {"1": -1, "2": (-2, -1), "n": None}[spec.form]

    def kernel(*args):
        if not 1 <= len(args) <= 4:
            return None
        input, s, dim, norm = (*args, *(None, default_dim, None)[len(args) - 1:])
        x = _fast_array(input, spec.family)
        norm = _fast_norm(norm)
        if x is None or s is not None or norm is None or (spec.form == "1" and type(dim) is not int):
            return None
        axes = tuple(range(x.ndim)) if dim is None else _fast_dims(dim, x.ndim)
        if not axes:
            return None
        if spec.family != "c2r":
            return _cuda_plans().transform(x, axes, norm, spec.family, spec.forward)
        last = 2 * (x.shape[axes[-1]] - 1)
        return _cuda_plans().transform(x, axes, norm, "c2r", last_dim_size=last) if last >= 1 else None

    kernel.__name__ = f"fft_{spec.name}_cuda_checked"
    return kernel


for _prim, _family in ((_fft_c2c, "c2c"), (_fft_r2c, "r2c"), (_fft_c2r, "c2r")):
    _prim.register_checked_kernel("cuda", _prim_checked_kernel(_family))


# -- stft's frames ---------------------------------------------------------------------------------------
# ``_stft_frames`` pads a batch of signals at both ends and cuts it into overlapping frames in one kernel;
# ``_stft_frames_backward`` is its adjoint (an overlap-add, then the padding folded back onto the samples
# it copied). Each is the other's derivative, so stft records three ops (frames, window product, FFT) and
# its backward runs three, where a pad, an unfold and their backward ops cost several times more.

_FRAME_PADS = ("reflect", "replicate", "circular", "constant")


def _check_frames(fn, length, n_fft, hop_length, pad, pad_mode):
    if pad_mode not in _FRAME_PADS:
        raise RuntimeError(f"{fn}: pad_mode must be one of {_FRAME_PADS}, got {pad_mode!r}")
    if pad < 0 or (pad and pad_mode != "constant" and pad >= length) or hop_length < 1:
        raise RuntimeError(f"{fn}: invalid padding {pad} ({pad_mode}) or hop_length {hop_length} for {length} samples")
    if not 0 < n_fft <= length + 2 * pad:
        raise RuntimeError(f"{fn}: expected 0 < n_fft <= {length + 2 * pad}, but got n_fft={n_fft}")
    return 1 + (length + 2 * pad - n_fft) // hop_length


def _stft_frames_meta(input, n_fft, hop_length, pad, pad_mode):
    """Frames of ``input`` (``(B, L)``) padded by ``pad`` on both ends: ``(B, n_frames, n_fft)``, frame ``t``
    starting at padded sample ``t * hop_length`` (a prim of ``ember.stft``).

    Raises:
        RuntimeError: for an unknown ``pad_mode``, a padding the mode cannot make, or ``n_fft`` longer than
            the padded signal.
    """
    _check_tensor("_stft_frames", input)
    x = input._data
    if x.ndim != 2:
        raise RuntimeError(f"_stft_frames expects a (batch, length) tensor, got shape {list(x.shape)}")
    count = _check_frames("_stft_frames", x.shape[1], n_fft, hop_length, pad, pad_mode)
    return MetaArray((x.shape[0], count, n_fft), x.dtype)


def _stft_frames_backward_meta(frames, length, hop_length, pad, pad_mode):
    """The adjoint of ``_stft_frames``: ``frames`` (``(B, n_frames, n_fft)``) added at their offsets, the
    padding folded back onto the samples it copied: ``(B, length)``.

    Raises:
        RuntimeError: for frames that ``_stft_frames`` of a signal of ``length`` would not give.
    """
    _check_tensor("_stft_frames_backward", frames)
    f = frames._data
    if f.ndim != 3:
        raise RuntimeError(f"_stft_frames_backward expects (batch, n_frames, n_fft) frames, got {list(f.shape)}")
    count = _check_frames("_stft_frames_backward", length, f.shape[2], hop_length, pad, pad_mode)
    if f.shape[1] != count:
        raise RuntimeError(f"_stft_frames_backward: {f.shape[1]} frames, but a signal of {length} samples has {count}")
    return MetaArray((f.shape[0], length), f.dtype)


def _xp(x):
    if type(x) is np.ndarray:
        return np
    import cupy

    return cupy


def _stft_frames_kernel(input, n_fft, hop_length, pad, pad_mode):
    x = input._data
    if type(x) is not np.ndarray:  # one gather kernel on the GPU
        from ..cuda.kernels import stft_frames

        out = stft_frames.frames(x, n_fft, hop_length, pad, pad_mode)
        if out is not None:
            return out
    xp = _xp(x)
    if pad:
        if pad_mode == "reflect":
            left, right = x[:, pad:0:-1], x[:, -2:-pad - 2:-1]
        elif pad_mode == "replicate":
            left, right = xp.repeat(x[:, :1], pad, 1), xp.repeat(x[:, -1:], pad, 1)
        elif pad_mode == "circular":
            left, right = x[:, -pad:], x[:, :pad]
        else:
            left = right = xp.zeros((x.shape[0], pad), x.dtype)
        x = xp.concatenate((left, x, right), axis=1)
    else:
        x = xp.ascontiguousarray(x)
    count = 1 + (x.shape[1] - n_fft) // hop_length
    step = x.strides[1]
    windows = xp.lib.stride_tricks.as_strided(x, (x.shape[0], count, n_fft), (x.strides[0], hop_length * step, step))
    return xp.ascontiguousarray(windows)


def _stft_frames_backward_kernel(frames, length, hop_length, pad, pad_mode):
    f = frames._data
    if type(f) is not np.ndarray:  # one overlap-add kernel on the GPU (reflect and constant padding)
        from ..cuda.kernels import stft_frames

        out = stft_frames.overlap_add(f, length, hop_length, pad, pad_mode)
        if out is not None:
            return out
    xp = _xp(f)
    batch, count, n_fft = f.shape
    blocks = -(-n_fft // hop_length)  # each frame spans this many hop-sized blocks
    if blocks * hop_length != n_fft:
        f = xp.concatenate((f, xp.zeros((batch, count, blocks * hop_length - n_fft), f.dtype)), axis=2)
    f = f.reshape(batch, count, blocks, hop_length)
    total = xp.zeros((batch, count + blocks - 1, hop_length), f.dtype)
    for j in range(blocks):  # block j of frame t lands in block t + j of the signal
        total[:, j:j + count] += f[:, :, j]
    padded = total.reshape(batch, -1)
    full = length + 2 * pad
    if padded.shape[1] >= full:  # the zero tail of the last frame's blocks may reach past the signal
        padded = padded[:, :full]
    else:  # the frames stop before the end of the signal
        padded = xp.concatenate((padded, xp.zeros((batch, full - padded.shape[1]), f.dtype)), axis=1)
    out = padded[:, pad:pad + length].copy()
    if pad and pad_mode != "constant":
        head, tail = padded[:, :pad], padded[:, pad + length:]
        if pad_mode == "reflect":
            out[:, 1:pad + 1] += head[:, ::-1]
            out[:, length - 1 - pad:length - 1] += tail[:, ::-1]
        elif pad_mode == "replicate":
            out[:, 0] += head.sum(axis=1)
            out[:, -1] += tail.sum(axis=1)
        else:  # circular
            out[:, length - pad:] += head
            out[:, :pad] += tail
    return out


_stft_frames = defop("_stft_frames", _stft_frames_meta, cpu=_stft_frames_kernel, tags=("fft",))
_stft_frames_backward = defop("_stft_frames_backward", _stft_frames_backward_meta, cpu=_stft_frames_backward_kernel,
                              tags=("fft",))
_stft_frames.register_kernel("cuda", _stft_frames_kernel)
_stft_frames_backward.register_kernel("cuda", _stft_frames_backward_kernel)


# -- the public transforms -----------------------------------------------------------------------------


class _Spec:
    """What distinguishes one public transform: its family, direction and argument form."""

    def __init__(self, name, family, form, forward, hermitian=False):
        self.name = name  # "fft", "rfft2", ...
        self.family = family  # "c2c", "r2c" or "c2r"
        self.form = form  # "1" (n, dim), "2" (s, dim=(-2, -1)) or "n" (s, dim=None)
        self.forward = forward  # the direction norm="backward" leaves unscaled
        self.hermitian = hermitian  # hfft*/ihfft*: the conjugate transform with the dual norm


def _plan(spec, input, s, dim, norm):
    """Check a call's arguments: ``(dims, sizes, norm, compute dtype)``.

    ``sizes`` are the signal sizes along ``dims`` (for ``c2r``, the last one is the output's size).

    Raises:
        RuntimeError, IndexError, TypeError: as PyTorch does (messages in the transforms' docstrings).
    """
    _check_tensor(f"fft_{spec.name}", input)
    x = input._data
    norm = _check_norm(norm)
    ndim = x.ndim
    if spec.form == "1":
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise TypeError(f"fft_{spec.name}(): argument 'dim' must be int, not {type(dim).__name__}")
        if s is not None and (not isinstance(s, int) or isinstance(s, bool)):
            raise TypeError(f"fft_{spec.name}(): argument 'n' must be int, not {type(s).__name__}")
        dims = (wrap_dim(dim, ndim, scalar_ok=False),)
        s = None if s is None else (s,)
    else:
        if isinstance(dim, int):
            dim = (dim,)
        if isinstance(s, int):
            s = (s,)
        if s is not None:
            s = tuple(s)
        if dim is None:
            if s is None:
                dims = tuple(range(ndim))
            else:
                if len(s) > ndim:
                    raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has {ndim} dimensions.")
                dims = tuple(range(ndim - len(s), ndim))
        else:
            dims = tuple(wrap_dim(d, ndim, scalar_ok=False) for d in dim)
            if s is not None and len(s) != len(dims):
                raise RuntimeError("When given, dim and shape arguments must have the same length")
        if len(set(dims)) != len(dims):
            raise RuntimeError("FFT dims must be unique")
    dtype = _compute_dtype(spec.name, x.dtype, spec.family)
    if spec.family != "c2c" and not dims:
        raise RuntimeError(f"{spec.name} must transform at least one axis")
    sizes = []
    for i, d in enumerate(dims):
        if s is not None and s[i] != -1:
            n = s[i]
        elif spec.family == "c2r" and i == len(dims) - 1:
            n = 2 * (x.shape[d] - 1)
        else:
            n = x.shape[d]
        if n < 1:
            raise RuntimeError(f"Invalid number of data points ({n}) specified")
        sizes.append(n)
    return dims, tuple(sizes), norm, dtype


def _out_shape(spec, shape, dims, sizes):
    shape = list(shape)
    for d, n in zip(dims, sizes):
        shape[d] = n
    if spec.family == "r2c":
        shape[dims[-1]] = sizes[-1] // 2 + 1
    return tuple(shape)


def _meta(spec, input, s, dim, norm):
    dims, sizes, norm, dtype = _plan(spec, input, s, dim, norm)
    out_dtype = dtype.to_real() if spec.family == "c2r" else dtype.to_complex()
    return MetaArray(_out_shape(spec, input._data.shape, dims, sizes), out_dtype.numpy_dtype)


def _resize(x, dims, sizes):
    """``x`` trimmed or zero-padded at the end of each of ``dims`` to ``sizes``."""
    pads = [0] * (2 * x.dim())
    padded = False
    for d, n in zip(dims, sizes):
        have = x.shape[d]
        if n < have:
            x = x.narrow(d, 0, n)
        elif n > have:
            pads[2 * (x.dim() - 1 - d) + 1] = n - have  # pad's pairs start from the last dim
            padded = True
    if padded:
        from ._registry import get

        last = max(i for i, p in enumerate(pads) if p) + 1
        x = get("pad")(x, pads[: last + (last % 2)])
    return x


def _decompose(spec, input, s, dim, norm):
    dims, sizes, norm, dtype = _plan(spec, input, s, dim, norm)
    x = input if input.dtype is dtype else input.to(dtype)
    if spec.hermitian:
        norm = DUAL_NORM[norm]
    if spec.family == "c2c":
        return _fft_c2c(_resize(x, dims, sizes), dims, norm, spec.forward)
    if spec.family == "r2c":
        y = _fft_r2c(_resize(x, dims, sizes), dims, norm, True)
        return y.conj_physical() if spec.hermitian else y
    last = sizes[-1]
    x = _resize(x, dims, sizes[:-1] + (last // 2 + 1,))
    if spec.hermitian:
        x = x.conj_physical()
    return _fft_c2r(x, dims, norm, last)


_DOC_NORM = """norm (str, optional): ``"backward"`` (the default, also for ``None``), ``"ortho"`` or
            ``"forward"``. {what} is scaled by ``1`` under ``"{unscaled}"``, by ``1/sqrt(n)`` under
            ``"ortho"`` and by ``1/n`` under ``"{scaled}"`` (``n``: the product of the signal sizes), so
            that a transform and its inverse with the same ``norm`` are inverses."""

_DOC_INPUT = {
    "c2c": "input (Tensor): any dtype but float16/bfloat16; real inputs are transformed as complex ones "
    "(bool and integers in the default float dtype).",
    "r2c": "input (Tensor): a real tensor (bool and integers compute in the default float dtype).",
    "c2r": "input (Tensor): the one-sided half of a Hermitian-symmetric signal, along the last transformed "
    "dim (real inputs count as complex).",
}

_DOC_RETURNS = {
    "c2c": "Tensor: complex (complex64 for float32/complex64 input, complex128 for double precision), of "
    "``input``'s shape with each transformed dim of its signal size.",
    "r2c": "Tensor: complex, ``input``'s shape with each transformed dim of its signal size except the last, "
    "which holds the ``n // 2 + 1`` non-redundant bins.",
    "c2r": "Tensor: real (float32 for complex64 input, float64 for complex128), ``input``'s shape with each "
    "transformed dim of its signal size; the last one defaults to ``2 * (m - 1)`` for ``m`` input bins.",
}

_DOC_SIZE = {
    "1": """n (int, optional): the signal size along ``dim``; the input is trimmed or zero-padded to it{c2r}.
        dim (int): the dim to transform (default: the last).""",
    "2": """s (sequence[int], optional): the signal sizes along ``dim`` (-1 keeps a dim's size); the input is
            trimmed or zero-padded to them{c2r}.
        dim (sequence[int]): the two dims to transform (default: the last two).""",
    "n": """s (sequence[int], optional): the signal sizes along ``dim`` (-1 keeps a dim's size); the input is
            trimmed or zero-padded to them{c2r}. Without ``dim``, the last ``len(s)`` dims.
        dim (sequence[int], optional): the dims to transform (default: the last ``len(s)``, or all).""",
}

_DOC_SUMMARY = {
    "fft": "The {form}discrete Fourier transform of ``input``.",
    "ifft": "The {form}inverse discrete Fourier transform of ``input``.",
    "rfft": "The {form}Fourier transform of real ``input``: the non-redundant half of the spectrum.",
    "irfft": "The inverse of :func:`rfft{suffix}`: a real signal from its one-sided {form}spectrum.",
    "hfft": "The {form}Fourier transform of a Hermitian-symmetric signal given by its one-sided half: a real "
    "spectrum.",
    "ihfft": "The inverse of :func:`hfft{suffix}`: the one-sided half of the {form}inverse transform of real "
    "``input``.",
}


def _docstring(spec, base):
    suffix = {"1": "", "2": "2", "n": "n"}[spec.form]
    form = {"1": "one-dimensional ", "2": "two-dimensional ", "n": "N-dimensional "}[spec.form]
    direction = "The forward transform" if spec.forward else "The inverse transform"
    unscaled, scaled = ("backward", "forward") if spec.forward else ("forward", "backward")
    c2r = ""
    if spec.family == "c2r":
        c2r = " (along the last transformed dim, the output's size, whose ``n // 2 + 1`` bins are read)"
    complex_error = ", complex input" if spec.family == "r2c" else ""
    example = {
        "fft": ">>> ember.fft.fft(ember.tensor([1.0, 2.0, 3.0, 4.0]))\n            "
        "tensor([10.+0.j, -2.+2.j, -2.+0.j, -2.-2.j])",
        "rfft": ">>> ember.fft.rfft(ember.tensor([1.0, 2.0, 3.0, 4.0]))\n            "
        "tensor([10.+0.j, -2.+2.j, -2.+0.j])",
        "irfft": ">>> ember.fft.irfft(ember.tensor([10.+0.j, -2.+2.j, -2.+0.j]))\n            "
        "tensor([1., 2., 3., 4.])",
    }.get(spec.name)
    text = f"""{_DOC_SUMMARY[base].format(form=form, suffix=suffix)}

    Registered as the composite op ``fft_{spec.name}``: its decomposition resizes ``input`` and calls the
    prim ``_fft_{spec.family}``. NumPy's ``numpy.fft.{spec.name}`` computes the same values.

    Args:
        {_DOC_INPUT[spec.family]}
        {_DOC_SIZE[spec.form].format(c2r=c2r)}
        {_DOC_NORM.format(what=direction, unscaled=unscaled, scaled=scaled)}
        out (Tensor, optional): the output tensor.

    Returns:
        {_DOC_RETURNS[spec.family]}

    Raises:
        RuntimeError: for an invalid ``norm`` ('Invalid normalization mode: "..."'), a signal size below 1
            ("Invalid number of data points (0) specified"), ``s`` and ``dim`` of different lengths,
            repeated dims, float16/bfloat16 input ("Unsupported dtype Half"){complex_error}.
        IndexError: for a dim out of range.
    """
    if example:
        text += f"""
    Example:
        >>> import ember
        {example}
    """
    return text


def _define(spec, base):
    """Register the composite op ``fft_<name>`` for ``spec``."""
    if spec.form == "1":

        def meta(input, n=None, dim=-1, norm=None):
            return _meta(spec, input, n, dim, norm)

        def decomposition(input, n=None, dim=-1, norm=None):
            return _decompose(spec, input, n, dim, norm)

    elif spec.form == "2":

        def meta(input, s=None, dim=(-2, -1), norm=None):
            return _meta(spec, input, s, dim, norm)

        def decomposition(input, s=None, dim=(-2, -1), norm=None):
            return _decompose(spec, input, s, dim, norm)

    else:

        def meta(input, s=None, dim=None, norm=None):
            return _meta(spec, input, s, dim, norm)

        def decomposition(input, s=None, dim=None, norm=None):
            return _decompose(spec, input, s, dim, norm)

    meta.__name__ = f"_fft_{spec.name}_meta"
    decomposition.__name__ = f"_fft_{spec.name}_decomposition"
    op = defop(
        f"fft_{spec.name}",
        meta,
        category=COMPOSITE,
        decomposition=decomposition,
        has_out=True,
        doc=_docstring(spec, base),
        tags=_TAGS,
    )
    op.decomposition_checks = True  # _decompose runs _plan, which raises every error the meta function would
    return op


#: The public transforms by their ember.fft name (``"rfft2"`` -> the op ``fft_rfft2``).
TRANSFORMS = {}
for _base, _family, _forward, _hermitian in (
    ("fft", "c2c", True, False),
    ("ifft", "c2c", False, False),
    ("rfft", "r2c", True, False),
    ("irfft", "c2r", False, False),
    ("hfft", "c2r", True, True),
    ("ihfft", "r2c", False, True),
):
    for _form, _suffix in (("1", ""), ("2", "2"), ("n", "n")):
        _spec = _Spec(_base + _suffix, _family, _form, _forward, _hermitian)
        TRANSFORMS[_spec.name] = _define(_spec, _base)
        if not _hermitian:
            TRANSFORMS[_spec.name].register_checked_kernel("cuda", _transform_checked_kernel(_spec))
