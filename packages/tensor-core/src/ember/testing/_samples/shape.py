"""OpInfos of the shape ops (ember._ops.joining, masks, ...): joining, splitting, repeating, gathering, scattering.

Samples cover, for every dtype: empty, zero-dim, non-contiguous and
transposed inputs, promotion across inputs (cat/stack family), repeated
indices (accumulating ops), both ``include_self`` settings, index tensors of
int32 where PyTorch allows them, and the keyword arguments that matter.
Plain scatter/index_copy/put samples use distinct positions, since which
write wins is unspecified there. References are numpy, written element by
element (Python loops over small samples) where numpy has no direct
counterpart, so they don't share code paths with the kernels.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from ... import _dtype as D
from .._opinfo import ALL_TYPES_AND_COMPLEX, ErrorInput, OpInfo, SampleInput, register_opinfo
from ._common import maker, scalar_for

_ALL = ALL_TYPES_AND_COMPLEX
_NO_BOOL = tuple(d for d in _ALL if d is not D.bool)


def _ember():
    import ember

    return ember


def _idx(values, device, dtype=None):
    """An index tensor (int64 unless ``dtype``) from nested lists or a numpy array."""
    ember = _ember()
    return ember.tensor(np.asarray(values), dtype=ember.int64 if dtype is None else dtype, device=device)


def _torch_dtype_of(arrays):
    """PyTorch's promoted dtype of numpy arrays (all counted as dimensioned), as a numpy dtype."""
    dtypes = [D.from_numpy_dtype(a.dtype) for a in arrays]
    return functools.reduce(D.promote_types, dtypes).numpy_dtype


def _wide(a):
    """``a`` in a wide dtype of its category for exact-ish reference arithmetic (bool stays bool)."""
    a = np.asarray(a)
    kind = a.dtype.kind
    if kind == "b":
        return a.copy()
    if kind in "iu":
        return a.astype(np.int64)
    if kind == "c":
        return a.astype(np.complex128)
    return a.astype(np.float64)


def _errors(*cases):
    """ErrorInputs from ``(make_input(ember, device), args, kwargs, error, regex)`` tuples."""

    def gen(opinfo, device):
        ember = _ember()
        for build, args, kwargs, error, regex in cases:
            inp, built_args = build(ember, device)
            yield ErrorInput(SampleInput(inp, built_args + args, kwargs), error, regex)

    return gen


def _t(*shape, dtype=None):
    """A builder of ``zeros(shape)`` for error inputs."""
    return lambda ember, device: (ember.zeros(shape, dtype=dtype or ember.float32, device=device), ())


def _with(builder, *extra):
    """A builder that also returns extra leading args (tensors built from ``ember``)."""

    def build(ember, device):
        inp, _ = builder(ember, device)
        return inp, tuple(e(ember, device) if callable(e) else e for e in extra)

    return build


# -- cat / stack ---------------------------------------------------------------------------------


def _other_dtype(dtype):
    """A second dtype for promotion samples: bool (promotes to ``dtype``) unless ``dtype`` is bool."""
    return D.int32 if dtype is D.bool else D.bool


def _cat_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    other = maker(device, _other_dtype(dtype), False, seed=1)
    yield SampleInput([make((2, 3)), make((4, 3))], (0,), name="dim 0")
    yield SampleInput([make((2, 3)), make((2, 2), noncontiguous=True), make((2, 0))], (1,), name="dim 1, empty part")
    yield SampleInput([make((0,)), make((2, 3))], (-1,), name="1-d empty skipped")
    yield SampleInput([make((3,)), other((2,))], (0,), name="promotion")
    yield SampleInput([make((3, 4)).t(), make((2, 3))], (0,), name="transposed")
    yield SampleInput([make((0, 2)), make((0, 2))], (0,), name="all empty")


def _cat_ref(tensors, dim=0):
    dtype = _torch_dtype_of(tensors)
    kept = [t.astype(dtype) for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]
    return np.concatenate(kept, axis=dim) if kept else np.empty((0,), dtype)


_cat_errors = _errors(
    (lambda e, d: ([e.zeros(2, 3, device=d), e.zeros(2, 4, device=d)], ()), (), {}, RuntimeError,
     "Sizes of tensors must match except in dimension 0"),
    (lambda e, d: ([e.zeros(2, 3, device=d), e.zeros(2, device=d)], ()), (), {}, RuntimeError,
     "Tensors must have same number of dimensions"),
    (lambda e, d: ([e.zeros((), device=d)], ()), (), {}, RuntimeError, "zero-dimensional tensor"),
    (lambda e, d: ([], ()), (), {}, ValueError, "expected a non-empty list of Tensors"),
    (lambda e, d: ([e.zeros(2, 3, device=d)], ()), (2,), {}, IndexError, "Dimension out of range"),
    (lambda e, d: (e.zeros(2, 3, device=d), ()), (), {}, TypeError, "must be tuple of Tensors"),
)


def _stack_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    other = maker(device, _other_dtype(dtype), False, seed=1)
    yield SampleInput([make((2, 3)), make((2, 3), noncontiguous=True)], (0,), name="dim 0")
    yield SampleInput([make((2, 3)), make((2, 3)), make((2, 3))], (-1,), name="last dim")
    yield SampleInput([make((2, 3)), make((2, 3))], (1,), name="middle")
    yield SampleInput([make(()), make(())], (), name="zero-dim")
    yield SampleInput([make((0, 2)), make((0, 2))], (1,), name="empty")
    yield SampleInput([make((3,)), other((3,))], (), name="promotion")


def _stack_ref(tensors, dim=0):
    dtype = _torch_dtype_of(tensors)
    return np.stack([t.astype(dtype) for t in tensors], axis=dim)


_stack_errors = _errors(
    (lambda e, d: ([e.zeros(2, device=d), e.zeros(3, device=d)], ()), (), {}, RuntimeError,
     "stack expects each tensor to be equal size"),
    (lambda e, d: ([], ()), (), {}, RuntimeError, "stack expects a non-empty TensorList"),
    (lambda e, d: ([e.zeros(2, device=d)], ()), (2,), {}, IndexError, "Dimension out of range"),
)


def _stacker_samples(shapes_list):
    def gen(opinfo, device, dtype, requires_grad):
        make = maker(device, dtype, requires_grad)
        other = maker(device, _other_dtype(dtype), False, seed=1)
        for name, shapes in shapes_list:
            yield SampleInput([make(s, noncontiguous=(i == 1)) for i, s in enumerate(shapes)], name=name)
        first = shapes_list[0][1]
        yield SampleInput([make(first[0]), other(first[1])], name="promotion")

    return gen


def _stacker_ref(np_fn):
    def ref(tensors):
        dtype = _torch_dtype_of(tensors)
        return np_fn([t.astype(dtype) for t in tensors])

    return ref


def _column_stack_np(arrays):
    return np.concatenate([a.reshape(-1, 1) if a.ndim <= 1 else a for a in arrays], axis=1)


def _empty_list_error(name):
    return _errors((lambda e, d: ([], ()), (), {}, RuntimeError, f"{name} expects a non-empty TensorList"))


# -- split / flatten / broadcast views ---------------------------------------------------------------


def _tensor_split_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((7,)), (3,), name="sections")
    yield SampleInput(make((7, 2)), ([1, 5],), name="indices")
    yield SampleInput(make((2, 7), noncontiguous=True), (3,), {"dim": 1}, name="dim 1")
    yield SampleInput(make((7,)), ([5, 1, 10],), name="unordered, past the end")
    yield SampleInput(make((7,)), ([-2],), name="negative index")
    yield SampleInput(make((4,)), (6,), name="more sections than elements")
    yield SampleInput(make((7,)), (_idx([1, 5], device),), name="index tensor", data_dependent=True)
    yield SampleInput(make((7,)), (_idx(3, device),), name="sections tensor", data_dependent=True)


def _tensor_split_ref(a, spec, dim=0):
    if isinstance(spec, np.ndarray) and spec.ndim == 0:
        spec = int(spec)
    return tuple(np.array_split(a, spec, axis=dim))


_tensor_split_errors = _errors(
    (_t(7), (0,), {}, RuntimeError, "number of sections must be larger than 0"),
    (_t(), (2,), {}, RuntimeError, "expected at least a 1-dimensional tensor"),
    (_with(_t(7), lambda e, d: e.tensor([2.0], device=d)), (), {}, RuntimeError, "to have dtype of long"),
)


def _unflatten_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((4, 6)), (1, (2, 3)), name="last dim")
    yield SampleInput(make((4, 6)), (0, (2, -1)), name="inferred size")
    yield SampleInput(make((6, 4), noncontiguous=True), (0, (3, 1, 2)), name="noncontiguous")
    yield SampleInput(make((4, 6)).t(), (-1, (2, 2)), name="transposed")
    yield SampleInput(make((0, 6)), (1, (3, 2)), name="empty")


def _unflatten_ref(a, dim, sizes):
    dim = dim % a.ndim
    return a.reshape(a.shape[:dim] + tuple(sizes) + a.shape[dim + 1:])


_unflatten_errors = _errors(
    (_t(4, 6), (1, (4, -1)), {}, RuntimeError, "don't multiply up to the size of dim 1"),
    (_t(4, 6), (1, ()), {}, RuntimeError, "sizes must be non-empty"),
    (_t(4, 6), (2, (2, 2)), {}, IndexError, "Dimension out of range"),
)


def _unary_shape_samples(*shapes):
    def gen(opinfo, device, dtype, requires_grad):
        make = maker(device, dtype, requires_grad)
        for shape in shapes:
            yield SampleInput(make(shape), name=f"{shape}")
        yield SampleInput(make((3, 4), noncontiguous=True), name="noncontiguous")
        yield SampleInput(make((4, 3)).t(), name="transposed")

    return gen


def _view_as_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 6)), (make((3, 4)),), name="2-d")
    yield SampleInput(make(()), (make((1, 1)),), name="zero-dim")
    yield SampleInput(make((0, 4)), (make((2, 0)),), name="empty")


def _expand_as_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3, 1)), (make((2, 3, 4)),), name="broadcast")
    yield SampleInput(make(()), (make((2, 2)),), name="zero-dim")
    yield SampleInput(make((3, 2), noncontiguous=True), (make((3, 2)),), name="same shape")


def _broadcast_to_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3, 1)), ((2, 3, 4),), name="broadcast")
    yield SampleInput(make(()), ((2, 2),), name="zero-dim")
    yield SampleInput(make((2, 1)), ((2, -1),), name="-1 keeps")
    yield SampleInput(make((3, 1), noncontiguous=True), ((3, 0),), name="to empty")


def _broadcast_to_ref(a, size):
    size = tuple(a.shape[i - (len(size) - a.ndim)] if s == -1 else s for i, s in enumerate(size))
    return np.broadcast_to(a, size)


_broadcast_errors = _errors(
    (_with(_t(2, 1), (3, 2)), (), {}, RuntimeError, "must match the existing size"),
)


def _broadcast_tensors_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 1)), (make((3,)),), name="two")
    yield SampleInput(make((2, 1, 1)), (make((3, 1), noncontiguous=True), make(())), name="three with zero-dim")
    yield SampleInput(make((2, 3)), (), name="one")
    yield SampleInput(make((0, 1)), (make((3,)),), name="empty")


_broadcast_tensors_errors = _errors(
    (_with(_t(2, 1), lambda e, d: e.zeros(3, 3, device=d)), (), {}, RuntimeError, "must match the size"),
)


def _movedim_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 3, 4)), (0, 2), name="one dim")
    yield SampleInput(make((2, 3, 4)), ((0, 1), (2, 0)), name="two dims")
    yield SampleInput(make((2, 3, 4), noncontiguous=True), (-1, 0), name="negative")
    yield SampleInput(make(()), (0, 0), name="zero-dim")


def _movedim_ref(a, source, destination):
    return np.moveaxis(a, source, destination) if a.ndim else a


_movedim_errors = _errors(
    (_t(2, 3, 4), ((0, 0), (2, 1)), {}, RuntimeError, "repeated dim in `source`"),
    (_t(2, 3, 4), ((0, 1), (2,)), {}, RuntimeError, "should contain the same number of dims"),
    (_t(2, 3, 4), (3, 0), {}, IndexError, "Dimension out of range"),
)


def _swap_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 3, 4)), (0, 2), name="3-d")
    yield SampleInput(make((2, 3), noncontiguous=True), (-1, -2), name="negative")


# -- repeat / tile / repeat_interleave ----------------------------------------------------------------


def _repeat_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 3)), (2, 1, 2), name="new dim")
    yield SampleInput(make((2, 3), noncontiguous=True), ((2, 2),), name="tuple")
    yield SampleInput(make(()), (3,), name="zero-dim")
    yield SampleInput(make((2, 3)), (0, 2), name="zero repeats")
    yield SampleInput(make((3, 2)).t(), (1, 1), name="transposed, ones")


def _repeat_ref(a, *sizes):
    sizes = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], tuple) else sizes
    padded = (1,) * (len(sizes) - a.ndim) + a.shape
    return np.tile(a.reshape(padded), sizes)


_repeat_errors = _errors(
    (_t(2, 3), (2,), {}, RuntimeError, "Number of dimensions of repeat dims"),
    (_t(2, 3), (-1, 2), {}, RuntimeError, "negative dimension"),
)


def _tile_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 3)), ((2,),), name="fewer dims")
    yield SampleInput(make((2, 3), noncontiguous=True), ((2, 1, 2),), name="more dims")
    yield SampleInput(make((2, 3)), ((),), name="empty dims")
    yield SampleInput(make(()), ((2, 2),), name="zero-dim")


_tile_errors = _errors(
    (_t(2, 3), ((-1,),), {}, RuntimeError, "negative dimension"),
    (_t(2, 3), (2,), {}, TypeError, "must be tuple of ints"),
)


def _repeat_interleave_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 3)), (2,), name="flat")
    yield SampleInput(make((2, 3), noncontiguous=True), (2,), {"dim": 1}, name="dim 1")
    yield SampleInput(make((2, 3)), (_idx([1, 2], device),), {"dim": 0}, name="tensor repeats", data_dependent=True)
    yield SampleInput(make((2, 3)), (_idx([0, 3, 1], device, _ember().int32),), {"dim": -1, "output_size": 4},
                      name="tensor repeats, output_size")
    yield SampleInput(make((3,)), (_idx(2, device),), name="zero-dim repeats", data_dependent=True)
    yield SampleInput(make(()), (3,), name="zero-dim input")
    if dtype in (D.int32, D.int64):
        counts = _ember().tensor([1, 0, 3, 2], dtype=dtype, device=device)
        yield SampleInput(counts, (), name="repeats only", data_dependent=True)


def _repeat_interleave_ref(a, repeats=None, dim=None, output_size=None):
    if repeats is None:
        return np.repeat(np.arange(a.size), a).astype(a.dtype)
    if isinstance(repeats, np.ndarray):
        repeats = repeats.reshape(-1)
        repeats = int(repeats[0]) if repeats.size == 1 else repeats
    if dim is None:
        return np.repeat(a.reshape(-1), repeats)
    return np.repeat(a, repeats, axis=dim)


_repeat_interleave_errors = _errors(
    (_t(2, 2), (-1,), {"dim": 0}, RuntimeError, "Repeats must be non-negative"),
    (_with(_t(2, 2), lambda e, d: e.tensor([1, 2, 3], device=d)), (), {"dim": 0}, RuntimeError,
     "repeats must have the same size as input along dim"),
    (_with(_t(2, 2), lambda e, d: e.tensor([1, -2], device=d)), (), {"dim": 0}, RuntimeError,
     "repeats can not be negative"),
    (_with(_t(2, 2), lambda e, d: e.tensor([1, 2], device=d)), (), {"dim": 0, "output_size": 4}, RuntimeError,
     "allocated size does not match"),
    (_t(2, 2), (2,), {"dim": 2}, IndexError, "Dimension out of range"),
)


# -- flip / roll / rot90 ------------------------------------------------------------------------------


def _flip_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 3, 4)), ((0, 2),), name="two dims")
    yield SampleInput(make((2, 3), noncontiguous=True), ([-1],), name="negative, list")
    yield SampleInput(make((2, 3)), ((),), name="no dims")
    yield SampleInput(make(()), ((0,),), name="zero-dim")
    yield SampleInput(make((0, 3)), ((0, 1),), name="empty")


def _flip_ref(a, dims):
    return np.flip(a, axis=tuple(dims)) if a.ndim else a


_flip_errors = _errors(
    (_t(2, 3), ((0, 0),), {}, RuntimeError, "dim 0 appears multiple times"),
    (_t(2, 3), ((2,),), {}, IndexError, "Dimension out of range"),
    (_t(2, 3), (0,), {}, TypeError, "must be tuple of ints"),
)


def _roll_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3, 4)), (1,), name="flattened")
    yield SampleInput(make((3, 4), noncontiguous=True), (1, 0), name="dim 0")
    yield SampleInput(make((3, 4)), ((1, -2), (0, 1)), name="two dims")
    yield SampleInput(make((3, 4)), (7,), {"dims": -1}, name="more than the size")
    yield SampleInput(make(()), (1,), name="zero-dim")
    yield SampleInput(make((0, 3)), (1, 0), name="empty")


def _roll_ref(a, shifts, dims=None):
    return np.roll(a, shifts, axis=dims)


_roll_errors = _errors(
    (_t(2, 3), ((1, 2), (0,)), {}, RuntimeError, "shifts and dimensions must align"),
    (_t(2, 3), (1, -3), {}, IndexError, "Dimension out of range"),
    (_t(), (1, 0), {}, IndexError, "Dimension specified as 0 but tensor has no dimensions"),
)


def _rot90_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3, 4)), (), name="default")
    yield SampleInput(make((3, 4), noncontiguous=True), (2,), name="half turn")
    yield SampleInput(make((3, 4)), (-1, (1, 0)), name="negative k, swapped dims")
    yield SampleInput(make((2, 3, 4)), (3, (0, 2)), name="3-d")
    yield SampleInput(make((3, 4)), (4,), name="full turn")


def _rot90_ref(a, k=1, dims=(0, 1)):
    return np.rot90(a, k, axes=tuple(dims))


_rot90_errors = _errors(
    (_t(2, 3), (1, (0, 0)), {}, RuntimeError, "expected rotation dims to be different"),
    (_t(2, 3), (1, (0,)), {}, RuntimeError, "expected total rotation dims == 2"),
    (_t(2), (1, (0, 1)), {}, RuntimeError, "expected total dims >= 2"),
)


# -- index_select / masks -------------------------------------------------------------------------------


def _index_select_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    ember = _ember()
    yield SampleInput(make((4, 3)), (0, _idx([2, 0, 2], device)), name="rows, repeated")
    yield SampleInput(make((4, 3), noncontiguous=True), (1, _idx([1], device, ember.int32)), name="int32 index")
    yield SampleInput(make((4, 3)), (-1, _idx(2, device)), name="zero-dim index")
    yield SampleInput(make((4, 3)), (0, _idx(np.zeros(0, np.int64), device)), name="empty index")
    yield SampleInput(make(()), (0, _idx([0], device)), name="zero-dim input")


def _index_select_ref(a, dim, index):
    if a.ndim == 0:
        return a
    return np.take(a, index.reshape(-1), axis=dim)


_index_select_errors = _errors(
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0.0, 2.0], device=d)), (), {}, RuntimeError,
     "Expected dtype int32 or int64 for index"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 3], device=d)), (), {}, IndexError, "index out of range in self"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([[0, 2]], device=d)), (), {}, IndexError,
     "Index is supposed to be a vector"),
)


def _mask(device, shape, seed=5):
    rng = np.random.default_rng(seed)
    return _ember().tensor(rng.integers(0, 2, size=shape).astype(bool), device=device)


def _masked_select_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3, 4)), (_mask(device, (3, 4)),), name="same shape", data_dependent=True)
    yield SampleInput(make((3, 4), noncontiguous=True), (_mask(device, (4,)),), name="broadcast mask",
                      data_dependent=True)
    yield SampleInput(make((4,)), (_mask(device, (2, 4)),), name="broadcast input", data_dependent=True)
    yield SampleInput(make((0, 3)), (_mask(device, (0, 3)),), name="empty")


def _masked_select_ref(a, mask):
    shape = np.broadcast_shapes(a.shape, mask.shape)
    return np.broadcast_to(a, shape)[np.broadcast_to(mask, shape)]


_masked_select_errors = _errors(
    (_with(_t(3, 4), lambda e, d: e.ones(3, 4, device=d)), (), {}, RuntimeError, "expected BoolTensor for mask"),
)


def _masked_fill_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    ember = _ember()
    yield SampleInput(make((3, 4)), (_mask(device, (3, 4)), scalar_for(dtype)), name="number")
    yield SampleInput(make((3, 4), noncontiguous=True), (_mask(device, (4,)), make(())), name="zero-dim tensor value")
    yield SampleInput(make((4,)), (_mask(device, (2, 4)), scalar_for(dtype)), name="mask broadcasts the input")
    yield SampleInput(make((3, 4)), (_mask(device, (3, 4)), ember.tensor(1, device=device)), name="int64 value tensor")
    yield SampleInput(make(()), (_mask(device, ()), scalar_for(dtype)), name="zero-dim")


def _masked_fill_ref(a, mask, value):
    shape = np.broadcast_shapes(a.shape, mask.shape)
    value = np.asarray(value)
    if value.dtype.kind == "c" and a.dtype.kind != "c":
        value = value.real
    filled = np.full(shape, value.astype(np.float64 if a.dtype.kind == "f" else a.dtype) if a.dtype.kind != "b"
                     else value != 0)
    return np.where(mask, filled.astype(a.dtype), np.broadcast_to(a, shape))


_masked_fill_errors = _errors(
    (_with(_t(3, 4), lambda e, d: e.ones(3, 4, device=d)), (1.0,), {}, RuntimeError, "only supports boolean masks"),
    (_with(_t(3, 4), lambda e, d: e.ones(3, 4, dtype=e.bool, device=d), lambda e, d: e.ones(1, device=d)), (), {},
     RuntimeError, "only supports a 0-dimensional value tensor"),
    (_with(_t(3, 4), lambda e, d: e.ones(4, dtype=e.bool, device=d)), (1 + 2j,), {}, RuntimeError,
     "value cannot be converted"),
)


def _masked_scatter_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3, 4)), (_mask(device, (3, 4)), make((12,))), name="same shape")
    yield SampleInput(make((3, 4), noncontiguous=True), (_mask(device, (4,)), make((4, 5))), name="2-d source")
    yield SampleInput(make((4,)), (_mask(device, (2, 4)), make((8,))), name="mask broadcasts the input")
    yield SampleInput(make((0, 3)), (_mask(device, (0, 3)), make((2,))), name="empty")


def _masked_scatter_ref(a, mask, source):
    shape = np.broadcast_shapes(a.shape, mask.shape)
    out = np.array(np.broadcast_to(a, shape))
    where = np.broadcast_to(mask, shape)
    out[where] = source.reshape(-1)[: int(where.sum())]
    return out


_masked_scatter_errors = _errors(
    (_with(_t(3, 4), lambda e, d: e.ones(3, 4, dtype=e.bool, device=d), lambda e, d: e.zeros(3, device=d)), (), {},
     RuntimeError, "Number of elements of source < number of ones in mask"),
    (_with(_t(3, 4), lambda e, d: e.ones(3, 4, dtype=e.bool, device=d), lambda e, d: e.zeros(12, dtype=e.int64, device=d)),
     (), {}, RuntimeError, "expected self and source to have same dtypes"),
    (_with(_t(3, 4), lambda e, d: e.ones(3, 4, dtype=e.uint8, device=d), lambda e, d: e.zeros(12, device=d)), (), {},
     RuntimeError, "only supports boolean masks"),
)


# -- gather / scatter ------------------------------------------------------------------------------------


def _random_index(shape, size, seed):
    return np.random.default_rng(seed).integers(0, size, size=shape)


def _distinct_index(shape, size, dim, seed):
    """Indices in [0, size) of ``shape``, distinct along ``dim`` (so plain scatters have one write per place)."""
    rng = np.random.default_rng(seed)
    full = list(shape)
    full[dim] = size
    order = np.argsort(rng.random(full), axis=dim)
    return np.take(order, np.arange(shape[dim]), axis=dim)


def _gather_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    ember = _ember()
    yield SampleInput(make((4, 5)), (1, _idx(_random_index((4, 3), 5, 0), device)), name="dim 1")
    yield SampleInput(make((4, 5), noncontiguous=True), (0, _idx(_random_index((2, 5), 4, 1), device)), name="dim 0")
    yield SampleInput(make((4, 5)), (-1, _idx(_random_index((2, 2), 5, 2), device, ember.int32)),
                      name="smaller index, int32")
    yield SampleInput(make((2, 3, 4)).transpose(0, 2), (1, _idx(_random_index((4, 6, 2), 3, 3), device)),
                      name="transposed, index larger along dim")
    yield SampleInput(make(()), (0, _idx(0, device)), name="zero-dim")
    yield SampleInput(make((4, 5)), (1, _idx(np.zeros((0, 5), np.int64), device)), name="empty index")


def _coords(index, dim):
    """Index arrays addressing ``index``'s positions with ``dim`` replaced by its values."""
    grids = list(np.indices(index.shape))
    grids[dim] = index
    return tuple(grids)


def _gather_ref(a, dim, index, sparse_grad=False):
    if a.ndim == 0:
        return a.reshape(1)[index.reshape(1)].reshape(index.shape)
    return a[_coords(index, dim % a.ndim)]


_gather_errors = _errors(
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([[0, 4]], device=d)), (), {}, RuntimeError,
     "index 4 is out of bounds for dimension 1 with size 4"),
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([[-1]], device=d)), (), {}, RuntimeError,
     "index -1 is out of bounds for dimension 1 with size 4"),
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([0], device=d)), (), {}, RuntimeError,
     "Index tensor must have the same number of dimensions as input tensor"),
    (_with(_t(3, 4), 1, lambda e, d: e.zeros(4, 1, dtype=e.int64, device=d)), (), {}, RuntimeError,
     "Size does not match at dimension 0"),
    (_with(_t(3, 4), 1, lambda e, d: e.zeros(1, 1, dtype=e.int16, device=d)), (), {}, RuntimeError,
     "Expected dtype int32/int64 for index"),
)


def _scatter_loop(a, dim, index, values, combine, include_self=True, mean=False):
    """Reference scatter: ``combine(old, new)`` per index position, in row-major order of ``index``."""
    out = _wide(a).reshape(a.shape if a.ndim else (1,))
    index = index.reshape(index.shape if index.ndim else (1,))
    values = values if np.ndim(values) == 0 else np.asarray(values).reshape(np.shape(values) or (1,))
    dim = dim % out.ndim
    result = out.copy()
    touched = {}
    for pos in np.ndindex(*index.shape):
        target = list(pos)
        target[dim] = int(index[pos])
        target = tuple(target)
        new = values if np.ndim(values) == 0 else values[pos]
        touched.setdefault(target, []).append(new)
    for target, news in touched.items():
        acc = out[target] if include_self else None
        for new in news:
            acc = new if acc is None else combine(acc, new)
        if mean:
            count = len(news) + (1 if include_self else 0)
            acc = acc // count if out.dtype.kind in "iu" else acc / count
        result[target] = acc
    return result.reshape(a.shape).astype(a.dtype) if a.dtype.kind != "b" else result.reshape(a.shape)


def _combine(reduce, dtype):
    if dtype == np.bool_:
        return {"sum": np.logical_or, "add": np.logical_or, "prod": np.logical_and, "multiply": np.logical_and,
                "mean": None, "amax": np.logical_or, "amin": np.logical_and, None: lambda old, new: new}[reduce]
    if reduce in ("amax", "amin"):
        return np.maximum if reduce == "amax" else np.minimum
    return {"sum": np.add, "add": np.add, "prod": np.multiply, "multiply": np.multiply, "mean": np.add,
            None: lambda old, new: new}[reduce]


def _scatter_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    small = maker(device, dtype, requires_grad, seed=7, low=-2, high=2)
    ember = _ember()
    value = scalar_for(dtype)
    yield SampleInput(make((4, 5)), (1, _idx(_distinct_index((4, 3), 5, 1, 0), device), make((4, 4))), name="src")
    yield SampleInput(make((4, 5), noncontiguous=True), (0, _idx(_distinct_index((3, 5), 4, 0, 1), device, ember.int32),
                                                          make((3, 5))), name="dim 0, int32 index")
    yield SampleInput(make((4, 5)), (1, _idx(_distinct_index((2, 4), 5, 1, 2), device), value), name="value")
    yield SampleInput(make((4, 5)), (1, _idx(_random_index((4, 6), 5, 3), device), make((4, 6))),
                      {"reduce": "add"}, name="add, repeated")
    yield SampleInput(small((4, 5)), (0, _idx(_random_index((6, 5), 4, 4), device), small((6, 5))),
                      {"reduce": "multiply"}, name="multiply, repeated")
    yield SampleInput(make((4, 5)), (1, _idx(_random_index((3, 6), 5, 5), device)), {"value": value, "reduce": "add"},
                      name="value add, repeated")
    yield SampleInput(make(()), (0, _idx(0, device), make(())), name="zero-dim")
    yield SampleInput(make((4, 5)), (1, _idx(np.zeros((0,), np.int64), device), make((2,))), name="empty index")


def _scatter_ref(a, dim, index, src=None, value=None, reduce=None):
    if src is not None and np.ndim(src) == 0 and not isinstance(src, np.ndarray):
        src, value = None, src
    values = src if src is not None else value
    if src is None and a.dtype.kind != "b":
        values = _wide(np.asarray(value)).astype(_wide(a).dtype)
    elif src is not None:
        values = _wide(src)
    return _scatter_loop(a, dim, index, values, _combine(reduce, a.dtype))


_scatter_errors = _errors(
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([[4]], device=d)), (2.0,), {}, RuntimeError,
     "index 4 is out of bounds for dimension 1 with size 4"),
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([[0, 1]], device=d)), (), {}, TypeError, "missing 1 required argument"),
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([[0, 1]], device=d), lambda e, d: e.ones(1, 2, dtype=e.float64, device=d)),
     (), {}, RuntimeError, "Expected self.dtype to be equal to src.dtype"),
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([[0, 1]], device=d), lambda e, d: e.ones(1, 1, device=d)), (), {},
     RuntimeError, "to be no larger size than src"),
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([[0, 1]], device=d), 1.0), (), {"reduce": "mean"}, RuntimeError,
     "reduce argument must be either add or multiply"),
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([0], device=d), 1.0), (), {}, RuntimeError,
     "Index tensor must have the same number of dimensions as self tensor"),
)


def _scatter_add_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    ember = _ember()
    yield SampleInput(make((4, 5)), (1, _idx(_random_index((4, 6), 5, 0), device), make((4, 6))), name="repeated")
    yield SampleInput(make((4, 5), noncontiguous=True), (0, _idx(_random_index((6, 5), 4, 1), device, ember.int32),
                                                          make((7, 5))), name="dim 0, larger src, int32")
    yield SampleInput(make((3,)), (0, _idx([0, 0, 2, 0], device), make((4,))), name="1-d")
    yield SampleInput(make(()), (0, _idx([0, 0], device), make((2,))), name="zero-dim self")
    yield SampleInput(make((4, 5)), (1, _idx(np.zeros((0, 2), np.int64), device), make((2, 2))), name="empty index")


def _scatter_add_ref(a, dim, index, src):
    return _scatter_loop(a, dim, index, _wide(src), _combine("sum", a.dtype))


_scatter_add_errors = _errors(
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([[0, 1]], device=d), lambda e, d: e.ones(1, 1, device=d)), (), {},
     RuntimeError, "to be no larger size than src"),
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([[5, 1]], device=d), lambda e, d: e.ones(1, 2, device=d)), (), {},
     RuntimeError, "index 5 is out of bounds for dimension 1 with size 4"),
)


def _reductions_for(dtype, choices):
    out = []
    for r in choices:
        if r == "mean" and dtype is D.bool:
            continue
        if r in ("amax", "amin") and dtype.is_complex:
            continue
        out.append(r)
    return out


def _scatter_reduce_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    small = maker(device, dtype, requires_grad, seed=7, low=-2, high=2)
    ember = _ember()
    index = _idx(_random_index((4, 6), 5, 0), device)
    for reduce in _reductions_for(dtype, ("sum", "prod", "mean", "amax", "amin")):
        m = small if reduce == "prod" else make
        for include_self in (True, False):
            yield SampleInput(m((4, 5)), (1, index, m((4, 6)), reduce), {"include_self": include_self},
                              name=f"{reduce}, include_self={include_self}")
        yield SampleInput(m((4, 5), noncontiguous=True),
                          (0, _idx(_random_index((6, 5), 4, 1), device, ember.int32), m((6, 5)), reduce),
                          name=f"{reduce}, dim 0, int32")
    if dtype.is_floating_point and dtype is not D.bfloat16:  # (the inputs-untouched check can't compare bfloat16 NaN)
        nan = make((4,))
        nan[1] = float("nan")
        yield SampleInput(nan, (0, _idx([1, 0, 2], device), make((3,)), "amax"), name="nan propagates")


def _scatter_reduce_ref(a, dim, index, src, reduce, include_self=True):
    return _scatter_loop(a, dim, index, _wide(src), _combine(reduce, a.dtype), include_self, mean=reduce == "mean")


def _reduce_type_error(op, reduce, dtype, error_regex):
    def build(ember, device):
        args_dtype = getattr(ember, dtype)
        x = ember.zeros(3, dtype=args_dtype, device=device)
        return x, (0, ember.tensor([0, 1], device=device), ember.ones(2, dtype=args_dtype, device=device), reduce)

    return (build, (), {}, NotImplementedError, error_regex)


_scatter_reduce_errors = _errors(
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([[0, 1]], device=d), lambda e, d: e.ones(1, 2, device=d)), ("foo",), {},
     RuntimeError, "reduce argument must be either sum, prod, mean, amax or amin"),
    _reduce_type_error("scatter_reduce", "mean", "bool", "not implemented for 'Bool'"),
    _reduce_type_error("scatter_reduce", "amax", "complex64", "not implemented for 'ComplexFloat'"),
)


# -- index_add / index_copy / index_fill / index_reduce ------------------------------------------------------


def _index_loop(a, dim, index, source, combine, include_self=True, mean=False):
    """Reference of the index_* family: slice ``j`` of ``source`` along ``dim`` combines into slice ``index[j]``."""
    out = _wide(a).reshape(a.shape if a.ndim else (1,))
    src = _wide(source).reshape(source.shape if source.ndim else (1,))
    dim = dim % out.ndim
    index = index.reshape(-1)
    result = out.copy()
    groups = {}
    for j, i in enumerate(index):
        groups.setdefault(int(i) % out.shape[dim], []).append(np.take(src, j, axis=dim))
    for i, parts in groups.items():
        acc = np.take(out, i, axis=dim) if include_self else None
        for part in parts:
            acc = part if acc is None else combine(acc, part)
        if mean:
            count = len(parts) + (1 if include_self else 0)
            acc = acc // count if out.dtype.kind in "iu" else acc / count
        key = [slice(None)] * out.ndim
        key[dim] = i
        result[tuple(key)] = acc
    return result.reshape(a.shape).astype(a.dtype)


def _alpha_for(dtype):
    return True if dtype is D.bool else 2


def _index_add_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    ember = _ember()
    yield SampleInput(make((4, 3)), (0, _idx([0, 2, 0], device), make((3, 3))), name="repeated rows")
    yield SampleInput(make((4, 3), noncontiguous=True), (1, _idx([2, 2], device, ember.int32), make((4, 2))),
                      {"alpha": _alpha_for(dtype)}, name="alpha, int32 index")
    yield SampleInput(make((2, 3, 4)), (-1, _idx([3, 0, 3, 1, 3], device), make((2, 3, 5))), name="last dim")
    yield SampleInput(make(()), (0, _idx(0, device), make(())), name="zero-dim")
    yield SampleInput(make((4, 3)), (0, _idx(np.zeros(0, np.int64), device), make((0, 3))), name="empty index")


def _index_add_ref(a, dim, index, source, alpha=1):
    if a.dtype.kind == "b":
        scaled = source & bool(alpha)
        return _index_loop(a, dim, index, scaled, np.logical_or)
    return _index_loop(a, dim, index, _wide(source) * alpha, np.add)


_index_add_errors = _errors(
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 5], device=d), lambda e, d: e.ones(2, 4, device=d)), (), {},
     RuntimeError, "index 5 is out of bounds for dimension 0 with size 3"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 1], device=d), lambda e, d: e.ones(3, 4, device=d)), (), {},
     RuntimeError, r"Number of indices \(2\) should be equal to source.size\(dim\): \(3\)"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 1], device=d), lambda e, d: e.ones(2, 3, device=d)), (), {},
     RuntimeError, "source tensor shape must match self tensor shape"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 1], device=d), lambda e, d: e.ones(2, 4, dtype=e.float64, device=d)),
     (), {}, RuntimeError, "must have the same scalar type"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([[0, 1]], device=d), lambda e, d: e.ones(2, 4, device=d)), (), {},
     IndexError, "Index is supposed to be a vector"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 1], dtype=e.int16, device=d), lambda e, d: e.ones(2, 4, device=d)),
     (), {}, RuntimeError, "Expected dtype int32/int64 for index"),
)


def _index_copy_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((4, 3)), (0, _idx([3, 0], device), make((2, 3))), name="rows")
    yield SampleInput(make((4, 3), noncontiguous=True), (1, _idx([2, 0, 1], device), make((4, 3))), name="columns")
    yield SampleInput(make((2, 3, 4)), (-1, _idx(1, device), make((2, 3, 1))), name="zero-dim index")
    yield SampleInput(make(()), (0, _idx([0], device), make((1,))), name="zero-dim self")


def _index_copy_ref(a, dim, index, source):
    return _index_loop(a, dim, index, source, lambda old, new: new, include_self=False) if index.size else a


_index_copy_errors = _errors(
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 5], device=d), lambda e, d: e.ones(2, 4, device=d)), (), {},
     IndexError, "index 5 is out of bounds for dimension 0 with size 3"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 1], device=d), lambda e, d: e.ones(3, 4, device=d)), (), {},
     IndexError, "Number of indices"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 1], dtype=e.int32, device=d), lambda e, d: e.ones(2, 4, device=d)),
     (), {}, RuntimeError, "Expected a long tensor for index"),
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([0, 1], device=d), lambda e, d: e.ones(2, 2, device=d)), (), {},
     RuntimeError, "must have same slice shapes"),
)


def _index_fill_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((4, 3)), (0, _idx([0, 2, 0], device), scalar_for(dtype)), name="rows")
    yield SampleInput(make((4, 3), noncontiguous=True), (1, _idx([-1], device), make(())), name="negative, tensor value")
    yield SampleInput(make((2, 3, 4)), (-1, _idx(2, device), scalar_for(dtype)), name="zero-dim index")
    yield SampleInput(make(()), (0, _idx(0, device), scalar_for(dtype)), name="zero-dim")


def _index_fill_ref(a, dim, index, value):
    out = np.array(a).reshape(a.shape if a.ndim else (1,))
    key = [slice(None)] * out.ndim
    key[dim % out.ndim] = index.reshape(-1)
    value = np.asarray(value)
    out[tuple(key)] = value.astype(out.dtype) if value.dtype.kind != "c" or out.dtype.kind == "c" else value.real
    return out.reshape(a.shape)


_index_fill_errors = _errors(
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 5], device=d)), (1.0,), {}, IndexError,
     "index 5 is out of bounds for dimension 0 with size 3"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 1], dtype=e.int32, device=d)), (1.0,), {}, IndexError,
     "Expected dtype int64 for index"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 1], device=d), lambda e, d: e.tensor([2.0], device=d)), (), {},
     RuntimeError, "only supports a 0-dimensional value tensor"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([[0, 1]], device=d)), (1.0,), {}, RuntimeError,
     "Index has to be a vector/scalar"),
)


def _index_reduce_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    small = maker(device, dtype, requires_grad, seed=7, low=-2, high=2)
    ember = _ember()
    for reduce in _reductions_for(dtype, ("prod", "mean", "amax", "amin")):
        m = small if reduce == "prod" else make
        # PyTorch has no include_self=False kernel for bool and complex
        for include_self in (True, False) if dtype is not D.bool and not dtype.is_complex else (True,):
            yield SampleInput(m((4, 3)), (0, _idx([0, 2, 0, 0], device), m((4, 3)), reduce),
                              {"include_self": include_self}, name=f"{reduce}, include_self={include_self}")
        yield SampleInput(m((4, 3), noncontiguous=True), (1, _idx([2, 2], device, ember.int32), m((4, 2)), reduce),
                          name=f"{reduce}, dim 1, int32")
    if dtype is not D.bool and not dtype.is_complex:  # PyTorch's zero-dim path lacks these dtypes
        yield SampleInput(make(()), (0, _idx(0, device), make(()), "prod"), name="zero-dim")


def _index_reduce_ref(a, dim, index, source, reduce, include_self=True):
    return _index_loop(a, dim, index, source, _combine(reduce, a.dtype), include_self, mean=reduce == "mean")


_index_reduce_errors = _errors(
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 1], device=d), lambda e, d: e.ones(2, 4, device=d)), ("sum",), {},
     RuntimeError, "Expected reduce to be one of prod, mean, amax or amin"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 5], device=d), lambda e, d: e.ones(2, 4, device=d)), ("prod",), {},
     IndexError, "index out of range in self"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 1], device=d), lambda e, d: e.ones(2, 4, dtype=e.float64, device=d)),
     ("amax",), {}, RuntimeError, "must have the same scalar type"),
    _reduce_type_error("index_reduce", "mean", "bool", "not implemented for 'Bool'"),
    _reduce_type_error("index_reduce", "amin", "complex128", "not implemented for 'ComplexDouble'"),
    (lambda e, d: (e.zeros(3, dtype=e.bool, device=d), (0, e.tensor([0], device=d), e.ones(1, dtype=e.bool, device=d),
                                                        "prod")),
     (), {"include_self": False}, NotImplementedError, "not implemented for 'Bool'"),
)


# -- take / take_along_dim / put ----------------------------------------------------------------------------


def _take_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3, 4)), (_idx([[0, 11], [-1, 5]], device),), name="2-d index, negative")
    yield SampleInput(make((3, 4), noncontiguous=True), (_idx([2, 2, 7], device),), name="noncontiguous")
    yield SampleInput(make(()), (_idx(0, device),), name="zero-dim")
    yield SampleInput(make((0,)), (_idx(np.zeros(0, np.int64), device),), name="empty")


def _take_ref(a, index):
    return a.reshape(-1)[index]


_take_errors = _errors(
    (_with(_t(3, 4), lambda e, d: e.tensor([12], device=d)), (), {}, IndexError, "out of range: tried to access index 12"),
    (_with(_t(3, 4), lambda e, d: e.tensor([1], dtype=e.int32, device=d)), (), {}, RuntimeError,
     "Expected a long tensor for index"),
    (_with(_t(0), lambda e, d: e.tensor([0], device=d)), (), {}, IndexError, "tried to take from an empty tensor"),
)


def _take_along_dim_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3, 4)), (_idx(_random_index((3, 2), 4, 0), device), 1), name="dim 1")
    yield SampleInput(make((3, 4), noncontiguous=True), (_idx([[0, -1]], device), 1), name="broadcast index, negative")
    yield SampleInput(make((3, 1)), (_idx(_random_index((2, 5), 3, 1), device),), {"dim": 0}, name="broadcast input")
    yield SampleInput(make((3, 4)), (_idx([[0, 11], [5, 2]], device),), name="flattened")


def _take_along_dim_ref(a, indices, dim=None):
    if dim is None:
        return a.reshape(-1)[indices.reshape(-1)]
    a_shape, i_shape = list(a.shape), list(indices.shape)
    a_shape[dim] = i_shape[dim] = 1
    common = np.broadcast_shapes(tuple(a_shape), tuple(i_shape))
    a_full = list(common)
    a_full[dim] = a.shape[dim]
    i_full = list(common)
    i_full[dim] = indices.shape[dim]
    return np.take_along_axis(np.broadcast_to(a, a_full), np.broadcast_to(indices, i_full), axis=dim)


_take_along_dim_errors = _errors(
    (_with(_t(3, 4), lambda e, d: e.tensor([0, 1], device=d), 1), (), {}, RuntimeError,
     "input and indices should have the same number of dimensions"),
    (_with(_t(3, 4), lambda e, d: e.tensor([[0, 1]], dtype=e.int32, device=d), 1), (), {}, RuntimeError,
     "dtype of indices should be Long"),
    (_with(_t(3, 4), lambda e, d: e.tensor([[0, 1], [1, 1]], device=d), 1), (), {}, RuntimeError,
     "must match the size of tensor b"),
    (_with(_t(3, 4), lambda e, d: e.tensor([[-1]], device=d)), (), {}, RuntimeError,
     "index -1 is out of bounds for dimension 0 with size 12"),
)


def _put_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3, 4)), (_idx([0, 11, -2], device), make((3,))), name="distinct, negative")
    yield SampleInput(make((3, 4), noncontiguous=True), (_idx([[1, 5], [0, 2]], device), make((4,))),
                      name="2-d index, noncontiguous")
    yield SampleInput(make((3, 4)), (_idx([1, 1, 3, -11], device), make((2, 2)), True), name="accumulate repeated")
    yield SampleInput(make(()), (_idx(0, device), make(())), name="zero-dim")


def _put_ref(a, index, source, accumulate=False):
    flat = _wide(a).reshape(-1)
    for i, v in zip(index.reshape(-1), _wide(source).reshape(-1)):
        if accumulate:
            flat[i] = (flat[i] | v) if flat.dtype == np.bool_ else flat[i] + v
        else:
            flat[i] = v
    return flat.reshape(a.shape).astype(a.dtype)


_put_errors = _errors(
    (_with(_t(3, 4), lambda e, d: e.tensor([0, 12], device=d), lambda e, d: e.ones(2, device=d)), (), {}, IndexError,
     "out of range: tried to access index 12 on a tensor of 12 elements"),
    (_with(_t(3, 4), lambda e, d: e.tensor([0, 1], device=d), lambda e, d: e.ones(3, device=d)), (), {}, IndexError,
     "Expected source and index to have the same number of elements"),
    (_with(_t(3, 4), lambda e, d: e.tensor([0, 1], device=d), lambda e, d: e.ones(2, dtype=e.int64, device=d)), (), {},
     RuntimeError, "self and source expected to have the same dtype"),
)


# -- nonzero / argwhere -------------------------------------------------------------------------------------


def _nonzero_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    zeroed = make((3, 4))
    zeroed[1] = 0
    zeroed[:, 2] = 0
    yield SampleInput(zeroed, name="2-d", data_dependent=True)
    yield SampleInput(make((2, 3, 2), noncontiguous=True), name="3-d", data_dependent=True)
    yield SampleInput(make(()), name="zero-dim", data_dependent=True)
    yield SampleInput(make((0, 3)), name="empty")
    if opinfo.name == "nonzero":
        yield SampleInput(zeroed, kwargs={"as_tuple": True}, name="as_tuple", data_dependent=True)
        yield SampleInput(make(()), kwargs={"as_tuple": True}, name="as_tuple zero-dim", data_dependent=True)


def _nonzero_ref(a, as_tuple=False):
    if as_tuple:
        return tuple(np.nonzero(a.reshape(a.shape or (1,))))
    return np.argwhere(a)


# -- triangles, diagonals -----------------------------------------------------------------------------------


def _tri_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3, 4)), name="main")
    yield SampleInput(make((3, 4), noncontiguous=True), (1,), name="above")
    yield SampleInput(make((4, 3)), (-1,), name="below")
    yield SampleInput(make((2, 3, 3)).transpose(1, 2), (0,), name="batched, transposed")
    yield SampleInput(make((3, 3)), (-5,), name="past the corner")
    yield SampleInput(make((0, 3)), name="empty")


_tri_errors = _errors((_t(3), (), {}, RuntimeError, "input tensor must have at least 2 dimensions"))


def _tri_indices_samples(opinfo, device, dtype, requires_grad):
    for args in ((3, 3), (3, 4, 1), (4, 3, -1), (0, 3), (3, 4, 10), (3, 4, -10)):
        yield SampleInput(args[0], args[1:], {"dtype": dtype, "device": device}, name=f"{args}")


def _tri_indices_ref(lower):
    def ref(row, col, offset=0, dtype=None, device=None):
        keep = np.tri(row, col, offset, dtype=bool) if lower else ~np.tri(row, col, offset - 1, dtype=bool)
        return np.stack(np.nonzero(keep)).astype(dtype.numpy_dtype).reshape(2, -1)

    return ref


def _tri_indices_errors(opinfo, device):
    ember = _ember()
    yield ErrorInput(SampleInput(-1, (4,), {"device": device}), RuntimeError, "row must be non-negative")
    yield ErrorInput(SampleInput(3, (-4,), {"device": device}), RuntimeError, "col must be non-negative")
    yield ErrorInput(SampleInput(3, (4,), {"dtype": ember.float32, "device": device}), NotImplementedError,
                     "not implemented for 'Float'")


def _diag_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3,)), name="vector")
    yield SampleInput(make((3,), noncontiguous=True), (2,), name="vector above")
    yield SampleInput(make((3,)), (-1,), name="vector below")
    yield SampleInput(make((3, 4)), name="matrix")
    yield SampleInput(make((3, 4), noncontiguous=True), (1,), name="matrix above")
    yield SampleInput(make((4, 3)).t(), (-2,), name="matrix below, transposed")
    yield SampleInput(make((3, 4)), (5,), name="past the corner")
    yield SampleInput(make((0,)), name="empty vector")


_diag_errors = _errors(
    (_t(), (), {}, RuntimeError, "Supports 1D or 2D tensors. Got 0D"),
    (_t(2, 3, 4), (), {}, RuntimeError, "Supports 1D or 2D tensors. Got 3D"),
)


def _diag_embed_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 3)), name="default")
    yield SampleInput(make((2, 3), noncontiguous=True), (1, 0, 2), name="offset, dims")
    yield SampleInput(make((2, 3)), (-1, 2, 0), name="negative offset, swapped dims")
    yield SampleInput(make((3,)), name="vector")
    yield SampleInput(make((2, 0)), name="empty")


def _diag_embed_ref(a, offset=0, dim1=-2, dim2=-1):
    n = a.shape[-1] + abs(offset)
    out = np.zeros(a.shape[:-1] + (n, n), a.dtype)
    for i in range(a.shape[-1]):
        r, c = (i, i + offset) if offset >= 0 else (i - offset, i)
        out[..., r, c] = a[..., i]
    ndim = a.ndim + 1
    return np.moveaxis(out, (-2, -1), (dim1 % ndim, dim2 % ndim))


_diag_embed_errors = _errors(
    (_t(2, 3), (0, 0, 0), {}, RuntimeError, "diagonal dimensions cannot be identical"),
    (_t(2, 3), (0, 0, 3), {}, IndexError, "Dimension out of range"),
)


def _diagflat_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 2)), name="matrix")
    yield SampleInput(make((3,), noncontiguous=True), (1,), name="vector above")
    yield SampleInput(make(()), (-2,), name="zero-dim below")


def _trace_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3, 4)), name="wide")
    yield SampleInput(make((4, 3), noncontiguous=True), name="noncontiguous")
    yield SampleInput(make((3, 3)).t(), name="transposed")
    yield SampleInput(make((0, 3)), name="empty")


def _trace_ref(a):
    return np.trace(_wide(a))


_trace_errors = _errors(
    (_t(3), (), {}, RuntimeError, "expected a matrix"),
    (lambda e, d: (e.zeros(2, 2, dtype=e.bool, device=d), ()), (), {}, NotImplementedError,
     "not implemented for 'Bool'"),
)


# -- meshgrid / cartesian_prod / combinations / block_diag / atleast ---------------------------------------------


def _meshgrid_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3,)), (make((2,)),), {"indexing": "ij"}, name="ij")
    yield SampleInput(make((3,)), (make((2,), noncontiguous=True),), {"indexing": "xy"}, name="xy")
    yield SampleInput(make((3,)), (make(()), make((4,))), {"indexing": "xy"}, name="three, zero-dim")
    yield SampleInput(make((2,)), (), {"indexing": "ij"}, name="one")
    yield SampleInput(make((0,)), (make((2,)),), {"indexing": "ij"}, name="empty")


def _meshgrid_ref(*arrays, indexing="ij"):
    return tuple(np.meshgrid(*arrays, indexing=indexing))


_meshgrid_errors = _errors(
    (_with(_t(3), lambda e, d: e.zeros(2, dtype=e.int64, device=d)), (), {"indexing": "ij"}, RuntimeError,
     "meshgrid expects all tensors to have the same dtype"),
    (_with(_t(3), lambda e, d: e.zeros(2, 2, device=d)), (), {"indexing": "ij"}, RuntimeError,
     "Expected 0D or 1D tensor"),
    (_with(_t(3), lambda e, d: e.zeros(2, device=d)), (), {"indexing": "foo"}, RuntimeError,
     "indexing must be one of"),
)


def _cartesian_prod_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2,)), (make((3,)),), name="two")
    yield SampleInput(make((2,), noncontiguous=True), (make((1,)), make((3,))), name="three")
    yield SampleInput(make((3,)), (), name="one")
    yield SampleInput(make((2,)), (make((0,)),), name="empty")


def _cartesian_prod_ref(*arrays):
    if len(arrays) == 1:
        return arrays[0]
    rows = list(itertools.product(*(a.tolist() for a in arrays)))
    return np.array(rows, dtype=arrays[0].dtype).reshape(len(rows), len(arrays))


_cartesian_prod_errors = _errors(
    (_with(_t(3), lambda e, d: e.zeros(2, 2, device=d)), (), {}, RuntimeError, "Expect a 1D vector"),
    (_with(_t(3), lambda e, d: e.zeros(2, dtype=e.int64, device=d)), (), {}, RuntimeError,
     "meshgrid expects all tensors to have the same dtype"),
)


def _combinations_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((4,)), name="pairs")
    yield SampleInput(make((4,), noncontiguous=True), (3,), name="triples")
    yield SampleInput(make((3,)), (2, True), name="with replacement")
    yield SampleInput(make((3,)), (4,), name="r > n")
    yield SampleInput(make((3,)), (0,), name="r = 0")
    yield SampleInput(make((0,)), name="empty")


def _combinations_ref(a, r=2, with_replacement=False):
    if r == 0:
        return np.empty((0,), a.dtype)
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = [list(c) for c in pick(a.tolist(), r)]
    return np.array(rows, dtype=a.dtype).reshape(len(rows), r)


_combinations_errors = _errors(
    (_t(2, 2), (), {}, RuntimeError, "Expect a 1D vector"),
    (_t(3), (-1,), {}, RuntimeError, "Expect a non-negative number"),
)


def _block_diag_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    other = maker(device, _other_dtype(dtype), False, seed=1)
    yield SampleInput(make((2, 3)), (make((1,)), make(())), name="matrix, vector, scalar")
    yield SampleInput(make((2, 2), noncontiguous=True), (other((1, 2)),), name="promotion")
    yield SampleInput(make((0, 3)), (make((2, 0)),), name="empty blocks")
    yield SampleInput(make((2, 3)), (), name="one")


def _block_diag_ref(*arrays):
    dtype = _torch_dtype_of(arrays)
    blocks = [a.reshape(1, 1) if a.ndim == 0 else a.reshape(1, -1) if a.ndim == 1 else a for a in arrays]
    out = np.zeros((sum(b.shape[0] for b in blocks), sum(b.shape[1] for b in blocks)), dtype)
    r = c = 0
    for b in blocks:
        out[r:r + b.shape[0], c:c + b.shape[1]] = b
        r += b.shape[0]
        c += b.shape[1]
    return out


_block_diag_errors = _errors(
    (_t(2, 3, 4), (), {}, RuntimeError, "Input tensors must have 2 or fewer dimensions"),
)


def _atleast_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make(()), name="zero-dim")
    yield SampleInput(make((3,), noncontiguous=True), name="vector")
    yield SampleInput(make((2, 3)), name="matrix")
    yield SampleInput(make((2, 3, 2)), name="3-d")
    yield SampleInput(make(()), (make((3,)), make((2, 3))), name="several")


def _atleast_ref(np_fn):
    def ref(*arrays):
        result = np_fn(*arrays)
        return tuple(result) if isinstance(result, (list, tuple)) else result

    return ref


# -- registration ---------------------------------------------------------------------------------------------

_INFOS = [
    OpInfo("cat", _cat_samples, ref=_cat_ref, error_inputs=_cat_errors),
    OpInfo("concat", _cat_samples, ref=_cat_ref),
    OpInfo("concatenate", _cat_samples, ref=_cat_ref),
    OpInfo("stack", _stack_samples, ref=_stack_ref, error_inputs=_stack_errors),
    OpInfo("hstack", _stacker_samples([("2-d", [(2, 3), (2, 2)]), ("1-d, zero-dim", [(), (3,)])]),
           ref=_stacker_ref(np.hstack), error_inputs=_empty_list_error("hstack")),
    OpInfo("vstack", _stacker_samples([("1-d, 2-d", [(3,), (2, 3)]), ("zero-dim", [(), (1,)])]),
           ref=_stacker_ref(np.vstack), error_inputs=_empty_list_error("vstack")),
    OpInfo("dstack", _stacker_samples([("2-d, 3-d", [(2, 3), (2, 3, 2)]), ("1-d", [(3,), (3,)])]),
           ref=_stacker_ref(np.dstack), error_inputs=_empty_list_error("dstack")),
    OpInfo("column_stack", _stacker_samples([("1-d, 2-d", [(2,), (2, 3), (2,)]), ("zero-dim", [(), ()])]),
           ref=_stacker_ref(_column_stack_np), error_inputs=_empty_list_error("column_stack")),
    OpInfo("tensor_split", _tensor_split_samples, ref=_tensor_split_ref, error_inputs=_tensor_split_errors),
    OpInfo("unflatten", _unflatten_samples, ref=_unflatten_ref, error_inputs=_unflatten_errors),
    OpInfo("ravel", _unary_shape_samples((2, 3), (), (0, 4)), ref=np.ravel),
    OpInfo("view_as", _view_as_samples, ref=lambda a, other: a.reshape(other.shape), torch_name="Tensor.view_as"),
    OpInfo("expand_as", _expand_as_samples, ref=lambda a, other: np.broadcast_to(a, other.shape),
           torch_name="Tensor.expand_as"),
    OpInfo("broadcast_to", _broadcast_to_samples, ref=_broadcast_to_ref, error_inputs=_broadcast_errors),
    OpInfo("broadcast_tensors", _broadcast_tensors_samples, ref=lambda *a: tuple(np.broadcast_arrays(*a)),
           error_inputs=_broadcast_tensors_errors),
    OpInfo("movedim", _movedim_samples, ref=_movedim_ref, error_inputs=_movedim_errors),
    OpInfo("moveaxis", _movedim_samples, ref=_movedim_ref, error_inputs=_movedim_errors),
    OpInfo("swapaxes", _swap_samples, ref=np.swapaxes),
    OpInfo("swapdims", _swap_samples, ref=np.swapaxes),
    OpInfo("repeat", _repeat_samples, ref=_repeat_ref, error_inputs=_repeat_errors, torch_name="Tensor.repeat"),
    OpInfo("tile", _tile_samples, ref=lambda a, dims: np.tile(a, dims), error_inputs=_tile_errors),
    OpInfo("repeat_interleave", _repeat_interleave_samples, ref=_repeat_interleave_ref,
           error_inputs=_repeat_interleave_errors),
    OpInfo("flip", _flip_samples, ref=_flip_ref, error_inputs=_flip_errors),
    OpInfo("fliplr", _unary_shape_samples((3, 4), (2, 3, 2), (0, 2)), ref=np.fliplr,
           error_inputs=_errors((_t(3), (), {}, RuntimeError, "Input must be >= 2-d"))),
    OpInfo("flipud", _unary_shape_samples((3,), (2, 3, 2), (0, 2)), ref=np.flipud,
           error_inputs=_errors((_t(), (), {}, RuntimeError, "Input must be >= 1-d"))),
    OpInfo("roll", _roll_samples, ref=_roll_ref, error_inputs=_roll_errors),
    OpInfo("rot90", _rot90_samples, ref=_rot90_ref, error_inputs=_rot90_errors),
    OpInfo("index_select", _index_select_samples, ref=_index_select_ref, error_inputs=_index_select_errors),
    OpInfo("masked_select", _masked_select_samples, ref=_masked_select_ref, error_inputs=_masked_select_errors),
    OpInfo("masked_fill", _masked_fill_samples, ref=_masked_fill_ref, error_inputs=_masked_fill_errors),
    OpInfo("masked_scatter", _masked_scatter_samples, ref=_masked_scatter_ref, error_inputs=_masked_scatter_errors),
    OpInfo("gather", _gather_samples, ref=_gather_ref, error_inputs=_gather_errors),
    OpInfo("scatter", _scatter_samples, ref=_scatter_ref, error_inputs=_scatter_errors),
    OpInfo("scatter_add", _scatter_add_samples, ref=_scatter_add_ref, error_inputs=_scatter_add_errors),
    OpInfo("scatter_reduce", _scatter_reduce_samples, ref=_scatter_reduce_ref, error_inputs=_scatter_reduce_errors),
    OpInfo("index_add", _index_add_samples, ref=_index_add_ref, error_inputs=_index_add_errors),
    OpInfo("index_copy", _index_copy_samples, ref=_index_copy_ref, error_inputs=_index_copy_errors),
    OpInfo("index_fill", _index_fill_samples, ref=_index_fill_ref, error_inputs=_index_fill_errors),
    OpInfo("index_reduce", _index_reduce_samples, ref=_index_reduce_ref, error_inputs=_index_reduce_errors),
    OpInfo("take", _take_samples, ref=_take_ref, error_inputs=_take_errors),
    OpInfo("take_along_dim", _take_along_dim_samples, ref=_take_along_dim_ref, error_inputs=_take_along_dim_errors),
    OpInfo("put", _put_samples, ref=_put_ref, error_inputs=_put_errors),
    OpInfo("nonzero", _nonzero_samples, ref=_nonzero_ref, supports_autograd=False),
    OpInfo("argwhere", _nonzero_samples, ref=np.argwhere, supports_autograd=False),
    OpInfo("tril", _tri_samples, ref=lambda a, diagonal=0: np.tril(a, diagonal), error_inputs=_tri_errors),
    OpInfo("triu", _tri_samples, ref=lambda a, diagonal=0: np.triu(a, diagonal), error_inputs=_tri_errors),
    OpInfo("tril_indices", _tri_indices_samples, dtypes=(D.int32, D.int64), ref=_tri_indices_ref(True),
           error_inputs=_tri_indices_errors, supports_autograd=False),
    OpInfo("triu_indices", _tri_indices_samples, dtypes=(D.int32, D.int64), ref=_tri_indices_ref(False),
           error_inputs=_tri_indices_errors, supports_autograd=False),
    OpInfo("diag", _diag_samples, ref=lambda a, diagonal=0: np.diag(a, diagonal), error_inputs=_diag_errors),
    OpInfo("diag_embed", _diag_embed_samples, ref=_diag_embed_ref, error_inputs=_diag_embed_errors),
    OpInfo("diagflat", _diagflat_samples, ref=lambda a, offset=0: np.diagflat(a, offset)),
    OpInfo("trace", _trace_samples, dtypes=_NO_BOOL, ref=_trace_ref, error_inputs=_trace_errors),
    OpInfo("meshgrid", _meshgrid_samples, ref=_meshgrid_ref, error_inputs=_meshgrid_errors),
    OpInfo("cartesian_prod", _cartesian_prod_samples, ref=_cartesian_prod_ref, error_inputs=_cartesian_prod_errors),
    OpInfo("combinations", _combinations_samples, ref=_combinations_ref, error_inputs=_combinations_errors),
    OpInfo("block_diag", _block_diag_samples, ref=_block_diag_ref, error_inputs=_block_diag_errors),
    OpInfo("atleast_1d", _atleast_samples, ref=_atleast_ref(np.atleast_1d)),
    OpInfo("atleast_2d", _atleast_samples, ref=_atleast_ref(np.atleast_2d)),
    OpInfo("atleast_3d", _atleast_samples, ref=_atleast_ref(np.atleast_3d)),
]

for _info in _INFOS:
    register_opinfo(_info)
