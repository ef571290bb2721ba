"""Which ops :func:`ember.func.vmap` ran as a loop over the batch instead of vectorising them, and
which ops forward-mode AD differentiated by the double-vjp identity instead of a jvp rule.

An op without a batching rule (and without a decomposition into ops that have one) still gives the
right answer under vmap: it runs once per sample and the results are stacked. That is slow, so each
such call is counted here, and tests assert that the ops they care about are truly vectorised.

Example:
    >>> import ember
    >>> from ember.func import vmap, debug
    >>> with debug.fallbacks() as report:
    ...     _ = vmap(ember.sin)(ember.ones(3, 2))
    >>> dict(report)
    {}
"""

from __future__ import annotations

import contextlib
import warnings
from collections import Counter

__all__ = [
    "fallbacks", "total_fallbacks", "set_warn_on_fallback", "FallbackReport", "jvp_fallbacks", "total_jvp_fallbacks",
]


class FallbackReport(Counter):
    """Op name -> how many times vmap looped over the batch for it, inside one :func:`fallbacks` block."""


_reports: list[FallbackReport] = []
_total = FallbackReport()
_warn = False


@contextlib.contextmanager
def fallbacks():
    """Record the ops that fall back to a per-sample loop inside this block.

    Yields:
        FallbackReport: a Counter of op names, filled while the block runs.
    """
    report = FallbackReport()
    _reports.append(report)
    try:
        yield report
    finally:
        _reports.remove(report)


def total_fallbacks():
    """Every fallback since ``import ember.func`` (a copy), op name -> count."""
    return FallbackReport(_total)


def set_warn_on_fallback(enabled):
    """Warn (``UserWarning``, naming the op) each time an op falls back to a loop; returns the previous setting."""
    global _warn
    previous, _warn = _warn, bool(enabled)
    return previous


def record(name):
    """Count one fallback of op ``name`` (called by the batching rules)."""
    _total[name] += 1
    for report in _reports:
        report[name] += 1
    if _warn:
        warnings.warn(
            f"vmap: there is no batching rule for {name}; it ran once per sample (correct, but slow)", stacklevel=4
        )


# ---------------------------------------------------------------------------------------------------
# forward mode: ops without a jvp rule


_jvp_reports: list[FallbackReport] = []
_jvp_total = FallbackReport()


@contextlib.contextmanager
def jvp_fallbacks():
    """Record the ops whose tangents forward-mode AD computed by the double-vjp identity inside this block.

    Forward-mode AD (:mod:`ember.autograd.forward_ad`, :func:`ember.func.jvp`, :func:`ember.func.jacfwd`)
    uses an op's jvp rule; an op without one (and without a decomposition) gets its tangent from its
    backward formula run twice (exact, but two backward passes). ``"forward-over-reverse"`` counts
    ``jvp``/``jacfwd`` calls of functions that run a reverse-mode transform on dual tensors
    (``jacfwd(jacrev(f))``), which are computed by the double-vjp identity as a whole.

    Yields:
        FallbackReport: a Counter of op names, filled while the block runs.

    Example:
        >>> import ember
        >>> from ember.func import jvp, debug
        >>> with debug.jvp_fallbacks() as report:
        ...     _ = jvp(ember.sin, (ember.ones(3),), (ember.ones(3),))
        >>> dict(report)
        {}
    """
    report = FallbackReport()
    _jvp_reports.append(report)
    try:
        yield report
    finally:
        _jvp_reports.remove(report)


def total_jvp_fallbacks():
    """Every forward-mode fallback since ``import ember.func`` (a copy), op name -> count."""
    return FallbackReport(_jvp_total)


def record_jvp(name):
    """Count one double-vjp fallback of op ``name`` (called by :mod:`ember.autograd.forward_ad`)."""
    _jvp_total[name] += 1
    for report in _jvp_reports:
        report[name] += 1
    if _warn:
        warnings.warn(f"forward AD: there is no jvp rule for {name}; its tangent came from two backward passes",
                      stacklevel=4)
