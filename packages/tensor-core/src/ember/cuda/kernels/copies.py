"""Same-dtype copies on the GPU as device-to-device memcpys: ``clone``, ``_to_copy`` and ``cat``.

The generic copy (``cupy.ndarray.copy``/``astype``) runs an elementwise kernel
(about 1.7 TB/s on an H200); a contiguous copy is one ``cudaMemcpyAsync`` on the
current stream, which the driver runs at the device's copy bandwidth. The fast path
takes a C-contiguous source on the current GPU whose copy is C-contiguous too; other
calls (strided sources, other dtypes or devices, channels-last) run the kernel the op
had before. ``clone(x)`` (dropout with nothing to drop, ``x.clone()``) also has a checked cuda kernel, so
the common call skips the meta function. A ``_to_copy`` between float32 and float16/bfloat16 (casting a model or
its activations to bfloat16) is one vectorised kernel of :mod:`.pointwise` (:func:`.pointwise.convert`).

``cat`` of C-contiguous arrays of one dtype (a split's gradient, attention's heads) is one strided
``cudaMemcpy2DAsync`` per input: each input is a block of ``outer`` rows written at its column offset in
the output's rows. Its checked cuda kernel takes those calls; any other (promotion, empty inputs, strides)
runs the generic path.
"""

from __future__ import annotations

import contextlib

from ..._tensor import Tensor
from .._runtime import cupy_module
from . import pointwise

__all__ = ["register", "generic_only", "device_copy", "cat", "cast"]

_state = {}
_installed = {}  # op -> its cuda kernel before register()


def device_copy(array):
    """A new C-contiguous CuPy array equal to C-contiguous ``array``, by one device-to-device memcpy."""
    out = _state["ndarray"](array.shape, array.dtype)
    if array.size:
        out.data.copy_from_device_async(array.data, array.nbytes)
    return out


def _copyable(data):
    if type(data) is not _state["ndarray"] or not data._c_contiguous:
        return False
    return _state["one_gpu"] or data.data.device_id == _state["device"]()


def _clone_checked(*args):
    """Checked cuda kernel of ``clone(input)``: the memcpy of a C-contiguous input, else None."""
    if len(args) != 1 or type(args[0]) is not Tensor:
        return None
    data = args[0]._data
    return device_copy(data) if _copyable(data) else None


_FLOAT_KINDS = frozenset(("float16", "float32", "float64"))


def cast(tensor, np_dtype):
    """``tensor.to(dtype)`` of a plain cuda tensor between float16/float32/float64, where nothing records (grad
    mode off, no dispatch mode): CuPy's ``astype``, what ``_to_copy``'s cuda kernel runs, without the dispatch
    (a backward pass casts each gradient of an autocast step back to its input's dtype). None otherwise."""
    from ..._ops._dispatch import ops_intercepted, state

    if type(tensor) is not Tensor or state.grad_enabled or ops_intercepted():
        return None
    data = tensor._data
    if type(data) is not _state.get("ndarray") or data.dtype.name not in _FLOAT_KINDS:
        return None
    if np_dtype.name not in _FLOAT_KINDS:
        return None
    if not (_state["one_gpu"] or data.data.device_id == _state["device"]()):
        return None
    return Tensor._make(data.astype(np_dtype), tensor._device)


_DEVICE_TO_DEVICE = 3  # cudaMemcpyDeviceToDevice


def cat(*args):
    """Checked cuda kernel of ``cat(tensors, dim=0)``: plain cuda tensors of one dtype, C-contiguous, non-empty,
    of one rank and equal sizes outside ``dim``; one 2-D memcpy per tensor. None for other calls (the usual
    path promotes, skips empty 1-D tensors and raises the meta function's errors)."""
    if not 1 <= len(args) <= 2:
        return None
    tensors = args[0]
    dim = args[1] if len(args) == 2 else 0
    if (type(tensors) is not list and type(tensors) is not tuple) or not tensors or type(dim) is not int:
        return None
    first = tensors[0]
    if type(first) is not Tensor:
        return None
    data = first._data
    ndim, dtype = data.ndim, data.dtype
    if not -ndim <= dim < ndim or ndim == 0:
        return None
    d = dim + ndim if dim < 0 else dim
    shape = data.shape
    arrays = []
    total = 0
    for t in tensors:
        if type(t) is not Tensor:
            return None
        a = t._data
        if a.dtype != dtype or a.ndim != ndim or a.size == 0 or not _copyable(a):
            return None
        s = a.shape
        if s[:d] != shape[:d] or s[d + 1:] != shape[d + 1:]:
            return None
        arrays.append(a)
        total += s[d]
    out_shape = shape[:d] + (total,) + shape[d + 1:]
    out = _state["ndarray"](out_shape, dtype)
    outer = 1
    for n in shape[:d]:
        outer *= n
    row = out.nbytes // outer  # bytes of one output row (the dims from d on)
    cp = cupy_module()
    stream = cp.cuda.get_current_stream().ptr
    memcpy_2d = cp.cuda.runtime.memcpy2DAsync
    base = out.data.ptr
    offset = 0
    for a in arrays:
        width = a.nbytes // outer
        memcpy_2d(base + offset, row, a.data.ptr, width, width, outer, _DEVICE_TO_DEVICE, stream)
        offset += width
    return out


def _clone_kernel(previous):
    from ..._ops.creation import contiguous_format, preserve_format

    def kernel(input, *, memory_format=None):
        data = input._data
        if (memory_format is None or memory_format is preserve_format or memory_format is contiguous_format) and (
            _copyable(data)
        ):
            return device_copy(data)
        if memory_format is contiguous_format and type(data) is _state["ndarray"] and (
            _state["one_gpu"] or data.data.device_id == _state["device"]()
        ):
            # a strided source (x.contiguous(), reshape's copy): one elementwise copy into a new C-contiguous
            # array, without the generic kernel's layers (about 30 us of host time for cupy.array(x, order="C"))
            return cupy_module().ascontiguousarray(data)
        return previous(input, memory_format=memory_format)

    kernel.__name__ = "clone_cuda"
    kernel._ember_fast_kernel = True
    return kernel


def _to_copy_kernel(previous):
    from ..._ops.creation import preserve_format

    def kernel(
        input, *, dtype=None, layout=None, device=None, pin_memory=False, non_blocking=False, memory_format=None
    ):
        data = input._data
        here = device is None or device == input.device  # (Tensor.to passes the device it stays on)
        if (
            (dtype is None or dtype.numpy_dtype == data.dtype)
            and here
            and layout is None
            and not pin_memory
            and (memory_format is None or memory_format is preserve_format)
            and _copyable(data)
        ):
            return Tensor._make(device_copy(data), input.device)
        if (
            dtype is not None
            and here
            and layout is None
            and not pin_memory
            and (memory_format is None or memory_format is preserve_format)
        ):
            converted = pointwise.convert(data, dtype.numpy_dtype)  # float32 <-> float16/bfloat16 in one pass
            if converted is not None:
                return Tensor._make(converted, input.device)
        return previous(
            input,
            dtype=dtype,
            layout=layout,
            device=device,
            pin_memory=pin_memory,
            non_blocking=non_blocking,
            memory_format=memory_format,
        )

    kernel.__name__ = "_to_copy_cuda"
    kernel._ember_fast_kernel = True
    return kernel


def register():
    """Put the memcpy path in front of ``clone``'s and ``_to_copy``'s cuda kernels (idempotent)."""
    from ..._ops._registry import registry

    cp = cupy_module()
    _state["ndarray"], _state["device"] = cp.ndarray, cp.cuda.runtime.getDevice
    _state["one_gpu"] = cp.cuda.runtime.getDeviceCount() == 1  # every array is then on the current GPU
    for name, make in (("clone", _clone_kernel), ("_to_copy", _to_copy_kernel)):
        op = registry.get(name)
        previous = op.kernels.get("cuda") if op is not None else None
        if previous is None or getattr(previous, "_ember_fast_kernel", False):
            continue
        _installed[op] = previous
        op.kernels["cuda"] = make(previous)
    registry["clone"].register_checked_kernel("cuda", _clone_checked)
    registry["cat"].register_checked_kernel("cuda", cat)


@contextlib.contextmanager
def generic_only():
    """Within the block, ``clone``/``_to_copy``/``cat`` run the cuda kernels they had before :func:`register`."""
    from ..._ops._registry import registry

    saved = {op: op.kernels["cuda"] for op in _installed}
    checked = {name: registry[name].checked_kernels.pop("cuda", None) for name in ("clone", "cat")}
    for op, previous in _installed.items():
        op.kernels["cuda"] = previous
    try:
        yield
    finally:
        for op, kernel in saved.items():
            op.kernels["cuda"] = kernel
        for name, kernel in checked.items():
            if kernel is not None:
                registry[name].register_checked_kernel("cuda", kernel)
