"""einsum: the equation parsed into a plan of pairwise contractions (batched matrix products)."""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from .._tensor import Tensor
from ._matmul_helpers import _FROM_NP, _compute_array, _matmul_compute, _op
from ._pointwise_helpers import _torch_name
from ._registry import COMPOSITE, defop
from .matmul import matmul
from .views import diagonal, permute, reshape, select

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = []
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


# -- einsum --------------------------------------------------------------------------------

_ELLIPSIS = "..."


def _parse_term(term, offset, what):
    """Labels of one term of an equation: letters, and ``_ELLIPSIS`` for ``...``; spaces are skipped."""
    labels = []
    dots = 0
    ellipsis = False
    for i, ch in enumerate(term):
        if ch == ".":
            if ellipsis:
                raise RuntimeError(f"einsum(): found '.' for {what} for which an ellipsis was already found")
            dots += 1
            if dots == 3:
                labels.append(_ELLIPSIS)
                ellipsis, dots = True, 0
            continue
        if dots:
            raise RuntimeError(f"einsum(): found '.' for {what} that is not part of any ellipsis")
        if ch == " ":
            continue
        if not ("a" <= ch <= "z" or "A" <= ch <= "Z"):
            raise RuntimeError(
                f"einsum(): invalid subscript given at index {offset + i} in the equation string, subscripts must be "
                "in [a-zA-Z]"
            )
        labels.append(ch)
    if dots:
        raise RuntimeError(f"einsum(): found '.' for {what} that is not part of any ellipsis")
    return tuple(labels)


@functools.lru_cache(maxsize=512)
def _parse_equation(equation):
    """``(input terms, output term or None)`` of an einsum equation (None: implicit output)."""
    lhs, arrow, rhs = equation.partition("->")
    terms = []
    offset = 0
    for i, term in enumerate(lhs.split(",")):
        terms.append(_parse_term(term, offset, f"operand {i}"))
        offset += len(term) + 1
    output = None
    if arrow:
        output = _parse_term(rhs, len(lhs) + 2, "output")
        seen = set()
        for label in output:
            if label in seen and label != _ELLIPSIS:
                raise RuntimeError(f"einsum(): output subscript {label} appears more than once in the output")
            seen.add(label)
        used = {label for term in terms for label in term}
        for label in output:
            if label != _ELLIPSIS and label not in used:
                raise RuntimeError(
                    f"einsum(): output subscript {label} does not appear in the equation for any input operand"
                )
    return tuple(terms), output


def _sublist_equation(args):
    """The equation of the sublist form ``einsum(op1, [0, 1], op2, [1, 2], [0, 2])`` and its operands."""

    def term(sublist):
        parts = []
        for s in sublist:
            if s is Ellipsis:
                parts.append("...")
            elif isinstance(s, int) and 0 <= s < 52:
                parts.append(chr(ord("A") + s) if s < 26 else chr(ord("a") + s - 26))
            else:
                raise ValueError(
                    f"einsum(): subscript in subscript list is not within the valid range [0, 52), got {s}"
                )
        return "".join(parts)

    operands = list(args[0::2])
    sublists = list(args[1::2])
    output = None
    if len(operands) > len(sublists):  # a trailing output sublist
        output = operands.pop()
        if isinstance(output, Tensor):
            raise RuntimeError("einsum(): missing subscript list for the last operand")
    equation = ",".join(term(s) for s in sublists)
    if output is not None:
        equation += "->" + term(output)
    return equation, tuple(operands)


def _einsum_args(equation, operands):
    """Normalise the call forms (varargs, one list of operands, sublists) to ``(equation, operands)``."""
    if isinstance(equation, Tensor):
        return _sublist_equation((equation,) + tuple(operands))
    if not isinstance(equation, str):
        raise TypeError(f"einsum(): argument 'equation' must be str, not {type(equation).__name__}")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    for i, x in enumerate(operands):
        if not isinstance(x, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 1, but got {type(x).__name__}")
    return equation, operands


class _EinsumPlan:
    """What einsum computes for one equation and one set of operand shapes and dtypes.

    Attributes:
        terms (list[tuple]): per operand, a label per dim, ellipsis dims as ``("...", k)`` (k counts from the
            left of the broadcast ellipsis).
        output (tuple): the output's labels, in order.
        sizes (dict): label -> size (after broadcasting).
        squeeze (list[tuple[int]]): per operand, the dims of size 1 that broadcast against a larger size.
        dtype (ember.dtype): the result dtype.
        shape (tuple[int]): the result shape.
        np_terms (list[str]): per operand, one letter per dim left after squeezing (ellipsis dims get letters
            the equation does not use).
        np_output (str): the output's letters.
    """

    __slots__ = ("terms", "output", "sizes", "squeeze", "dtype", "shape", "np_terms", "np_output")


def _sum_dtype(dtype):
    return D.int64 if dtype.category <= D.INTEGRAL else dtype


def _einsum_result_dtype(sizes_per_op, dtypes, output):
    """The result dtype, following PyTorch's left-to-right evaluation.

    One operand: labels left out of the output are summed with ``sum``, which
    turns bool and integer tensors into int64. Several operands: a label left
    out of the output is summed (with ``sum``) in the last operand where its
    size is not 1 when the running result does not have it, contracted with a
    matrix product (``bmm``/``dot``, which need one dtype and refuse bool) when
    it does, and squeezed wherever its size is 1. A contraction with an empty
    side gives zeros of the operand's dtype without those checks; operands
    without a contracted label multiply, with type promotion.
    """
    out = set(output)
    if len(sizes_per_op) == 1:
        return _sum_dtype(dtypes[0]) if any(label not in out for label in sizes_per_op[0]) else dtypes[0]
    last = {}
    for i, sizes in enumerate(sizes_per_op):
        for label, size in sizes.items():
            if size != 1:
                last[label] = i
    result = result_dtype = None
    for i, (sizes, op_dtype) in enumerate(zip(sizes_per_op, dtypes)):
        kept, contracted, summed = {}, [], []
        for label, size in sizes.items():
            last_op = last.get(label, -1)
            if label in out or last_op > i:
                kept[label] = size
            elif last_op == i:  # size != 1 here, and needed nowhere later
                if result is None or result.get(label, 1) == 1:
                    summed.append(label)
                else:
                    contracted.append(label)
            # else: size 1, squeezed away
        if summed:
            op_dtype = _sum_dtype(op_dtype)
        if result is None:
            result, result_dtype = kept, op_dtype
            continue
        if contracted:
            empty = 0 in result.values() or 0 in kept.values() or any(sizes[label] == 0 for label in contracted)
            if empty:
                result_dtype = op_dtype
            elif result_dtype is D.bool:
                raise NotImplementedError("\"einsum\" not implemented for 'Bool'")
            elif result_dtype is not op_dtype:
                raise RuntimeError(
                    f"expected scalar type {_torch_name(result_dtype)} but found {_torch_name(op_dtype)}"
                )
        else:
            result_dtype = D.promote_types(result_dtype, op_dtype)
        for label in contracted + summed:
            result.pop(label, None)
        for label, size in kept.items():
            if result.get(label, 1) == 1:
                result[label] = size
    return result_dtype


@functools.lru_cache(maxsize=512)
def _einsum_plan(equation, shapes, dtypes):
    """The :class:`_EinsumPlan` of ``equation`` on operands of ``shapes`` and ``dtypes``, after PyTorch's checks."""
    terms, output = _parse_equation(equation)
    if not shapes:
        raise RuntimeError("einsum(): must provide at least one operand")
    if len(terms) > len(shapes):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
    if len(terms) < len(shapes):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    # expand ellipses into labels of their own, aligned on the right
    ell_ndim = 0
    for i, (term, shape) in enumerate(zip(terms, shapes)):
        n_labels = len(term) - (_ELLIPSIS in term)
        if _ELLIPSIS in term:
            if n_labels > len(shape):
                raise RuntimeError(
                    f"einsum(): the number of subscripts in the equation ({n_labels}) is more than the number of "
                    f"dimensions ({len(shape)}) for operand {i}"
                )
            ell_ndim = max(ell_ndim, len(shape) - n_labels)
        elif n_labels != len(shape):
            raise RuntimeError(
                f"einsum(): the number of subscripts in the equation ({n_labels}) does not match the number of "
                f"dimensions ({len(shape)}) for operand {i} and no ellipsis was given"
            )
    full_terms = []
    for term, shape in zip(terms, shapes):
        labels = []
        for label in term:
            if label == _ELLIPSIS:
                covered = len(shape) - (len(term) - 1)
                labels.extend((_ELLIPSIS, ell_ndim - covered + k) for k in range(covered))
            else:
                labels.append(label)
        full_terms.append(tuple(labels))
    # sizes: repeated labels of one operand must agree; across operands they broadcast
    sizes = {}
    sizes_per_op = []
    for i, (labels, shape) in enumerate(zip(full_terms, shapes)):
        own = {}
        for label, n in zip(labels, shape):
            if label in own and own[label] != n:
                raise RuntimeError(
                    f"einsum(): subscript {label} is repeated for operand {i} but the sizes don't match, "
                    f"{own[label]} != {n}"
                )
            own[label] = n
        for label, n in own.items():
            seen = sizes.get(label)
            if seen is None or seen == 1:
                sizes[label] = n
            elif n != 1 and n != seen:
                if isinstance(label, tuple):
                    raise RuntimeError(
                        "einsum(): operands do not broadcast with remapped shapes (original->remapped): "
                        + " ".join(str(list(s)) for s in shapes)
                    )
                raise RuntimeError(
                    f"einsum(): subscript {label} has size {n} for operand {i} which does not broadcast with "
                    f"previously seen size {seen}"
                )
        sizes_per_op.append(own)
    # the output: given, or the ellipsis dims then the labels used once, in alphabetical order
    ellipsis_labels = [(_ELLIPSIS, k) for k in range(ell_ndim)]
    if output is None:
        counts = {}
        for term in terms:
            for label in term:
                counts[label] = counts.get(label, 0) + 1
        out = ellipsis_labels + sorted(label for label, c in counts.items() if c == 1 and label != _ELLIPSIS)
    else:
        out = []
        for label in output:
            out.extend(ellipsis_labels if label == _ELLIPSIS else [label])
    plan = _EinsumPlan()
    plan.terms, plan.output, plan.sizes = full_terms, tuple(out), sizes
    plan.shape = tuple(sizes.get(label, 1) for label in out)
    plan.dtype = _einsum_result_dtype(sizes_per_op, [_FROM_NP(d) for d in dtypes], out)
    # numpy's equation: one letter per label; size-1 dims that broadcast are squeezed away
    letters = {}
    free = iter(c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in sizes)
    for label in sizes:
        if isinstance(label, str):
            letters[label] = label
        else:
            letter = next(free, None)
            if letter is None:
                raise RuntimeError(
                    "einsum(): too many subscripts in the equation (at most 52 labels, ellipsis dims included)"
                )
            letters[label] = letter
    plan.squeeze, plan.np_terms = [], []
    for labels, shape in zip(full_terms, shapes):
        squeeze = tuple(d for d, (label, n) in enumerate(zip(labels, shape)) if n == 1 and sizes[label] != 1)
        plan.squeeze.append(squeeze)
        plan.np_terms.append("".join(letters[label] for d, label in enumerate(labels) if d not in squeeze))
    plan.np_output = "".join(letters[label] for label in out)
    return plan


def _einsum_plan_for(equation, operands):
    return _einsum_plan(equation, tuple(x._data.shape for x in operands), tuple(x._data.dtype for x in operands))


def _einsum_meta(equation, *operands):
    """Einstein summation: products of the operands' elements, summed over the labels missing from the output.

    The equation names each operand's dims with letters (``"ij,jk->ik"`` is a matrix product); ``...``
    stands for any number of leading or middle dims, which broadcast across operands. A label repeated
    within one operand takes its diagonal; labels left out of the output (after ``->``) are summed. Without
    ``->`` the output is the ellipsis dims, then the labels that appear once, in alphabetical order. Sizes
    of a label broadcast (1 against n). The operands may also be given as one list, or in the sublist form
    ``einsum(a, [0, 1], b, [1, 2], [0, 2])``.

    Args:
        equation (str): the subscripts.
        *operands (Tensor): one tensor per term of the equation.

    Returns:
        Tensor: the output dims of the equation. The dtype follows PyTorch: the operands' dtype, except that
        integer and bool sums give int64 as ``ember.sum`` does.

    Raises:
        RuntimeError: for malformed equations, operand counts or ranks that don't match the equation, sizes that
            don't broadcast, or operands of different dtypes where PyTorch multiplies matrices.
        NotImplementedError: for bool operands that need a matrix product.

    Example:
        >>> import ember
        >>> a = ember.tensor([[1., 2.], [3., 4.]])
        >>> ember.einsum("ij,jk->ik", a, a)
        tensor([[ 7., 10.],
                [15., 22.]])
        >>> ember.einsum("ii", a)
        tensor(5.)
        >>> ember.einsum("...ij->...ji", ember.ones(5, 2, 3)).shape
        ember.Size([5, 3, 2])
    """
    equation, operands = _einsum_args(equation, operands)
    plan = _einsum_plan_for(equation, operands)
    return MetaArray(plan.shape, plan.dtype.numpy_dtype)


def _einsum_cpu(equation, *operands):
    equation, operands = _einsum_args(equation, operands)
    plan = _einsum_plan_for(equation, operands)
    np_dtype = plan.dtype.numpy_dtype
    arrays = []
    for x, squeeze in zip(operands, plan.squeeze):
        a = _compute_array(x._data, np_dtype)
        if squeeze:
            a = a.reshape(tuple(n for d, n in enumerate(a.shape) if d not in squeeze))
        arrays.append(a)
    if len(arrays) == 1:
        result = np.einsum(f"{plan.np_terms[0]}->{plan.np_output}", arrays[0])
    else:
        result = _einsum_pairwise(arrays, plan.np_terms, plan.np_output)
    result = np.asarray(result)
    if result.base is not None or not result.flags.c_contiguous:  # a view of an operand, or a permuted result
        result = np.array(result, order="C")
    return result.astype(np_dtype, copy=False)


def _einsum_pairwise(arrays, terms, output):
    """Contract operands left to right (as PyTorch does), each pair as one batched matrix product.

    ``terms`` and ``output`` are strings of letters; a letter repeated within a
    term takes the diagonal. Letters needed neither later nor in the output
    are summed as early as possible.
    """
    items = []
    for a, term in zip(arrays, terms):
        unique = "".join(dict.fromkeys(term))
        if unique != term:
            a = np.einsum(f"{term}->{unique}", a)
        items.append((a, unique))
    out = set(output)

    def needed(after):
        keep = set(out)
        for _, term in items[after:]:
            keep.update(term)
        return keep

    x, xl = _sum_out_array(*items[0], needed(1))
    for i in range(1, len(items)):
        keep = needed(i + 1)
        y, yl = _sum_out_array(*items[i], keep | set(xl))
        x, xl = _contract_arrays(x, xl, y, yl, keep)
    x, xl = _sum_out_array(x, xl, out)
    return x.transpose([xl.index(c) for c in output])


def _sum_out_array(a, labels, keep):
    axes = tuple(d for d, c in enumerate(labels) if c not in keep)
    if not axes:
        return a, labels
    return a.sum(axis=axes, dtype=a.dtype), "".join(c for c in labels if c in keep)


def _contract_arrays(x, xl, y, yl, keep):
    """Contract two labelled arrays: shared labels not in ``keep`` are summed, the others batch or stay."""
    batch = [c for c in xl if c in yl and c in keep]
    summed = [c for c in xl if c in yl and c not in keep]
    left = [c for c in xl if c not in yl]
    right = [c for c in yl if c not in xl]
    size = dict(zip(xl, x.shape))
    size.update(zip(yl, y.shape))

    def numel(labels):
        return math.prod(size[c] for c in labels)

    B, L, C, R = numel(batch), numel(left), numel(summed), numel(right)
    xp = x.transpose([xl.index(c) for c in batch + left + summed])
    yp = y.transpose([yl.index(c) for c in batch + summed + right])
    if not summed:  # an outer product per batch: broadcasting multiply
        z = np.multiply(xp.reshape(B, L, 1), yp.reshape(B, 1, R))
    elif L == 1 and R == 1:  # dot products per batch
        z = np.einsum("bc,bc->b", xp.reshape(B, C), yp.reshape(B, C))
    else:
        z = _matmul_compute(xp.reshape(B, L, C), yp.reshape(B, C, R))
    labels = batch + left + right
    return z.reshape(tuple(size[c] for c in labels)), "".join(labels)


def _einsum_decomp(equation, *operands):
    equation, operands = _einsum_args(equation, operands)
    plan = _einsum_plan_for(equation, operands)
    dtype = plan.dtype
    sum_ = _op("sum")
    items = []
    for x, labels, squeeze in zip(operands, plan.terms, plan.squeeze):
        for d in reversed(squeeze):
            x = select(x, d, 0)
        labels = [label for d, label in enumerate(labels) if d not in squeeze]
        while len(set(labels)) != len(labels):  # a repeated label: take the diagonal
            label = next(label for label in labels if labels.count(label) > 1)
            d1 = labels.index(label)
            d2 = labels.index(label, d1 + 1)
            x = diagonal(x, 0, d1, d2)
            labels = [lb for i, lb in enumerate(labels) if i not in (d1, d2)] + [label]
        if x.dtype is not dtype:
            x = x.to(dtype)
        items.append((x, labels))
    out = list(plan.output)

    def needed(after):
        keep = set(out)
        for _, labels in items[after:]:
            keep.update(labels)
        return keep

    def sum_out(x, labels, keep):
        dims = [d for d, label in enumerate(labels) if label not in keep]
        if not dims:
            return x, labels
        x = sum_(x, dims)
        return x, [label for label in labels if label in keep]

    x, labels = sum_out(*items[0], needed(1))
    for i in range(1, len(items)):
        keep = needed(i + 1)
        y, ylabels = sum_out(*items[i], keep | set(labels))
        x, labels = _contract(x, labels, y, ylabels, keep)
    x, labels = sum_out(x, labels, set(out))
    if labels != out:
        x = permute(x, *[labels.index(label) for label in out])
    return x if x.dtype is dtype else x.to(dtype)


def _contract(x, xl, y, yl, keep):
    """Contract two labelled tensors as one batched matrix product; labels not in ``keep`` are summed."""
    batch = [label for label in xl if label in yl and label in keep]
    summed = [label for label in xl if label in yl and label not in keep]
    left = [label for label in xl if label not in yl]
    right = [label for label in yl if label not in xl]
    size = {**dict(zip(xl, x.shape)), **dict(zip(yl, y.shape))}

    def numel(labels):
        return math.prod(size[label] for label in labels)

    xp = permute(x, *[xl.index(label) for label in batch + left + summed])
    yp = permute(y, *[yl.index(label) for label in batch + summed + right])
    xp = reshape(xp, (numel(batch), numel(left), numel(summed)))
    yp = reshape(yp, (numel(batch), numel(summed), numel(right)))
    z = reshape(matmul(xp, yp), tuple(size[label] for label in batch + left + right))
    return z, batch + left + right


einsum = defop("einsum", _einsum_meta, cpu=_einsum_cpu, category=COMPOSITE, decomposition=_einsum_decomp)
