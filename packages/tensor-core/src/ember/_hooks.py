"""Hooks: the handle every hook registration returns, and the check of what a gradient hook returns.

Modules, autograd nodes and tensors, and optimizers keep their hooks in dicts
keyed by the handle's ``id``; ``handle.remove()`` deletes the entry. The
handle refers to the dicts weakly, so it does not keep their owner alive
(PyTorch's ``torch.utils.hooks.RemovableHandle``).

A hook that returns a gradient in place of the one it was given is checked by
:func:`check_hook_result` (one gradient) or :func:`check_hook_results` (a
tuple), wherever the autograd engine or a Module's full backward hooks call one.
"""

from __future__ import annotations

import weakref

from ._tensor import Tensor

__all__ = ["RemovableHandle", "check_hook_result", "check_hook_results", "hook_name"]


class RemovableHandle:
    """A handle that removes a hook from the dicts it was registered in (``torch.utils.hooks.RemovableHandle``).

    Usable as a context manager: the hook is removed on exit.

    Args:
        hooks_dict (dict): where the hook is registered under ``handle.id`` (must accept weak references:
            an ``OrderedDict`` or a dict subclass).
        extra_dict (dict or sequence of dicts, optional): other dicts holding an entry under the same id.
    """

    next_id = 0

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        if extra_dict is None:
            extra_dict = ()
        elif isinstance(extra_dict, dict):
            extra_dict = (extra_dict,)
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extra_dict)

    def remove(self):
        """Remove the hook (a no-op when already removed)."""
        hooks_dict = self.hooks_dict_ref()
        if hooks_dict is not None and self.id in hooks_dict:
            del hooks_dict[self.id]
        for ref in self.extra_dict_ref:
            extra = ref()
            if extra is not None and self.id in extra:
                del extra[self.id]

    def __enter__(self):
        return self

    def __exit__(self, *args):
        self.remove()


def hook_name(hook):
    """How error messages name a hook: its ``__name__`` (``'<lambda>'`` for a lambda), else its type's name."""
    return getattr(hook, "__name__", None) or type(hook).__name__


def check_hook_result(hook, original, result):
    """Check a gradient that a user hook returned in place of ``original``; return it.

    Used wherever a hook's return value replaces a gradient: tensor hooks (``register_hook``),
    autograd-node hooks and pre-hooks, post-accumulate-grad hooks and Module full backward
    (pre-)hooks. The replacement must be a tensor of the same shape, dtype and device, as in
    PyTorch; it would otherwise flow on silently (``x.grad`` taking the hook's shape) or fail
    later inside an unrelated op.

    Args:
        hook (callable): the hook, for the message.
        original (Tensor or None): the gradient the hook was given at that position.
        result: what the hook returned there; None keeps ``original``'s place empty, as in PyTorch.

    Returns:
        ``result``.

    Raises:
        TypeError: if ``result`` is neither None nor a tensor.
        RuntimeError: if ``result`` replaces a None gradient, or its shape, dtype or device
            differ from ``original``'s.
    """
    if result is None:
        return None
    if not isinstance(result, Tensor):
        raise TypeError(f"expected Tensor, but hook '{hook_name(hook)}' returned '{type(result).__name__}'")
    if original is None:
        raise RuntimeError(f"hook '{hook_name(hook)}' can't replace a None gradient with a non-None value")
    if result.dtype is not original.dtype or result.device.type != original.device.type:
        raise RuntimeError(
            f"hook '{hook_name(hook)}' has changed the type of value (was {original.type()} got {result.type()})"
        )
    if result.device != original.device:
        raise RuntimeError(
            f"hook '{hook_name(hook)}' has changed the device of value (was {original.device} got {result.device})"
        )
    if result.shape != original.shape:
        raise RuntimeError(
            f"hook '{hook_name(hook)}' has changed the size of value (was {list(original.shape)} got "
            f"{list(result.shape)})"
        )
    return result


def check_hook_results(hook, originals, results):
    """:func:`check_hook_result` for a hook that returns a sequence of gradients (autograd-node and Module
    hooks); returns the results as a list.

    Raises:
        TypeError: if ``results`` is not a tuple or list, or for an element as in :func:`check_hook_result`.
        RuntimeError: if its length differs from ``originals``', or for an element as above.
    """
    if not isinstance(results, (tuple, list)):
        raise TypeError(f"hook '{hook_name(hook)}' should return a tuple of gradients or None, not "
                        f"'{type(results).__name__}'")
    if len(results) != len(originals):
        raise RuntimeError(
            f"hook '{hook_name(hook)}' has returned an incorrect number of values (got {len(results)}, but "
            f"expected {len(originals)})"
        )
    return [check_hook_result(hook, o, r) for o, r in zip(originals, results)]
