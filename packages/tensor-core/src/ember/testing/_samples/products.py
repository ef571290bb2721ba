"""OpInfos of the matrix products: matmul and its family, einsum, tensordot, kron, cross, cdist, chain_matmul.

References compute with numpy on the sample's values, in float32 for the half
types and in int64 for integers (the comparison casts back to the result dtype,
so integer products that wrap around compare modulo 2**bits, as they should).
"""

from __future__ import annotations

import math

import numpy as np

from ... import _dtype as D
from .._opinfo import ALL_TYPES_AND_COMPLEX, ErrorInput, OpInfo, SampleInput, register_opinfo
from ._common import maker

#: PyTorch's CPU matrix products take every dtype but bool.
_NO_BOOL = tuple(d for d in ALL_TYPES_AND_COMPLEX if d is not D.bool)
_CDIST_TYPES = (D.float32, D.float64)


def _up(a):
    """A numpy operand at the precision references compute in."""
    a = np.asarray(a)
    if a.dtype == np.float16 or a.dtype.name == "bfloat16":
        return a.astype(np.float32)
    if a.dtype.kind in "iu":
        return a.astype(np.int64)
    return a


def _scalars(dtype, beta, alpha):
    """``beta``/``alpha`` as PyTorch's add-multiply ops apply them (truncated for integers)."""
    if dtype.kind in "iu":
        return int(beta), int(alpha)
    return beta, alpha


def _blend_ref(input, product, beta=1, alpha=1, dtype=None):
    beta, alpha = _scalars(np.dtype(dtype), beta, alpha)
    result = product * alpha
    if beta != 0:
        result = result + _up(input) * beta
    return result


# -- samples --------------------------------------------------------------------------------


def _pairs(*cases):
    """Samples ``op(make(shape1), make(shape2))`` for ``(name, shape1, shape2)`` cases."""

    def gen(opinfo, device, dtype, requires_grad):
        make = maker(device, dtype, requires_grad)
        for name, s1, s2 in cases:
            yield SampleInput(make(s1), (make(s2),), name=name)

    return gen


def _matmul_samples(opinfo, device, dtype, requires_grad):
    yield from _pairs(
        ("1-d @ 1-d", (4,), (4,)),
        ("2-d @ 2-d", (3, 4), (4, 2)),
        ("2-d @ 1-d", (3, 4), (4,)),
        ("1-d @ 2-d", (4,), (4, 3)),
        ("3-d @ 3-d", (2, 3, 4), (2, 4, 2)),
        ("batch dims broadcast", (2, 1, 2, 3), (3, 3, 2)),
        ("3-d @ 2-d", (2, 3, 4), (4, 2)),
        ("2-d @ 3-d", (3, 4), (2, 4, 2)),
        ("3-d @ 1-d", (2, 3, 4), (4,)),
        ("1-d @ 3-d", (4,), (2, 4, 3)),
        ("empty batch", (0, 2, 3), (3, 2)),
        ("empty batch both", (0, 2, 3), (0, 3, 2)),
        ("empty inner dim", (2, 0), (0, 3)),
        ("empty rows", (0, 3), (3, 2)),
        ("empty vectors", (0,), (0,)),
    )(opinfo, device, dtype, requires_grad)
    make = maker(device, dtype, requires_grad, seed=1)
    yield SampleInput(make((3, 4), noncontiguous=True), (make((4, 2), noncontiguous=True),), name="noncontiguous")
    yield SampleInput(make((4, 3)).t(), (make((2, 4)).t(),), name="transposed views")
    yield SampleInput(make((2, 4, 3)).transpose(-2, -1), (make((2, 4, 2)),), name="batched transposed view")
    yield SampleInput(make((1, 3, 4)).expand(2, 3, 4), (make((4, 2)),), name="expanded batch")
    yield SampleInput(make((2, 3, 4), noncontiguous=True), (make((4, 2), noncontiguous=True),),
                      name="noncontiguous batch @ 2-d")


def _mm_samples(opinfo, device, dtype, requires_grad):
    yield from _pairs(
        ("2-d", (3, 4), (4, 2)),
        ("empty rows", (0, 3), (3, 2)),
        ("empty inner dim", (2, 0), (0, 3)),
        ("row times column", (1, 5), (5, 1)),
    )(opinfo, device, dtype, requires_grad)
    make = maker(device, dtype, requires_grad, seed=1)
    yield SampleInput(make((3, 4), noncontiguous=True), (make((4, 2), noncontiguous=True),), name="noncontiguous")
    yield SampleInput(make((4, 3)).t(), (make((2, 4)).t(),), name="transposed views")


def _bmm_samples(opinfo, device, dtype, requires_grad):
    yield from _pairs(
        ("3-d", (2, 3, 4), (2, 4, 2)),
        ("empty batch", (0, 2, 3), (0, 3, 2)),
        ("empty inner dim", (2, 3, 0), (2, 0, 2)),
    )(opinfo, device, dtype, requires_grad)
    make = maker(device, dtype, requires_grad, seed=1)
    yield SampleInput(make((2, 4, 3)).transpose(1, 2), (make((2, 4, 2), noncontiguous=True),), name="views")


def _mv_samples(opinfo, device, dtype, requires_grad):
    yield from _pairs(
        ("2-d @ 1-d", (3, 4), (4,)),
        ("empty rows", (0, 3), (3,)),
        ("empty columns", (3, 0), (0,)),
    )(opinfo, device, dtype, requires_grad)
    make = maker(device, dtype, requires_grad, seed=1)
    yield SampleInput(make((4, 3)).t(), (make((4,), noncontiguous=True),), name="views")


def _dot_samples(opinfo, device, dtype, requires_grad):
    yield from _pairs(("1-d", (5,), (5,)), ("empty", (0,), (0,)))(opinfo, device, dtype, requires_grad)
    make = maker(device, dtype, requires_grad, seed=1)
    yield SampleInput(make((5,), noncontiguous=True), (make((5,)),), name="noncontiguous")


def _inner_samples(opinfo, device, dtype, requires_grad):
    yield from _pairs(
        ("1-d", (4,), (4,)),
        ("2-d with 2-d", (2, 3), (4, 3)),
        ("3-d with 1-d", (2, 3, 4), (4,)),
        ("zero-dim first", (), (2, 3)),
        ("zero-dim second", (3,), ()),
        ("empty", (0, 3), (2, 3)),
    )(opinfo, device, dtype, requires_grad)
    make = maker(device, dtype, requires_grad, seed=1)
    yield SampleInput(make((3, 2)).t(), (make((4, 3), noncontiguous=True),), name="views")


def _other_dtype_maker(device, dtype, requires_grad):
    """Operands of another dtype, to exercise type promotion."""
    other = D.float64 if dtype is not D.float64 else D.int32
    return maker(device, other, requires_grad, seed=2)


def _outer_samples(opinfo, device, dtype, requires_grad):
    yield from _pairs(("vectors", (3,), (4,)), ("empty", (0,), (3,)))(opinfo, device, dtype, requires_grad)
    make = maker(device, dtype, requires_grad, seed=1)
    yield SampleInput(make((3,), noncontiguous=True), (make((2,), noncontiguous=True),), name="noncontiguous")
    yield SampleInput(make((3,)), (_other_dtype_maker(device, dtype, requires_grad)((2,)),), name="type promotion")


def _addmm_scalars(dtype):
    """``(beta, alpha)`` pairs worth testing at ``dtype``."""
    if dtype.category == D.INTEGRAL:
        return [(2, 3), (0, -1), (2.5, 1.5)]  # PyTorch truncates float scalars for integer results
    if dtype.is_complex:
        return [(0.5, 2), (1.5, 0.5 - 1j), (0, 2)]
    return [(0.5, 2), (-1.5, 0.25), (0, 2)]


def _nan_input(make, shape, dtype):
    """An input holding NaN (``beta=0`` must ignore it); plain values for dtypes without NaN.

    (Not for bfloat16: numpy's array comparisons don't see its NaNs as NaN.)
    """
    x = make(shape)
    if dtype.category >= D.FLOATING and dtype is not D.bfloat16:
        x[0] = float("nan")
    return x


def _addmm_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 2)), (make((2, 3)), make((3, 2))), name="2-d")
    yield SampleInput(make((2,)), (make((3, 4)), make((4, 2))), name="input broadcasts (row)")
    yield SampleInput(make((3, 1)), (make((3, 4)), make((4, 2))), name="input broadcasts (column)")
    yield SampleInput(make(()), (make((3, 4)), make((4, 2))), name="zero-dim input")
    yield SampleInput(make((0, 2)), (make((0, 3)), make((3, 2))), name="empty rows")
    yield SampleInput(make((2, 3)), (make((2, 0)), make((0, 3))), name="empty inner dim")
    yield SampleInput(make((3, 2)), (make((4, 3)).t(), make((4, 3), noncontiguous=True)[:, :2]), name="views")
    for beta, alpha in _addmm_scalars(dtype):
        input = _nan_input(make, (2, 2), dtype) if beta == 0 else make((2, 2))
        yield SampleInput(input, (make((2, 3)), make((3, 2))), {"beta": beta, "alpha": alpha},
                          name=f"beta={beta}, alpha={alpha}")


def _addmv_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3,)), (make((3, 4)), make((4,))), name="1-d input")
    yield SampleInput(make((1,)), (make((3, 4)), make((4,))), name="input broadcasts")
    yield SampleInput(make(()), (make((3, 4)), make((4,))), name="zero-dim input")
    yield SampleInput(make((0,)), (make((0, 3)), make((3,))), name="empty rows")
    yield SampleInput(make((3,)), (make((3, 0)), make((0,))), name="empty columns")
    yield SampleInput(make((3,)), (make((4, 3)).t(), make((4,), noncontiguous=True)), name="views")
    for beta, alpha in _addmm_scalars(dtype):
        input = _nan_input(make, (3,), dtype) if beta == 0 else make((3,))
        yield SampleInput(input, (make((3, 4)), make((4,))), {"beta": beta, "alpha": alpha},
                          name=f"beta={beta}, alpha={alpha}")


def _addbmm_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3, 2)), (make((2, 3, 4)), make((2, 4, 2))), name="3-d")
    yield SampleInput(make((2,)), (make((2, 3, 4)), make((2, 4, 2))), name="input broadcasts")
    yield SampleInput(make(()), (make((2, 3, 4)), make((2, 4, 2))), name="zero-dim input")
    yield SampleInput(make((3, 2)), (make((0, 3, 4)), make((0, 4, 2))), name="empty batch")
    yield SampleInput(make((3, 2)), (make((2, 4, 3)).transpose(1, 2), make((2, 4, 2), noncontiguous=True)),
                      name="views")
    for beta, alpha in _addmm_scalars(dtype):
        input = _nan_input(make, (3, 2), dtype) if beta == 0 else make((3, 2))
        yield SampleInput(input, (make((2, 3, 4)), make((2, 4, 2))), {"beta": beta, "alpha": alpha},
                          name=f"beta={beta}, alpha={alpha}")


def _baddbmm_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 3, 2)), (make((2, 3, 4)), make((2, 4, 2))), name="3-d")
    yield SampleInput(make((3, 2)), (make((2, 3, 4)), make((2, 4, 2))), name="input broadcasts")
    yield SampleInput(make(()), (make((2, 3, 4)), make((2, 4, 2))), name="zero-dim input")
    yield SampleInput(make((0, 3, 2)), (make((0, 3, 4)), make((0, 4, 2))), name="empty batch")
    yield SampleInput(make((2, 3, 2)), (make((2, 3, 0)), make((2, 0, 2))), name="empty inner dim")
    yield SampleInput(make((2, 3, 2)), (make((2, 4, 3)).transpose(1, 2), make((2, 4, 2), noncontiguous=True)),
                      name="views")
    for beta, alpha in _addmm_scalars(dtype):
        input = _nan_input(make, (2, 3, 2), dtype) if beta == 0 else make((2, 3, 2))
        yield SampleInput(input, (make((2, 3, 4)), make((2, 4, 2))), {"beta": beta, "alpha": alpha},
                          name=f"beta={beta}, alpha={alpha}")


def _addr_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3, 4)), (make((3,)), make((4,))), name="2-d input")
    yield SampleInput(make((4,)), (make((3,)), make((4,))), name="input broadcasts")
    yield SampleInput(make(()), (make((3,)), make((4,))), name="zero-dim input")
    yield SampleInput(make((0, 2)), (make((0,)), make((2,))), name="empty")
    yield SampleInput(make((3, 2)), (make((3,), noncontiguous=True), make((2,), noncontiguous=True)),
                      name="noncontiguous")
    if dtype is D.bool:
        scalars = [(True, True), (False, True), (True, False), (0, 2)]
    elif dtype.category == D.INTEGRAL:
        scalars = [(2, 3), (0, -1)]
    elif dtype.is_complex:
        scalars = [(0.5, 2), (0, 1 - 1j)]
    else:
        scalars = [(0.5, 2), (0, -1.5)]
    for beta, alpha in scalars:
        input = _nan_input(make, (3, 4), dtype) if beta == 0 else make((3, 4))
        yield SampleInput(input, (make((3,)), make((4,))), {"beta": beta, "alpha": alpha},
                          name=f"beta={beta}, alpha={alpha}")
    other = _other_dtype_maker(device, dtype, requires_grad)
    yield SampleInput(make((3, 2)), (make((3,)), other((2,))), name="type promotion")


def _einsum_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    cases = [
        ("ij,jk->ik", [(2, 3), (3, 4)], "matrix product"),
        ("ij,jk", [(2, 3), (3, 2)], "implicit output"),
        ("ba,cb", [(3, 2), (4, 3)], "implicit output, alphabetical"),
        ("ii->i", [(3, 3)], "diagonal"),
        ("ii", [(3, 3)], "trace"),
        ("ij->ji", [(2, 3)], "transpose"),
        ("ij->", [(2, 3)], "sum"),
        ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)], "batched"),
        ("...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 2)], "ellipsis broadcasts"),
        ("...ij->...ji", [(2, 2, 3)], "ellipsis transpose"),
        ("i...->...", [(2, 3)], "ellipsis output, summed label"),
        ("ij...,jk...->ik", [(2, 3, 2), (3, 2, 2)], "ellipsis summed away"),
        ("i,j->ij", [(3,), (4,)], "outer product"),
        ("i,i->", [(4,), (4,)], "dot product"),
        ("i,i->i", [(3,), (1,)], "size-1 label broadcasts"),
        ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 4)], "three operands"),
        (" b i j , b j -> b i ", [(2, 3, 4), (2, 4)], "spaces"),
        ("ij,jk->ik", [(0, 3), (3, 2)], "empty"),
        ("ij,jk->ik", [(2, 0), (0, 3)], "empty contraction"),
        ("->", [()], "zero-dim"),
        (",i->i", [(), (3,)], "zero-dim with 1-d"),
    ]
    for equation, shapes, name in cases:
        yield SampleInput(equation, tuple(make(s) for s in shapes), name=name)
    yield SampleInput("ij,jk->ik", ([make((2, 3)), make((3, 2))],), name="operands as a list")
    yield SampleInput("ij,kj->ik", (make((3, 2)).t(), make((4, 3), noncontiguous=True)), name="views")
    yield SampleInput(make((2, 3)), ([0, 1], make((3, 2)), [1, 2], [0, 2]), name="sublist form")
    yield SampleInput(make((2, 2, 3)), ([Ellipsis, 0, 1], make((3, 2)), [1, 2], [Ellipsis, 0, 2]),
                      name="sublist form with ellipsis")


def _einsum_ref(equation, *operands):
    """numpy.einsum, after broadcasting size-1 labelled dims (numpy only broadcasts ellipsis dims)."""
    if not isinstance(equation, str):
        args = [equation, *operands]
        return np.einsum(*[_up(a) if isinstance(a, np.ndarray) else a for a in args])
    if len(operands) == 1 and isinstance(operands[0], list):
        operands = operands[0]
    operands = [_up(a) for a in operands]
    lhs = equation.replace(" ", "").split("->")[0]
    terms = lhs.split(",")
    sizes = {}
    for term, a in zip(terms, operands):
        if "..." not in term:
            for label, n in zip(term, a.shape):
                sizes[label] = max(sizes.get(label, 1), n)
    broadcast = []
    for term, a in zip(terms, operands):
        if "..." not in term and a.ndim:
            a = np.broadcast_to(a, tuple(sizes[label] if n == 1 else n for label, n in zip(term, a.shape)))
        broadcast.append(a)
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    if arrow and "..." in lhs and "..." not in rhs:  # numpy keeps ellipsis dims; PyTorch sums them
        result = np.einsum(f"{lhs}->...{rhs}", *broadcast)
        return result.sum(axis=tuple(range(result.ndim - len(rhs))))
    return np.einsum(equation, *broadcast)


def _tensordot_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    cases = [
        ((2, 3, 4), (3, 4, 2), 2, "dims=2"),
        ((2, 3), (3, 4), 1, "dims=1"),
        ((2,), (3,), 0, "dims=0"),
        ((3, 4), (4, 3), ([1, 0], [0, 1]), "two lists"),
        ((2, 3, 4), (4, 3, 2), [[2], [0]], "list of lists"),
        ((2, 3, 4), (4, 3, 2), ([-1, 1], [0, 1]), "negative dims"),
        ((0, 3), (3, 2), 1, "empty"),
        ((2, 0), (0, 3), 1, "empty contraction"),
        ((2, 1), (3, 2), ([1], [0]), "size-1 contracted dim"),
    ]
    for s1, s2, dims, name in cases:
        yield SampleInput(make(s1), (make(s2),), {"dims": dims}, name=name)
    yield SampleInput(make((4, 3)).t(), (make((4, 2), noncontiguous=True),), {"dims": 1}, name="views")


def _tensordot_ref(a, b, dims=2):
    a, b = _up(a), _up(b)
    if isinstance(dims, int):
        dims = (list(range(a.ndim - dims, a.ndim)), list(range(dims)))
    da = [d % a.ndim for d in dims[0]]
    db = [d % b.ndim for d in dims[1]]
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            if a.shape[i] == 1:
                b = b.sum(axis=j, keepdims=True)
            else:
                a = a.sum(axis=i, keepdims=True)
    return np.tensordot(a, b, axes=(da, db))


def _kron_samples(opinfo, device, dtype, requires_grad):
    yield from _pairs(
        ("2-d", (2, 3), (3, 2)),
        ("1-d", (2,), (3,)),
        ("different ranks", (2, 3), (4,)),
        ("zero-dim", (), (3,)),
        ("both zero-dim", (), ()),
        ("empty", (0, 2), (2, 3)),
    )(opinfo, device, dtype, requires_grad)
    make = maker(device, dtype, requires_grad, seed=1)
    # (no transposed views: PyTorch 2.13's kron fails on them with a view error, where ember computes the product)
    yield SampleInput(make((2, 2), noncontiguous=True), (make((3, 2), noncontiguous=True),), name="noncontiguous")
    yield SampleInput(make((2,)), (_other_dtype_maker(device, dtype, requires_grad)((2, 2)),), name="type promotion")


def _kron_ref(a, b):
    return np.kron(_up(a), _up(b))


def _cross_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    cases = [
        ((3,), (3,), 0, "1-d"),
        ((4, 3), (4, 3), -1, "last dim"),
        ((3, 4), (3, 4), 0, "first dim"),
        ((1, 3), (4, 3), 1, "broadcast"),
        ((0, 3), (0, 3), 1, "empty"),
        ((2, 3, 3), (2, 3, 3), None, "default dim"),
    ]
    for s1, s2, dim, name in cases:
        yield SampleInput(make(s1), (make(s2),), {} if dim is None else {"dim": dim}, name=name)
    yield SampleInput(make((2, 3), noncontiguous=True), (make((3, 2)).t(),), {"dim": 1}, name="views")


def _cross_ref(a, b, dim=None):
    if dim is None:
        dim = next(i for i, n in enumerate(np.shape(a)) if n == 3)
    return np.cross(_up(a), _up(b), axis=dim)


def _cdist_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    for p in (2.0, 1.0, 0.0, math.inf, 1.5):
        yield SampleInput(make((3, 4)), (make((5, 4)),), {"p": p}, name=f"p={p}")
    yield SampleInput(make((2, 3, 4)), (make((2, 5, 4)),), name="batched")
    yield SampleInput(make((2, 1, 3, 4)), (make((3, 2, 4)),), name="batch dims broadcast")
    yield SampleInput(make((3, 4)), (make((2, 5, 4)),), name="2-d with 3-d")
    yield SampleInput(make((0, 4)), (make((3, 4)),), name="no rows")
    yield SampleInput(make((3, 0)), (make((2, 0)),), name="no columns")
    yield SampleInput(make((0, 3, 2)), (make((3, 2)),), name="empty batch")
    yield SampleInput(make((30, 3)), (make((4, 3)),), name="more than 25 rows (matrix product)")
    yield SampleInput(make((30, 3)), (make((4, 3)),), {"compute_mode": "donot_use_mm_for_euclid_dist"},
                      name="more than 25 rows, no matrix product")
    yield SampleInput(make((3, 4)), (make((5, 4)),), {"compute_mode": "use_mm_for_euclid_dist"},
                      name="matrix product")
    yield SampleInput(make((4, 3), noncontiguous=True), (make((3, 5)).t(),), {"p": 1.0}, name="views")


def _cdist_ref(x1, x2, p=2.0, compute_mode=None):
    diff = np.abs(x1.astype(np.float64)[..., :, None, :] - x2.astype(np.float64)[..., None, :, :])
    if p == 0:
        return np.count_nonzero(diff, axis=-1).astype(np.float64)
    if math.isinf(p):
        return diff.max(axis=-1, initial=0.0)
    return np.power(np.power(diff, p).sum(axis=-1), 1.0 / p)


def _chain_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    cases = [
        ([(2, 3)], "one matrix"),
        ([(2, 3), (3, 4)], "two matrices"),
        ([(2, 3), (3, 4), (4, 2)], "three matrices"),
        ([(4, 1), (1, 3), (3, 2), (2, 5)], "four matrices"),
        ([(0, 3), (3, 2), (2, 4)], "empty"),
        ([(2, 3), (3, 0), (0, 2)], "empty inner dim"),
    ]
    for shapes, name in cases:
        matrices = [make(s) for s in shapes]
        yield SampleInput(matrices[0], tuple(matrices[1:]), name=name)
    yield SampleInput(make((3, 2)).t(), (make((3, 4), noncontiguous=True),), name="views")


def _chain_ref(*matrices):
    if len(matrices) == 1:
        return matrices[0].copy()
    result = _up(matrices[0])
    for m in matrices[1:]:
        result = result @ _up(m)
    return result


# -- error inputs -------------------------------------------------------------------------


def _errors(*cases):
    """Error inputs from ``(callable making the sample, error type, regex)`` cases."""

    def gen(opinfo, device):
        import ember

        def t(*shape, dtype=ember.float32):
            return ember.ones(shape, dtype=dtype, device=device)

        for make_sample, error, regex in cases:
            yield ErrorInput(make_sample(t, ember), error, regex)

    return gen


_DTYPE_MISMATCH = r"expected m1 and m2 to have the same dtype, but got: float != double"

_matmul_errors = _errors(
    (lambda t, e: SampleInput(t(2, 3), (t(4, 5),)), RuntimeError, r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"),
    (lambda t, e: SampleInput(t(2, 3), (t(3, 2, dtype=e.float64),)), RuntimeError, _DTYPE_MISMATCH),
    (lambda t, e: SampleInput(t(3), (t(4),)), RuntimeError, r"inconsistent tensor size, expected tensor \[3\] and src \[4\]"),
    (lambda t, e: SampleInput(t(2, 3), (t(4),)), RuntimeError, r"size mismatch, got input \(2\), mat \(2x3\), vec \(4\)"),
    (lambda t, e: SampleInput(t(2, 2, 3), (t(4, 5),)), RuntimeError, r"shapes cannot be multiplied \(4x3 and 4x5\)"),
    (lambda t, e: SampleInput(t(2, 2, 3), (t(2, 4, 5),)), RuntimeError,
     r"Expected size for first two dimensions of batch2 tensor to be: \[2, 3\] but got: \[2, 4\]"),
    (lambda t, e: SampleInput(t(2, 2, 3), (t(3, 3, 5),)), RuntimeError,
     r"The size of tensor a \(2\) must match the size of tensor b \(3\)"),
    (lambda t, e: SampleInput(t(2, 2, 3), (t(2, 3, 2, dtype=e.float64),)), RuntimeError,
     "expected scalar type Float but found Double"),
    (lambda t, e: SampleInput(t(), (t(3),)), RuntimeError, "both arguments to matmul need to be at least 1D"),
    (lambda t, e: SampleInput(t(2, 2, dtype=e.bool), (t(2, 2, dtype=e.bool),)), NotImplementedError,
     "not implemented for 'Bool'"),
    (lambda t, e: SampleInput(t(2, 2), (3,)), TypeError, r"argument 'other' \(position 2\) must be Tensor, not int"),
)

_mm_errors = _errors(
    (lambda t, e: SampleInput(t(2, 2, 3), (t(3, 2),)), RuntimeError, "self must be a matrix"),
    (lambda t, e: SampleInput(t(2, 3), (t(3),)), RuntimeError, "mat2 must be a matrix"),
    (lambda t, e: SampleInput(t(2, 3), (t(4, 5),)), RuntimeError, r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"),
    (lambda t, e: SampleInput(t(2, 3), (t(3, 2, dtype=e.float64),)), RuntimeError, _DTYPE_MISMATCH),
    (lambda t, e: SampleInput(t(2, 3, dtype=e.bool), (t(3, 2, dtype=e.bool),)), NotImplementedError, "Bool"),
)

_bmm_errors = _errors(
    (lambda t, e: SampleInput(t(2, 3), (t(3, 2),)), RuntimeError, "batch1 must be a 3D tensor"),
    (lambda t, e: SampleInput(t(2, 2, 3), (t(3, 2),)), RuntimeError, "batch2 must be a 3D tensor"),
    (lambda t, e: SampleInput(t(2, 2, 3), (t(3, 3, 2),)), RuntimeError,
     r"Expected size for first two dimensions of batch2 tensor to be: \[2, 3\] but got: \[3, 3\]"),
    (lambda t, e: SampleInput(t(2, 2, 3), (t(2, 3, 2, dtype=e.float64),)), RuntimeError,
     "expected scalar type Float but found Double"),
    (lambda t, e: SampleInput(t(2, 2, 3, dtype=e.bool), (t(2, 3, 2, dtype=e.bool),)), NotImplementedError, "Bool"),
)

_mv_errors = _errors(
    (lambda t, e: SampleInput(t(3), (t(3),)), RuntimeError, "vector \\+ matrix @ vector expected, got 1, 1, 1"),
    (lambda t, e: SampleInput(t(2, 3), (t(3, 1),)), RuntimeError, "vector \\+ matrix @ vector expected, got 1, 2, 2"),
    (lambda t, e: SampleInput(t(2, 3), (t(4),)), RuntimeError, r"size mismatch, got input \(2\), mat \(2x3\), vec \(4\)"),
    (lambda t, e: SampleInput(t(2, 3), (t(3, dtype=e.float64),)), RuntimeError,
     "addmv input tensors must have the same dtype, but got Double, Float, and Double"),
)


def _dot_errors_for(name):
    return _errors(
        (lambda t, e: SampleInput(t(2, 3), (t(3),)), RuntimeError, "1D tensors expected, but got 2D and 1D tensors"),
        (lambda t, e: SampleInput(t(3), (t(4),)), RuntimeError,
         r"inconsistent tensor size, expected tensor \[3\] and src \[4\] to have the same number of elements"),
        (lambda t, e: SampleInput(t(3), (t(3, dtype=e.float64),)), RuntimeError,
         "dot : expected both vectors to have same dtype, but found Float and Double"),
        (lambda t, e: SampleInput(t(3, dtype=e.bool), (t(3, dtype=e.bool),)), NotImplementedError, "Bool"),
    )


_inner_errors = _errors(
    (lambda t, e: SampleInput(t(2, 3), (t(4),)), RuntimeError,
     r"inner\(\) the last dimension must match on both input tensors but got shapes \[2, 3\] and \[4\]"),
    (lambda t, e: SampleInput(t(2, 3), (t(3, dtype=e.float64),)), RuntimeError, "both inputs should have same dtype"),
)

_outer_errors = _errors(
    (lambda t, e: SampleInput(t(2, 2), (t(3),)), RuntimeError, "outer: Expected 1-D argument self, but got 2-D"),
    (lambda t, e: SampleInput(t(2), (t(),)), RuntimeError, "outer: Expected 1-D argument vec2, but got 0-D"),
    (lambda t, e: SampleInput(t(2), ([1.0],)), TypeError, "must be Tensor"),
)

_addmm_errors = _errors(
    (lambda t, e: SampleInput(t(2, 2), (t(2, 3), t(4, 2))), RuntimeError,
     r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x2\)"),
    (lambda t, e: SampleInput(t(2, 2), (t(3), t(3, 2))), RuntimeError, "mat1 must be a matrix, got 1-D tensor"),
    (lambda t, e: SampleInput(t(3, 3), (t(2, 3), t(3, 2))), RuntimeError,
     r"The expanded size of the tensor \(2\) must match the existing size \(3\)"),
    (lambda t, e: SampleInput(t(2, 2, dtype=e.float64), (t(2, 3), t(3, 2))), RuntimeError,
     "self and mat2 must have the same dtype, but got Double and Float"),
    (lambda t, e: SampleInput(t(2, 2), (t(2, 3, dtype=e.float64), t(3, 2))), RuntimeError,
     "mat1 and mat2 must have the same dtype, but got Double and Float"),
    (lambda t, e: SampleInput(t(2, 2, dtype=e.bool), (t(2, 3, dtype=e.bool), t(3, 2, dtype=e.bool))),
     NotImplementedError, "Bool"),
    (lambda t, e: SampleInput(1.0, (t(2, 3), t(3, 2))), TypeError, r"argument 'input' \(position 1\) must be Tensor"),
)

_addmv_errors = _errors(
    (lambda t, e: SampleInput(t(2), (t(2, 3), t(4))), RuntimeError, r"size mismatch, got input \(2\), mat \(2x3\), vec \(4\)"),
    (lambda t, e: SampleInput(t(3), (t(2, 3), t(3))), RuntimeError, r"size mismatch, got input \(3\), mat \(2x3\), vec \(3\)"),
    (lambda t, e: SampleInput(t(1, 2), (t(2, 3), t(3))), RuntimeError, "vector \\+ matrix @ vector expected, got 2, 2, 1"),
    (lambda t, e: SampleInput(t(2, dtype=e.float64), (t(2, 3), t(3))), RuntimeError,
     "addmv input tensors must have the same dtype, but got Double, Float, and Float"),
)

_addbmm_errors = _errors(
    (lambda t, e: SampleInput(t(2, 2), (t(2, 2, 3), t(2, 4, 2))), RuntimeError,
     r"Incompatible matrix sizes for bmm \(2x3 and 4x2\)"),
    (lambda t, e: SampleInput(t(2, 2), (t(2, 2, 3), t(3, 3, 2))), RuntimeError,
     "batch1 and batch2 must have same number of batches, got 2 and 3"),
    (lambda t, e: SampleInput(t(3, 2), (t(2, 2, 3), t(2, 3, 2))), RuntimeError,
     r"The expanded size of the tensor \(2\) must match the existing size \(3\) at non-singleton dimension 0"),
    (lambda t, e: SampleInput(t(2, 2), (t(2, 2, 3, 2), t(2, 3, 2))), RuntimeError, "batch1 must be a 3D tensor"),
    (lambda t, e: SampleInput(t(2, 2), (t(2, 2, 3), t(2, 3))), IndexError, "Dimension out of range"),
    (lambda t, e: SampleInput(t(2, 2, dtype=e.float64), (t(2, 2, 3), t(2, 3, 2))), RuntimeError,
     "self and mat2 must have the same dtype, but got Double and Float"),
)

_baddbmm_errors = _errors(
    (lambda t, e: SampleInput(t(2, 2, 2), (t(2, 2, 3), t(2, 4, 2))), RuntimeError,
     r"Expected size for first two dimensions of batch2 tensor to be: \[2, 3\] but got: \[2, 4\]"),
    (lambda t, e: SampleInput(t(3, 2, 2), (t(2, 2, 3), t(2, 3, 2))), RuntimeError,
     r"The expanded size of the tensor \(2\) must match the existing size \(3\) at non-singleton dimension 0"),
    (lambda t, e: SampleInput(t(2, 2, 2, dtype=e.float64), (t(2, 2, 3), t(2, 3, 2))), RuntimeError,
     "Input dtypes must be the same, got: input double, batch1: float, batch2: float"),
    (lambda t, e: SampleInput(t(2, 2, 2, dtype=e.bool), (t(2, 2, 3, dtype=e.bool), t(2, 3, 2, dtype=e.bool))),
     NotImplementedError, "Bool"),
)

_addr_errors = _errors(
    (lambda t, e: SampleInput(t(2, 2), (t(2, 1), t(2))), RuntimeError, "addr: Expected 1-D argument vec1, but got 2-D"),
    (lambda t, e: SampleInput(t(2, 2), (t(3), t(2))), RuntimeError,
     r"The expanded size of the tensor \(3\) must match the existing size \(2\) at non-singleton dimension 0"),
    (lambda t, e: SampleInput(t(2, 2), (t(2), t(2)), {"alpha": True}), RuntimeError,
     "Boolean alpha only supported for Boolean results"),
    (lambda t, e: SampleInput(t(2, 2, dtype=e.int64), (t(2, dtype=e.int64), t(2, dtype=e.int64)), {"beta": 0.5}),
     RuntimeError, "For integral input tensors, argument beta must not be a floating point number"),
)

_einsum_errors = _errors(
    (lambda t, e: SampleInput("ij,jk->ik", (t(2, 3),)), RuntimeError, "fewer operands were provided than specified"),
    (lambda t, e: SampleInput("i->i", (t(2), t(2))), RuntimeError, "more operands were provided than specified"),
    (lambda t, e: SampleInput("ijk,jk->ik", (t(2, 3), t(3, 2))), RuntimeError,
     r"the number of subscripts in the equation \(3\) does not match the number of dimensions \(2\) for operand 0"),
    (lambda t, e: SampleInput("ij,jk->ik", (t(2, 3), t(4, 2))), RuntimeError,
     "subscript j has size 4 for operand 1 which does not broadcast with previously seen size 3"),
    (lambda t, e: SampleInput("i1,jk->ik", (t(2, 3), t(3, 2))), RuntimeError,
     "invalid subscript given at index 1 in the equation string"),
    (lambda t, e: SampleInput("ij,jk->ii", (t(2, 3), t(3, 2))), RuntimeError,
     "output subscript i appears more than once in the output"),
    (lambda t, e: SampleInput("ij,jk->iz", (t(2, 3), t(3, 2))), RuntimeError,
     "output subscript z does not appear in the equation for any input operand"),
    (lambda t, e: SampleInput("...i...,i->i", (t(2, 3), t(3))), RuntimeError, "an ellipsis was already found"),
    (lambda t, e: SampleInput("ii->i", (t(3, 1),)), RuntimeError, "subscript i is repeated for operand 0"),
    (lambda t, e: SampleInput("ij,jk->ik", (t(2, 3), t(3, 2, dtype=e.float64))), RuntimeError,
     "expected scalar type Float but found Double"),
    (lambda t, e: SampleInput("ij,jk->ik", (t(2, 3, dtype=e.bool), t(3, 2, dtype=e.bool))), NotImplementedError, "Bool"),
    (lambda t, e: SampleInput("ij,jk->i", (t(2, 3, dtype=e.int8), t(3, 2, dtype=e.int8))), RuntimeError,
     "expected scalar type Char but found Long"),
    (lambda t, e: SampleInput("i->i", ([1, 2],)), TypeError, "expected Tensor as element 0"),
)

_tensordot_errors = _errors(
    (lambda t, e: SampleInput(t(2, 3), (t(4, 2),), {"dims": 1}), RuntimeError,
     "contracted dimensions need to match, but first has size 3 in dim -1 and second has size 4 in dim 0"),
    (lambda t, e: SampleInput(t(2, 3), (t(3, 2),), {"dims": -1}), RuntimeError, "tensordot expects dims >= 0"),
    (lambda t, e: SampleInput(t(2, 3), (t(3, 2),), {"dims": 3}), RuntimeError, "tensordot expects dims < ndim_a or ndim_b"),
    (lambda t, e: SampleInput(t(2, 3), (t(3, 2),), {"dims": ([0, 1], [0])}), RuntimeError,
     "both dimension lists should have same length"),
    (lambda t, e: SampleInput(t(3, 3), (t(3, 3),), {"dims": ([0, 0], [0, 1])}), RuntimeError,
     "dim 0 appears multiple times in the list of dims"),
    (lambda t, e: SampleInput(t(2, 3), (t(3, 2, dtype=e.float64),), {"dims": 1}), RuntimeError,
     "both inputs should have same dtype"),
    (lambda t, e: SampleInput(t(2, 3), (t(3, 2),), {"dims": ([5], [0])}), IndexError, "Dimension out of range"),
)

_kron_errors = _errors(
    (lambda t, e: SampleInput(t(2), ([1],)), TypeError, r"argument 'other' \(position 2\) must be Tensor, not list"),
)

_cross_errors = _errors(
    (lambda t, e: SampleInput(t(2, 4), (t(2, 4),), {"dim": 1}), RuntimeError,
     "linalg.cross: inputs dimension 1 must have length 3. Got 4 and 4"),
    (lambda t, e: SampleInput(t(2, 3), (t(3),), {"dim": -1}), RuntimeError,
     "linalg.cross: inputs must have the same number of dimensions"),
    (lambda t, e: SampleInput(t(2, 3), (t(4, 3),), {"dim": 1}), RuntimeError,
     r"The size of tensor a \(2\) must match the size of tensor b \(4\)"),
    (lambda t, e: SampleInput(t(2, 3), (t(2, 3, dtype=e.float64),), {"dim": 1}), RuntimeError,
     "expected scalar type Float but found Double"),
    (lambda t, e: SampleInput(t(2, 3), (t(2, 3),), {"dim": 2}), IndexError, "Dimension out of range"),
    (lambda t, e: SampleInput(t(3, dtype=e.bool), (t(3, dtype=e.bool),), {"dim": 0}), NotImplementedError, "Bool"),
)

_cdist_errors = _errors(
    (lambda t, e: SampleInput(t(3), (t(3),)), RuntimeError, "cdist only supports at least 2D tensors, X1 got: 1D"),
    (lambda t, e: SampleInput(t(2, 3), (t(2, 4),)), RuntimeError,
     "X1 and X2 must have the same number of columns. X1: 3 X2: 4"),
    (lambda t, e: SampleInput(t(2, 3), (t(2, 3),), {"p": -1}), RuntimeError, "cdist only supports non-negative p values"),
    (lambda t, e: SampleInput(t(2, 3), (t(2, 3),), {"compute_mode": "foo"}), ValueError,
     "foo is not a valid value for compute_mode"),
    (lambda t, e: SampleInput(t(2, 3, dtype=e.int64), (t(2, 3, dtype=e.int64),)), RuntimeError,
     "cdist only supports floating-point dtypes, X1 got: Long"),
    (lambda t, e: SampleInput(t(2, 3, dtype=e.float16), (t(2, 3, dtype=e.float16),)), NotImplementedError, "Half"),
    (lambda t, e: SampleInput(t(2, 3), (t(2, 3, dtype=e.float64),)), RuntimeError,
     "expected scalar type Float but found Double"),
    (lambda t, e: SampleInput(t(2, 2, 3), (t(3, 2, 3),)), RuntimeError,
     r"The size of tensor a \(2\) must match the size of tensor b \(3\)"),
)

_chain_errors = _errors(
    (lambda t, e: SampleInput(t(2, 3), (t(3),)), RuntimeError, "Tensor dimension is 1, expected 2 instead"),
    (lambda t, e: SampleInput(t(2, 3), (t(4, 2),)), RuntimeError,
     r"multi_dot\(\): tensors 0 and 1 with shapes \[2, 3\] and \[4, 2\] cannot be multiplied"),
    (lambda t, e: SampleInput(t(2, 3), (t(3, 4), t(4, 2, dtype=e.float64))), RuntimeError,
     "multi_dot\\(\\): all tensors must have be the same dtype but tensor 0 is float and tensor 2 double"),
)


# -- registrations ------------------------------------------------------------------------

_MATMUL_TOL = {D.float16: (2e-3, 1e-2)}
#: For ops whose half-precision results round after every step (as in PyTorch), against a reference that rounds once.
_ROUNDS_PER_STEP = {D.float16: (5e-3, 1e-2), D.bfloat16: (5e-2, 1e-1)}


def _ref2(fn):
    """A reference of two tensors computed at the references' precision."""
    return lambda a, b: fn(_up(a), _up(b))


register_opinfo(OpInfo("matmul", _matmul_samples, dtypes=_NO_BOOL, ref=_ref2(np.matmul), error_inputs=_matmul_errors,
                       tolerances=_MATMUL_TOL))
register_opinfo(OpInfo("mm", _mm_samples, dtypes=_NO_BOOL, ref=_ref2(np.matmul), error_inputs=_mm_errors,
                       tolerances=_MATMUL_TOL))
register_opinfo(OpInfo("bmm", _bmm_samples, dtypes=_NO_BOOL, ref=_ref2(np.matmul), error_inputs=_bmm_errors,
                       tolerances=_MATMUL_TOL))
register_opinfo(OpInfo("mv", _mv_samples, dtypes=_NO_BOOL, ref=_ref2(np.matmul), error_inputs=_mv_errors,
                       tolerances=_MATMUL_TOL))
register_opinfo(OpInfo("dot", _dot_samples, dtypes=_NO_BOOL, ref=_ref2(np.dot), error_inputs=_dot_errors_for("dot"),
                       tolerances=_MATMUL_TOL))
register_opinfo(OpInfo("vdot", _dot_samples, dtypes=_NO_BOOL, ref=_ref2(np.vdot), error_inputs=_dot_errors_for("vdot"),
                       tolerances=_MATMUL_TOL))
register_opinfo(OpInfo("inner", _inner_samples, dtypes=_NO_BOOL, ref=_ref2(np.inner), error_inputs=_inner_errors,
                       tolerances=_MATMUL_TOL))
register_opinfo(OpInfo("outer", _outer_samples, ref=_ref2(np.multiply.outer), error_inputs=_outer_errors))
register_opinfo(OpInfo("ger", _outer_samples, ref=_ref2(np.multiply.outer), error_inputs=_outer_errors))
register_opinfo(OpInfo(
    "addmm", _addmm_samples, dtypes=_NO_BOOL, error_inputs=_addmm_errors, tolerances=_MATMUL_TOL,
    ref=lambda input, m1, m2, beta=1, alpha=1: _blend_ref(input, _up(m1) @ _up(m2), beta, alpha, m1.dtype),
))
register_opinfo(OpInfo(
    "addmv", _addmv_samples, dtypes=_NO_BOOL, error_inputs=_addmv_errors, tolerances=_MATMUL_TOL,
    ref=lambda input, mat, vec, beta=1, alpha=1: _blend_ref(input, _up(mat) @ _up(vec), beta, alpha, mat.dtype),
))
register_opinfo(OpInfo(
    "addbmm", _addbmm_samples, dtypes=_NO_BOOL, error_inputs=_addbmm_errors, tolerances=_ROUNDS_PER_STEP,
    ref=lambda input, b1, b2, beta=1, alpha=1: _blend_ref(
        input, np.matmul(_up(b1), _up(b2)).sum(axis=0) if len(b1) else np.zeros((b1.shape[1], b2.shape[2]),
                                                                                 _up(b1).dtype),
        beta, alpha, b1.dtype),
))
register_opinfo(OpInfo(
    "baddbmm", _baddbmm_samples, dtypes=_NO_BOOL, error_inputs=_baddbmm_errors, tolerances=_MATMUL_TOL,
    ref=lambda input, b1, b2, beta=1, alpha=1: _blend_ref(input, np.matmul(_up(b1), _up(b2)), beta, alpha, b1.dtype),
))


def _addr_ref(input, vec1, vec2, beta=1, alpha=1):
    dtype = np.result_type(*(a.dtype if a.dtype.name != "bfloat16" else np.float32 for a in (input, vec1, vec2)))
    if dtype == np.bool_:
        product = np.logical_and.outer(vec1, vec2) if alpha else np.zeros((len(vec1), len(vec2)), bool)
        return np.logical_or(product, input) if beta else product
    return _blend_ref(input, np.multiply.outer(_up(vec1), _up(vec2)), beta, alpha, dtype)


register_opinfo(OpInfo("addr", _addr_samples, ref=_addr_ref, error_inputs=_addr_errors))
register_opinfo(OpInfo("einsum", _einsum_samples, dtypes=_NO_BOOL, ref=_einsum_ref, error_inputs=_einsum_errors,
                       tolerances=_MATMUL_TOL))
register_opinfo(OpInfo("tensordot", _tensordot_samples, dtypes=_NO_BOOL, ref=_tensordot_ref,
                       error_inputs=_tensordot_errors, tolerances=_MATMUL_TOL))
register_opinfo(OpInfo("kron", _kron_samples, ref=_kron_ref, error_inputs=_kron_errors))
register_opinfo(OpInfo("cross", _cross_samples, dtypes=_NO_BOOL, ref=_cross_ref, error_inputs=_cross_errors))
register_opinfo(OpInfo("cdist", _cdist_samples, dtypes=_CDIST_TYPES, ref=_cdist_ref, error_inputs=_cdist_errors,
                       tolerances={D.float32: (1e-4, 1e-4)}))
register_opinfo(OpInfo("chain_matmul", _chain_samples, dtypes=_NO_BOOL, ref=_chain_ref, error_inputs=_chain_errors,
                       tolerances=_ROUNDS_PER_STEP))
