"""``FakeTensorProp``: store a meta tensor standing for each node's value in ``node.meta["val"]``.

Later passes (and the compiler) read shapes, dtypes and strides from ``meta["val"]``
as they would from a real value, without any real computation having run.
"""

from __future__ import annotations

from .shape_prop import ShapeProp

__all__ = ["FakeTensorProp"]


class FakeTensorProp(ShapeProp):
    """Run a GraphModule on meta tensors and keep each node's meta value in ``node.meta["val"]``.

    Args:
        module (GraphModule): the module to analyse.
        mode: accepted for PyTorch compatibility; must be None.
    """

    def __init__(self, module, mode=None):
        super().__init__(module, fake_mode=mode, device="meta")

    def run_node(self, n):
        result = super().run_node(n)
        n.meta["val"] = result
        return result
