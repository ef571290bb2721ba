"""``Flatten`` and ``Unflatten``, as in ``torch.nn``."""

from __future__ import annotations

from .module import Module

__all__ = ["Flatten", "Unflatten"]


class Flatten(Module):
    """Flatten dims ``start_dim..end_dim`` into one (``input.flatten(start_dim, end_dim)``).

    Args:
        start_dim (int): first dim to flatten (default 1, keeping the batch dim).
        end_dim (int): last dim to flatten (default -1).

    Shape: input ``(*, S_start, ..., S_end, *)``, output ``(*, prod(S_start..S_end), *)``.
    """

    __constants__ = ["start_dim", "end_dim"]

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Expand dim ``dim`` into the shape ``unflattened_size`` (``input.unflatten(dim, size)``).

    Args:
        dim (int): the dim to expand.
        unflattened_size (tuple of int): its new shape; may hold one ``-1``.

    Raises:
        TypeError: ``unflattened_size`` is not a tuple/list of ints.
    """

    __constants__ = ["dim", "unflattened_size"]

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if not isinstance(dim, int):
            raise TypeError(f"invalid argument type for dim parameter: {type(dim).__name__}")
        if not isinstance(unflattened_size, (tuple, list)) or not all(isinstance(s, int) for s in unflattened_size):
            raise TypeError("unflattened_size must be tuple of ints, but found type " + type(unflattened_size).__name__)
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size) if isinstance(unflattened_size, list) else unflattened_size

    def forward(self, input):
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
