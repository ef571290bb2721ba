"""Modules as functions of their parameters: :func:`functional_call`, :func:`stack_module_state`."""

from __future__ import annotations

import contextlib

import ember

__all__ = ["functional_call", "stack_module_state"]


def _owner(module, name):
    """``(submodule, attribute)`` for a dotted ``name`` such as ``"layer.0.weight"``."""
    *path, attr = name.split(".")
    for part in path:
        module = getattr(module, part)
    return module, attr


@contextlib.contextmanager
def _swapped(module, values):
    """Put ``values`` (name -> tensor) in the module's parameter and buffer slots; restore them on exit."""
    saved = []
    try:
        for name, value in values.items():
            owner, attr = _owner(module, name)
            store = owner._parameters if attr in owner._parameters else owner._buffers if attr in owner._buffers \
                else None
            if store is None:
                saved.append((owner, attr, None, owner.__dict__.get(attr, _MISSING)))
                owner.__dict__[attr] = value
            else:
                saved.append((owner, attr, store, store[attr]))
                store[attr] = value
        yield
    finally:
        for owner, attr, store, old in reversed(saved):
            if store is not None:
                store[attr] = old
            elif old is _MISSING:
                owner.__dict__.pop(attr, None)
            else:
                owner.__dict__[attr] = old


_MISSING = object()


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """Call ``module`` with its parameters and buffers replaced by the given tensors.

    The module itself is unchanged afterwards. With :func:`grad` and :func:`vmap` this makes a model
    a function of its weights: ``grad(lambda p, x: loss(functional_call(model, p, (x,))))``.

    Args:
        module (ember.nn.Module): the model.
        parameter_and_buffer_dicts (dict or tuple[dict]): names (``named_parameters``/``named_buffers``
            style, dotted) -> tensors. Several dicts are merged; a name may appear in only one.
        args: the positional arguments of the call (a tuple, or one value).
        kwargs (dict, optional): its keyword arguments.
        tie_weights (bool): a parameter shared under several names (tied weights) takes the given
            tensor under all of them when only one name is given.
        strict (bool): every parameter and buffer must be given, and no other name.

    Returns:
        whatever ``module(*args, **kwargs)`` returns.

    Raises:
        ValueError: a name is given twice, or (``strict``) names are missing or unexpected.
    """
    dicts = parameter_and_buffer_dicts if isinstance(parameter_and_buffer_dicts, (tuple, list)) else (
        parameter_and_buffer_dicts,)
    values = {}
    for d in dicts:
        for name, value in d.items():
            if name in values:
                raise ValueError(f"functional_call: {name!r} appeared in multiple dictionaries")
            values[name] = value
    current = dict(module.named_parameters(remove_duplicate=False))
    current.update(dict(module.named_buffers(remove_duplicate=False)))
    if strict:
        missing = sorted(set(current) - set(values))
        unexpected = sorted(set(values) - set(current))
        if missing or unexpected:
            raise ValueError(
                f"functional_call got missing keys {missing} and unexpected keys {unexpected} (strict=True)"
            )
    if tie_weights:
        given = {id(current[name]): value for name, value in values.items() if name in current}
        for name, tensor in current.items():
            if name not in values and id(tensor) in given:
                values[name] = given[id(tensor)]
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _swapped(module, values):
        return module(*args, **(kwargs or {}))


def stack_module_state(models):
    """Stack the parameters and buffers of identically built models, for ensembling with :func:`vmap`.

    Args:
        models (sequence[ember.nn.Module]): models of the same architecture.

    Returns:
        tuple[dict, dict]: ``(params, buffers)``, name -> tensor with a leading dim of ``len(models)``.
        The stacked parameters are new leaves that require grad when the originals do.

    Raises:
        RuntimeError: no models, or models whose parameters differ in names or shapes.

    Example:
        >>> import ember
        >>> from ember.func import functional_call, stack_module_state, vmap
        >>> models = [ember.nn.Linear(3, 2) for _ in range(4)]
        >>> params, buffers = stack_module_state(models)
        >>> call = lambda p, b, x: functional_call(models[0], (p, b), (x,))
        >>> vmap(call, in_dims=(0, 0, None))(params, buffers, ember.ones(5, 3)).shape
        ember.Size([4, 5, 2])
    """
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or not any(m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    first = models[0]

    def stack(named, requires_grad):
        out = {}
        names = [name for name, _ in named(first)]
        for m in models[1:]:
            if [name for name, _ in named(m)] != names:
                raise RuntimeError("stack_module_state: Expected all models to have the same parameters and buffers")
        for name in names:
            tensors = [dict(named(m))[name] for m in models]
            stacked = ember.stack([t.detach() for t in tensors])
            if requires_grad and tensors[0].requires_grad:
                stacked.requires_grad_()
            out[name] = stacked
        return out

    params = stack(lambda m: m.named_parameters(), True)
    buffers = stack(lambda m: m.named_buffers(), False)
    return params, buffers


def replace_all_batch_norm_modules_(root):
    """Make every batch norm module in ``root`` use batch statistics only, in place, so that it runs under vmap.

    A batch norm module in training mode updates its running statistics in place: under :func:`vmap` one
    buffer would receive a value per sample, which vmap refuses. This sets each ``_BatchNorm`` module's
    ``running_mean``, ``running_var`` and ``num_batches_tracked`` to None and ``track_running_stats`` to
    False, as ``torch.func.replace_all_batch_norm_modules_`` does. The modules then normalise with the
    statistics of the batch they see, in training and in eval mode alike.

    Args:
        root (ember.nn.Module): the module whose submodules (itself included) are changed.

    Returns:
        ember.nn.Module: ``root``.
    """
    from ember.nn.modules.batchnorm import _BatchNorm

    for module in root.modules():
        if isinstance(module, _BatchNorm):
            module.running_mean = None
            module.running_var = None
            module.num_batches_tracked = None
            module.track_running_stats = False
    return root

