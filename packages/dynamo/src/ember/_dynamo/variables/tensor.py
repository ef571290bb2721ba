"""Tensors: a meta example (shape, dtype, strides, requires_grad) and its node in the graph."""

from __future__ import annotations

from ..exc import Unsupported
from ..reconstruct import GraphOutput
from ..source import AttrSource
from .base import MethodOf, VariableTracker
from .constant import ConstantVariable

__all__ = ["TensorVariable"]

# Attributes read from the meta example as Python constants (no graph node).
_METADATA = frozenset({
    "shape", "dtype", "ndim", "requires_grad", "is_leaf", "layout", "is_sparse", "is_quantized",
    "is_meta", "itemsize", "nbytes",
})
# Attributes whose value is a tensor computed by ops (views): recorded like a call.
_TENSOR_ATTRS = frozenset({"T", "mT", "H", "mH", "real", "imag", "data"})
# Methods that would hand Python the tensor's values or leave the graph.
_REFUSED = {
    "item": "Tensor.item() reads a tensor's value into Python",
    "tolist": "Tensor.tolist() reads a tensor's values into Python",
    "numpy": "Tensor.numpy() leaves the graph",
    "__bool__": "bool(tensor) reads a tensor's value into Python",
    "backward": "Tensor.backward() inside a compiled function runs autograd's engine, not ops",
    "register_hook": "Tensor.register_hook() inside a compiled function",
    "retain_grad": "Tensor.retain_grad() inside a compiled function",
    "data_ptr": "Tensor.data_ptr() depends on memory, not on the graph",
    "requires_grad_": "Tensor.requires_grad_() inside a compiled function changes a flag, not values",
    "share_memory_": "Tensor.share_memory_() inside a compiled function",
}

# Methods of a sparse graph input that the capture takes: size queries (not its nnz, indices or values,
# which its guard does not check) and the products that end in ``_sparse_mm`` (ember.sparse._graph).
_SPARSE_METHODS = frozenset({
    "size", "dim", "numel", "sparse_dim", "dense_dim", "is_floating_point", "is_complex", "mm", "matmul", "__matmul__",
    "__rmatmul__", "addmm",
})


def _strided():
    import ember

    return ember.strided


class TensorVariable(VariableTracker):
    """A tensor of the graph.

    Attributes:
        example (ember.Tensor): a meta tensor with the value's metadata; the recording mode maps it
            to its graph node.
        device (ember.device): the device the real tensor lives on (the example's is ``meta``).
    """

    def __init__(self, example, device, source=None, real=None):
        super().__init__(source)
        self.example = example
        self.device = device
        self.real = real  # the real tensor, for graph inputs (its .grad is read from it)
        self.on_type_check = None  # records a TYPE_MATCH guard (TENSOR_MATCH does not check the class)
        # dynamic shapes: the example's twin with the symbols' shadow sizes (None: all sizes static),
        # the symbols of a graph input's dynamic dims, and the size trackers read so far
        self.shadow = None
        self.symbols = {}
        self.size_vars = {}

    def describe(self):
        return f"tensor {tuple(self.example.shape)} {self.example.dtype}"

    def python_type(self):
        if self.on_type_check is not None:
            on_type_check, self.on_type_check = self.on_type_check, None
            on_type_check()
        return type(self.real) if self.real is not None else type(self.example)

    def as_python(self, tx):
        if tx.output.shadowing and self.shadow is not None:
            return self.shadow
        return self.example

    def truth(self, tx):
        raise Unsupported("data-dependent branch: bool() of a tensor reads its value into Python")

    def is_dynamic(self):
        """Whether some size of this tensor depends on the capture's symbols."""
        return self.shadow is not None and tuple(self.shadow.shape) != tuple(self.example.shape)

    def sizes(self, tx):
        """The sizes as trackers (constants, or symbolic sizes for dims that depend on symbols)."""
        return [tx.output.size_of(tx, self, d) for d in range(self.example.dim())]

    def _shape_query(self, tx, name, args, kwargs):
        """``shape``/``size()``/``numel()`` of a tensor with symbolic sizes; None for other queries."""
        from .symbolic import SizeVariable

        if name == "shape" or (name == "size" and not args and not kwargs):
            return SizeVariable(self.sizes(tx))
        if name == "size":
            dim = (args[0] if args else kwargs["dim"]).as_constant()
            return tx.output.size_of(tx, self, dim)
        if name == "numel":
            return SizeVariable(self.sizes(tx)).call_method(tx, "numel", [], {})
        return None

    def length(self, tx):
        if self.example.dim() == 0:
            raise Unsupported("len() of a 0-d tensor")
        if self.is_dynamic():
            return tx.output.size_of(tx, self, 0).as_constant()  # a Python int: guarded to this size
        return self.example.shape[0]

    def unpack(self, tx):
        if self.example.dim() == 0:
            raise Unsupported("iterating over a 0-d tensor")
        if self.is_dynamic():
            tx.output.size_of(tx, self, 0).as_constant()  # as many items as now: guarded
        return list(tx.output.leaf_call(tx, lambda t: tuple(t.unbind(0)), [self], {}).items)

    def getitem(self, tx, key):
        import operator

        if tx.output.shape_env:
            from ..graph import _holds_symbolic

            if _holds_symbolic(key):
                indexed = self._index_with_symbolic_bounds(tx, key)
                if indexed is not None:
                    return indexed
        return tx.output.leaf_call(tx, operator.getitem, [self, key], {})

    def _index_with_symbolic_bounds(self, tx, key):
        """``t[...]`` with symbolic sizes among ints and slices (steps >= 1): slice/select registry ops
        that take the sizes' nodes (ember's indexing would turn the bounds into plain ints). None for
        other keys (tensors, None, Ellipsis): those are indexed by ember, with the sizes guarded."""
        from ember._ops._registry import registry

        from .containers import SliceVariable, TupleVariable
        from .symbolic import SymIntVariable

        parts = key.items if type(key) is TupleVariable else [key]
        if len(parts) > self.example.dim():
            return None
        result, dim = self, 0
        for part in parts:
            constant_slice = isinstance(part, ConstantVariable) and isinstance(part.value, slice)
            if isinstance(part, SliceVariable) or constant_slice:
                bounds = part.parts if isinstance(part, SliceVariable) else [
                    ConstantVariable(v) for v in (part.value.start, part.value.stop, part.value.step)
                ]
                start, stop, step = bounds
                step_value = step.as_constant() if step.is_constant() and not isinstance(step, SymIntVariable) else 0
                if step_value is None:
                    step, step_value = ConstantVariable(1), 1
                if type(step_value) is not int or step_value < 1:
                    return None
                full = step_value == 1 and all(
                    isinstance(b, ConstantVariable) and b.value is None for b in (start, stop)
                )  # (asking a symbolic bound for its value would guard it to that value)
                if not full:
                    args = [result, ConstantVariable(dim), start, stop, step]
                    result = tx.output.leaf_call(tx, registry["slice"], args, {})
                dim += 1
            elif isinstance(part, SymIntVariable) or (
                isinstance(part, ConstantVariable) and type(part.value) is int
            ):
                result = tx.output.leaf_call(tx, registry["select"], [result, ConstantVariable(dim), part], {})
            else:
                return None
        return result

    def setattr(self, tx, name, value):
        """``p.grad = None`` (``zero_grad(set_to_none=True)``) or ``p.grad = g`` on a tensor the frame can
        reach: replayed on the real tensor after the graph (later reads in the capture see it)."""
        if name != "grad" or self.real is None or self.source is None:
            return super().setattr(tx, name, value)
        if not (isinstance(value, TensorVariable) or (value.is_constant() and value.as_constant() is None)):
            raise Unsupported(f"setting Tensor.grad to {value.describe()}")
        tx.output.side_effects.store_attr(self, self.real, "grad", value)

    def getattr(self, tx, name):
        if self.is_dynamic() and name in ("shape", "nbytes"):
            shape = self._shape_query(tx, "shape", [], {})
            if name == "shape":
                return shape
            for size in shape.items:
                size.as_constant()  # nbytes is a Python int: every size guarded to its value
        if name in _METADATA:
            return ConstantVariable(getattr(self.example, name))
        if name == "device":
            return ConstantVariable(self.device)
        if name in ("is_cuda", "is_cpu"):
            return ConstantVariable(self.device.type == name[3:])
        if name == "grad":
            if self.real is None or self.source is None:
                raise Unsupported("Tensor.grad of a tensor made inside the compiled function")
            stored = tx.output.side_effects.attr_override(self.real, "grad")
            if stored is not None:  # ``p.grad = ...`` earlier in this capture
                return stored
            return tx.output.wrap(self.real.grad, AttrSource(self.source, "grad"))
        if name in _TENSOR_ATTRS:
            return tx.output.leaf_call(tx, getattr, [self, ConstantVariable(name)], {})
        if not hasattr(self.example, name):
            raise Unsupported(f"'Tensor' object has no attribute {name!r}")
        return MethodOf(self, name)

    def call_method(self, tx, name, args, kwargs):
        if name in _REFUSED:
            raise Unsupported(_REFUSED[name])
        if self.example.layout is not _strided() and name not in _SPARSE_METHODS:
            raise Unsupported(f"Tensor.{name}() of a {self.example.layout} tensor (a sparse graph input is opaque: "
                              "only sparse @ dense products and size queries take it)")
        if name == "__bool__":
            return ConstantVariable(self.truth(tx))
        if name in ("to", "cpu", "cuda"):
            return self._move(tx, name, args, kwargs)
        if self.is_dynamic() and name in ("size", "numel"):
            return self._shape_query(tx, name, args, kwargs)
        if self.is_dynamic() and name == "stride":
            for size in self.sizes(tx):
                size.as_constant()  # strides are Python ints here: every size guarded to its value
        if (name == "size" or name == "dim" or name == "stride" or name == "numel" or name.startswith("is_")
                or name == "sparse_dim" or name == "dense_dim"):
            # metadata queries: plain Python values, no node (read from the example: a sparse one answers
            # sparse_dim/dense_dim its own way)
            values = [a.as_python(tx) for a in args]
            keywords = {k: v.as_python(tx) for k, v in kwargs.items()}
            return ConstantVariable(getattr(self.example, name)(*values, **keywords))
        import ember

        method = getattr(ember.Tensor, name)
        return tx.output.leaf_call(tx, method, [self, *args], kwargs)

    def _move(self, tx, name, args, kwargs):
        """``to``/``cpu``/``cuda``: the example stays on meta (the graph's node gets the real device)."""
        import ember

        meta = ConstantVariable(ember.device("meta"))
        if name == "cpu":
            return self._copy_to(tx, ember.device("cpu"))
        if name == "cuda":
            index = args[0].as_constant() if args else kwargs.get("device", ConstantVariable(None)).as_constant()
            target = ember.device("cuda" if index is None else index if isinstance(index, str) else f"cuda:{index}")
            return self._copy_to(tx, target)
        target = self.device
        new_args = []
        for arg in args:
            device = _as_device(arg)
            if device is not None:
                target, arg = device, meta
            elif isinstance(arg, TensorVariable):  # x.to(other): other's dtype and device
                target = arg.device
                new_args.extend([meta, ConstantVariable(arg.example.dtype)])
                continue
            new_args.append(arg)
        new_kwargs = dict(kwargs)
        if "device" in new_kwargs:
            device = _as_device(new_kwargs["device"])
            if device is not None:
                target, new_kwargs["device"] = device, meta
        moved = tx.output.leaf_call(tx, ember.Tensor.to, [self, *new_args], new_kwargs, device=target)
        if isinstance(moved, TensorVariable) and moved.example is self.example:
            return self._copy_to(tx, target)  # meta to meta was a no-op: the device change still needs a node
        return moved

    def _copy_to(self, tx, target):
        """The tensor on device ``target`` (itself when it is there already), as a ``_to_copy`` node."""
        import ember
        from ember._ops._registry import registry

        if target == self.device:
            return self
        meta = ConstantVariable(ember.device("meta"))
        return tx.output.leaf_call(tx, registry["_to_copy"], [self], {"device": meta}, device=target)

    def reconstruct(self, out):
        return GraphOutput(out.output_index(self))


def _as_device(var):
    """The device a ``to()`` argument names (a string or ember.device), else None."""
    import ember

    if not var.is_constant():
        return None
    value = var.as_constant()
    if isinstance(value, ember.device):
        return value
    if isinstance(value, str):
        try:
            return ember.device(value)
        except (RuntimeError, ValueError, TypeError):
            return None
    return None
