"""Anomaly detection: remember where each node was made, and fail on NaN gradients.

With anomaly mode on (:class:`ember.autograd.detect_anomaly` or
:func:`ember.autograd.set_detect_anomaly`), every backward node records the
Python stack of the forward call that created it. When a node returns a
gradient containing NaN, the engine raises an error naming the node and
showing that forward stack, so the op at fault is found without bisecting.
"""

from __future__ import annotations

import traceback
import warnings

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "is_anomaly_check_nan_enabled"]


class _State:
    """The mode is process-wide, as PyTorch's is: a thread started inside ``detect_anomaly`` sees it on."""

    def __init__(self):
        self.enabled = False
        self.check_nan = True


_state = _State()


def enabled():
    """Whether anomaly mode is on (the recording hot path reads ``_state.enabled`` directly)."""
    return _state.enabled


def record_forward(node):
    """Store the forward stack (without autograd's own frames) on ``node``."""
    stack = traceback.format_stack()
    node._anomaly_trace = "".join(f for f in stack if "/ember/autograd/" not in f and "/ember/_ops/" not in f)


def check_nan(node, grads):
    """Raise if a gradient computed by ``node`` contains NaN (anomaly mode with ``check_nan``).

    Raises:
        RuntimeError: naming the node and the output index; the forward stack is in the message.
    """
    if not (_state.enabled and _state.check_nan):
        return
    import ember

    for i, g in enumerate(grads):
        if g is not None and (g.is_floating_point() or g.is_complex()) and bool(ember.isnan(g).any()):
            trace = node._anomaly_trace
            where = f"\nThe forward call that created it:\n{trace}" if trace else ""
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.{where}")


def warn_forward_trace(node):
    """In anomaly mode, warn with the forward stack of the node whose backward failed."""
    trace = getattr(node, "_anomaly_trace", None)
    if _state.enabled and trace:
        warnings.warn(
            f"Error detected in {node.name()}. Traceback of forward call that caused the error:\n{trace}",
            stacklevel=3,
        )


class detect_anomaly:
    """Context manager and decorator turning anomaly detection on (see the module docstring).

    Args:
        check_nan (bool): raise when a backward node returns NaN (default True).
    """

    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        self._previous = (_state.enabled, _state.check_nan)
        _state.enabled, _state.check_nan = True, self.check_nan
        warnings.warn(
            "Anomaly Detection has been enabled. This mode will increase the runtime and should only be enabled "
            "for debugging.",
            stacklevel=2,
        )
        return self

    def __exit__(self, *exc):
        _state.enabled, _state.check_nan = self._previous
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)

        return wrapper


class set_detect_anomaly:
    """Turn anomaly detection on or off: immediately, and restored on exit when used with ``with``.

    Args:
        mode (bool): on or off.
        check_nan (bool): raise on NaN gradients while on.
    """

    def __init__(self, mode, check_nan=True):
        self._previous = (_state.enabled, _state.check_nan)
        _state.enabled, _state.check_nan = bool(mode), check_nan

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _state.enabled, _state.check_nan = self._previous
        return False


def is_anomaly_enabled():
    """Whether anomaly detection is on (process-wide)."""
    return _state.enabled


def is_anomaly_check_nan_enabled():
    """Whether anomaly mode checks backward results for NaN."""
    return _state.check_nan
