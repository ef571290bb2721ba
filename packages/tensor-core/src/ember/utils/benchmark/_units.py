"""Turning seconds into numbers a person reads: the unit, and rounding to significant figures."""

from __future__ import annotations

import math

#: Each unit with its length in seconds, largest first.
_UNITS = (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9))
_ENGLISH = {"s": "second", "ms": "millisecond", "us": "microsecond", "ns": "nanosecond"}


def select_unit(t: float) -> tuple[str, float]:
    """The unit that shows ``t`` seconds as a number in ``[1, 1000)``, and that unit's length in seconds.

    Times below a nanosecond (and zero) are shown in nanoseconds, times of a second or more in seconds.

    Example:
        >>> from ember.utils.benchmark import select_unit
        >>> select_unit(4.2e-5)
        ('us', 1e-06)
    """
    for unit, scale in _UNITS:
        if t >= scale:
            return unit, scale
    return "ns", 1e-9


def unit_to_english(u: str) -> str:
    """The English name of a unit from :func:`select_unit` (``"us"`` -> ``"microsecond"``).

    Raises:
        KeyError: for a unit that is not one of ``s``, ``ms``, ``us``, ``ns``.
    """
    return _ENGLISH[u]


def trim_sigfig(x: float, n: int) -> float:
    """``x`` rounded to ``n`` significant figures (``trim_sigfig(3.14159, 2) == 3.1``).

    Raises:
        ValueError: if ``n`` is not a positive integer.
    """
    if n != int(n) or n < 1:
        raise ValueError(f"trim_sigfig: the number of significant figures must be a positive integer, got {n!r}")
    if x == 0 or not math.isfinite(x):
        return float(x)
    # Digits before the decimal point (negative for |x| < 0.1); round to n of them in all.
    magnitude = math.ceil(math.log10(abs(x)))
    scale = 10.0 ** (magnitude - int(n))
    return float(round(x / scale) * scale)
