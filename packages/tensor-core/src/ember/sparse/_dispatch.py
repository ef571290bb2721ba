"""How registry ops reach sparse tensors: ``SparseTensor.__ember_function__`` looks the op up here.

:data:`IMPLEMENTATIONS` maps a registry op's name to its sparse implementation, called with the
arguments normalised to the op's signature. An op without an entry raises
``NotImplementedError`` naming the op and the layout: a sparse tensor never reaches a dense kernel,
so there is no silent wrong answer.
"""

from __future__ import annotations

from .._layout import sparse_coo, sparse_csr, strided
from .._tensor import Tensor
from . import _functions as F
from ._graph import TRACED_OPS, is_traced, refuse_traced, traced_product
from ._graph import _check as _check_sparse_mm
from ._tensor import SparseTensor

__all__ = ["IMPLEMENTATIONS", "run_sparse", "unsupported"]


def _layout_of(args, kwargs):
    for a in (*args, *kwargs.values()):
        if isinstance(a, SparseTensor):
            return a.layout
        if isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, SparseTensor):
                    return b.layout
    return sparse_coo


def unsupported(name, layout):
    """The error for an op without a sparse implementation."""
    kind = "sparse CSR" if layout is sparse_csr else "sparse COO"
    return NotImplementedError(
        f"ember.{name} does not support {kind} tensors (layout {layout}); call .to_dense() first"
    )


def run_sparse(func, args, kwargs):
    """Run registry op ``func`` on arguments that include a sparse tensor."""
    name = getattr(func, "name", getattr(func, "__name__", repr(func)))
    if name not in TRACED_OPS and _any_traced(args, kwargs):
        raise refuse_traced(name)
    implementation = IMPLEMENTATIONS.get(name)
    if implementation is None or kwargs.get("out") is not None:
        raise unsupported(name if kwargs.get("out") is None else f"{name}(out=...)", _layout_of(args, kwargs))
    args, kwargs = func.normalize(args, kwargs)
    return implementation(*args, **kwargs)


def _any_traced(args, kwargs):
    """Whether a meta sparse tensor (a graph input being traced, :mod:`ember.sparse._graph`) is an argument."""
    for a in (*args, *kwargs.values()):
        for b in (a if isinstance(a, (list, tuple)) else (a,)):
            if isinstance(b, SparseTensor) and is_traced(b):
                return True
    return False


# -- the implementations, by op ------------------------------------------------------------


def _sparse_mm(input, mat2, transpose=False):
    _check_sparse_mm(input, mat2, transpose)
    if is_traced(input):
        return traced_product(input, mat2, transpose)
    return F._product(F._pattern(input), input._values_t, mat2, transpose)


def _mm(input, mat2):
    return F.matmul(input, mat2, "mm")


def _matmul(input, other):
    return F.matmul(input, other, "matmul")


def _addmm(input, mat1, mat2, *, beta=1, alpha=1):
    return F.addmm(input, mat1, mat2, beta=beta, alpha=alpha)


def _add(input, other, *, alpha=1):
    return F.add(input, other, alpha)


def _sub(input, other, *, alpha=1):
    return F.add(input, other, alpha, subtract=True)


def _div(input, other, *, rounding_mode=None):
    if not isinstance(input, SparseTensor) or not F._is_scalar(other):
        raise RuntimeError("div: a sparse tensor can only be divided by a scalar (or a zero-dim dense tensor)")
    from .. import div

    return F.map_values(input, lambda v: div(v, other, rounding_mode=rounding_mode),
                        needs_coalesced=rounding_mode is not None)


def _sum(input, dim=None, keepdim=False, *, dtype=None):
    return F.sparse_sum(input, dim, keepdim, dtype)


def _t(input):
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return input if input.ndim < 2 else F.transpose(input, 0, 1)


def _transpose(input, dim0, dim1):
    return F.transpose(input, dim0, dim1)


def _permute(input, *dims):
    return F.permute(input, dims[0] if len(dims) == 1 and isinstance(dims[0], (list, tuple)) else dims)


def _detach(input):
    return input._with_values(input._values_t.detach())


def _clone(input, *, memory_format=None):
    return input._with_values(input._values_t.clone(), map_indices=Tensor.clone)


def _to_copy(input, *, dtype=None, layout=None, device=None, pin_memory=False, non_blocking=False,
             memory_format=None):
    if layout is strided:
        return F.to_dense(input).to(dtype=dtype, device=device)
    values = input._values_t.to(dtype=dtype, device=device, non_blocking=non_blocking, copy=True)
    target = values.device
    result = input._with_values(values, map_indices=lambda indices: indices.to(target))
    if layout is not None and layout is not input.layout:
        result = result.to_sparse(layout=layout)
    return result


def _unary(function_name, needs_coalesced=True):
    """A zero-preserving elementwise op, applied to the stored values."""

    def run(input, *args, **kwargs):
        if kwargs.get("inplace"):
            raise unsupported(f"{function_name}(inplace=True)", input.layout)
        kwargs.pop("inplace", None)
        from .. import _ops

        op = _ops.registry[function_name]
        return F.map_values(input, lambda v: op(v, *args, **kwargs), needs_coalesced)

    run.__name__ = function_name
    return run


def _mul(input, other):
    return F.mul(input, other)


IMPLEMENTATIONS = {
    "_sparse_mm": _sparse_mm,
    "mm": _mm,
    "matmul": _matmul,
    "addmm": _addmm,
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "div": _div,
    "sum": _sum,
    "t": _t,
    "transpose": _transpose,
    "permute": _permute,
    "detach": _detach,
    "clone": _clone,
    "_to_copy": _to_copy,
    "neg": _unary("neg", needs_coalesced=False),
}
# elementwise ops with f(0) == 0: on the stored values of the coalesced tensor
for _name in ("abs", "sqrt", "sin", "tan", "tanh", "sinh", "asin", "asinh", "atan", "atanh", "expm1", "log1p",
              "relu", "sign", "sgn", "square", "trunc", "floor", "ceil", "round", "frac", "deg2rad", "rad2deg",
              "erf", "erfinv", "nan_to_num", "conj_physical"):
    IMPLEMENTATIONS[_name] = _unary(_name)
del _name
