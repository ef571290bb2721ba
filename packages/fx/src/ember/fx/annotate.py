"""``annotate``: attach a type annotation to a traced value (printed in the generated code)."""

from __future__ import annotations

from .proxy import Proxy

__all__ = ["annotate"]


def annotate(val, type):  # noqa: A002 - PyTorch's argument name
    """Give the node behind ``val`` the type ``type``; outside tracing, ``val`` is returned unchanged.

    Raises:
        RuntimeError: if the node already has a different annotation.
    """
    if isinstance(val, Proxy):
        if val.node.type is not None and val.node.type is not type:
            raise RuntimeError(
                f"Tried to annotate a value that already had a type on it! Existing type is {val.node.type} "
                f"and new type is {type}. This could happen if you tried to annotate a function parameter value "
                "(in which case you should use the type slot on the function signature) or you called annotate "
                "on the same value twice"
            )
        val.node.type = type
    return val
