"""The hook-based ``nn.utils.spectral_norm`` / ``remove_spectral_norm`` (PyTorch's older API).

The parameter ``<name>`` moves to ``<name>_orig``; buffers ``<name>_u`` ``(h,)`` and ``<name>_v``
``(w,)`` hold the current estimates of the leading left and right singular vectors of the weight
viewed as an ``h x w`` matrix (``dim`` first). Before every forward a pre-hook sets the plain
attribute ``<name> = W / sigma`` with ``sigma = u^T W v``, after ``n_power_iterations`` steps of
power iteration in training mode (``v <- normalize(W^T u)``, then ``u <- normalize(W v)``).

:func:`ember.nn.utils.parametrizations.spectral_norm` is the newer API (different state-dict keys).

Reference: Miyato et al., "Spectral Normalization for Generative Adversarial Networks", ICLR 2018,
https://arxiv.org/abs/1802.05957
"""

from __future__ import annotations

import ember

from ..parameter import Parameter, UninitializedParameter

__all__ = ["spectral_norm", "remove_spectral_norm"]

# Written into the state dict's metadata (``local_metadata["spectral_norm"]["<name>.version"]``),
# as PyTorch does, so that checkpoints name the layout they were saved with.
_VERSION = 1


class _SpectralNormHook:
    """The forward pre-hook: power iteration on the buffers, then ``module.<name> = W / sigma``."""

    def __init__(self, name, n_power_iterations, dim, eps):
        if n_power_iterations <= 0:
            raise ValueError(
                f"Expected n_power_iterations to be positive, but got n_power_iterations={n_power_iterations}"
            )
        self.name = name
        self.n_power_iterations = n_power_iterations
        self.dim = dim
        self.eps = eps

    def weight_matrix(self, weight):
        """``weight`` as an ``h x w`` matrix with ``dim`` as the rows."""
        if self.dim != 0:
            weight = weight.movedim(self.dim, 0)
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        matrix = self.weight_matrix(weight)
        if do_power_iteration:
            normalize = ember.nn.functional.normalize
            with ember.no_grad():
                for _ in range(self.n_power_iterations):
                    # In place: the buffers carry the estimate from one forward to the next.
                    v.copy_(normalize(ember.mv(matrix.t(), u), dim=0, eps=self.eps))
                    u.copy_(normalize(ember.mv(matrix, v), dim=0, eps=self.eps))
            # Clones: the in-place updates of the next forward must not change what backward saved.
            u = u.clone()
            v = v.clone()
        sigma = ember.dot(u, ember.mv(matrix, v))
        return weight / sigma

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))

    def remove(self, module):
        with ember.no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))


class _VersionHook:
    """State-dict hook: record the layout version under ``local_metadata["spectral_norm"]``."""

    def __init__(self, hook):
        self.hook = hook

    def __call__(self, module, state_dict, prefix, local_metadata):
        key = self.hook.name + ".version"
        versions = local_metadata.setdefault("spectral_norm", {})
        if key in versions:
            raise RuntimeError(f"Unexpected key in metadata['spectral_norm']: {key}")
        versions[key] = _VERSION


def _find_hook(module, name):
    for hook_id, hook in module._forward_pre_hooks.items():
        if isinstance(hook, _SpectralNormHook) and hook.name == name:
            return hook_id, hook
    return None, None


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    r"""Divide ``module.<name>`` by its spectral norm before every forward, with hooks.

    .. math:: W_{SN} = W / \sigma(W), \qquad \sigma(W) \approx u^T W v

    The parameter moves to ``<name>_orig``; ``u`` and ``v`` (random unit vectors at first) are the
    buffers ``<name>_u`` and ``<name>_v``, refined by ``n_power_iterations`` power-iteration steps on
    each training-mode forward (eval mode uses them as they are). Until the first forward,
    ``module.<name>`` is the unnormalized weight.

    Args:
        module (Module): the module holding the weight.
        name (str, optional): the weight's name. Default: ``"weight"``.
        n_power_iterations (int, optional): steps per training forward, positive. Default: ``1``.
        eps (float, optional): added to norms in the normalizations. Default: ``1e-12``.
        dim (int, optional): the output dimension (the rows of the matrix). Default: ``0``, or ``1`` for
            ``ConvTranspose1d/2d/3d``.

    Returns:
        Module: ``module``, with the hooks.

    Raises:
        RuntimeError: ``name`` already has a ``spectral_norm`` hook.
        ValueError: ``n_power_iterations <= 0``, or the weight is an uninitialized (lazy) parameter.
        KeyError: ``module`` has no parameter ``name``.

    References:
        Miyato et al., "Spectral Normalization for Generative Adversarial Networks", ICLR 2018,
        https://arxiv.org/abs/1802.05957

    Example:
        >>> from ember import nn
        >>> m = nn.utils.spectral_norm(nn.Linear(20, 40))
        >>> list(m.state_dict()), m.weight_u.shape
        (['bias', 'weight_orig', 'weight_u', 'weight_v'], ember.Size([40]))
    """
    from ..modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d

    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    if _find_hook(module, name)[1] is not None:
        raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
    hook = _SpectralNormHook(name, n_power_iterations, dim, eps)
    weight = module._parameters[name]
    if isinstance(weight, UninitializedParameter):
        raise ValueError(
            "The module passed to `SpectralNorm` can't have uninitialized parameters. "
            "Make sure to run the dummy forward before applying spectral normalization"
        )
    with ember.no_grad():
        matrix = hook.weight_matrix(weight)
        h, w = matrix.shape
        normalize = ember.nn.functional.normalize
        u = normalize(weight.new_empty(h).normal_(0, 1), dim=0, eps=eps)
        v = normalize(weight.new_empty(w).normal_(0, 1), dim=0, eps=eps)
    delattr(module, name)
    module.register_parameter(name + "_orig", weight)
    setattr(module, name, weight.detach())
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    module.register_forward_pre_hook(hook)
    hook.state_dict_handle = module._register_state_dict_hook(_VersionHook(hook))
    return module


def remove_spectral_norm(module, name="weight"):
    """Undo :func:`spectral_norm`: ``module.<name>`` becomes a parameter holding ``W / sigma`` with the
    current ``u`` and ``v`` (no further power iteration); ``<name>_orig``, the buffers and the hooks go.

    Args:
        module (Module): the module.
        name (str, optional): the weight's name. Default: ``"weight"``.

    Returns:
        Module: ``module``.

    Raises:
        ValueError: ``module`` has no ``spectral_norm`` hook for ``name``.

    Example:
        >>> from ember import nn
        >>> list(nn.utils.remove_spectral_norm(nn.utils.spectral_norm(nn.Linear(2, 3))).state_dict())
        ['bias', 'weight']
    """
    hook_id, hook = _find_hook(module, name)
    if hook is None:
        raise ValueError(f"spectral_norm of '{name}' not found in {module}")
    hook.remove(module)
    del module._forward_pre_hooks[hook_id]
    hook.state_dict_handle.remove()
    return module
