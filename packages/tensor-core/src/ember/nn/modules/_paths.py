"""PyTorch's module paths for classes ember defines in another file of ``ember.nn.modules``.

Programs import layers by their PyTorch path (``from torch.nn.modules.activation import
MultiheadAttention``, ``torch.nn.modules.linear.NonDynamicallyQuantizableLinear``). Ember
groups some of them differently (attention layers in ``attention``, lazy layers in ``lazy``,
unpooling and LP pooling in ``unpool``); :func:`install` makes each reachable from PyTorch's
module too. One table, so "where does PyTorch import X from?" has one answer here.
"""

from __future__ import annotations

import importlib

__all__ = ["PYTORCH_PATHS", "LAZY_SUBMODULES", "install"]

#: Submodules that exist only for PyTorch's paths, loaded when first reached (see ``__init__``).
LAZY_SUBMODULES = ("instancenorm", "utils")

#: (PyTorch's module, ember's module defining the names, the names); a pair names
#: (PyTorch's name, ember's name) where they differ.
PYTORCH_PATHS = [
    ("activation", "attention", ["MultiheadAttention", "NonDynamicallyQuantizableLinear"]),
    ("linear", "attention", ["NonDynamicallyQuantizableLinear"]),
    ("linear", "lazy", ["LazyLinear"]),
    ("batchnorm", "lazy", ["LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d"]),
    (
        "conv",
        "lazy",
        ["LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d"],
    ),
    (
        "pooling",
        "unpool",
        ["MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "LPPool1d", "LPPool2d", "LPPool3d", "_MaxUnpoolNd", "_LPPoolNd"],
    ),
    ("module", "module", [("_addindent", "_indent_tail")]),
]


def install():
    """Set each name of :data:`PYTORCH_PATHS` on PyTorch's module (ember's module keeps it too)."""
    for target, source, names in PYTORCH_PATHS:
        target_module = importlib.import_module(f"{__package__}.{target}")
        source_module = importlib.import_module(f"{__package__}.{source}")
        for name in names:
            alias, original = name if isinstance(name, tuple) else (name, name)
            setattr(target_module, alias, getattr(source_module, original))
