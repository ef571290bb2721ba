"""``AdaptiveLogSoftmaxWithLoss``: the adaptive softmax of Grave et al., as in ``torch.nn``.

Classes are split by ``cutoffs`` into a frequent "shortlist" and rarer clusters. The head scores the
shortlist classes and one entry per cluster; each cluster has its own small two-layer projection
(hidden size ``in_features // div_value**(i + 1)``) scoring its classes. The log-probability of a
cluster class is the head's log-probability of the cluster plus the class's log-probability within
the cluster, so rare classes cost a small matrix product, and only for the rows that need them.

Reference: Grave, Joulin, Cissé, Grangier and Jégou, "Efficient softmax approximation for GPUs",
ICML 2017, https://arxiv.org/abs/1609.04309
"""

from __future__ import annotations

from collections import namedtuple

import ember

from .. import functional as F
from .container import ModuleList, Sequential
from .linear import Linear
from .module import Module

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Adaptive softmax: log-probabilities of ``n_classes`` classes sorted by decreasing frequency.

    Args:
        in_features (int): features of the input.
        n_classes (int): number of classes.
        cutoffs (Sequence[int]): increasing, unique class indices in ``[1, n_classes - 1]`` that
            close the shortlist (``[0, cutoffs[0])``) and each cluster (``[cutoffs[i], cutoffs[i+1])``,
            the last one ending at ``n_classes``).
        div_value (float): cluster ``i``'s hidden size is ``in_features // div_value**(i + 1)``.
            Default ``4.0``.
        head_bias (bool): a bias in the head. Default ``False``.
        device, dtype: of the parameters.

    Attributes:
        head (Linear): ``in_features -> cutoffs[0] + number of clusters``.
        tail (ModuleList): per cluster, ``Sequential(Linear(in_features, hidden, bias=False),
            Linear(hidden, cluster size, bias=False))``.

    Forward:
        ``input`` ``(N, in_features)`` or ``(in_features,)``; ``target`` ``(N,)`` or ``()`` class
        indices. Returns the namedtuple ``(output, loss)``: ``output`` ``(N,)`` (or ``()``) the
        log-probability of each target, ``loss`` the mean negative log-likelihood (a scalar).

    Raises:
        ValueError: invalid ``cutoffs``.
        RuntimeError: mismatched input/target shapes, or targets outside ``[0, n_classes - 1]``.

    Example:
        >>> import ember
        >>> m = ember.nn.AdaptiveLogSoftmaxWithLoss(16, 10, cutoffs=[4, 8])
        >>> out = m(ember.randn(5, 16), ember.tensor([0, 3, 4, 8, 9]))
        >>> out.output.shape, out.loss.shape, m.log_prob(ember.randn(2, 16)).exp().sum(1).allclose(ember.ones(2))
        (ember.Size([5]), ember.Size([]), True)
    """

    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False, device=None, dtype=None):
        placement = {"device": device, "dtype": dtype}
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (
            cutoffs != sorted(cutoffs)
            or min(cutoffs) <= 0
            or max(cutoffs) > n_classes - 1
            or len(set(cutoffs)) != len(cutoffs)
            or any(int(c) != c for c in cutoffs)
        ):
            raise ValueError(
                "cutoffs should be a sequence of unique, positive integers sorted in an increasing order, "
                "where each value is between 1 and n_classes-1"
            )
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, **placement)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(
                Sequential(
                    Linear(in_features, hidden, bias=False, **placement),
                    Linear(hidden, size, bias=False, **placement),
                )
            )

    def reset_parameters(self):
        """Re-initialise the head and every cluster projection (``Linear``'s default init)."""
        self.head.reset_parameters()
        for projection, scores in self.tail:
            projection.reset_parameters()
            scores.reset_parameters()

    def _check_shapes(self, input, target):
        found = f"but found inputs with size {input.shape}"
        if target.dim() == 1:
            if input.shape[0] != target.shape[0]:
                raise RuntimeError("Input and target should have the same size in the batch dimension.")
            if input.dim() != 2:
                raise RuntimeError(f"1D target tensor expects 2D input tensors, {found}")
        elif target.dim() == 0:
            if input.dim() != 1:
                raise RuntimeError(f"0D target tensor expects 1D input tensors, {found}")
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")

    def forward(self, input_, target_):
        self._check_shapes(input_, target_)
        batched = target_.dim() > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)
        if target.numel() and (int(target.min()) < 0 or int(target.max()) >= self.n_classes):
            raise RuntimeError(
                f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                f"[{int(target.min())}, {int(target.max())}] were found. "
            )
        # Which block each target falls in: 0 for the shortlist, i + 1 for cluster i.
        block = ember.bucketize(target, ember.tensor(self.cutoffs[:-1], device=target.device), right=True)
        # The head's column for each row: the class itself, or its cluster's entry.
        head_column = ember.where(block == 0, target, block - 1 + self.shortlist_size)
        head_logprob = F.log_softmax(self.head(input), dim=1)
        output = head_logprob.gather(1, head_column.unsqueeze(1)).squeeze(1)
        for i, cluster in enumerate(self.tail):
            rows = (block == i + 1).nonzero().flatten()
            if rows.numel() == 0:
                continue  # only the rows whose targets are in this cluster pay for it
            relative = target.index_select(0, rows) - self.cutoffs[i]
            cluster_logprob = F.log_softmax(cluster(input.index_select(0, rows)), dim=1)
            within = cluster_logprob.gather(1, relative.unsqueeze(1)).squeeze(1)
            output = output.index_add(0, rows, within)
        loss = (-output).mean()
        if not batched:
            output = output.squeeze(0)
        return _ASMoutput(output, loss)

    def _full_log_prob(self, input, head_output):
        head_logprob = F.log_softmax(head_output, dim=1)
        blocks = [head_logprob[:, : self.shortlist_size]]
        for i, cluster in enumerate(self.tail):
            cluster_logprob = F.log_softmax(cluster(input), dim=1)
            blocks.append(cluster_logprob + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return ember.cat(blocks, dim=1)

    def log_prob(self, input):
        """Log-probabilities of every class: ``(N, n_classes)`` for ``(N, in_features)`` input,
        ``(n_classes,)`` for ``(in_features,)``."""
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        out = self._full_log_prob(x, self.head(x))
        return out if batched else out.squeeze(0)

    def predict(self, input):
        """The most likely class of each row: ``(N,)`` (or ``()`` for unbatched input), ``int64``."""
        return self.log_prob(input).argmax(dim=-1)
