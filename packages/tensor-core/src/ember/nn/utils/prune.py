"""Parameter pruning (``torch.nn.utils.prune`` counterpart): masks that zero out parts of a parameter.

Pruning ``module.<name>`` moves the parameter to ``<name>_orig``, stores a 0/1 mask in the buffer
``<name>_mask`` and registers the pruning method itself as a forward pre-hook that recomputes the
plain attribute ``<name> = <name>_orig * <name>_mask`` before every forward. Gradients therefore
flow to ``<name>_orig`` (zero where masked), the state dict holds both ``<name>_orig`` and
``<name>_mask``, and :func:`remove` makes the pruning permanent (``<name>`` becomes a parameter again,
holding the masked values).

Pruning the same parameter again combines the methods in a :class:`PruningContainer`: the new
method only looks at the entries (unstructured) or channels (structured) that the earlier masks
kept, so ``amount`` as a fraction is a fraction of what remains. ``amount`` is either a float in
[0, 1] (that fraction of the entries or channels, rounded half to even as Python's ``round``) or
an int (that many).

The pruning methods are :class:`Identity`, :class:`RandomUnstructured`, :class:`L1Unstructured`,
:class:`RandomStructured`, :class:`LnStructured` (channels with the smallest Ln norm) and
:class:`CustomFromMask`; :func:`global_unstructured` prunes the smallest entries across several
parameters at once.

Reference: Han, Pool, Tran & Dally, "Learning both Weights and Connections for Efficient Neural
Networks", NeurIPS 2015 (magnitude pruning); Li et al., "Pruning Filters for Efficient ConvNets",
ICLR 2017 (structured L1 filter pruning).
"""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod

import ember

from ..parameter import Parameter

__all__ = [
    "BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured", "L1Unstructured",
    "RandomStructured", "LnStructured", "CustomFromMask", "identity", "random_unstructured",
    "l1_unstructured", "random_structured", "ln_structured", "global_unstructured", "custom_from_mask",
    "remove", "is_pruned",
]


# -- amounts ---------------------------------------------------------------------------------------


def _check_amount(amount):
    """Refuse an ``amount`` that is neither a float in [0, 1] nor a non-negative int."""
    if isinstance(amount, bool) or not isinstance(amount, numbers.Real):
        raise TypeError(f"amount must be a float in [0, 1] or a non-negative int, got {type(amount).__name__}")
    integral = isinstance(amount, numbers.Integral)
    if (integral and amount < 0) or (not integral and not 0.0 <= float(amount) <= 1.0):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")


def _count_to_prune(amount, total):
    """How many of ``total`` entries (or channels) ``amount`` names; ValueError if more than ``total``."""
    if isinstance(amount, numbers.Integral):
        if amount > total:
            raise ValueError(f"amount={amount} should be smaller than the number of parameters to prune={total}")
        return int(amount)
    return round(float(amount) * total)


def _zero_ranked(default_mask, scores, count, largest):
    """A copy of ``default_mask`` with the ``count`` entries of largest (or smallest) ``scores`` set to 0."""
    mask = default_mask.clone()
    if count:
        drop = ember.topk(scores.reshape(-1), k=count, largest=largest).indices
        mask.view(-1)[drop] = 0
    return mask


def _channel_dim(dim, tensor):
    if tensor.dim() == 0:
        raise ValueError("structured pruning needs a tensor with at least one dimension, got a 0-d tensor")
    if not -tensor.dim() <= dim < tensor.dim():
        raise IndexError(f"dim={dim} is out of range for a tensor with {tensor.dim()} dimensions")
    return dim % tensor.dim()


def _other_dims(tensor, dim):
    return [d for d in range(tensor.dim()) if d != dim]


def _channel_selector(tensor, dim, channels):
    """An index that selects ``channels`` (a bool or index tensor) along ``dim`` of ``tensor``."""
    index = [slice(None)] * tensor.dim()
    index[dim] = channels
    return tuple(index)


# -- methods ---------------------------------------------------------------------------------------


class BasePruningMethod(ABC):
    """A way to compute a pruning mask; an instance is also the forward pre-hook that applies it.

    Subclasses set ``PRUNING_TYPE`` (``"unstructured"``, ``"structured"`` or ``"global"``: how an
    iterative :class:`PruningContainer` restricts them to what earlier masks kept) and implement
    :meth:`compute_mask`.
    """

    PRUNING_TYPE = "unstructured"
    _tensor_name = None

    def __call__(self, module, inputs):
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The new mask (same shape as ``t``) given ``t``'s importance scores and the mask so far."""

    def apply_mask(self, module):
        """``<name>_orig * <name>_mask`` of ``module``: the pruned tensor."""
        if self._tensor_name is None:
            raise RuntimeError(f"{type(self).__name__} has not been applied to a module yet")
        orig = getattr(module, self._tensor_name + "_orig")
        mask = getattr(module, self._tensor_name + "_mask")
        return orig * mask.to(dtype=orig.dtype)

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prune ``module.<name>`` with ``cls(*args, **kwargs)``; returns the hook now on ``module``.

        Args:
            module (nn.Module): holds the tensor to prune.
            name (str): the parameter's name in ``module``.
            importance_scores (Tensor, optional): scores of ``module.<name>``'s shape that the mask is
                computed from (default: the parameter's own values).

        Raises:
            AttributeError: if ``module`` has no attribute ``name``.
            ValueError: if ``importance_scores`` does not have the parameter's shape.
        """
        method = cls(*args, **kwargs)
        method._tensor_name = name
        hook_id, earlier = _find_pruning_hook(module, name)
        if earlier is not None:
            del module._forward_pre_hooks[hook_id]
            method = _combine(earlier, method)
        orig = getattr(module, name + "_orig") if earlier is not None else getattr(module, name)
        # by default a new method ranks the tensor as pruned so far (module.<name>), as PyTorch does
        scores = getattr(module, name) if importance_scores is None else importance_scores
        if tuple(scores.shape) != tuple(orig.shape):
            raise ValueError(
                f"importance_scores should have the shape of parameter {name!r}, "
                f"got {tuple(scores.shape)} and {tuple(orig.shape)}"
            )
        if earlier is None:
            default_mask = ember.ones_like(orig)
            module.register_parameter(name + "_orig", orig if isinstance(orig, Parameter) else Parameter(orig))
            del module._parameters[name]
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()
        with ember.no_grad():
            mask = method.compute_mask(scores.detach(), default_mask=default_mask)
        module.register_buffer(name + "_mask", mask)
        setattr(module, name, method.apply_mask(module))
        module.register_forward_pre_hook(method)
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """``t`` with this method's mask applied (a new tensor; no module involved)."""
        scores = t if importance_scores is None else importance_scores
        if tuple(scores.shape) != tuple(t.shape):
            raise ValueError(
                f"importance_scores should have the shape of t, got {tuple(scores.shape)} and {tuple(t.shape)}"
            )
        mask = ember.ones_like(t) if default_mask is None else default_mask
        with ember.no_grad():
            mask = self.compute_mask(scores.detach(), default_mask=mask)
        return t * mask.to(dtype=t.dtype)

    def remove(self, module):
        """Make the pruning permanent: ``module.<name>`` becomes a parameter holding the masked values."""
        if self._tensor_name is None:
            raise RuntimeError(f"{type(self).__name__} has not been applied to a module yet")
        weight = self.apply_mask(module).detach()
        if hasattr(module, self._tensor_name):
            delattr(module, self._tensor_name)
        orig = module._parameters[self._tensor_name + "_orig"]
        with ember.no_grad():
            orig.copy_(weight)
        del module._parameters[self._tensor_name + "_orig"]
        del module._buffers[self._tensor_name + "_mask"]
        module.register_parameter(self._tensor_name, orig)


class PruningContainer(BasePruningMethod):
    """Several pruning methods applied one after the other to the same parameter.

    Each added method sees only what the masks before it kept: the kept entries for an
    unstructured method, the channels not wholly pruned for a structured one, the whole tensor
    for a global one.
    """

    def __init__(self, *methods):
        self._pruning_methods = ()
        for method in methods:
            self.add_pruning_method(method)

    def add_pruning_method(self, method):
        """Append ``method`` (a :class:`BasePruningMethod` for this container's parameter name).

        Raises:
            TypeError: if ``method`` is not a pruning method.
            ValueError: if it prunes a parameter of another name.
        """
        if not isinstance(method, BasePruningMethod):
            raise TypeError(f"{type(method).__name__} is not a BasePruningMethod subclass")
        if self._tensor_name is not None and method._tensor_name != self._tensor_name:
            raise ValueError(
                f"can only add pruning methods acting on the parameter named {self._tensor_name!r} to the "
                f"PruningContainer, got one for {method._tensor_name!r}"
            )
        self._tensor_name = method._tensor_name
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, index):
        return self._pruning_methods[index]

    def compute_mask(self, t, default_mask):
        """``default_mask`` further pruned by the last method added, applied to the entries (or channels)
        ``default_mask`` still keeps; a new mask of ``t``'s shape and ``default_mask``'s dtype."""
        method = self._pruning_methods[-1]
        where = _still_kept(method, t, default_mask)
        mask = default_mask.clone()
        mask[where] = method.compute_mask(t[where], default_mask=default_mask[where]).to(dtype=mask.dtype)
        return mask


def _still_kept(method, t, mask):
    """The index of ``t`` that a new ``method`` prunes within, given the earlier ``mask``."""
    if method.PRUNING_TYPE == "unstructured":
        return mask == 1
    if method.PRUNING_TYPE == "structured":
        if not hasattr(method, "dim"):
            raise AttributeError(f"{type(method).__name__} is structured and needs a 'dim' attribute")
        dim = _channel_dim(method.dim, t)
        kept_channels = mask.sum(dim=_other_dims(t, dim)) != 0 if t.dim() > 1 else mask != 0
        return _channel_selector(t, dim, kept_channels)
    if method.PRUNING_TYPE == "global":
        return (slice(None),) * t.dim()
    raise ValueError(f"unknown PRUNING_TYPE {method.PRUNING_TYPE!r} of {type(method).__name__}")


def _combine(earlier, method):
    if isinstance(earlier, PruningContainer):
        earlier.add_pruning_method(method)
        return earlier
    return PruningContainer(earlier, method)


class Identity(BasePruningMethod):
    """Prunes nothing: the mask is all ones (useful to give a module the pruned layout)."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


class RandomUnstructured(BasePruningMethod):
    """Prunes ``amount`` entries chosen uniformly at random."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _check_amount(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        count = _count_to_prune(self.amount, t.numel())
        if not count:  # draw no random numbers when nothing is pruned
            return default_mask.clone()
        return _zero_ranked(default_mask, ember.rand_like(t, dtype=ember.float32), count, largest=True)

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    """Prunes the ``amount`` entries of smallest absolute value (magnitude pruning)."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _check_amount(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        count = _count_to_prune(self.amount, t.numel())
        return _zero_ranked(default_mask, ember.abs(t), count, largest=False)

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


def _keep_channels(t, dim, keep):
    """A 0/1 mask of ``t``'s shape that keeps the channels ``keep`` (index tensor) along ``dim``."""
    mask = ember.zeros_like(t)
    mask[_channel_selector(t, dim, keep)] = 1
    return mask


class RandomStructured(BasePruningMethod):
    """Prunes ``amount`` whole channels along ``dim``, chosen uniformly at random."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1):
        _check_amount(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t, default_mask):
        dim = _channel_dim(self.dim, t)
        channels = t.shape[dim]
        count = _count_to_prune(self.amount, channels)
        if count == 0:
            return default_mask
        keep = ember.topk(ember.rand(channels), k=channels - count).indices
        return _keep_channels(t, dim, keep) * default_mask

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(BasePruningMethod):
    """Prunes the ``amount`` channels along ``dim`` with the smallest Ln norm (``n`` as ``ember.norm``'s ``p``)."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim=-1):
        _check_amount(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def compute_mask(self, t, default_mask):
        dim = _channel_dim(self.dim, t)
        channels = t.shape[dim]
        count = _count_to_prune(self.amount, channels)
        if count == 0:
            return default_mask
        others = _other_dims(t, dim)
        norms = ember.norm(t, p=self.n, dim=others) if others else ember.abs(t) if self.n != 0 else (t != 0).to(t.dtype)
        keep = ember.topk(norms, k=channels - count).indices
        return _keep_channels(t, dim, keep) * default_mask

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes where a given 0/1 ``mask`` is 0 (on top of the earlier mask)."""

    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if tuple(self.mask.shape) != tuple(default_mask.shape):
            raise ValueError(
                f"mask should have the shape of the tensor to prune, got {tuple(self.mask.shape)} and "
                f"{tuple(default_mask.shape)}"
            )
        return default_mask * self.mask.to(dtype=default_mask.dtype, device=default_mask.device)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


# -- functional forms ------------------------------------------------------------------------------


def identity(module, name):
    """Give ``module.<name>`` the pruned layout with an all-ones mask; returns ``module``."""
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    """Prune ``amount`` random entries of ``module.<name>``; returns ``module``."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    """Prune the ``amount`` entries of ``module.<name>`` with the smallest ``|importance_scores|``.

    Args:
        module (nn.Module): the module holding the parameter.
        name (str): the parameter's name, e.g. ``"weight"``.
        amount (float or int): fraction in [0, 1] of the (still unpruned) entries, or their number.
        importance_scores (Tensor, optional): of the parameter's shape; default its values.

    Returns:
        ``module``, with ``<name>_orig``, ``<name>_mask`` and the forward pre-hook added.

    Raises:
        TypeError / ValueError: for an ``amount`` of the wrong type or range, or larger than the
            number of entries.

    Example::

        >>> m = ember.nn.Linear(4, 2)
        >>> _ = ember.nn.utils.prune.l1_unstructured(m, "weight", amount=0.5)
        >>> int((m.weight == 0).sum())
        4
    """
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    """Prune ``amount`` random channels of ``module.<name>`` along ``dim``; returns ``module``."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    """Prune the ``amount`` channels along ``dim`` of ``module.<name>`` with the smallest Ln norm.

    ``n`` is the order of the norm over every other dim (as ``ember.norm``'s ``p``: an int, a
    float, ``float("inf")``, ``"fro"``); returns ``module``.
    """
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module, name, mask):
    """Prune ``module.<name>`` where the 0/1 tensor ``mask`` (the parameter's shape) is 0; returns ``module``."""
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prune several parameters together: the mask is computed over all their entries at once.

    With ``L1Unstructured`` and ``amount=0.2`` this removes the 20% smallest entries of all the
    parameters together, so layers with small weights lose more of them than others.

    Args:
        parameters (iterable): the parameters to prune, as ``(module, name)`` pairs.
        pruning_method (type): an unstructured :class:`BasePruningMethod` subclass
            (``PRUNING_TYPE == "unstructured"``).
        importance_scores (dict, optional): scores by ``(module, name)`` pair (default: the values).
        **kwargs: the method's arguments, e.g. ``amount``.

    Raises:
        TypeError: if ``parameters`` is not an iterable of pairs, or the method is not unstructured.
    """
    if not hasattr(parameters, "__iter__") or isinstance(parameters, (str, ember.Tensor)):
        raise TypeError(
            "global_unstructured(): parameters must be an iterable of (module, name) pairs, "
            f"got {type(parameters).__name__}"
        )
    parameters = list(parameters)
    if getattr(pruning_method, "PRUNING_TYPE", None) != "unstructured":
        raise TypeError(
            "global_unstructured() needs an unstructured pruning method (PRUNING_TYPE 'unstructured'), "
            f"got {getattr(pruning_method, '__name__', pruning_method)!r}"
        )
    scores = importance_scores or {}
    flat_scores = ember.cat([scores.get((m, n), getattr(m, n)).detach().reshape(-1) for m, n in parameters])
    flat_masks = ember.cat([getattr(m, n + "_mask", ember.ones_like(getattr(m, n))).reshape(-1) for m, n in parameters])
    container = PruningContainer()
    container._tensor_name = "global"
    method = pruning_method(**kwargs)
    method._tensor_name = "global"
    container.add_pruning_method(method)
    with ember.no_grad():
        flat = container.compute_mask(flat_scores, default_mask=flat_masks)
    start = 0
    for module, name in parameters:
        size = getattr(module, name).numel()
        custom_from_mask(module, name, flat[start:start + size].view_as(getattr(module, name)))
        start += size


def remove(module, name):
    """Make the pruning of ``module.<name>`` permanent (drops ``<name>_orig``, the mask and the hook).

    Raises:
        ValueError: if ``module.<name>`` is not pruned.
    """
    hook_id, method = _find_pruning_hook(module, name)
    if method is None:
        raise ValueError(
            f"Parameter {name!r} of module {type(module).__name__} has to be pruned before pruning can be removed"
        )
    method.remove(module)
    del module._forward_pre_hooks[hook_id]
    return module


def is_pruned(module):
    """Whether ``module`` or any of its submodules has a pruning hook."""
    return any(
        isinstance(hook, BasePruningMethod)
        for submodule in module.modules()
        for hook in submodule._forward_pre_hooks.values()
    )


def _find_pruning_hook(module, name):
    for hook_id, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            return hook_id, hook
    return None, None
