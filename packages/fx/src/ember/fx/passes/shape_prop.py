"""``ShapeProp``: record each node's output shape and dtype by running the graph.

By default the graph runs on the ``meta`` device: inputs, parameters and buffers are
replaced by meta tensors of the same shape, dtype and strides, so every op runs only
its meta function from the op registry (argument checks and output metadata) and no
arithmetic is done. Pass ``device=None`` to run on the inputs as given instead.

Each node gets ``node.meta["tensor_meta"]`` (a :class:`TensorMetadata`, or a nested
tuple/list/dict of them for ops with several outputs) and ``node.meta["type"]``.
"""

from __future__ import annotations

import copy
from typing import NamedTuple

from ..interpreter import Interpreter
from ..node import map_aggregate

__all__ = ["ShapeProp", "TensorMetadata"]


class TensorMetadata(NamedTuple):
    """What ShapeProp records about a tensor value."""

    shape: tuple
    dtype: object
    requires_grad: bool
    stride: tuple
    memory_format: object
    is_quantized: bool
    qparams: dict


def _extract_tensor_metadata(t):
    from ember._ops.creation import contiguous_format

    memory_format = contiguous_format if t.is_contiguous() else None
    return TensorMetadata(tuple(t.shape), t.dtype, t.requires_grad, tuple(t.stride()), memory_format, False, {})


def _tensor_cls():
    import ember

    return ember.Tensor


def _to_meta(value):
    """A meta tensor with ``value``'s shape, dtype and strides; other values unchanged."""
    import ember

    if isinstance(value, ember.Tensor) and value.device.type != "meta":
        meta = ember.empty_strided(tuple(value.shape), tuple(value.stride()), dtype=value.dtype, device="meta")
        if value.requires_grad and value.is_floating_point():
            meta.requires_grad_(True)
        return meta
    return value


class ShapeProp(Interpreter):
    """Run a GraphModule and store each node's output metadata in ``node.meta["tensor_meta"]``.

    Args:
        gm (GraphModule): the module to analyse (not modified apart from its nodes' ``meta``).
        fake_mode: accepted for PyTorch compatibility; must be None.
        device (str or None): ``"meta"`` (default) propagates on meta tensors; None runs on
            the inputs as given (real computation).

    Example:
        >>> import ember
        >>> from ember.fx import symbolic_trace
        >>> from ember.fx.passes.shape_prop import ShapeProp
        >>> gm = symbolic_trace(ember.nn.Sequential(ember.nn.Linear(4, 3), ember.nn.ReLU()))
        >>> _ = ShapeProp(gm).propagate(ember.randn(5, 4))
        >>> [tuple(n.meta["tensor_meta"].shape) for n in gm.graph.nodes if n.op != "output"]
        [(5, 4), (5, 3), (5, 3)]

    Raises:
        ValueError: for an unsupported ``device`` or a non-None ``fake_mode``.
    """

    def __init__(self, gm, fake_mode=None, *, device="meta"):
        super().__init__(gm)
        if fake_mode is not None:
            raise ValueError("ShapeProp: fake_mode is not supported by ember.fx; use device='meta'")
        if device not in ("meta", None):
            raise ValueError(f"ShapeProp: device must be 'meta' or None, got {device!r}")
        self.device = device
        self._meta_modules = {}
        self._meta_attrs = {}

    def get_attr(self, target, args, kwargs):
        value = super().get_attr(target, args, kwargs)
        if self.device != "meta":
            return value
        if target not in self._meta_attrs:
            self._meta_attrs[target] = _to_meta(value)
        return self._meta_attrs[target]

    def call_module(self, target, args, kwargs):
        if self.device != "meta":
            return super().call_module(target, args, kwargs)
        module = self._meta_modules.get(target)
        if module is None:
            # A meta copy: running the real module would compute (and update buffers such as running stats).
            module = copy.deepcopy(self.fetch_attr(target))
            module._apply(_to_meta)
            self._meta_modules[target] = module
        return module(*args, **kwargs)

    def run_node(self, n):
        result = super().run_node(n)
        tensor = _tensor_cls()
        found = []

        def extract(v):
            if isinstance(v, tensor):
                found.append(True)
                return _extract_tensor_metadata(v)
            return v

        meta = map_aggregate(result, extract)
        if found:
            n.meta["tensor_meta"] = meta
        n.meta["type"] = type(result)
        return result

    def propagate(self, *args):
        """Run on ``args`` (converted to meta tensors when ``device="meta"``) and return the output."""
        if self.device == "meta":
            args = tuple(map_aggregate(a, _to_meta) for a in args)
        return super().run(*args)
