"""An out-of-tree device defined here, implementing only prims.

The "tiles" device stores data in :class:`TileArray`, a wrapper ember knows
nothing about. It registers kernels for a handful of prims; every composite
op must then run on it through its decomposition, and every view op through
the backend's strided-view primitive.
"""

import numpy as np
import pytest

import ember
from ember._device import Backend
from ember._meta import MetaArray
from ember._ops import registry
from ember.utils.backend_registration import missing_prims, register_backend, register_kernel

DEVICE = "tiles"
KERNEL_CALLS = []


class TileArray:
    """A strided array of the tiles device: metadata plus a numpy view it keeps private."""

    def __init__(self, array):
        self._np = array

    shape = property(lambda self: self._np.shape)
    strides = property(lambda self: self._np.strides)
    dtype = property(lambda self: self._np.dtype)
    ndim = property(lambda self: self._np.ndim)
    size = property(lambda self: self._np.size)
    nbytes = property(lambda self: self._np.nbytes)

    def data_ptr(self):
        return self._np.__array_interface__["data"][0]

    def _ember_storage_bytes(self):
        root = self._np
        while isinstance(root.base, np.ndarray):
            root = root.base
        flat = root.reshape(-1).view(np.uint8)
        return TileArray(flat), flat.nbytes


class TilesBackend(Backend):
    def from_numpy(self, array, index):
        return TileArray(np.array(array, copy=True))

    def to_numpy(self, array):
        return np.array(array._np, copy=True)

    def strided_view(self, storage, shape, strides, offset, dtype):
        itemsize = dtype.itemsize
        return TileArray(
            np.ndarray(
                shape,
                dtype,
                buffer=storage.base._np,
                offset=offset * itemsize,
                strides=tuple(s * itemsize for s in strides),
            )
        )


def _np(x):
    if isinstance(x, ember.Tensor):  # zero-dim CPU tensors may join device ops, as in PyTorch
        return x._data._np if x.device.type == DEVICE else x._host_array()
    return x


def _kernel(name, fn):
    def kernel(*args, **kwargs):
        KERNEL_CALLS.append(name)
        return fn(*args, **kwargs)

    register_kernel(name, DEVICE, kernel)


def _binary(np_fn):
    def fn(input, other, *, alpha=1):
        meta = registry[fn.op_name].meta(input, other) if alpha == 1 else None
        dtype = meta.dtype if meta is not None else np.result_type(_np(input), _np(other))
        b = _np(other) if alpha == 1 else np.multiply(_np(other), alpha)
        return TileArray(np.asarray(np_fn(_np(input), b), dtype=dtype))

    return fn


@pytest.fixture(scope="module", autouse=True)
def tiles_device():
    if DEVICE not in ember._device._BACKENDS:
        register_backend(DEVICE, TilesBackend())
        add, mul = _binary(np.add), _binary(np.multiply)
        add.op_name, mul.op_name = "add", "mul"
        _kernel("add", add)
        _kernel("mul", mul)

        def zeros(*size, dtype=None, **kw):
            return TileArray(
                np.zeros(
                    registry["zeros"].meta(*size, dtype=dtype).shape, (dtype or ember.get_default_dtype()).numpy_dtype
                )
            )

        def full(size, fill_value, *, dtype=None, **kw):
            meta = registry["full"].meta(size, fill_value, dtype=dtype)
            return TileArray(np.full(meta.shape, fill_value, meta.dtype))

        def copy_(self, src, non_blocking=False):
            data = src._host_array() if isinstance(src, ember.Tensor) else src
            np.copyto(self._data._np, data, casting="unsafe")

        def clone(input, *, memory_format=None):
            return TileArray(np.array(input._data._np, copy=True))

        def to_copy(input, *, dtype=None, device=None, **kw):
            data = input._data._np.astype(input.dtype.numpy_dtype if dtype is None else dtype.numpy_dtype)
            target = ember.device(device) if device is not None else input.device
            if target.type == "cpu":
                return ember.Tensor._make(data)
            return ember.Tensor._make(TileArray(data), target)

        _kernel("zeros", zeros)
        _kernel("full", full)
        _kernel("copy_", copy_)
        _kernel("clone", clone)
        _kernel("_to_copy", to_copy)
    yield


@pytest.fixture(autouse=True)
def clear_calls():
    KERNEL_CALLS.clear()


def test_device_is_first_class():
    x = ember.tensor([[1.0, 2.0], [3.0, 4.0]], device=DEVICE)
    assert x.device == ember.device(DEVICE, 0)
    assert str(x.device) == "tiles:0"
    assert isinstance(x._data, TileArray)
    assert x.is_tiles and not x.is_cpu
    np.testing.assert_array_equal(x.cpu().numpy(), [[1.0, 2.0], [3.0, 4.0]])
    y = ember.arange(3.0).tiles()
    assert y.device.type == DEVICE


def test_prims_run_their_kernels():
    x = ember.tensor([1.0, 2.0, 3.0], device=DEVICE)
    y = x + x * 2
    assert KERNEL_CALLS == ["mul", "add"]
    assert isinstance(y._data, TileArray)
    np.testing.assert_array_equal(y.cpu().numpy(), [3.0, 6.0, 9.0])


def test_composites_run_through_decompositions():
    x = ember.tensor([[1.0, 2.0], [3.0, 4.0]], device=DEVICE)
    # zeros_like and full_like are composites over the zeros/full prims
    z = ember.zeros_like(x)
    assert KERNEL_CALLS == ["zeros"] and z.device.type == DEVICE
    np.testing.assert_array_equal(ember.full_like(x, 7.0).cpu().numpy(), np.full((2, 2), 7.0))
    # add_ is a composite of add and copy_ (the CPU fused kernel is not used here)
    KERNEL_CALLS.clear()
    x.add_(1.0)
    assert KERNEL_CALLS == ["add", "copy_"]
    np.testing.assert_array_equal(x.cpu().numpy(), [[2.0, 3.0], [4.0, 5.0]])
    assert x._version == 1
    # index_put is a composite of clone and index_put_ (which this device lacks)
    with pytest.raises(NotImplementedError, match="index_put_.*tiles"):
        ember.index_put(x, [ember.tensor([0], device=DEVICE)], ember.tensor(0.0, device=DEVICE))


def test_views_need_no_kernels():
    x = ember.arange(12.0).view(3, 4).to(DEVICE)
    KERNEL_CALLS.clear()
    t = x.t()
    row = x[1]
    pieces = x.chunk(2, dim=1)  # composite -> split -> slice views
    flat = x.reshape(12)
    assert KERNEL_CALLS == []
    ref = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(t.cpu().numpy(), ref.T)
    np.testing.assert_array_equal(row.cpu().numpy(), ref[1])
    np.testing.assert_array_equal(pieces[1].cpu().numpy(), ref[:, 2:])
    assert t.stride() == (1, 4) and pieces[1].storage_offset() == 2
    # a write through a view reaches the base
    row.copy_(ember.zeros(4))  # copy_ may cross devices
    np.testing.assert_array_equal(x.cpu().numpy()[1], np.zeros(4))
    np.testing.assert_array_equal(flat.cpu().numpy()[4:8], np.zeros(4))
    assert x._version == row._version == 1


def test_missing_prim_has_a_clear_error():
    x = ember.tensor([1.0, -2.0], device=DEVICE)
    with pytest.raises(NotImplementedError, match="'neg'.*'tiles'"):
        _ = -x
    assert "neg" in missing_prims(DEVICE)
    assert "add" not in missing_prims(DEVICE) and "view" not in missing_prims(DEVICE)


def test_mixing_devices_is_an_error():
    x = ember.tensor([1.0, 2.0], device=DEVICE)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        x + ember.tensor([1.0, 2.0])
    # a zero-dim CPU tensor may join, as in PyTorch
    np.testing.assert_array_equal((x + ember.tensor(1.0)).cpu().numpy(), [2.0, 3.0])


def test_meta_function_checks_before_the_kernel():
    x = ember.zeros(2, 3, device=DEVICE)
    KERNEL_CALLS.clear()
    with pytest.raises(RuntimeError, match="must match the size"):
        x + ember.zeros(4, device=DEVICE)
    assert KERNEL_CALLS == ["zeros"]  # the second zeros ran; add never reached its kernel


def test_duplicate_registration_raises():
    with pytest.raises(RuntimeError, match="already registered"):
        register_backend(DEVICE, TilesBackend())
    with pytest.raises(RuntimeError, match="already has a kernel"):
        register_kernel("add", DEVICE, lambda *a, **k: None)


def test_meta_arrays_describe_views_of_the_device():
    x = ember.zeros(4, 6, device=DEVICE)
    v = x[1:, ::2]
    meta = registry["slice"].meta(x[1:], 1, None, None, 2)
    assert isinstance(meta, MetaArray)
    assert v.shape == (3, 3) and v.stride() == (6, 2) and v.storage_offset() == 6
    assert (meta.shape, meta._elem_strides, meta.offset) == ((3, 3), (6, 2), 6)
