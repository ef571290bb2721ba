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
"""

__all__: list[str] = []
