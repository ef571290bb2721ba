"""Hook handles (PyTorch's ``torch.utils.hooks``)."""

from .._hooks import RemovableHandle

__all__ = ["RemovableHandle"]
