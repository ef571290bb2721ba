"""``ember.autograd.Function`` classes that ember-core's fused kernels define, made on first use.

ember-autograd sits above ember-core, so a core kernel whose backward is its own kernel (the one-kernel cuda
dropout, the CPU recurrence of nn.LSTM/GRU) cannot subclass ``Function`` at import; :func:`function_class`
builds the class the first time a recorded call needs it.
"""

from __future__ import annotations

import functools

__all__ = ["function_class"]


@functools.cache
def function_class(name, forward, backward):
    """The ``ember.autograd.Function`` subclass ``name`` with static methods ``forward(ctx, *args)`` and
    ``backward(ctx, *grads)`` (one class per triple, made once), or None without ember-autograd installed."""
    try:
        from ember.autograd import Function
    except ImportError:
        return None
    return type(name, (Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward)})
