"""PyTorch's ``torch.nn.modules.utils``: the ``_single``/``_pair``/``_triple``/``_quadruple``
argument expanders layers use, and :func:`consume_prefix_in_state_dict_if_present`."""

from __future__ import annotations

from ._utils import _ntuple, _pair, _reverse_repeat_tuple, _single, _triple  # noqa: F401

__all__ = ["consume_prefix_in_state_dict_if_present"]

_quadruple = _ntuple(4, "_quadruple")


def consume_prefix_in_state_dict_if_present(state_dict, prefix):
    """Strip ``prefix`` from the keys of ``state_dict`` that start with it, in place.

    The usual use: load a checkpoint saved from a :class:`~ember.nn.DataParallel` or
    ``DistributedDataParallel`` wrapper (keys ``"module.weight"``) into the bare model
    (``prefix="module."``). As in PyTorch, each renamed entry moves to the end of the dict,
    and the keys of the ``_metadata`` attribute (if the dict has one) are renamed too.

    Args:
        state_dict (dict): a state dict; modified in place.
        prefix (str): the prefix to remove.

    Raises:
        TypeError: if ``prefix`` is not a string.

    Example:
        >>> from collections import OrderedDict
        >>> from ember.nn.modules.utils import consume_prefix_in_state_dict_if_present
        >>> sd = OrderedDict([("module.weight", 1), ("module.bias", 2)])
        >>> consume_prefix_in_state_dict_if_present(sd, "module.")
        >>> list(sd)
        ['weight', 'bias']
    """
    if not isinstance(prefix, str):
        raise TypeError(f"consume_prefix_in_state_dict_if_present: prefix must be a str, got {type(prefix).__name__}")
    for key in [k for k in state_dict if isinstance(k, str) and k.startswith(prefix)]:
        state_dict[key[len(prefix) :]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        bare = prefix.replace(".", "")
        for key in [k for k in metadata if k and (k == bare or k.startswith(prefix))]:
            # "module" itself (the wrapped model's own entry) becomes the root entry "".
            metadata[key[len(prefix) :]] = metadata.pop(key)
