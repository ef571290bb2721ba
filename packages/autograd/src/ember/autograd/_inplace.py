"""In-place ops and views under autograd.

An in-place op ``x.op_(...)`` is recorded as its out-of-place op followed by
a copy into ``x``, which then points at the new node. When ``x`` is a view,
the base's history is rewritten with :class:`CopySlices`: the gradient of the
base is the incoming one, except in the view's region, where it is what the
op's node gives; every other view of the base rebuilds its ``grad_fn`` from
the base's new history when next asked (:func:`view_grad_fn`), as in PyTorch.
"""

from __future__ import annotations

import ember
from ember._ops import registry
from ember._ops._dispatch import run_backend, state

from . import _record
from ._formula_node import FormulaNode
from ._table import DERIVATIVES, NONDIFFERENTIABLE
from .derivatives._helpers import as_strided_backward
from .graph import Node, edge_of

__all__ = ["inplace", "inplace_flagged", "CopySlices", "view_grad_fn"]

_copy_ = registry["copy_"]

def _differentiable_base(t):
    """The base whose history an in-place write through view ``t`` must update, or None."""
    info = t._view_info
    if info is not None:
        return info[0]
    if t._base is not None and not t._nondiff_view:
        return t._base
    return None


def _check_inplace_allowed(self):
    if self._requires_grad and self._grad_fn is None and self._view_info is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    base = _differentiable_base(self)
    if base is not None and base._requires_grad and base._grad_fn is None:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    return base


def inplace(op, args, kwargs, device):
    """The autograd step for an in-place op (``kind == "inplace"``)."""
    self = args[0]
    base = _check_inplace_allowed(self)
    functional = op.functional
    if functional is not None and functional not in NONDIFFERENTIABLE:
        op.meta(*args, **kwargs)  # the in-place op's own checks (result dtype castable to self's, shapes)
        position = getattr(op, "self_index", 0)  # where self goes among the functional's arguments
        return _functional_then_copy(
            functional, args[1 : 1 + position], self, args[1 + position :], kwargs, base, device
        )
    entry = DERIVATIVES.get(op)
    if entry is None:
        if op in NONDIFFERENTIABLE or functional in NONDIFFERENTIABLE:
            result = _record.run_without_grad(op, args, kwargs, device)
            _rebase_history(self, base, None, 0)
            return result
        raise NotImplementedError(f"the derivative for '{op.name}' is not implemented in ember-autograd")
    result, node = _record.record(op, entry, args, kwargs, device, attach=False)
    _rebase_history(self, base, node, 0)
    return result


def _functional_then_copy(functional, before, self, after, kwargs, base, device):
    """Overwrite ``self`` with ``functional(*before, self, *after, **kwargs)``, recorded as that call and a copy."""
    entry = DERIVATIVES.get(functional)
    # CopySlices can call the functional's node directly when its first gradient is self's
    direct = not before and entry is not None and entry.grad_args[:1] == entry.params[:1]
    source = self
    if base is not None and base._requires_grad:
        # self's history may be followed backward from here (by CopyBackwards below, or by double
        # backward through a formula that reads self): make it a view of base's current history that
        # keeps no values of base, which the write is about to change (the view op's node may have saved them)
        _regenerate_view(self, base)
    if not direct or entry.reads_original_input:
        source = ember.clone(self)  # the formula reads self's old value, which the write destroys
    out = functional(*before, source, *after, **kwargs)
    previous = state.grad_enabled
    state.grad_enabled = False
    try:
        run_backend(_copy_, (self, out), {}, device)
    finally:
        state.grad_enabled = previous
    if not out._requires_grad:
        _rebase_history(self, base, None, 0)  # self now holds values that depend on nothing that needs grad
    elif base is not None and not _takes_self_first(out._grad_fn, functional):
        # out's history is not one node of the functional op whose first input is self (the functional
        # was differentiated through its decomposition): the write is then a copy of out into the view
        _rebase_history(self, base, CopyBackwards(edge_of(out)), 0)
    else:
        _rebase_history(self, base, out._grad_fn, out._output_nr)
    return self


def inplace_flagged(op, position, args, kwargs, device):
    """``F.relu(x, inplace=True)``: recorded as ``relu(x)`` and a copy into ``x``, as ``x.relu_()`` is.

    The kernel writing into ``x`` under a formula node would let the formula read the overwritten
    input and skip the leaf and view rules of in-place writes; a decomposition that copies its
    result into ``x`` would find the input it saved modified.
    """
    self = args[0]
    base = _check_inplace_allowed(self)
    op.meta(*args, **kwargs)
    if position < len(args):
        args = args[:position] + (False,) + args[position + 1 :]
    else:
        kwargs = dict(kwargs, inplace=False)
    return _functional_then_copy(op, (), self, args[1:], kwargs, base, device)


def _takes_self_first(node, op):
    """Whether ``node`` is ``op``'s formula node with the gradient of ``op``'s first argument first (what
    :class:`CopySlices` calls to get the gradient of the overwritten region)."""
    if not isinstance(node, FormulaNode) or node.entry.op is not op:
        return False
    entry = node.entry
    return bool(entry.grad_args) and bool(entry.params) and entry.grad_args[0] == entry.params[0]


class CopyBackwards(Node):
    """``self.copy_(src)`` as a node: the old value of ``self`` gets no gradient, ``src`` all of it.

    Its inputs are ``(self, src)``, as :class:`CopySlices` expects of the node that wrote the view.
    """

    def __init__(self, src_edge):
        super().__init__(((None, 0), src_edge), 1)

    def apply(self, grad_outputs):
        return [None, grad_outputs[0]]


def _rebase_history(self, base, node, output_nr):
    """After an in-place write into ``self``, point ``self`` (and its base) at the node that wrote it."""
    if base is None:
        self._grad_fn = node
        self._output_nr = output_nr
        self._requires_grad = node is not None
        return
    if node is None and not base._requires_grad:
        return
    copy_slices = CopySlices(base, self, node, output_nr)
    base._grad_fn = copy_slices
    base._output_nr = 0
    base._requires_grad = True
    if base._view_info is not None:
        base._view_info = None
    _regenerate_view(self, base)


def _geometry(t, real_units):
    """``(shape, strides, offset)`` of ``t`` in elements, or in real scalars (a complex element is two)."""
    shape, strides, offset = tuple(t._data.shape), tuple(t.stride()), t.storage_offset()
    if real_units and t.is_complex():
        return shape + (2,), tuple(2 * s for s in strides) + (1,), 2 * offset
    return shape, strides, offset


def _region(base_like, view_geometry, view_is_complex):
    """The view's region of a tensor laid out like the base (``base_like``), as a view of it.

    ``view_geometry`` is in real scalars when the view's dtype differs from the base's
    (``view_as_real``, ``.real``/``.imag`` of a complex base; ``view_as_complex`` of a real one).
    """
    vshape, vstrides, voffset = view_geometry
    if base_like.is_complex() == view_is_complex:
        return base_like.as_strided(vshape, vstrides, voffset)
    if base_like.is_complex():
        return ember.view_as_real(base_like).as_strided(vshape, vstrides, voffset)
    return ember.view_as_complex(base_like.as_strided(vshape, vstrides, voffset))


def _row_major(shape):
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


class CopySlices(Node):
    """The history of a base after an in-place write through one of its views.

    The gradient of the new base is the incoming gradient, except in the
    region of the view, where it is what the in-place op's node gives for
    its ``self`` input; the op's other inputs get their gradients as usual.
    Views of another dtype (the real view of a complex base) are handled in
    real scalars.
    """

    def __init__(self, base, view, node, output_nr):
        base_edge = edge_of(base)
        rest = tuple(node.next_functions[1:]) if node is not None else ()
        super().__init__((base_edge, *rest), 1)
        real_units = base.is_complex() != view.is_complex()
        shape, strides, offset = _geometry(base, False)
        self._base_geometry = (shape, strides, base.dtype, base._device)
        vshape, vstrides, voffset = _geometry(view, real_units)
        # the region's offset relative to the base's first element, in the units of the region's strides
        relative = voffset - (2 * offset if real_units and base.is_complex() else offset)
        self._view_geometry = (vshape, vstrides, relative)
        self._view_is_complex = view.is_complex()
        self._fn = node
        self._fn_output_nr = output_nr

    def name(self):
        return "CopySlices"

    def apply(self, grad_outputs):
        g = grad_outputs[0]
        shape, strides, dtype, device = self._base_geometry
        if type(g) is not ember.Tensor and isinstance(g, ember.Tensor) and strides == _row_major(shape):
            # a subclass's gradient (vmap's batched tensor: the double backward under jacrev/hessian) makes
            # its own buffer, so that the writes below stay batched
            result = g.new_empty(shape, dtype=dtype, device=device)
        else:
            result = ember.empty_strided(shape, strides, dtype=dtype, device=device)
        result.copy_(g)
        region = _region(result, self._view_geometry, self._view_is_complex)
        if self._fn is None:
            region.zero_()
            return [result]
        fn_grads = [None] * self._fn._num_outputs
        fn_grads[self._fn_output_nr] = region.clone()
        res = self._fn.apply(fn_grads)
        if res[0] is None:
            region.zero_()
        else:
            region.copy_(res[0])
        return [result, *res[1:]]

    def _release(self):
        if self._fn is not None:
            self._fn._release()


def view_grad_fn(t):
    """``t.grad_fn`` for a view: rebuilt from the base's history when the base was written in place since."""
    base, version = t._view_info
    if t._storage.version != version and base._requires_grad:
        _regenerate_view(t, base)
    return t._grad_fn


class AsStridedView(Node):
    """A view's history rebuilt from its base's: ``base.as_strided(view's geometry)``.

    It keeps the two geometries, not the base's values, so later in-place
    writes to the storage don't invalidate it (the base's own history says
    what the base was). Its backward is :func:`as_strided_backward`, in
    real scalars when the view's dtype differs from the base's.
    """

    def __init__(self, base, view):
        super().__init__((edge_of(base),), 1)
        real_units = base.is_complex() != view.is_complex()
        self._real_units = real_units
        self._base_is_complex = base.is_complex()
        self._base_geometry = _geometry(base, real_units)
        self._view_geometry = _geometry(view, real_units)

    def name(self):
        return "AsStridedBackward0"

    def apply(self, grad_outputs):
        g = grad_outputs[0]
        if self._real_units and g.is_complex():
            g = ember.view_as_real(g.contiguous())
        g = as_strided_backward(g, *self._base_geometry, *self._view_geometry)
        if self._real_units and self._base_is_complex:
            g = ember.view_as_complex(g.contiguous())
        return [g]


def _regenerate_view(view, base):
    """Make ``view``'s history an ``as_strided`` of ``base``'s current history."""
    view._grad_fn = AsStridedView(base, view)
    view._output_nr = 0
    view._requires_grad = True
    view._view_info = (base, view._storage.version)
