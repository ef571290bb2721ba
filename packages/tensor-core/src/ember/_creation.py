"""Tensors from Python data, numpy arrays and DLPack capsules.

These are conversions, not ops: their inputs are not tensors, so they are not
registry entries (tracing records their results as constants).
"""

from __future__ import annotations

import numpy as np

from . import _dtype as D
from ._device import canonical_device, get_backend
from ._tensor import Tensor

__all__ = ["tensor", "as_tensor", "asarray", "from_numpy", "from_dlpack"]


def _infer_numpy(data, dtype):
    """A numpy array holding ``data`` with PyTorch's dtype inference.

    Every leaf has a dtype (bool -> bool, int -> int64, float -> the default
    dtype, complex -> the default complex dtype; numpy scalars, numpy arrays and
    tensors keep theirs) and the result is their :func:`promote_types`, as in
    PyTorch: ``[np.int32(1)]`` gives int32, ``[1, np.float64(2.5)]`` float64.
    """
    if isinstance(data, Tensor):
        return data._host_array()
    if isinstance(data, np.ndarray):
        array = data
    else:
        found = set()
        try:
            array = np.array(_leaves(data, found))
        except (ValueError, TypeError, OverflowError) as exc:
            raise ValueError(f"could not convert {type(data).__name__} to a tensor: {exc}") from None
        if array.dtype == object:
            if int in found and found <= _PY_SCALARS:
                raise ValueError(f"could not convert {type(data).__name__} to a tensor: an integer overflows int64")
            raise TypeError(f"could not infer a dtype for {type(data).__name__}: the data must be numbers or tensors")
        if dtype is None:
            inferred = _promote_leaf_dtypes(found)
            if inferred is D.int64 and array.dtype == np.uint64:
                raise ValueError(f"could not convert {type(data).__name__} to a tensor: integer overflows int64")
            if array.dtype != inferred.numpy_dtype:
                array = array.astype(inferred.numpy_dtype)
    if array.dtype.kind in "USO":
        raise TypeError(f"can't convert np.ndarray of type {array.dtype}; only numeric and bool data make tensors")
    return array


_PY_SCALARS = frozenset({bool, int, float, complex})


def _leaves(data, found):
    """``data`` with tensors replaced by numpy arrays; adds each leaf's dtype (or Python type) to ``found``."""
    t = type(data)
    if t is list or t is tuple:
        types = set(map(type, data))
        if types <= _PY_SCALARS:  # the common flat case, without a Python-level loop
            found.update(types)
            return data
        return [_leaves(d, found) for d in data]
    if isinstance(data, Tensor):
        found.add(data.dtype)
        return data._host_array()
    if isinstance(data, (np.ndarray, np.generic)):
        found.add(D.from_numpy_dtype(data.dtype))
        return data
    for py in (bool, int, float, complex):  # subclasses (IntEnum, ...) count as their base
        if isinstance(data, py):
            found.add(py)
            return data
    if isinstance(data, (list, tuple)):
        return [_leaves(d, found) for d in data]
    return data  # not a number: np.array gives an object array, rejected by the caller


def _promote_leaf_dtypes(found):
    result = None
    for kind in found:
        if kind is bool:
            d = D.bool
        elif kind is int:
            d = D.int64
        elif kind is float:
            d = D.get_default_dtype()
        elif kind is complex:
            d = D.default_complex_dtype()
        else:
            d = kind
        result = d if result is None else D.promote_types(result, d)
    return D.get_default_dtype() if result is None else result


def _finish(array, dtype, device, requires_grad, *, copy):
    if dtype is not None:
        if not isinstance(dtype, D.dtype):
            raise TypeError(f"dtype must be an ember.dtype, not {type(dtype).__name__}")
        if array.dtype != dtype.numpy_dtype:
            from ._ops.creation import _convert_array

            array = _convert_array(array, dtype.numpy_dtype)
            copy = False
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    D.from_numpy_dtype(array.dtype)  # raises TypeError for unsupported dtypes
    if copy or any(st < 0 for st in array.strides):  # tensors have no negative strides
        array = np.array(array, copy=True, order="C")
    dev = canonical_device(device)
    if dev.type != "cpu":
        array = get_backend(dev.type).from_numpy(np.asarray(array, order="C"), dev.index)  # keeps 0-d arrays 0-d
    result = Tensor._make(array, dev)
    if requires_grad:
        result.requires_grad_(True)
    return result


def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new tensor holding a copy of ``data``.

    Args:
        data: a number, a (nested) list/tuple of numbers, a numpy array or a tensor.
        dtype (ember.dtype, optional): inferred when omitted: bool -> bool,
            int -> int64, float -> default dtype, complex -> default complex,
            numpy arrays keep theirs.
        device (ember.device or str, optional): cpu by default.
        requires_grad (bool): whether autograd records operations on it.

    Raises:
        ValueError: for ragged nested sequences.
        TypeError: for non-numeric data.

    Example:
        >>> import ember
        >>> ember.tensor([[1, 2], [3, 4]])
        tensor([[1, 2],
                [3, 4]])
    """
    return _finish(_infer_numpy(data, dtype), dtype, device, requires_grad, copy=True)


def as_tensor(data, dtype=None, device=None):
    """``data`` as a tensor, sharing memory when it already is one (or a CPU numpy array) of the right dtype and device.

    Example:
        >>> import ember, numpy as np
        >>> a = np.zeros(3)
        >>> t = ember.as_tensor(a); a[0] = 5; t[0].item()
        5.0
    """
    if isinstance(data, Tensor):
        if (dtype is None or data.dtype is dtype) and (device is None or data.device == canonical_device(device)):
            return data
        return data.to(dtype=dtype, device=device)
    if isinstance(data, np.ndarray) and canonical_device(device).type == "cpu" and _shareable(data):
        if dtype is None or data.dtype == dtype.numpy_dtype:
            return from_numpy(data)
    return _finish(_infer_numpy(data, dtype), dtype, device, False, copy=False)


def _shareable(array):
    """Whether a tensor can share the memory of numpy ``array`` (else it gets a copy)."""
    return array.dtype.isnative and all(st >= 0 for st in array.strides)


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """``obj`` as a tensor: shares memory when possible unless ``copy=True``; ``copy=False`` forbids copying.

    Raises:
        ValueError: if ``copy=False`` but a copy is needed.
    """
    if copy:
        return tensor(obj, dtype=dtype, device=device, requires_grad=requires_grad)
    result = as_tensor(obj, dtype=dtype, device=device)
    shares = isinstance(obj, (Tensor, np.ndarray)) and result.data_ptr() == (
        obj.data_ptr() if isinstance(obj, Tensor) else obj.__array_interface__["data"][0]
    )
    if copy is False and not shares:
        raise ValueError("asarray(copy=False): the data can't be used without a copy (dtype, device or type differs)")
    if requires_grad:
        result.requires_grad_(True)
    return result


def from_numpy(ndarray):
    """A CPU tensor sharing memory with the numpy array ``ndarray`` (writes show on both sides).

    Raises:
        TypeError: for dtypes ember lacks (uint16, strings, objects, ...) or non-arrays.
        ValueError: for arrays with negative strides (copy them first) or a non-native byte order.

    Example:
        >>> import ember, numpy as np
        >>> a = np.arange(3)
        >>> t = ember.from_numpy(a); t[0] = 9; a[0]
        np.int64(9)
    """
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    if not ndarray.dtype.isnative:
        raise ValueError(
            f"from_numpy: the array's byte order ({ndarray.dtype}) differs from the machine's; convert it first "
            "with ndarray.astype(ndarray.dtype.newbyteorder('='))"
        )
    D.from_numpy_dtype(ndarray.dtype)
    if any(s < 0 for s in ndarray.strides):
        raise ValueError(
            "At least one stride in the given numpy array is negative, and tensors with negative strides are not "
            "currently supported. (You can probably work around this by making a copy of your array with array.copy().)"
        )
    return Tensor._make(ndarray)


def from_dlpack(ext_tensor):
    """A tensor sharing memory with a DLPack-capable object or a DLPack capsule (no copy).

    Args:
        ext_tensor: an object with ``__dlpack__``/``__dlpack_device__`` (numpy and CuPy arrays,
            other frameworks' tensors) or a capsule from a ``to_dlpack`` function.

    Returns:
        Tensor: on cpu for host memory (DLPack device types 1 and 3), on cuda for device memory (2).

    Raises:
        TypeError: for objects that are neither.
        RuntimeError: for memory on another device type, or cuda memory without the CUDA backend.
    """
    if isinstance(ext_tensor, Tensor):
        return ext_tensor
    if type(ext_tensor).__name__ == "PyCapsule":
        from .utils.dlpack import _Capsule

        ext_tensor = _Capsule(ext_tensor)
    if not hasattr(ext_tensor, "__dlpack__"):
        raise TypeError(
            f"from_dlpack: expected an object with __dlpack__ or a DLPack capsule, got {type(ext_tensor).__name__}"
        )
    device_type, device_id = ext_tensor.__dlpack_device__()
    if device_type in (1, 3):  # kDLCPU, kDLCUDAHost
        return from_numpy(np.from_dlpack(ext_tensor))
    if device_type == 2:  # kDLCUDA
        return _from_cuda_dlpack(ext_tensor, device_id)
    raise RuntimeError(f"from_dlpack: memory on DLPack device type {device_type} is not supported (cpu: 1, cuda: 2)")


def _from_cuda_dlpack(ext_tensor, device_id):
    from . import _device

    backend = _device.get_backend("cuda")  # importing ember.cuda registers it where CuPy is present
    if not backend.is_available():
        raise RuntimeError(f"from_dlpack: the object holds cuda memory: {backend.unavailable_reason()}")
    import cupy

    return Tensor._make(cupy.from_dlpack(ext_tensor), _device.device("cuda", device_id))
