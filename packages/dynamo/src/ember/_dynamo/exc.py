"""Errors of capture: what the translator cannot trace, and where in the user's code it happened.

:class:`Unsupported` is raised by the translator (and the variable trackers) on anything it cannot
follow symbolically: reading a tensor's value into Python, ``print``, a C function it does not
know, a generator.  The translator attaches the user's file, line and source text of the
instruction that failed; with ``fullgraph=False`` it becomes a graph break at that instruction,
with ``fullgraph=True`` the user sees it.

:class:`SkipFrame` says that the whole frame must run eagerly (no graph at all): a break where the
interpreter's state cannot be handed to a continuation (inside an ``except`` handler, in a generator
or coroutine function: see :class:`~ember._dynamo.resume.CannotResume`).
"""

from __future__ import annotations

import linecache

__all__ = ["Unsupported", "SkipFrame", "ObservedException", "user_location"]


def user_location(code, lineno):
    """``(filename, lineno, source_line)`` of ``lineno`` in ``code``'s file (source_line '' if unknown)."""
    filename = code.co_filename
    line = linecache.getline(filename, lineno).strip() if lineno else ""
    return filename, lineno, line


class Unsupported(RuntimeError):
    """The translator cannot capture an instruction.

    Attributes:
        reason (str): what could not be traced and why, e.g. ``"Tensor.item() reads a tensor's value"``.
        filename (str or None), lineno (int or None), source_line (str): where in the user's code
            (the innermost user frame being traced when it was raised).
    """

    def __init__(self, reason, filename=None, lineno=None, source_line=""):
        super().__init__(reason)
        self.reason = reason
        self.filename = filename
        self.lineno = lineno
        self.source_line = source_line

    def located(self):
        """Whether the user location is filled in."""
        return self.filename is not None

    def locate(self, code, lineno):
        """Fill in the user location from ``code`` and ``lineno`` unless an inner frame already did."""
        if not self.located():
            self.filename, self.lineno, self.source_line = user_location(code, lineno)
        return self

    def __str__(self):
        if not self.located():
            return self.reason
        where = f"{self.filename}:{self.lineno}"
        text = f"\n    {self.source_line}" if self.source_line else ""
        return f"{self.reason}\n  at {where}{text}"


class SkipFrame(Unsupported):
    """The whole frame must run eagerly: nothing of it can be captured (``reason`` says why)."""


class ObservedException(Unsupported):
    """A Python exception the traced code raised (``raise``, a missing dict key, an index out of range).

    The translator unwinds to the innermost handler of the exception tables of the frames being
    traced; one that no frame catches is a graph break at the instruction of the compiled frame
    (run eagerly, it raises for real).

    Attributes:
        exception: the tracker of the exception object (an ExceptionVariable).
    """

    def __init__(self, exception, reason=None):
        super().__init__(reason or f"{exception.describe()} raised while tracing (not caught in the traced code)")
        self.exception = exception
