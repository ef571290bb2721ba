"""OpInfos of the shape ops: joining (cat/stack family, block_diag), view composites, repeating, flips and rolls, atleast.

Samples cover empty, zero-dim, non-contiguous and transposed inputs and
promotion across inputs (cat/stack family); see :mod:`._shape_helpers`.
"""

from __future__ import annotations

import functools

import numpy as np

from ... import _dtype as D
from .._opinfo import OpInfo, SampleInput, register_opinfo
from ._common import maker
from ._shape_helpers import _ember, _errors, _idx, _t, _with


def _torch_dtype_of(arrays):
    """PyTorch's promoted dtype of numpy arrays (all counted as dimensioned), as a numpy dtype."""
    dtypes = [D.from_numpy_dtype(a.dtype) for a in arrays]
    return functools.reduce(D.promote_types, dtypes).numpy_dtype


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
    OpInfo("block_diag", _block_diag_samples, ref=_block_diag_ref, error_inputs=_block_diag_errors),
    OpInfo("atleast_1d", _atleast_samples, ref=_atleast_ref(np.atleast_1d)),
    OpInfo("atleast_2d", _atleast_samples, ref=_atleast_ref(np.atleast_2d)),
    OpInfo("atleast_3d", _atleast_samples, ref=_atleast_ref(np.atleast_3d)),
]

for _info in _INFOS:
    register_opinfo(_info)
