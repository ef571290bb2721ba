"""Distance modules, as in ``torch.nn``: ``PairwiseDistance`` and ``CosineSimilarity``."""

from __future__ import annotations

from .. import functional as F
from .module import Module

__all__ = ["PairwiseDistance", "CosineSimilarity"]


class PairwiseDistance(Module):
    """The p-norm distance ``||x1 - x2 + eps||_p`` over the last dimension.

    Args:
        p (float): the norm degree (may be negative). Default 2. Stored as ``self.norm``.
        eps (float): added to the difference to avoid a zero norm's infinite gradient. Default 1e-6.
        keepdim (bool): keep the reduced last dimension. Default ``False``.

    Shape: inputs ``(N, D)`` or ``(D,)`` (broadcastable), output ``(N,)`` or ``()``.

    Example:
        >>> import ember
        >>> ember.nn.PairwiseDistance()(ember.tensor([[3.0, 0.0]]), ember.tensor([[0.0, 4.0]]))
        tensor([5.])
    """

    __constants__ = ["norm", "eps", "keepdim"]

    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class CosineSimilarity(Module):
    """``x1 . x2 / max(||x1|| ||x2||, eps)`` along ``dim``.

    Args:
        dim (int): the dimension to reduce. Default 1.
        eps (float): lower bound of the norms' product. Default 1e-8.

    Shape: inputs broadcastable ``(*, D, *)``, output without dimension ``dim``.

    Example:
        >>> import ember
        >>> ember.nn.CosineSimilarity(dim=0)(ember.tensor([1.0, 0.0]), ember.tensor([1.0, 1.0]))
        tensor(0.7071)
    """

    __constants__ = ["dim", "eps"]

    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)
