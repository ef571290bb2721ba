"""PyTorch's ``torch.nn.modules.instancenorm`` path: the instance-norm layers.

Ember defines them beside the other normalisation layers (``normalization``) and their lazy
forms in ``lazy``; this module gathers them under PyTorch's module name.
"""

from .lazy import LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d
from .normalization import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, _InstanceNorm  # noqa: F401

__all__ = [
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "LazyInstanceNorm1d",
    "LazyInstanceNorm2d",
    "LazyInstanceNorm3d",
]
