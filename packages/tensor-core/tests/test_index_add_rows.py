"""index_add's row kernel (``_C.index_accumulate_rows``) against numpy's ``add.at``, which adds slices in index
order as the element-wise path does: values bit for bit, repeated indices, every dim, alpha, layouts."""

import numpy as np
import pytest

import ember
from ember import _C

RNG = np.random.default_rng(7)


def _oracle(base, dim, idx, src, alpha=1):
    out = base.copy()
    np.add.at(np.moveaxis(out, dim, 0), idx, np.moveaxis(src * np.asarray(alpha, base.dtype), dim, 0))
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.complex64])
@pytest.mark.parametrize("dim", [0, 1, 2])
@pytest.mark.parametrize("alpha", [1, 3])
def test_index_add_matches_add_at(dtype, dim, alpha):
    shape = [4, 5, 6]
    idx = RNG.integers(0, shape[dim], 9)  # 9 > size: indices repeat
    src_shape = list(shape)
    src_shape[dim] = idx.size
    base = (RNG.standard_normal(shape) * 10).astype(dtype)
    src = (RNG.standard_normal(src_shape) * 10).astype(dtype)
    got = ember.index_add(ember.tensor(base), dim, ember.tensor(idx), ember.tensor(src), alpha=alpha).numpy()
    np.testing.assert_array_equal(got, _oracle(base, dim, idx, src, alpha))


def test_index_add_in_place_on_a_strided_tensor():
    # a transposed destination is not rows of contiguous elements: the element-wise path writes through it
    base = RNG.standard_normal((6, 4)).astype(np.float32)
    t = ember.tensor(base).t()
    idx = np.array([1, 1, 3])
    src = RNG.standard_normal((3, 6)).astype(np.float32)
    t.index_add_(0, ember.tensor(idx), ember.tensor(src))
    np.testing.assert_array_equal(t.numpy(), _oracle(base.T.copy(), 0, idx, src))


def test_row_kernel_checks_its_arguments():
    target = np.zeros((4, 3), np.float32)
    with pytest.raises(IndexError, match="row 4 out of range for 4 rows"):
        _C.index_accumulate_rows(target, np.array([0, 4]), np.ones((2, 3), np.float32), 3)
    with pytest.raises(ValueError, match="values must hold index.size rows"):
        _C.index_accumulate_rows(target, np.array([0]), np.ones((2, 3), np.float32), 3)
    with pytest.raises(ValueError, match="differ in dtype"):
        _C.index_accumulate_rows(target, np.array([0]), np.ones((1, 3)), 3)
    with pytest.raises(ValueError, match="must be positive and divide"):
        _C.index_accumulate_rows(target, np.array([0]), np.ones((1, 3), np.float32), 5)
    with pytest.raises(RuntimeError, match="index 4 is out of bounds for dimension 0 with size 4"):  # PyTorch's
        ember.index_add(ember.zeros(4, 3), 0, ember.tensor([4]), ember.ones(1, 3))


def test_index_add_of_an_empty_batch():
    # no slices before dim: nothing to add (interpolate's backward of a (0, C, H, W) input reaches this)
    base = np.zeros((0, 2, 4), np.float32)
    got = ember.index_add(ember.tensor(base), 2, ember.tensor([1, 1, 3]), ember.ones(0, 2, 3))
    assert tuple(got.shape) == (0, 2, 4)
