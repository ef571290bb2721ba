"""Indexing: ``__getitem__``, ``__setitem__`` and ``index_put_`` against numpy.

Hypothesis draws shapes and index tuples (ints, slices with steps, None,
Ellipsis, bool masks, integer lists and tensors that broadcast together).

PyTorch, and so ember, applies Python ints (and zero-dim integer tensors) as
``select`` before advanced indexing; numpy treats them as advanced indices.
The two disagree when that changes whether the advanced indices are adjacent,
as in ``x[0, :, [0, 1]]`` (numpy: shape (2, 3); PyTorch: (3, 2)). So:

* ``test_getitem_matches_numpy`` and ``test_setitem_matches_numpy`` use numpy
  directly, on keys where numpy and PyTorch agree (:func:`numpy_agrees_with_torch`);
* ``test_getitem_follows_torch_rule`` uses every key, with the PyTorch rule
  written in numpy (:func:`torch_rule_getitem`: ints first, then the rest);
* ``test_torch_differs_from_numpy`` pins values that PyTorch gives (hardcoded).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ember

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- drawing keys -----------------------------------------------------------------------------------


class Mask:
    """A bool mask in a drawn key (kept apart from integer arrays for the rules below)."""

    def __init__(self, array):
        self.array = array


def _is_scalar_int(k):
    return isinstance(k, int) or (isinstance(k, np.ndarray) and k.ndim == 0 and k.dtype.kind == "i")


def _is_array(k):
    return isinstance(k, Mask) or (isinstance(k, (np.ndarray, list)) and not _is_scalar_int(k))


def _dims(k):
    if k is None or k is Ellipsis:
        return 0
    if isinstance(k, Mask):
        return k.array.ndim
    return 1


@st.composite
def index_shapes(draw):
    """A broadcast shape for the integer index arrays of one key."""
    return draw(st.sampled_from([(), (1,), (2,), (3,), (2, 1), (1, 3), (2, 3)]))


def _component(draw, shape, dims, target):
    """One index component for the dims ``dims`` (a list of dim numbers it may start on)."""
    dim = dims[0]
    kinds = ["none"]
    if dim is not None:
        kinds += ["slice", "slice"] if shape[dim] == 0 else ["int", "slice", "slice", "array", "list"]
        kinds.append("mask")
    kind = draw(st.sampled_from(kinds))
    if kind == "none":
        return None, []
    n = shape[dim]
    if kind == "int":
        value = draw(st.integers(-n, n - 1))
        return (np.array(value) if draw(st.integers(0, 3)) == 0 else value), [dim]
    if kind == "slice":
        start = draw(st.none() | st.integers(-n - 2, n + 2))
        stop = draw(st.none() | st.integers(-n - 2, n + 2))
        step = draw(st.none() | st.integers(1, 3))
        return slice(start, stop, step), [dim]
    if kind in ("array", "list"):
        # a shape that broadcasts to the key's common index shape
        own = list(target[draw(st.integers(0, len(target))) :])
        own = [1 if draw(st.booleans()) else s for s in own]
        count = int(np.prod(own))
        values = draw(st.lists(st.integers(-n, n - 1), min_size=count, max_size=count))
        array = np.array(values, dtype=np.int64).reshape(own)
        if array.ndim == 0:
            array = array.reshape(1)
        return (array.tolist() if kind == "list" else array), [dim]
    # a mask over one dim, or two when the next one is free too
    covered = dims[: draw(st.integers(1, 2))] if len(dims) > 1 and dims[1] is not None else dims[:1]
    mask_shape = tuple(shape[d] for d in sorted(covered))
    count = int(np.prod(mask_shape))
    bits = draw(st.lists(st.booleans(), min_size=count, max_size=count))
    return Mask(np.array(bits, dtype=bool).reshape(mask_shape)), covered


@st.composite
def keys(draw, shape):
    """An index tuple for an array of ``shape``: components for leading dims, maybe an Ellipsis,
    components for trailing dims (so that every int and array fits the dim it lands on)."""
    ndim = len(shape)
    target = draw(st.sampled_from([(), (1,), (2,), (3,), (2, 1), (1, 3), (2, 3)]))
    head, first = [], 0  # dims [0, first) are taken by the head
    for _ in range(draw(st.integers(0, 4))):
        free = list(range(first, ndim)) or [None]
        comp, used = _component(draw, shape, free, target)
        head.append(comp)
        first += len(used)
    if not draw(st.booleans()):
        return tuple(head)
    tail, last = [], ndim  # dims [last, ndim) are taken by the tail
    for _ in range(draw(st.integers(0, 3))):
        free = list(range(last - 1, first - 1, -1)) or [None]
        comp, used = _component(draw, shape, free, target)
        tail.insert(0, comp)
        last -= len(used)
    return (*head, Ellipsis, *tail)


@st.composite
def arrays_and_keys(draw):
    ndim = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(0, 4) if draw(st.integers(0, 9)) == 0 else st.integers(1, 4),
                                min_size=ndim, max_size=ndim)))
    key = draw(keys(shape))
    return shape, key


def _ellipsis_dims(key, ndim):
    return ndim - sum(_dims(k) for k in key)


def numpy_key(key):
    """The drawn key as numpy takes it."""
    out = []
    for k in key:
        if isinstance(k, Mask):
            out.append(k.array)
        elif isinstance(k, list):
            out.append(np.array(k, dtype=np.int64))
        else:
            out.append(k)
    return tuple(out)


def ember_key(key, as_tensors):
    """The drawn key as ember takes it: numpy arrays become tensors (or stay lists)."""
    out = []
    for k in key:
        if isinstance(k, Mask):
            # an empty mask as a list would lose its dims: keep it a tensor
            out.append(ember.from_numpy(k.array) if as_tensors or k.array.size == 0 else k.array.tolist())
        elif isinstance(k, np.ndarray):
            out.append(ember.from_numpy(k) if as_tensors else k)
        else:
            out.append(k)
    return tuple(out)


def numpy_agrees_with_torch(key, ndim):
    """Whether numpy's rules give what PyTorch's give for this key.

    numpy: ints and arrays together form the advanced group; PyTorch: ints are
    applied first, arrays alone form the group (and an Ellipsis that covers no
    dim does not separate them). They disagree exactly when the group is split
    for one and adjacent for the other.
    """
    arrays = [i for i, k in enumerate(key) if _is_array(k)]
    if not arrays:
        return True
    ints = [i for i, k in enumerate(key) if _is_scalar_int(k)]
    group = sorted(arrays + ints)
    numpy_adjacent = group[-1] - group[0] + 1 == len(group)
    empty_ellipsis = _ellipsis_dims(key, ndim) == 0
    kept = [i for i, k in enumerate(key) if i not in ints and not (k is Ellipsis and empty_ellipsis)]
    positions = [kept.index(i) for i in arrays]
    torch_adjacent = positions[-1] - positions[0] + 1 == len(positions)
    return numpy_adjacent == torch_adjacent


def _torch_rule_split(key, ndim):
    """PyTorch's rule as two numpy keys: the basic part (ints, slices, None) and the advanced rest."""
    basic, advanced = [], []
    for k in key:
        if _is_scalar_int(k):
            basic.append(int(k))
        elif k is None:
            basic.append(None)
            advanced.append(slice(None))
        elif isinstance(k, slice):
            basic.append(k)
            advanced.append(slice(None))
        elif k is Ellipsis:
            basic.append(Ellipsis)
            advanced.extend([slice(None)] * _ellipsis_dims(key, ndim))
        elif isinstance(k, Mask):
            basic.extend([slice(None)] * k.array.ndim)
            advanced.append(k.array)
        else:
            basic.append(slice(None))
            advanced.append(np.array(k, dtype=np.int64))
    if Ellipsis not in basic:
        basic.append(Ellipsis)  # so numpy returns a (zero-dim) view rather than a scalar
    has_advanced = any(isinstance(k, np.ndarray) for k in advanced)
    return tuple(basic), (tuple(advanced) if has_advanced else None)


def torch_rule_getitem(a, key):
    """``a[key]`` by PyTorch's rule, in numpy: ints (and zero-dim ints) first, then advanced indexing."""
    basic, advanced = _torch_rule_split(key, a.ndim)
    view = a[basic]
    return view if advanced is None else view[advanced]


def torch_rule_setitem(a, key, value):
    basic, advanced = _torch_rule_split(key, a.ndim)
    view = a[basic]
    view[... if advanced is None else advanced] = value


def _base(shape):
    return (np.arange(int(np.prod(shape))) * 1.5).reshape(shape)


# -- getitem -----------------------------------------------------------------------------------------


@SETTINGS
@given(arrays_and_keys(), st.booleans())
def test_getitem_matches_numpy(shape_and_key, as_tensors):
    shape, key = shape_and_key
    if not numpy_agrees_with_torch(key, len(shape)):
        return
    a = _base(shape)
    try:
        expected = a[numpy_key(key)]
    except IndexError:
        with pytest.raises(IndexError):
            ember.from_numpy(a)[ember_key(key, as_tensors)]
        return
    result = ember.from_numpy(a)[ember_key(key, as_tensors)]
    assert tuple(result.shape) == expected.shape
    np.testing.assert_array_equal(result.numpy(), expected)
    assert result.dtype is ember.float64


@SETTINGS
@given(arrays_and_keys(), st.booleans())
def test_getitem_follows_torch_rule(shape_and_key, as_tensors):
    shape, key = shape_and_key
    a = _base(shape)
    try:
        expected = torch_rule_getitem(a, key)
    except IndexError:
        with pytest.raises(IndexError):
            ember.from_numpy(a)[ember_key(key, as_tensors)]
        return
    result = ember.from_numpy(a)[ember_key(key, as_tensors)]
    assert tuple(result.shape) == expected.shape
    np.testing.assert_array_equal(result.numpy(), expected)


@SETTINGS
@given(arrays_and_keys())
def test_basic_indexing_returns_views(shape_and_key):
    shape, key = shape_and_key
    # ints, slices, None, Ellipsis only: each array becomes whole-dim slices
    key = tuple(s for k in key for s in ([slice(None)] * _dims(k) if _is_array(k) else [k]))
    a = _base(shape)
    x = ember.from_numpy(a)
    result = x[ember_key(key, True)]
    expected = torch_rule_getitem(a, key)
    assert tuple(result.shape) == expected.shape
    np.testing.assert_array_equal(result.numpy(), expected)
    assert result._base is x and result.untyped_storage() is x.untyped_storage()
    if expected.size:
        assert np.shares_memory(result.numpy(), a)
        assert result.data_ptr() - x.data_ptr() == expected.ctypes.data - a.ctypes.data
        for n, stride, np_stride in zip(expected.shape, result.stride(), expected.strides):
            assert n == 1 or stride * 8 == np_stride


# Values derived from PyTorch for keys where numpy's rule differs.
TORCH_CASES = [
    ((0, slice(None), [0, 1]), (3, 2), [[0, 1], [4, 5], [8, 9]]),
    ((1, slice(None), [[0], [3]]), (3, 2, 1), [[[12], [15]], [[16], [19]], [[20], [23]]]),
    ((1, slice(None), "mask"), (3, 2), [[12, 14], [16, 18], [20, 22]]),
    (("0d", slice(None), [0, 1]), (3, 2), [[0, 1], [4, 5], [8, 9]]),
    ((slice(None), [0, 1], Ellipsis, [1, 2]), (2, 2), [[1, 6], [13, 18]]),
    ((None, "mask2d", Ellipsis, [0, 1, 3, 2]), (1, 4), [[0, 9, 19, 22]]),
]


def _torch_case_key(key):
    out = []
    for k in key:
        if k == "mask":
            out.append(ember.tensor([True, False, True, False]))
        elif k == "mask2d":
            out.append(ember.tensor([[True, False, True], [False, True, True]]))
        elif k == "0d":
            out.append(ember.tensor(0))
        else:
            out.append(k)
    return tuple(out)


@pytest.mark.parametrize(("key", "shape", "values"), TORCH_CASES)
def test_torch_differs_from_numpy(key, shape, values):
    x = ember.arange(24).view(2, 3, 4)
    result = x[_torch_case_key(key)]
    assert tuple(result.shape) == shape
    assert result.tolist() == values


def test_int_then_advanced_setitem_follows_torch():
    # values derived from PyTorch: z[0, :, [0, 1]] has shape (3, 2) there
    z = ember.zeros(2, 3, 4, dtype=ember.int64)
    z[0, :, [0, 1]] = ember.tensor([[1, 2, 3], [4, 5, 6]]).t()
    assert z.tolist() == [[[1, 4, 0, 0], [2, 5, 0, 0], [3, 6, 0, 0]], [[0] * 4] * 3]
    with pytest.raises(RuntimeError):
        z[0, :, [0, 1]] = ember.tensor([[1, 2, 3], [4, 5, 6]])  # numpy's shape (2, 3) does not fit
    z = ember.zeros(2, 3, 4, dtype=ember.int64)
    z[1, :, [3, 0]] = ember.tensor([7, 8])
    assert z.tolist() == [[[0] * 4] * 3, [[8, 0, 0, 7]] * 3]


def test_zero_dim_integer_tensor_indexes_like_an_int():
    x = ember.arange(12.0).view(3, 4)
    row = x[ember.tensor(1)]
    assert row.tolist() == [4.0, 5.0, 6.0, 7.0]
    assert row.data_ptr() - x.data_ptr() == 4 * 4  # a view, as x[1]
    assert x[ember.tensor(2, dtype=ember.int32), ember.tensor(-1)].item() == 11.0
    assert x[np.int64(1), np.array(2)].item() == 6.0


def test_list_of_sequences_is_a_tuple_of_indices():
    # PyTorch's rule: a short list holding lists, tensors, slices, None or Ellipsis is a tuple
    x = ember.arange(12).view(3, 4)
    assert x[[[0, 1], [2, 0]]].tolist() == [2, 4]
    assert x[[0, slice(None)]].tolist() == [0, 1, 2, 3]
    assert x[[None, 0]].shape == (1, 4)
    assert x[[0, 1]].shape == (2, 4)  # a list of ints is one index
    assert x[[True, False, True]].tolist() == [[0, 1, 2, 3], [8, 9, 10, 11]]


def test_bool_scalars_and_empty_indices():
    x = ember.arange(12.0).view(3, 4)
    assert x[True].shape == (1, 3, 4)
    assert x[False].shape == (0, 3, 4)
    assert x[False, 0].shape == (0, 4)
    assert x[ember.tensor(True)].shape == (1, 3, 4)
    assert x[ember.tensor(False)].shape == (0, 3, 4)
    s = ember.tensor(5.0)
    assert s[None].shape == (1,) and s[...].shape == () and s[True].shape == (1,) and s[False].shape == (0,)
    assert x[[]].shape == (0, 4)
    assert x[ember.tensor([], dtype=ember.int64)].shape == (0, 4)
    assert x[...].shape == (3, 4) and x[...]._base is x._base
    assert x[:]._base is x._base


def test_index_dtypes():
    x = ember.arange(12.0).view(3, 4)
    assert x[ember.tensor([0, 2], dtype=ember.int32)].tolist() == [[0, 1, 2, 3], [8, 9, 10, 11]]
    # uint8 index tensors are masks
    assert x[ember.tensor([1, 0, 1], dtype=ember.uint8)].tolist() == [[0, 1, 2, 3], [8, 9, 10, 11]]
    # like PyTorch: long, int, byte or bool only
    for dtype in (ember.int8, ember.int16, ember.float32, ember.float64, ember.complex64):
        with pytest.raises(IndexError, match="long, int, byte or bool"):
            x[ember.tensor([0, 1], dtype=dtype)]


def test_advanced_indexing_copies():
    x = ember.arange(12.0).view(3, 4)
    y = x[[0, 2]]
    assert y._base is None and y.untyped_storage() is not x.untyped_storage()
    y[0, 0] = 100.0
    assert x[0, 0].item() == 0.0
    m = x[x > 5]
    assert m.tolist() == [6.0, 7.0, 8.0, 9.0, 10.0, 11.0]


def test_index_tensors_broadcast():
    x = ember.arange(24).view(2, 3, 4)
    a = np.arange(24).reshape(2, 3, 4)
    rows = ember.tensor([[0], [1]])
    cols = ember.tensor([[0, 2, 3]])
    np.testing.assert_array_equal(x[:, rows, cols].numpy(), a[:, [[0], [1]], [[0, 2, 3]]])
    np.testing.assert_array_equal(x[rows, :, cols].numpy(), a[[[0], [1]], :, [[0, 2, 3]]])
    np.testing.assert_array_equal(x[ember.tensor(1), rows].numpy(), a[1][[[0], [1]]])


# -- getitem errors -----------------------------------------------------------------------------------


def test_getitem_errors():
    x = ember.arange(12.0).view(3, 4)
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 3"):
        x[5]
    with pytest.raises(IndexError, match="index -4 is out of bounds"):
        x[-4]
    with pytest.raises(IndexError, match="dimension 1 with size 4"):
        x[0, 4]
    with pytest.raises(IndexError, match="out of bounds"):
        x[[0, 3]]
    with pytest.raises(IndexError, match="out of bounds"):
        x[ember.tensor([0, -4])]
    with pytest.raises(IndexError, match="out of bounds"):
        x[:, [4]]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="too many indices"):
        x[..., 0, 0, 0]
    with pytest.raises(IndexError, match="too many indices"):
        ember.tensor(5.0)[0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., ...]
    with pytest.raises(IndexError, match="shape of the mask"):
        x[ember.tensor([True, False])]
    with pytest.raises(IndexError, match="shape of the mask"):
        x[ember.ones(3, 3, dtype=ember.bool)]
    with pytest.raises(IndexError, match="shape of the mask"):
        x[:, [True, False, True]]
    with pytest.raises(IndexError):
        x[ember.tensor([0.0])]
    with pytest.raises(IndexError):
        x[1.0]
    with pytest.raises(IndexError):
        x["a"]
    with pytest.raises(IndexError, match="could not be broadcast"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(ValueError):
        x[::0]
    with pytest.raises(ValueError):
        x[::-1]
    assert x.tolist() == np.arange(12.0).reshape(3, 4).tolist()  # untouched


# -- setitem ---------------------------------------------------------------------------------------------


@st.composite
def values_for(draw, shape):
    """A value to assign to an indexed result of ``shape``: a scalar, or an array that broadcasts to it."""
    kind = draw(st.sampled_from(["scalar", "full", "trailing", "ones"]))
    if kind == "scalar":
        return draw(st.sampled_from([-2.5, 0.0, 7.0]))
    if kind == "full":
        value_shape = shape
    elif kind == "trailing":
        value_shape = shape[draw(st.integers(0, len(shape))):]
    else:
        value_shape = tuple(1 if draw(st.booleans()) else s for s in shape)
    return -np.arange(int(np.prod(value_shape)), dtype=np.float64).reshape(value_shape) - 1.0


@SETTINGS
@given(arrays_and_keys(), st.data())
def test_setitem_matches_numpy(shape_and_key, data):
    shape, key = shape_and_key
    if not numpy_agrees_with_torch(key, len(shape)):
        return
    a = _base(shape)
    try:
        target_shape = a[numpy_key(key)].shape
    except IndexError:
        return
    value = data.draw(values_for(target_shape))
    expected = a.copy()
    expected[numpy_key(key)] = value
    x = ember.from_numpy(a.copy())
    x[ember_key(key, data.draw(st.booleans()))] = ember.from_numpy(value) if isinstance(value, np.ndarray) else value
    np.testing.assert_array_equal(x.numpy(), expected)


@SETTINGS
@given(arrays_and_keys(), st.data())
def test_setitem_follows_torch_rule(shape_and_key, data):
    shape, key = shape_and_key
    a = _base(shape)
    try:
        target_shape = torch_rule_getitem(a, key).shape
    except IndexError:
        return
    value = data.draw(values_for(target_shape))
    expected = a.copy()
    torch_rule_setitem(expected, key, value)
    x = ember.from_numpy(a.copy())
    version = x._version
    x[ember_key(key, data.draw(st.booleans()))] = ember.from_numpy(value) if isinstance(value, np.ndarray) else value
    np.testing.assert_array_equal(x.numpy(), expected)
    assert x._version == version + 1


def test_setitem_scalar_and_broadcast():
    x = ember.zeros(3, 4)
    x[1] = 5.0
    x[:, 0] = ember.tensor([1.0, 2.0, 3.0])
    x[2, 1:] = ember.tensor([7.0])
    x[x == 0] = -1.0
    assert x.tolist() == [[1.0, -1.0, -1.0, -1.0], [2.0, 5.0, 5.0, 5.0], [3.0, 7.0, 7.0, 7.0]]
    y = ember.zeros(3, 4)
    y[[0, 2]] = ember.tensor([1.0, 2.0, 3.0, 4.0])
    y[[1, 1], [0, 3]] = 9.0
    assert y.tolist() == [[1.0, 2.0, 3.0, 4.0], [9.0, 0.0, 0.0, 9.0], [1.0, 2.0, 3.0, 4.0]]
    z = ember.zeros(2, 3)
    z[...] = ember.tensor([[1.0], [2.0]])
    assert z.tolist() == [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]
    z[:] = 0
    assert z.tolist() == [[0.0] * 3] * 2


def test_setitem_converts_values_like_torch():
    x = ember.zeros(3, dtype=ember.int64)
    x[0] = 2.7  # a scalar is truncated
    x[1:] = ember.tensor([1.5, -3.5])  # basic indexing copies with conversion
    assert x.tolist() == [2, 1, -3]
    x[[0, 2]] = 2.9
    assert x.tolist() == [2, 1, 2]
    with pytest.raises(RuntimeError, match="dtypes match"):
        x[[0, 2]] = ember.tensor([1.5, -3.5])  # advanced indexing needs the same dtype
    with pytest.raises(RuntimeError, match="without overflow"):
        ember.zeros(3)[0] = 1j
    with pytest.raises(RuntimeError, match="without overflow"):
        ember.zeros(3, dtype=ember.uint8)[[0]] = 300
    with pytest.raises(RuntimeError, match="without overflow"):
        ember.zeros(3, dtype=ember.uint8)[0] = 300
    u = ember.zeros(2, dtype=ember.uint8)
    u[0] = -1  # PyTorch wraps small negative numbers into unsigned types
    assert u.tolist() == [255, 0]


def test_setitem_errors():
    x = ember.zeros(3, 4)
    with pytest.raises(IndexError, match="out of bounds"):
        x[5] = 1.0
    with pytest.raises(IndexError, match="out of bounds"):
        x[[0, 7]] = 1.0
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0] = 1.0
    with pytest.raises(IndexError, match="shape of the mask"):
        x[ember.tensor([True])] = 1.0
    with pytest.raises(IndexError):
        x[ember.tensor([0.5])] = 1.0
    with pytest.raises(RuntimeError):
        x[:] = ember.ones(2, 4)
    with pytest.raises(RuntimeError):
        x[[0, 1]] = ember.ones(3, 4)
    assert x.tolist() == [[0.0] * 4] * 3 and x._version == 0  # untouched


# -- index_put_ with accumulate -------------------------------------------------------------------------


@st.composite
def accumulate_cases(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim)))
    k = draw(st.integers(1, ndim))
    target = draw(st.sampled_from([(5,), (2, 3), (1, 4), (6,)]))
    skip = draw(st.integers(0, k - 1)) if k > 1 and draw(st.booleans()) else None  # a None entry
    indices = []
    for d in range(k):
        if d == skip:
            indices.append(None)
            continue
        values = draw(st.lists(st.integers(-shape[d], shape[d] - 1), min_size=int(np.prod(target)),
                               max_size=int(np.prod(target))))
        indices.append(np.array(values, dtype=np.int64).reshape(target))
    dtype = draw(st.sampled_from([np.float64, np.float32, np.int64, np.int32]))
    return shape, indices, dtype


@SETTINGS
@given(accumulate_cases(), st.data())
def test_index_put_accumulate_matches_add_at(case, data):
    shape, indices, dtype = case
    a = _base(shape).astype(dtype)
    np_key = tuple(slice(None) if i is None else i for i in indices)
    target_shape = a[np_key].shape
    value_shape = target_shape[data.draw(st.integers(0, len(target_shape))):]
    values = (np.arange(int(np.prod(value_shape))) + 1).reshape(value_shape).astype(dtype)
    expected = a.copy()
    # numpy 2.4's np.add.at mishandles values that broadcast up to the indexed shape (it adds
    # them once instead of once per row): broadcast them first.
    np.add.at(expected, np_key, np.broadcast_to(values, target_shape))
    x = ember.from_numpy(a.copy())
    index_tensors = [None if i is None else ember.from_numpy(i) for i in indices]
    out = x.index_put_(index_tensors, ember.from_numpy(values), accumulate=True)
    assert out is x and x._version == 1
    np.testing.assert_array_equal(x.numpy(), expected)
    # out of place: the input is untouched
    y = ember.from_numpy(a.copy())
    z = ember.index_put(y, index_tensors, ember.from_numpy(values), accumulate=True)
    np.testing.assert_array_equal(z.numpy(), expected)
    np.testing.assert_array_equal(y.numpy(), a)


def test_index_put_accumulate_repeated_indices():
    # values derived from PyTorch
    a = ember.zeros(3, 4)
    a.index_put_((ember.tensor([0, 0, 2, 0]),), ember.tensor([1.0, 2.0, 3.0, 4.0]).view(4, 1).expand(4, 4), accumulate=True)
    assert a.tolist() == [[7.0] * 4, [0.0] * 4, [3.0] * 4]
    b = ember.zeros(3, 4)
    b.index_put_((ember.tensor([0, 0, 2]), ember.tensor([1, 1, 3])), ember.tensor(1.0), accumulate=True)
    assert b.tolist() == [[0.0, 2.0, 0.0, 0.0], [0.0] * 4, [0.0, 0.0, 0.0, 1.0]]
    c = ember.zeros(4, dtype=ember.int64)[::2]  # not contiguous
    c.index_put_((ember.tensor([1, 1, 1]),), ember.tensor([1, 2, 3]), accumulate=True)
    assert c.tolist() == [0, 6]
    # without accumulate, the last write wins
    d = ember.zeros(3)
    d.index_put_((ember.tensor([1, 1]),), ember.tensor([5.0, 6.0]))
    assert d.tolist() == [0.0, 6.0, 0.0]


def test_index_put_errors():
    x = ember.zeros(3)
    with pytest.raises(IndexError, match="out of bounds"):
        x.index_put_((ember.tensor([5]),), ember.tensor(1.0), accumulate=True)
    with pytest.raises(IndexError):
        x.index_put_((ember.tensor([0.0]),), ember.tensor(1.0))
    with pytest.raises(RuntimeError):
        x.index_put_((ember.tensor([0, 1]),), ember.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(RuntimeError, match="dtypes match"):
        x.index_put_((ember.tensor([0]),), ember.tensor([1.0], dtype=ember.float64))
    assert x.tolist() == [0.0, 0.0, 0.0]


# -- zero-dim bool masks ------------------------------------------------------------------------------
# PyTorch reads a zero-dim bool (or uint8) tensor as ``x[True]``/``x[False]``: a new dim of size 1 or 0,
# as numpy does for a zero-dim bool array. numpy is the oracle here; the parity test checks against torch.


@pytest.mark.parametrize("bit", [True, False])
@pytest.mark.parametrize("mask_dtype", ["bool", "uint8"])
def test_zero_dim_mask_on_zero_dim_tensor(bit, mask_dtype):
    mask = ember.tensor(bit, dtype=getattr(ember, mask_dtype))
    t = ember.tensor(1.0)
    got = t[mask]
    expected = np.float32(1.0)[np.array(bit)]
    assert tuple(got.shape) == expected.shape == ((1,) if bit else (0,))
    np.testing.assert_array_equal(got.numpy(), expected)
    t[mask] = 5.0
    assert t.item() == (5.0 if bit else 1.0)


def test_zero_dim_mask_read_is_a_copy():
    t = ember.tensor(1.0)
    got = t[ember.tensor(True)]
    got[0] = 9.0
    assert t.item() == 1.0


@pytest.mark.parametrize("bit", [True, False])
@pytest.mark.parametrize(
    "key",
    [
        lambda m: m,
        lambda m: (m, Ellipsis),
        lambda m: (Ellipsis, m),
        lambda m: (slice(None), m),
        lambda m: (m, [0, 1]),
        lambda m: (slice(None), m, [2, 0, 1]),
        lambda m: (m, slice(1, None), np.array([True, False, True, True])),
    ],
)
def test_zero_dim_mask_on_nd_tensor_matches_numpy(bit, key):
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    np_key = key(np.array(bit))
    ember_key = key(ember.tensor(bit))
    try:
        data[np_key]
    except IndexError:
        # a false mask selects 0 positions, which don't broadcast with a list of 2 or 3 (numpy, PyTorch)
        with pytest.raises(IndexError, match="could not be broadcast together with shapes"):
            ember.tensor(data)[ember_key]
        with pytest.raises(IndexError, match="could not be broadcast together with shapes"):
            ember.tensor(data)[ember_key] = -1.0
        return
    got = ember.tensor(data)[ember_key]
    np.testing.assert_array_equal(got.numpy(), data[np_key])
    assert tuple(got.shape) == data[np_key].shape
    target, expected = ember.tensor(data), data.copy()
    target[ember_key] = -1.0
    expected[np_key] = -1.0
    np.testing.assert_array_equal(target.numpy(), expected)


def test_zero_dim_mask_setitem_broadcasts_value_tensor():
    t = ember.zeros(2, 3)
    t[ember.tensor(True)] = ember.tensor([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(t.numpy(), np.array([[1, 2, 3], [1, 2, 3]], dtype=np.float32))


def test_zero_dim_mask_keeps_gradient():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    (x[ember.tensor(True)] * ember.tensor([[3.0, 4.0]])).sum().backward()
    assert x.grad.tolist() == [3.0, 4.0]


def test_zero_dim_meta_mask_raises():
    with pytest.raises(NotImplementedError, match="data-dependent"):
        ember.tensor(1.0)[ember.empty((), dtype=ember.bool, device="meta")]


_MASK_CASES = [
    # (tensor shape, key builder taking (module, mask maker)); masks come from a fixed generator
    ((), lambda m: m(())),
    ((3, 4), lambda m: m(())),
    ((3, 4), lambda m: m((3, 4))),  # a mask of the tensor's shape
    ((3, 4), lambda m: m((3,))),
    ((3, 4), lambda m: (slice(None), m((4,)))),
    ((2, 3, 4), lambda m: m((2, 3))),
    ((2, 3, 4), lambda m: (Ellipsis, m((4,)))),
    ((2, 3, 4), lambda m: (slice(None), m((3, 4)))),
    ((2, 3, 4), lambda m: (m((2,)), slice(None), m((4,)))),  # two masks, counts forced equal below
    ((2, 3, 4), lambda m: (m(()), m((2, 3)))),
    ((2, 3, 4), lambda m: (None, m((2,)), 1)),
    ((2, 3, 4), lambda m: (m(()), slice(None), [0, 2], None)),
]


@pytest.mark.parity
@pytest.mark.parametrize("case", range(len(_MASK_CASES)))
def test_mask_indexing_parity_with_torch(case):
    torch = pytest.importorskip("torch", reason="torch is the oracle of this parity test")
    shape, build = _MASK_CASES[case]
    rng = np.random.default_rng(case)
    masks = []

    def make(mask_shape):
        bits = rng.random(mask_shape) < 0.6
        if mask_shape == (2,) or mask_shape == (4,):
            bits = np.zeros(mask_shape, dtype=bool)
            bits[[0, -1]] = True  # two masks in one key must select as many positions each
        masks.append(np.asarray(bits))
        return masks[-1]

    np_key = build(make)
    data = rng.standard_normal(shape).astype(np.float32)

    def convert(key, lib):
        if isinstance(key, tuple):
            return tuple(convert(k, lib) for k in key)
        return lib.tensor(key) if isinstance(key, np.ndarray) else key

    e_key, t_key = convert(np_key, ember), convert(np_key, torch)
    expected = torch.tensor(data)[t_key]
    got = ember.tensor(data)[e_key]
    assert tuple(got.shape) == tuple(expected.shape)
    np.testing.assert_array_equal(got.numpy(), expected.numpy())
    # writes: a scalar, and a tensor of the indexed shape's trailing dims (broadcast)
    value = rng.standard_normal(tuple(expected.shape)[1:]).astype(np.float32)
    for v_e, v_t in ((2.5, 2.5), (ember.tensor(value), torch.tensor(value))):
        t_dst, e_dst = torch.tensor(data), ember.tensor(data)
        t_dst[t_key] = v_t
        e_dst[e_key] = v_e
        np.testing.assert_array_equal(e_dst.numpy(), t_dst.numpy())
