"""The ``cuda`` device type's backend: CuPy arrays, views of them, and the generic kernel path.

:class:`ember._device._CUDABackend` delegates here, so nothing imports CuPy before
a CUDA tensor is asked for. What lives here:

* moving numpy data to the GPU and back, and building strided views of a
  storage (the primitive every view op uses);
* the **generic kernel path**: an op without a CUDA kernel of its own runs its
  CPU kernel on CuPy arrays. numpy hands ufunc calls (NEP 13,
  ``__array_ufunc__``) and most ``np.*`` functions (NEP 18,
  ``__array_function__``) on CuPy arrays to CuPy, so a CPU kernel written with
  ``np.`` functions computes on the GPU unchanged. A kernel that leaves the
  numpy namespace (``np.asarray`` of its input, ``np.array``, ``ember._C``)
  raises ``NotImplementedError`` naming the op, never a silent host copy of its
  inputs. This is the bridge until every kernel takes ``xp`` explicitly
  (docs/internals.rst, "The CUDA backend");
* the random factory ops: they draw from the device's default generator
  (:mod:`ember.cuda.random`) on the host and copy the values to the GPU.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _device
from .._tensor import Tensor
from . import _bf16
from ._async_errors import raise_pending
from ._runtime import cupy_module
from ._sync import host_sync, install_cupy_hook

__all__ = [
    "initialize", "initialized", "from_numpy", "upload", "current_index", "to_numpy", "strided_view", "fallback_kernel",
    "generic_ops", "scalar_one",
]

_done = []
_fallbacks = {}  # op -> its generic CUDA kernel
#: names of the ops that ran through the generic path in this process (for the porting plan's bookkeeping)
generic_ops = set()

# What numpy, CuPy and pybind11 say when a CPU kernel leaves the numpy namespace with a CuPy array.
_NOT_GENERIC = (
    "Implicit conversion to a NumPy array",
    "no implementation found for",
    "incompatible function arguments",
    "Unsupported type <class 'cupy",
    "Unsupported type <class 'numpy",  # CuPy handed a numpy array the kernel made
    "incorrect type (expected cupy",
)


def initialized():
    return bool(_done)


def initialize():
    """Load CuPy and set up the allocator's bookkeeping (once).

    Raises:
        RuntimeError: when CUDA is not available, saying how to install it.
    """
    if _done:
        return
    cupy_module()
    install_cupy_hook()  # CuPy's own waits (ndarray.get(), synchronize()) are reported too (ember.cuda._sync)
    from .memory import install_peak_tracking

    install_peak_tracking()
    _register_random_kernels()
    from .kernels import register as register_fast_kernels

    register_fast_kernels()  # ember/cuda/kernels: fast pointwise, copy, row and optimizer kernels
    _bf16.install()
    _done.append(True)


def from_numpy(array, index):
    """A CuPy copy of numpy ``array`` on GPU ``index`` (the current GPU when None).

    bfloat16 (``ml_dtypes.bfloat16``) arrays become CuPy bfloat16 arrays, which
    need CuPy >= 14 with ``ml_dtypes`` installed.

    Raises:
        TypeError: for bfloat16 when this CuPy has no bfloat16 dtype.
    """
    cp = cupy_module()
    if index is None:
        return upload(array)
    with cp.cuda.Device(index):
        return upload(array)


def upload(array):
    """A CuPy copy of numpy ``array`` on the current GPU (bfloat16 included; see :func:`from_numpy`)."""
    cp = cupy_module()
    if array.dtype.name != "bfloat16":
        return cp.asarray(array)
    # the bytes travel as uint16 and are viewed as bfloat16 on the GPU (a plain copy, whatever CuPy's
    # host-array conversion does with extension dtypes)
    if not array.flags.c_contiguous:
        array = array.copy(order="C")  # (np.ascontiguousarray would turn a 0-d array into a 1-d one)
    bits = cp.asarray(array.view(np.uint16))
    try:
        return bits.view(array.dtype)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            "bfloat16 tensors on the cuda device need CuPy >= 14 with ml_dtypes installed "
            f"(this CuPy {cp.__version__} has no bfloat16 dtype: {exc})"
        ) from None


def current_index():
    """The index of the current GPU: where a bare ``"cuda"`` device allocates, as in PyTorch."""
    return cupy_module().cuda.runtime.getDevice()


def to_numpy(array, reason="a copy of a cuda tensor to the host"):
    """A numpy copy of CuPy ``array``: waits for the GPU work that writes it, a host synchronisation that
    :func:`ember.cuda._sync.host_sync` reports as ``reason``. Errors that the GPU's kernels flagged surface
    here (:mod:`ember.cuda._async_errors`).
    """
    return host_sync(reason, lambda: _read_back(array))


def _read_back(array):
    raise_pending()  # (reads the flags: part of the same wait)
    return array.get()


def strided_view(storage, shape, strides, offset, dtype):
    """A CuPy array viewing ``storage`` with ``shape``/``strides``/``offset`` (elements) of numpy ``dtype``."""
    cp = cupy_module()
    if 0 in shape:  # an empty view may start past the end of its storage (PyTorch allows it)
        return cp.empty(shape, dtype)
    itemsize = dtype.itemsize
    memptr = storage.base.data
    if offset:
        memptr = memptr + offset * itemsize
    # (every view op ends here: a list comprehension is faster than a generator)
    return cp.ndarray(shape, dtype, memptr, tuple([s * itemsize for s in strides]))


_ones = {}  # (device index, numpy dtype) -> a 0-d CuPy array holding 1


def scalar_one(array):
    """A new CuPy array of ``array``'s shape (one element), dtype and device holding 1: the implicit gradient
    of ``backward()`` on a scalar. One device-to-device copy from a cached 1 of that dtype, on the current
    stream: cheaper on the host than ``cupy.ones``' fill kernel, and the same bits.
    """
    cp = cupy_module()
    index = array.data.device_id
    with cp.cuda.Device(index):
        one = _ones.get((index, array.dtype))
        if one is None:
            one = cp.ones((), array.dtype)
            # written before any stream may read it (once per device and dtype)
            host_sync("the first implicit gradient of a dtype", cp.cuda.get_current_stream().synchronize)
            _ones[(index, array.dtype)] = one
        out = cp.empty(array.shape, array.dtype)
        out.data.copy_from_device_async(one.data, array.dtype.itemsize)
    return out


def _on_device(result):
    """A kernel's result with any numpy array in it copied to the GPU (results computed from metadata alone)."""
    if isinstance(result, np.ndarray):
        return upload(result)
    if isinstance(result, np.generic):
        return upload(np.asarray(result))
    if type(result) is tuple or type(result) is list:
        return type(result)(_on_device(r) for r in result)
    return result


def _cpu_scalars_to_device(a):
    # A zero-dim CPU tensor may join a CUDA op (the dispatcher allows it, as PyTorch does); its value
    # goes to the GPU so that the kernel sees arrays of one namespace.
    if type(a) is Tensor and a._device.type == "cpu":
        cp = cupy_module()
        return Tensor._make(upload(np.asarray(a._data)), _device.device("cuda", cp.cuda.runtime.getDevice()))
    return a


def fallback_kernel(op):
    """The generic CUDA kernel of ``op``: its CPU kernel run on CuPy arrays (None if it has no CPU kernel)."""
    kernel = _fallbacks.get(op)
    if kernel is not None:
        return kernel
    cpu = dict.get(op.kernels, "cpu")  # the kernel itself: not the one deterministic mode wraps for the cpu
    if cpu is None:
        return None

    def kernel(*args, **kwargs):
        generic_ops.add(op.name)
        if any(type(a) is Tensor and a._device.type == "cpu" for a in args):
            args = tuple(_cpu_scalars_to_device(a) for a in args)
        try:
            result = _run_generic(op, cpu, args, kwargs)
        except Exception as exc:
            # CuPy lacks bfloat16 in a few functions (rounding, divmod, most of cupyx): compute those in
            # float32 and round once, as PyTorch's bfloat16 kernels do
            if not (_bf16.has_bf16(args, kwargs) and _bf16.is_bf16_failure(exc)):
                raise
            try:
                result = _run_generic(op, lambda *a, **k: _bf16.run_in_float32(op, cpu, a, k), args, kwargs)
            except Exception as retry:
                if hasattr(exc, "add_note"):  # Python >= 3.11
                    exc.add_note(f"(computing in float32 instead failed too: {type(retry).__name__}: {retry})")
                raise exc from None
        return _on_device(result)

    kernel.__name__ = f"{op.name}_cuda_generic"
    _fallbacks[op] = kernel
    return kernel


def _run_generic(op, cpu, args, kwargs):
    """``cpu(*args, **kwargs)`` on CuPy arrays; a kernel that leaves the numpy namespace raises NotImplementedError."""
    try:
        return cpu(*args, **kwargs)
    except TypeError as exc:
        if not any(marker in str(exc) for marker in _NOT_GENERIC):
            raise
        raise NotImplementedError(
            f"Could not run '{op.name}' on the 'cuda' backend: it has no CUDA kernel yet and its CPU kernel "
            f"leaves the numpy namespace ({exc})"
        ) from exc


def _device_index(kwargs):
    from .._device import canonical_device

    index = canonical_device(kwargs.get("device")).index
    return current_index() if index is None else index


def _register_random_kernels():
    """CUDA kernels of the random ops (values drawn from the GPU's default generator on the host, then copied).

    * factories (``rand``, ``randn``, ``randint``, ...): the CPU kernel's result, copied to the GPU;
    * in-place samplers (``uniform_``, ``normal_``, ``random_``, ``exponential_``, ``bernoulli_``): the
      CPU kernel fills a host array of ``self``'s shape and dtype (it reads nothing else of ``self``),
      copied into ``self``; with a tensor argument on the GPU (``bernoulli_(p)``) the kernel runs on the
      GPU arrays instead, with draws copied to the GPU (:class:`~ember.cuda.random.DeviceDraws`);
    * samplers of a tensor (``bernoulli``): likewise on the GPU arrays with uploaded draws when given a
      generator; with the default generator the uniforms are drawn on the GPU (ember's Philox4x32-10 kernels
      keyed by the generator, :class:`~ember.cuda.random.DeviceNoise`), so they differ from the CPU's. With
      the default generator and a Python number ``p`` (dropout's call) the mask is written in ``input``'s
      dtype by one kernel (:func:`ember.cuda.kernels.philox.bernoulli`), equal to ``uniforms < p``;
    * ``multinomial``: :func:`ember.cuda.random.multinomial`.

    Apart from ``bernoulli`` with the default generator, a cuda tensor drawn after ``ember.manual_seed(s)``
    equals the CPU tensor drawn after the same seed.
    """
    from .._ops._registry import registry
    from . import random as cuda_random
    from .kernels import philox
    from .random import DeviceDraws, DeviceNoise, DeviceNoiseDraws, generator_for

    def make(op, cpu):
        def kernel(*args, **kwargs):
            if kwargs.get("generator") is None:
                kwargs["generator"] = generator_for(_device_index(kwargs))
            with cupy_module().cuda.Device(_device_index(kwargs)):
                return _on_device(cpu(*args, **kwargs))

        kernel.__name__ = f"{op.name}_cuda"
        return kernel

    def make_inplace(op, cpu):
        def kernel(self, *args, **kwargs):
            index = self._device.index
            generator = kwargs.get("generator")
            generator = generator_for(index) if generator is None else generator
            on_gpu = any(isinstance(a, Tensor) and a._device.type != "cpu" for a in (*args, *kwargs.values()))
            with cupy_module().cuda.Device(index):
                if on_gpu:  # e.g. bernoulli_(p) with p on the GPU: compute there, from uploaded draws
                    cpu(self, *args, **{**kwargs, "generator": DeviceDraws(generator)})
                    return self
                host = Tensor._make(np.empty(self._data.shape, self._data.dtype))  # only its shape/dtype are read
                cpu(host, *args, **{**kwargs, "generator": generator})
                self._data[...] = upload(host._data)
            return self

        kernel.__name__ = f"{op.name}_cuda"
        return kernel

    def fused_bernoulli(input, args, kwargs):
        # bernoulli(input, p) with a Python number p and the default generator: the mask in input's dtype,
        # straight from the Philox kernel (one pass, no uniforms stored); None for any other call
        if len(args) > 1 or any(k != "p" and k != "generator" for k in kwargs):
            return None
        p = args[0] if args else kwargs.get("p")
        data = input._data
        if (type(p) is not float and type(p) is not int) or not philox.mask_dtype_supported(data.dtype):
            return None
        index = input._device.index
        with cupy_module().cuda.Device(index):
            return DeviceNoise(generator_for(index)).bernoulli(data.shape, p, data.dtype)

    def make_sampler(op, cpu):
        fused = fused_bernoulli if op.name == "bernoulli" else None

        def kernel(input, *args, **kwargs):
            index = input._device.index
            generator = kwargs.get("generator")
            if generator is None and fused is not None:
                mask = fused(input, args, kwargs)
                if mask is not None:
                    return mask
            # The default generator's draws are made on the GPU (dropout's masks: a host draw plus copy costs
            # about a second per transformer-layer step); an explicit generator's equal the CPU's draws.
            draws = DeviceNoiseDraws(generator_for(index)) if generator is None else DeviceDraws(generator)
            kwargs = {**kwargs, "generator": draws}
            with cupy_module().cuda.Device(index):
                return _on_device(_run_generic(op, cpu, (input, *args), kwargs))

        kernel.__name__ = f"{op.name}_cuda"
        return kernel

    def multinomial_kernel(input, num_samples, replacement=False, *, generator=None):
        index = input._device.index
        generator = generator_for(index) if generator is None else generator
        shape = input._data.shape
        with cupy_module().cuda.Device(index):
            weights = input._data.astype(np.float64).reshape(math.prod(shape[:-1]), shape[-1])
            out = cuda_random.multinomial(weights, num_samples, replacement, generator)
            return out.reshape(*shape[:-1], out.shape[-1])

    for op in registry.values():
        if "random" not in op.tags or "cuda" in op.kernels or "cpu" not in op.kernels:
            continue
        cpu = op.kernels["cpu"]
        if "factory" in op.tags:
            op.register_kernel("cuda", make(op, cpu))
        elif "generator" not in op._call_signature.parameters:
            continue  # draws from the default generator inside (dropout and friends): the generic path
        elif op.name == "multinomial":
            op.register_kernel("cuda", multinomial_kernel)
        elif op.kind == "inplace":
            op.register_kernel("cuda", make_inplace(op, cpu))
        elif op.kind == "function":
            op.register_kernel("cuda", make_sampler(op, cpu))
