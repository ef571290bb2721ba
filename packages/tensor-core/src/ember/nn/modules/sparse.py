"""Embedding lookup tables: ``Embedding`` and ``EmbeddingBag``, as in ``torch.nn``."""

from __future__ import annotations

import ember

from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["Embedding", "EmbeddingBag"]


def _check_padding_idx(padding_idx, num_embeddings):
    if padding_idx is None:
        return None
    if padding_idx > 0:
        if padding_idx >= num_embeddings:
            raise AssertionError("Padding_idx must be within num_embeddings")
    elif padding_idx < 0:
        if padding_idx < -num_embeddings:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx = num_embeddings + padding_idx
    return padding_idx


# Options shown by extra_repr only when they differ from these defaults.
_REPR_DEFAULTS = {"padding_idx": None, "max_norm": None, "norm_type": 2, "scale_grad_by_freq": False}


def _non_default_options(module, names):
    return [f"{name}={getattr(module, name)}" for name in names if getattr(module, name) != _REPR_DEFAULTS[name]]


def _table_or_given(num_embeddings, embedding_dim, given, device, dtype):
    """The embedding table: ``given`` after a shape check, or new uninitialized storage."""
    if given is None:
        return ember.empty((num_embeddings, embedding_dim), device=device, dtype=dtype)
    if tuple(given.shape) != (num_embeddings, embedding_dim):
        raise AssertionError("Shape of weight does not match num_embeddings and embedding_dim")
    return given


def _zero_padding_row(weight, padding_idx):
    # The padding row's embedding is the zero vector; its gradient stays zero, so it stays so.
    if padding_idx is not None:
        with ember.no_grad():
            weight[padding_idx].fill_(0)


def _pretrained_shape(embeddings):
    if embeddings.dim() != 2:
        raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
    return tuple(embeddings.shape)


class Embedding(Module):
    """A lookup table: ``output[..., :] = weight[input[...], :]``.

    Args:
        num_embeddings (int): size of the table.
        embedding_dim (int): size of each vector.
        padding_idx (int, optional): this row is initialised to zeros and gets no gradient
            (negative values count from the end).
        max_norm (float, optional): looked-up rows with a larger ``norm_type``-norm are renormalised
            in place to ``max_norm``.
        norm_type (float): the p of that norm. Default 2.
        scale_grad_by_freq (bool): scale gradients by the inverse frequency of the indices.
        sparse (bool): sparse gradients (accepted; ember computes dense gradients).
        _weight (Tensor, optional): use this ``(num_embeddings, embedding_dim)`` tensor as the weight.
        _freeze (bool): make the weight not require grad.

    Attributes:
        weight: ``(num_embeddings, embedding_dim)``, initialised N(0, 1).

    Shape: input ``(*)`` integer indices, output ``(*, embedding_dim)``.

    Raises:
        AssertionError: ``padding_idx`` out of range, or ``_weight`` of the wrong shape (as PyTorch).

    Example:
        >>> import ember
        >>> emb = ember.nn.Embedding(10, 3)
        >>> emb(ember.tensor([[1, 2, 4, 5], [4, 3, 2, 9]])).shape
        ember.Size([2, 4, 3])
    """

    __constants__ = [
        "num_embeddings",
        "embedding_dim",
        "padding_idx",
        "max_norm",
        "norm_type",
        "scale_grad_by_freq",
        "sparse",
    ]

    def __init__(
        self,
        num_embeddings,
        embedding_dim,
        padding_idx=None,
        max_norm=None,
        norm_type=2.0,
        scale_grad_by_freq=False,
        sparse=False,
        _weight=None,
        _freeze=False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = _check_padding_idx(padding_idx, num_embeddings)
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        table = _table_or_given(num_embeddings, embedding_dim, _weight, device, dtype)
        self.weight = Parameter(table, requires_grad=not _freeze)
        if _weight is None:
            self.reset_parameters()
        self.sparse = sparse

    def reset_parameters(self):
        """Re-draw ``weight`` from N(0, 1) and zero the ``padding_idx`` row."""
        init.normal_(self.weight)
        _zero_padding_row(self.weight, self.padding_idx)

    def forward(self, input):
        return F.embedding(
            input, self.weight, self.padding_idx, self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse
        )

    def extra_repr(self):
        parts = [f"{self.num_embeddings}, {self.embedding_dim}"]
        parts += _non_default_options(self, ("padding_idx", "max_norm", "norm_type", "scale_grad_by_freq"))
        if self.sparse is not False:
            parts.append("sparse=True")
        return ", ".join(parts)

    @classmethod
    def from_pretrained(
        cls,
        embeddings,
        freeze=True,
        padding_idx=None,
        max_norm=None,
        norm_type=2.0,
        scale_grad_by_freq=False,
        sparse=False,
    ):
        """Create an Embedding whose weight is ``embeddings`` (2-D, shared, not copied).

        Args:
            embeddings (Tensor): ``(num_embeddings, embedding_dim)``.
            freeze (bool): the weight does not require grad (``embedding.weight.requires_grad = False``).
                Default ``True``.
            padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse: as the constructor.

        Raises:
            AssertionError: ``embeddings`` is not 2-D (as PyTorch).
        """
        rows, cols = _pretrained_shape(embeddings)
        return cls(
            num_embeddings=rows,
            embedding_dim=cols,
            _weight=embeddings,
            _freeze=freeze,
            padding_idx=padding_idx,
            max_norm=max_norm,
            norm_type=norm_type,
            scale_grad_by_freq=scale_grad_by_freq,
            sparse=sparse,
        )


class EmbeddingBag(Module):
    """Sums, means or maxes bags of embeddings without materialising the per-index embeddings.

    Args:
        num_embeddings, embedding_dim, max_norm, norm_type, scale_grad_by_freq, sparse, padding_idx:
            as :class:`Embedding`.
        mode (str): ``'sum'``, ``'mean'`` (default) or ``'max'``.
        include_last_offset (bool): ``offsets`` has one extra final element (CSR style).

    Shape: ``input`` 2-D ``(B, N)`` (fixed-length bags) or 1-D with ``offsets`` ``(B,)``; output
    ``(B, embedding_dim)``.
    """

    __constants__ = [
        "num_embeddings",
        "embedding_dim",
        "max_norm",
        "norm_type",
        "scale_grad_by_freq",
        "mode",
        "sparse",
        "include_last_offset",
        "padding_idx",
    ]

    def __init__(
        self,
        num_embeddings,
        embedding_dim,
        max_norm=None,
        norm_type=2.0,
        scale_grad_by_freq=False,
        mode="mean",
        sparse=False,
        _weight=None,
        include_last_offset=False,
        padding_idx=None,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.padding_idx = _check_padding_idx(padding_idx, num_embeddings)
        self.weight = Parameter(_table_or_given(num_embeddings, embedding_dim, _weight, device, dtype))
        if _weight is None:
            self.reset_parameters()
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset

    def reset_parameters(self):
        """Re-draw ``weight`` from N(0, 1) and zero the ``padding_idx`` row."""
        init.normal_(self.weight)
        _zero_padding_row(self.weight, self.padding_idx)

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(
            input,
            self.weight,
            offsets,
            self.max_norm,
            self.norm_type,
            self.scale_grad_by_freq,
            self.mode,
            self.sparse,
            per_sample_weights,
            self.include_last_offset,
            self.padding_idx,
        )

    def extra_repr(self):
        parts = [f"{self.num_embeddings}, {self.embedding_dim}"]
        parts += _non_default_options(self, ("max_norm", "norm_type", "scale_grad_by_freq"))
        parts.append(f"mode={self.mode!r}")
        parts += _non_default_options(self, ("padding_idx",))
        return ", ".join(parts)

    @classmethod
    def from_pretrained(
        cls,
        embeddings,
        freeze=True,
        max_norm=None,
        norm_type=2.0,
        scale_grad_by_freq=False,
        mode="mean",
        sparse=False,
        include_last_offset=False,
        padding_idx=None,
    ):
        """Create an EmbeddingBag whose weight is the 2-D ``embeddings``; see
        :meth:`Embedding.from_pretrained`."""
        rows, cols = _pretrained_shape(embeddings)
        bag = cls(
            num_embeddings=rows,
            embedding_dim=cols,
            _weight=embeddings,
            max_norm=max_norm,
            norm_type=norm_type,
            scale_grad_by_freq=scale_grad_by_freq,
            mode=mode,
            sparse=sparse,
            include_last_offset=include_last_offset,
            padding_idx=padding_idx,
        )
        bag.weight.requires_grad = not freeze
        return bag
