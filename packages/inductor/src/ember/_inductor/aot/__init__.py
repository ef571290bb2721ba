"""Ahead-of-time autograd: joint tracing, functionalization, decompositions, partitioners.

``aot_function``/``aot_module``/``aot_module_simplified`` (:mod:`.api`) trace a function's
forward and backward together (:mod:`.joint`) into a functional graph (:mod:`.functionalize`),
split it (:mod:`.partitioners`) and hand each half to a compiler. Random ops follow
:mod:`.rng`'s rule.
"""

from .api import aot_function, aot_module, aot_module_simplified, default_partition
from .joint import TraceInfo, trace_forward, trace_joint

__all__ = [
    "aot_function",
    "aot_module",
    "aot_module_simplified",
    "default_partition",
    "trace_joint",
    "trace_forward",
    "TraceInfo",
]
