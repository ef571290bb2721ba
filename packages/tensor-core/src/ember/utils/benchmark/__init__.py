"""Benchmarking utilities, with PyTorch's ``torch.utils.benchmark`` API: time, compare, fuzz, count instructions.

* :class:`Timer` times a statement in blocks of runs, with a fixed intra-op
  thread count, and returns a :class:`Measurement` (median, IQR, warnings);
* :class:`Compare` lays many measurements out as tables (terminal or Markdown);
* :class:`Fuzzer`, :class:`FuzzedParameter` and :class:`FuzzedTensor` generate
  seeded benchmark inputs of random shapes, layouts and dtypes;
* :meth:`Timer.collect_callgrind` counts instructions with Valgrind
  (:class:`CallgrindStats`), which, unlike wall time, a busy machine barely moves.

Example:
    >>> from ember.utils.benchmark import Timer
    >>> m = Timer("x * 2", setup="x = ember.ones(16)", label="mul").blocked_autorange(min_run_time=0.01)
    >>> m.median > 0 and m.number_per_run >= 1
    True
"""

from ._units import select_unit, trim_sigfig, unit_to_english
from .callgrind import CallgrindStats, FunctionCount, FunctionCounts
from .compare import Colorize, Compare
from .fuzzer import FuzzedParameter, FuzzedTensor, Fuzzer, ParameterAlias
from .measurement import Measurement, TaskSpec
from .timer import Language, Timer, synchronize_device

__all__ = [
    "Timer",
    "Language",
    "Measurement",
    "TaskSpec",
    "Compare",
    "Colorize",
    "Fuzzer",
    "FuzzedParameter",
    "FuzzedTensor",
    "ParameterAlias",
    "CallgrindStats",
    "FunctionCounts",
    "FunctionCount",
    "select_unit",
    "trim_sigfig",
    "unit_to_english",
    "synchronize_device",
]
