"""Bytecode tools for ember-dynamo: decode, edit and assemble CPython 3.11-3.13 code objects.

- :mod:`.versions`: the one table of per-version differences.
- :mod:`.instructions`: code object -> :class:`Instruction` list with jump targets by reference.
- :mod:`.assemble`: instructions -> ``CodeType`` (EXTENDED_ARG, jumps, caches, tables, stack size).
- :mod:`.analysis`: :func:`stack_depth_at` and :func:`live_locals_at`.

This package uses only the standard library (no ember import), so it can be tested on its own.
"""

from .analysis import live_locals_at, stack_depth_at
from .assemble import assemble
from .instructions import ExceptionTableEntry, Instruction, decode

__all__ = ["Instruction", "ExceptionTableEntry", "decode", "assemble", "stack_depth_at", "live_locals_at"]
