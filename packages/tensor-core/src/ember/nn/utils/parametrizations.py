"""Parametrizations built on :mod:`ember.nn.utils.parametrize`, PyTorch's ``torch.nn.utils.parametrizations``.

- :func:`weight_norm`: ``w = g * v / ||v||``, with ``g`` and ``v`` stored as
  ``parametrizations.<name>.original0`` and ``original1``.
- :func:`spectral_norm`: ``w = W / sigma(W)``, ``sigma`` estimated by power iteration with the
  buffers ``parametrizations.<name>.0._u`` and ``_v``.
- :func:`orthogonal`: ``w = Q(X)`` with orthonormal columns or rows (``ember/nn/utils/_orthogonal.py``).
"""

from __future__ import annotations

from ..._tensor import Tensor
from ..modules.module import Module
from . import parametrize
from ._orthogonal import orthogonal

__all__ = ["orthogonal", "weight_norm", "spectral_norm"]


def _norm_except_dim(v, dim):
    """The 2-norm of ``v`` over every dimension but ``dim``, kept broadcastable (PyTorch's ``norm_except_dim``).

    ``dim == -1`` means the norm of the whole tensor (a 0-dim tensor), as in PyTorch.
    """
    if dim == -1:
        return v.norm(2)
    dims = tuple(d for d in range(v.dim()) if d != dim)
    if not dims:
        return v.abs()
    return v.norm(2, dim=dims, keepdim=True)


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        if dim is None:
            dim = -1
        self.dim = dim

    def forward(self, weight_g, weight_v):
        return weight_v * (weight_g / _norm_except_dim(weight_v, self.dim))

    def right_inverse(self, weight):
        weight_g = _norm_except_dim(weight, self.dim)
        weight_v = weight
        return weight_g, weight_v


def weight_norm(module, name="weight", dim=0):
    r"""Apply weight normalization to the parameter ``name`` of ``module``.

    .. math:: \mathbf{w} = g \dfrac{\mathbf{v}}{\|\mathbf{v}\|}

    The magnitude ``g`` (``original0``, the 2-norm over every dimension but ``dim``, kept as
    size-1 dimensions) and direction ``v`` (``original1``, initially the weight itself) become the
    trainable parameters ``module.parametrizations.<name>.original0``/``original1``. State dicts saved
    with the old ``<name>_g``/``<name>_v`` keys still load.

    Args:
        module (Module): the module holding the weight.
        name (str, optional): name of the weight parameter. Default: ``"weight"``.
        dim (int, optional): the dimension over which the norm is *not* taken (output channels for
            ``0``); ``None`` normalises the whole tensor. Default: ``0``.

    Returns:
        Module: ``module``, parametrized.

    Reference:
        Salimans & Kingma, "Weight Normalization: A Simple Reparameterization to Accelerate Training
        of Deep Neural Networks", 2016, https://arxiv.org/abs/1602.07868

    Example:
        >>> import ember
        >>> from ember import nn
        >>> m = nn.utils.parametrizations.weight_norm(nn.Linear(20, 40), name="weight")
        >>> m.parametrizations.weight.original0.shape, m.parametrizations.weight.original1.shape
        (ember.Size([40, 1]), ember.Size([40, 20]))
    """
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def rename_hook_based_keys(state_dict, prefix, *_):
        # Checkpoints of the hook-based weight_norm (nn.utils.weight_norm) store the magnitude and
        # direction as "<name>_g" and "<name>_v"; here they are original0 and original1.
        old_keys = (f"{prefix}{name}_g", f"{prefix}{name}_v")
        if all(key in state_dict for key in old_keys):
            for i, key in enumerate(old_keys):
                state_dict[f"{prefix}parametrizations.{name}.original{i}"] = state_dict.pop(key)

    module._register_load_state_dict_pre_hook(rename_hook_based_keys)
    return module


class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        from ..functional import normalize

        super().__init__()
        rank = weight.ndim
        if not -rank <= dim < rank:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{rank}, {rank - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError(
                f"Expected n_power_iterations to be positive, but got n_power_iterations={n_power_iterations}"
            )
        self.dim = dim % rank
        self.eps = eps
        if rank == 1:
            return  # a vector's spectral norm is its 2-norm: no singular vectors to track (see forward)
        self.n_power_iterations = n_power_iterations
        matrix = self._as_matrix(weight.detach())
        rows, cols = matrix.shape
        # Random unit starting vectors (the buffers _u and _v, PyTorch's state-dict keys) ...
        for buffer_name, size in (("_u", rows), ("_v", cols)):
            start = matrix.new_empty(size).normal_(0, 1)
            self.register_buffer(buffer_name, normalize(start, dim=0, eps=self.eps))
        # ... refined up front, so the first forward already sees good singular vectors.
        self._power_iterations(matrix, 15)

    def _as_matrix(self, weight):
        """``weight`` (2-D or more) as a matrix whose rows run along ``self.dim``."""
        if self.dim != 0:
            weight = weight.movedim(self.dim, 0)
        return weight.flatten(1)

    def _power_iterations(self, weight_mat, n_power_iterations):
        """Update the buffers ``_u``/``_v`` in place with ``n_power_iterations`` steps of power iteration.

        ``u <- normalize(W v)``, ``v <- normalize(W^H u)``; run under ``no_grad``.
        """
        from ... import mv, no_grad
        from ..functional import normalize

        with no_grad():
            weight_h = weight_mat.mT.conj() if weight_mat.is_complex() else weight_mat.mT
            for _ in range(n_power_iterations):
                self._u.copy_(normalize(mv(weight_mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(normalize(mv(weight_h, self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        from ... import mv, vdot
        from ..functional import normalize

        if weight.ndim == 1:
            # A vector: divide by its exact 2-norm.
            return normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._as_matrix(weight)
        if self.training:
            self._power_iterations(weight_mat, self.n_power_iterations)
        # Clone so that later in-place updates of the buffers do not invalidate the backward graph.
        u = self._u.clone()
        v = self._v.clone()
        sigma = vdot(u, mv(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value):
        # Assigning to the weight sets ``original`` directly, as in PyTorch (no rescaling).
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    r"""Apply spectral normalization to the parameter ``name`` of ``module``.

    .. math:: \mathbf{W}_{SN} = \dfrac{\mathbf{W}}{\sigma(\mathbf{W})},
        \qquad \sigma(\mathbf{W}) = \max_{\mathbf{h} \ne 0} \dfrac{\|\mathbf{W} \mathbf{h}\|_2}{\|\mathbf{h}\|_2}

    The weight is reshaped to a matrix with ``dim`` as rows; ``sigma`` is estimated as
    ``u^H W v`` with vectors ``u``/``v`` (buffers ``parametrizations.<name>.0._u`` and ``_v``) refined by
    ``n_power_iterations`` steps of power iteration on every forward in training mode (15 steps at
    registration). In eval mode the stored vectors are used as they are. A 1-D weight is simply
    normalised. The unnormalised weight is ``parametrizations.<name>.original``.

    Args:
        module (Module): the module holding the weight.
        name (str, optional): name of the weight parameter. Default: ``"weight"``.
        n_power_iterations (int, optional): power iterations per training forward. Default: ``1``.
        eps (float, optional): epsilon for numerical stability in the normalisations. Default: ``1e-12``.
        dim (int, optional): the output dimension; default ``0``, or ``1`` for ``ConvTranspose1d/2d/3d``.

    Returns:
        Module: ``module``, parametrized.

    Raises:
        ValueError: if ``module`` has no parameter or buffer ``name``, or ``n_power_iterations <= 0``.
        IndexError: if ``dim`` is out of range for the weight.

    Reference:
        Miyato et al., "Spectral Normalization for Generative Adversarial Networks", ICLR 2018,
        https://arxiv.org/abs/1802.05957

    Example:
        >>> import ember
        >>> from ember import nn
        >>> m = nn.utils.parametrizations.spectral_norm(nn.Linear(20, 40))
        >>> m.parametrizations.weight.original.shape, m.parametrizations.weight[0]._u.shape
        (ember.Size([40, 20]), ember.Size([40]))
    """
    from ..modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d

    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
