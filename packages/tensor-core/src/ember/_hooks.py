"""The handle every hook registration returns (PyTorch's ``torch.utils.hooks.RemovableHandle``).

Modules, autograd nodes and tensors, and optimizers keep their hooks in dicts
keyed by the handle's ``id``; ``handle.remove()`` deletes the entry. The
handle refers to the dicts weakly, so it does not keep their owner alive.
"""

from __future__ import annotations

import weakref

__all__ = ["RemovableHandle"]


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
