"""ember.utils.dlpack: capsules and __dlpack__ objects share memory both ways (numpy as the peer),
errors for tensors that require grad, for foreign capsules and for unsupported device types."""

import numpy as np
import pytest

import ember
from ember.utils import dlpack


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.int64, ember.int8, ember.bool, ember.complex64])
def test_round_trip_through_a_capsule_shares_memory(dtype):
    t = ember.arange(12).reshape(3, 4).to(dtype)
    back = dlpack.from_dlpack(dlpack.to_dlpack(t))
    assert back.dtype == dtype and back.shape == (3, 4)
    np.testing.assert_array_equal(back.numpy(), t.numpy())
    if dtype != ember.bool:
        back[1, 2] = 7
        assert t[1, 2].item() == 7


def test_strided_views_keep_their_strides():
    t = ember.arange(20.0).reshape(4, 5)[:, 1::2]
    out = ember.from_dlpack(dlpack.to_dlpack(t))
    np.testing.assert_array_equal(out.numpy(), t.numpy())
    assert out.stride() == t.stride()


def test_numpy_arrays_and_their_capsules():
    a = np.arange(6.0).reshape(2, 3)
    t = ember.utils.dlpack.from_dlpack(a)
    t[0, 0] = -1
    assert a[0, 0] == -1
    c = dlpack.from_dlpack(a.__dlpack__())
    assert dlpack.capsule_device(ember.arange(3).__dlpack__()) == (1, 0)
    np.testing.assert_array_equal(c.numpy(), a)
    # numpy consumes ember's export and views the same memory
    back = np.from_dlpack(t)
    back[1, 1] = 42
    assert t[1, 1].item() == 42


def test_errors():
    with pytest.raises(BufferError, match="require"):
        dlpack.to_dlpack(ember.ones(2, requires_grad=True))
    with pytest.raises(TypeError, match="__dlpack__"):
        dlpack.from_dlpack([1, 2])
    capsule = ember.ones(2).__dlpack__()
    ember.from_dlpack(capsule)
    with pytest.raises(ValueError, match="unconsumed DLPack capsule"):
        ember.from_dlpack(capsule)  # a capsule is consumed once

    class OnAnotherDevice:
        def __dlpack__(self, stream=None, **kwargs):
            raise AssertionError("not reached")

        def __dlpack_device__(self):
            return (14, 0)

    with pytest.raises(RuntimeError, match="device type 14"):
        ember.from_dlpack(OnAnotherDevice())


@pytest.mark.cuda
def test_cuda_memory_shared_with_cupy():
    cupy = pytest.importorskip("cupy")
    a = cupy.arange(6, dtype=cupy.float32)
    t = dlpack.from_dlpack(a)
    assert t.device.type == "cuda"
    t[0] = 9
    assert float(a[0]) == 9
    b = cupy.from_dlpack(dlpack.to_dlpack(t))
    b[1] = 5
    assert t[1].item() == 5
