"""The backward node of ops with formulas in the derivative table, and the checks of its results.

A :class:`FormulaNode` holds what the forward call saved for the formulas of
its op (see :mod:`ember.autograd._table`), runs the formulas whose inputs need
a gradient, and makes each gradient fit its input: summed over broadcast
dimensions and cast to the input's dtype and device (:func:`validate_grad`).
"""

from __future__ import annotations

from types import MappingProxyType

import ember
from ember._dtype import from_numpy_dtype
from ember._ops._dispatch import state as _dispatch_state

from .graph import Node, SavedTensor

__all__ = ["FormulaNode", "node_class", "validate_grad", "sum_to"]


class FormulaNode(Node):
    """A node whose backward is an entry of the derivative table (made by ``ember.autograd._record.new_node``).

    Attributes:
        entry (Derivative): the op's formulas.
    """

    # Defaults at class level: each recorded op sets only what differs.
    _needed = -1  # bit mask over grad_args of the arguments that need a gradient (-1: all)
    _num_outputs = 1
    _saved = MappingProxyType({})  # {argument name: value}, SavedTensor for tensors (read-only when none)
    _saved_results = None  # tuple of SavedTensor
    _output_meta = None  # multi-output ops: (shape, dtype, device) per output
    _runs_ember_code = True  # the formulas are ember ops

    def name(self):
        return self.entry.node_name

    def _unpacked(self):
        name = self.entry.node_name
        env = {}
        if self._saved_results is _FREED_TENSOR:
            raise RuntimeError(_FREED)
        for key, value in self._saved.items():
            if type(value) is SavedTensor:
                value = value.unpack(name)
            elif value is _FREED_TENSOR:
                raise RuntimeError(_FREED)
            elif type(value) is list and value and type(value[0]) is SavedTensor:
                value = [v.unpack(name, i) for i, v in enumerate(value)]
            env[key] = value
        saved_results = self._saved_results
        if saved_results is not None:
            if len(saved_results) == 1:
                result = saved_results[0].unpack(name, 0, self)
                env["result"] = result
                env["results"] = (result,)
            else:
                results = tuple(
                    s.unpack(name, i, self) if s is not None else None for i, s in enumerate(saved_results)
                )
                env["result"] = results[0]
                env["results"] = results
        return env

    def apply(self, grad_outputs):
        return self._apply_release(grad_outputs, False)

    def _apply_release(self, grad_outputs, release=True):
        """``apply`` and then (when ``release``) ``_release`` in one frame: the engine's compiled loop calls
        this once per node of a backward that frees the graph (see ``Node._apply_release``)."""
        if grad_outputs is None:
            if release:
                self._release()
            return None
        entry = self.entry
        steps = entry.simple_steps
        if steps is None or self._layout is not entry.static_layout or self._output_meta is not None:
            grads = self._apply_general(grad_outputs)
            if release:
                self._release()
            return grads
        # The common node, inlined (this runs once per node of every backward): one output, one formula
        # per differentiable tensor argument.
        env = {"grad": grad_outputs[0]}
        saved = self._saved
        if saved:  # _unpacked(), inlined
            name = entry.node_name
            for key, value in saved.items():
                if type(value) is SavedTensor:
                    # SavedTensor.unpack's common case for an input, inlined: no unpack hook, not freed, not
                    # modified in place since it was saved; anything else (and the errors) through unpack
                    t = value._tensor
                    if value._unpack is None and t is not None and not value._is_output and (
                        (0 if t._storage is None else t._storage.version) == value._version
                    ):
                        value = t
                    else:
                        value = value.unpack(name)
                elif value is _FREED_TENSOR:
                    raise RuntimeError(_FREED)
                elif type(value) is list and value and type(value[0]) is SavedTensor:
                    value = [v.unpack(name, i) for i, v in enumerate(value)]
                env[key] = value
        results = self._saved_results
        if results is not None:
            if results is _FREED_TENSOR:
                raise RuntimeError(_FREED)
            saved_result = results[0]  # one output: one entry
            result = saved_result._tensor
            # SavedTensor.unpack's common case inlined: no unpack hook, not freed, not modified in place, and
            # no double backward (grad mode off) that would need the output's history
            if saved_result._unpack is not None or result is None or _dispatch_state.grad_enabled or (
                (0 if result._storage is None else result._storage.version) != saved_result._version
            ):
                result = saved_result.unpack(entry.node_name, 0, self)
            env["result"] = result
            if entry.reads_results:
                env["results"] = (result,)
        next_functions = self.next_functions
        meta = self._input_meta
        grads = [None] * len(next_functions)
        for i, fn, first, second in steps:  # (see Derivative.simple_steps)
            if next_functions[i][0] is None:
                continue  # an input that needs no gradient (or is not a tensor)
            if second is not None:
                g = fn(env[first], env[second])
            elif first is not None:
                g = fn(env[first])
            else:
                g = fn(env)  # the formula's caller, for other parameter counts
            if g is not None:
                m = meta[i]
                data = g._data
                # (numpy's dtypes are compared by identity first: equal ones are almost always the same object)
                if data.shape != m[0] or (data.dtype is not m[1] and data.dtype != m[1]) or g._device is not m[2]:
                    g = validate_grad(g, m, self, i)
                grads[i] = g
        if release:  # _release(), inlined
            if saved:
                for key, value in saved.items():
                    if type(value) is SavedTensor or (type(value) is list and value and type(value[0]) is SavedTensor):
                        saved[key] = _FREED_TENSOR
            if results is not None:
                self._saved_results = _FREED_TENSOR
        return grads

    def _apply_general(self, grad_outputs):
        env = self._unpacked()
        if self._output_meta is not None:
            grad_outputs = _materialize(grad_outputs, self._output_meta)
        env["grad"] = grad_outputs[0]
        if self.entry.reads_grads:
            env["grads"] = tuple(grad_outputs)
        next_functions = self.next_functions
        grads = [None] * len(next_functions)
        layout = self._layout
        for formula in self.entry.formulas:
            if formula.joint:
                mask = tuple(_needs(next_functions, layout[name]) for name in formula.inputs)
                if not any(mask):
                    continue
                env["output_mask"] = mask
                out = formula.call(env)
                for name, g, needed in zip(formula.inputs, out, mask):
                    if needed:
                        _place(grads, layout[name], g)
                continue
            slot = layout[formula.inputs[0]]
            if slot[1] < 0:
                if next_functions[slot[0]][0] is None:
                    continue
                grads[slot[0]] = formula.call(env)
            elif _needs(next_functions, slot):
                _place(grads, slot, formula.call(env))
        meta = self._input_meta
        for i, g in enumerate(grads):
            if g is not None:
                m = meta[i]
                if m is None or next_functions[i][0] is None:
                    grads[i] = None  # an input that needs no gradient
                    continue
                if g._data.shape != m[0] or g._data.dtype != m[1] or g._device is not m[2]:
                    grads[i] = validate_grad(g, m, self, i)
        return grads

    def _release(self):
        # Only saved tensors are freed: a node that saved none can run again, as in PyTorch.
        saved = self._saved
        if saved:
            for key, value in saved.items():
                if type(value) is SavedTensor or (type(value) is list and value and type(value[0]) is SavedTensor):
                    saved[key] = _FREED_TENSOR
        if self._saved_results is not None:
            self._saved_results = _FREED_TENSOR


_FREED_TENSOR = object()  # what a saved tensor becomes after a backward without retain_graph
_FREED = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they have "
    "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
    "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or "
    "if you need to access saved tensors after calling backward."
)


def _needs(next_functions, slot):
    first, count = slot
    if count < 0:
        return next_functions[first][0] is not None
    return any(next_functions[i][0] is not None for i in range(first, first + count))


def _place(grads, slot, g):
    first, count = slot
    if count < 0:
        grads[first] = g
    elif g is not None:
        for i, gi in enumerate(g):
            grads[first + i] = gi


def _materialize(grad_outputs, output_meta):
    """Missing gradients of differentiable outputs become zeros (formulas may then add them)."""
    out = list(grad_outputs)
    for i, g in enumerate(out):
        if g is None and output_meta[i] is not None:
            shape, dtype, device = output_meta[i]
            out[i] = ember.zeros(shape, dtype=dtype, device=device)
    return out


def validate_grad(g, meta, node, index):
    """``g`` summed to the input's shape and cast to its dtype and device.

    ``meta`` is the input's ``(shape, numpy dtype, device)``.

    Raises:
        RuntimeError: when ``g`` cannot be summed to the input's shape.
    """
    shape, np_dtype, device = meta
    if g._data.shape != shape:
        g = sum_to(g, shape, node, index)
    if g._data.dtype != np_dtype:
        dtype = from_numpy_dtype(np_dtype)
        if g.is_complex() and not dtype.is_complex:
            g = ember.real(g)
        if g.dtype is not dtype:
            cast = _cuda_cast(g, np_dtype) if g._device.type == "cuda" else None
            g = g.to(dtype) if cast is None else cast
    if g._device != device:
        g = g.to(device)
    return g


def _cuda_cast(g, np_dtype):
    """The cast of a cuda gradient without the dispatch when nothing records (ember.cuda.kernels.copies.cast)."""
    from ember.cuda.kernels.copies import cast

    return cast(g, np_dtype)


def sum_to(g, shape, node=None, index=0):
    """Sum ``g`` over the dimensions that broadcasting added or expanded to reach ``shape``."""
    gshape = g._data.shape
    lead = len(gshape) - len(shape)
    if lead < 0 or any(s != 1 and s != gs for s, gs in zip(shape, gshape[lead:])):
        where = f" {node.name()}" if node is not None else ""
        raise RuntimeError(
            f"Function{where} returned an invalid gradient at index {index} - got {list(gshape)} but expected "
            f"shape compatible with {list(shape)}"
        )
    dims = list(range(lead)) + [lead + i for i, s in enumerate(shape) if s == 1 and gshape[lead + i] != 1]
    if dims:
        g = ember.sum(g, dims, keepdim=True)
    if lead:
        g = g.reshape(shape)
    return g


def node_class(entry):
    """The node class of ``entry``'s op: a :class:`FormulaNode` subclass named like PyTorch's (``MulBackward0``).

    Tools that read ``type(t.grad_fn).__name__`` (graph visualisers) then see the op's node name.
    """
    cls = entry.node_class
    if cls is None:
        # the entry and its one-edge-per-argument layout are class attributes: a node stores them only
        # where they differ (a call with a list of tensors), one attribute store less per recorded op
        attributes = {"__module__": __name__, "entry": entry, "_layout": entry.static_layout}
        cls = entry.node_class = type(entry.node_name, (FormulaNode,), attributes)
    return cls
