"""ember-inductor: AOT autograd, decompositions and a fusing compiler that emits C++/OpenMP.

The pipeline, one module per stage (see ``docs/inductor.rst``)::

    aot/          joint forward+backward trace, functionalization, decompositions, partitioners
    ir.py         the loop-level IR
    lowering.py   registry op -> IR builder (one table)
    graph.py      FX graph -> IR buffers
    scheduler.py  fusion and buffer reuse
    codegen/      C++/OpenMP kernels and the wrapper that runs them
    codecache.py  compiled artefacts on disk, keyed by content hash
    compile_fx.py the entry point backends call
    backends.py   "eager", "aot_eager", "inductor" by name
    config.py     settings; debug.py: EMBER_COMPILE_DEBUG output

The entry point is ``ember._inductor.compile_fx.compile_fx(gm, example_inputs)``
(the module keeps its name so that ``ember._inductor.compile_fx`` is always the module).
"""

from . import backends, compile_fx, config
from .exc import CppCompileError, InductorError, LoweringException

__all__ = ["backends", "compile_fx", "config", "InductorError", "LoweringException", "CppCompileError"]
