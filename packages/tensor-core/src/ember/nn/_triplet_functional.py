"""``ember.nn.functional.triplet_margin_with_distance_loss``: the triplet loss with any distance.

It takes a Python callable, so, as in PyTorch, it is a composition of ops rather than an op.

Reference: Balntas et al., "Learning local feature descriptors with triplets and shallow
convolutional neural networks", BMVC 2016 (the triplet margin loss and its swap variant).
"""

from __future__ import annotations

import ember

from ..overrides import handle_ember_function, has_ember_function

__all__ = ["triplet_margin_with_distance_loss"]

_REDUCTIONS = ("mean", "sum", "none")


def triplet_margin_with_distance_loss(
    anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False, reduction="mean"
):
    r"""The triplet loss ``max(d(a, p) - d(a, n) + margin, 0)`` for a distance function ``d``.

    With ``swap`` (the "distance swap" of Balntas et al.), ``d(a, n)`` is replaced by
    ``min(d(a, n), d(p, n))``: the harder of the two negatives.

    Args:
        anchor, positive, negative (Tensor): ``(N, D)`` or ``(D,)``, all of the same rank; any shape
            ``distance_function`` accepts.
        distance_function (callable, optional): ``d(x, y) -> Tensor`` of per-sample distances
            (non-negative). Default :func:`pairwise_distance` (Euclidean).
        margin (float): the margin, positive. Default ``1.0``.
        swap (bool): use the distance swap. Default ``False``.
        reduction (str): ``"mean"``, ``"sum"`` or ``"none"`` (per-sample losses). Default ``"mean"``.

    Returns:
        Tensor: a scalar, or ``(N,)`` with ``reduction="none"``.

    Raises:
        ValueError: ``margin <= 0`` or an unknown ``reduction``.
        RuntimeError: the three inputs differ in rank.

    References:
        Balntas et al., "Learning local feature descriptors with triplets and shallow convolutional
        neural networks", BMVC 2016

    Example:
        >>> import ember
        >>> import ember.nn.functional as F
        >>> a, p, n = ember.zeros(1, 2), ember.tensor([[3.0, 4.0]]), ember.tensor([[1.0, 0.0]])
        >>> F.triplet_margin_with_distance_loss(a, p, n, distance_function=lambda x, y: (x - y).norm(dim=-1))
        tensor(5.)
    """
    if has_ember_function((anchor, positive, negative)):
        return handle_ember_function(
            triplet_margin_with_distance_loss,
            [t for t in (anchor, positive, negative) if has_ember_function((t,))],
            (anchor, positive, negative),
            dict(distance_function=distance_function, margin=margin, swap=swap, reduction=reduction),
        )
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    ranks = (anchor.dim(), positive.dim(), negative.dim())
    if len(set(ranks)) != 1:
        raise RuntimeError(
            "The anchor, positive, and negative tensors are expected to have the same number of dimensions, but "
            f"got: anchor {ranks[0]}D, positive {ranks[1]}D, and negative {ranks[2]}D inputs"
        )
    distance = distance_function if distance_function is not None else ember.nn.functional.pairwise_distance
    dist_pos = distance(anchor, positive)
    dist_neg = distance(anchor, negative)
    if swap:
        dist_neg = ember.minimum(dist_neg, distance(positive, negative))
    loss = (margin + dist_pos - dist_neg).clamp(min=0)
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss
