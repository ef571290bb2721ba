"""View kernels (``Op.view_kernels``): view, transpose and permute of the common calls built by the array's own
reshape/swapaxes/transpose must equal the meta function's view (shape, strides, offset, storage), and every call
they decline must still raise PyTorch's errors."""

import itertools

import numpy as np
import pytest

import ember
from ember._ops import _dispatch
from ember._ops.views import _permute_kernel, _transpose_kernel, _view_kernel


def _layout(t):
    return tuple(t.shape), t.stride(), t.storage_offset(), t.untyped_storage().data_ptr(), t.dtype


def _both(fn, *args):
    """``fn(*args)`` with the view kernels (and the other fast paths) and without them: two tensors."""
    fast = fn(*args)
    with _dispatch.fast_paths_disabled():
        general = fn(*args)
    return fast, general


def _inputs():
    """Tensors of many layouts: contiguous, with size-1 dims, transposed, sliced with an offset, empty."""
    rng = np.random.default_rng(0)
    base = ember.tensor(rng.standard_normal((4, 6, 10)).astype(np.float32))
    yield base
    yield base[1:3]  # an offset, contiguous
    yield base[:, 2:4]  # not contiguous
    yield base.transpose(0, 2)
    yield base[:, :1]  # a size-1 dim
    yield base[0, :1, :1].t()  # size-1 dims with unusual strides
    yield ember.ones(6)
    yield ember.ones(())
    yield ember.ones(0, 3)


VIEW_SHAPES = [(-1,), (2, -1), (-1, 2), (1, -1), (-1, 1, 2), (3, 2, -1), ((-1,),), ([2, -1],)]


@pytest.mark.parametrize("index", range(9))
@pytest.mark.parametrize("shape", VIEW_SHAPES, ids=str)
def test_view_equals_the_meta_functions_view(index, shape):
    x = list(_inputs())[index]
    try:
        expected = _both(lambda: x.view(*shape))
    except RuntimeError as exc:  # a shape that does not fit, or strides that do not allow it: the same error
        with pytest.raises(RuntimeError, match=str(exc)[:40].replace("(", r"\(").replace("[", r"\[")):
            x.view(*shape)
        return
    fast, general = expected
    assert _layout(fast) == _layout(general)
    assert fast._base is general._base is (x._base if x._base is not None else x)
    np.testing.assert_array_equal(fast.numpy(), general.numpy())


@pytest.mark.parametrize("index", range(9))
def test_transpose_and_permute_equal_the_meta_functions_views(index):
    x = list(_inputs())[index]
    nd = x.dim()
    for d0, d1 in itertools.product(range(-nd, nd), repeat=2):
        fast, general = _both(lambda: x.transpose(d0, d1))
        assert _layout(fast) == _layout(general)
    for order in itertools.permutations(range(nd)):
        fast, general = _both(lambda: x.permute(*order))
        assert _layout(fast) == _layout(general)
        fast, general = _both(lambda: x.permute(order))
        assert _layout(fast) == _layout(general)


def test_the_kernels_decline_what_they_do_not_check():
    x = ember.ones(2, 3)
    assert _view_kernel(x, 2.0, 3) is None  # a float size: the meta function's TypeError
    assert _view_kernel(x, 4, -1) is None  # does not fit
    assert _view_kernel(x, ember.float16) is None  # view(dtype)
    assert _view_kernel(x.t(), 6) is None  # not contiguous
    assert _view_kernel(ember.ones(2, 1), 2) is None  # a size-1 dim
    assert _transpose_kernel(x, 0, 2) is None and _transpose_kernel(x, 0.0, 1) is None
    assert _permute_kernel(x, 0, 0) is None and _permute_kernel(x, 0) is None and _permute_kernel(x, 0, 5) is None
    assert _view_kernel(x, 3, 2).shape == (3, 2)


@pytest.mark.parametrize("call, error, match", [
    (lambda x: x.view(4, -1), RuntimeError, r"shape '\[4, -1\]' is invalid for input of size 6"),
    (lambda x: x.view(2.0, 3), TypeError, "view"),
    (lambda x: x.t().view(6), RuntimeError, "view size is not compatible"),
    (lambda x: x.transpose(0, 2), IndexError, "Dimension out of range"),
    (lambda x: x.permute(0, 0), RuntimeError, "duplicate dims"),
    (lambda x: x.reshape(2.0, 3), TypeError, "reshape"),
    (lambda x: x.reshape(4, -1), RuntimeError, r"shape '\[4, -1\]' is invalid"),
])
def test_errors_are_the_meta_functions(call, error, match):
    with pytest.raises(error, match=match):
        call(ember.ones(2, 3))


def test_fake_and_meta_tensors_take_the_meta_function():
    # a fake tensor says cpu but holds a MetaArray: the kernels decline it (no array methods to call)
    from ember.fx.experimental.proxy_tensor import make_fx

    def f(x):
        return x.view(6, 4).permute(1, 0).transpose(0, 1).reshape(2, 12)

    gm = make_fx(f, tracing_mode="fake")(ember.ones(2, 3, 4))
    x = ember.tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    np.testing.assert_array_equal(gm(x).numpy(), np.arange(24, dtype=np.float32).reshape(2, 12))
    m = ember.ones(2, 3, 4, device="meta").view(6, 4).permute(1, 0)
    assert tuple(m.shape) == (4, 6) and m.stride() == (1, 4)
