"""Errors of the compiler, one class per way a compilation can fail.

``compile_fx`` catches :class:`LoweringException` (a graph the compiler cannot
handle) and runs the graph eagerly instead, logging the reason; it never turns a
failure into a wrong answer. A failing C++ build is a bug in the generated code
or the toolchain: :class:`CppCompileError` carries the compiler's message and the
path of the source file so a user can read both.
"""

from __future__ import annotations

__all__ = ["InductorError", "LoweringException", "CppCompileError"]


class InductorError(RuntimeError):
    """Base class of ember-inductor's errors."""


class LoweringException(InductorError):
    """A node the lowering cannot turn into loop IR (the message names the op and why)."""


class CppCompileError(InductorError):
    """The C++ compiler rejected generated code.

    Args:
        source_path (str): the ``.cpp`` file that failed to build.
        command (list[str]): the compiler command line.
        output (str): what the compiler printed.
    """

    def __init__(self, source_path, command, output):
        self.source_path = str(source_path)
        self.command = list(command)
        self.output = output
        super().__init__(f"C++ compilation failed for {self.source_path}\ncommand: {' '.join(self.command)}\n{output}")
