"""Dynamic shapes in Triton kernels, run through Triton's interpreter on cpu tensors (CI has no GPU).

The twin of test_dynamic_kernels.py for the Triton code generator (``config.triton_on_cpu``): a sweep of
sizes compiles twice, kernels take the dynamic sizes as ``ks`` arguments. Sizes are small (the
interpreter runs each program in Python). The GPU twins are in test_dynamic_kernels_cuda.py.
"""

from __future__ import annotations

import os

import pytest

if os.environ.get("EMBER_TEST_BACKEND", "cpu") in ("cuda", "rocm"):
    pytest.skip("the GPU backend runs test_dynamic_kernels_cuda.py instead of the interpreter",
                allow_module_level=True)
os.environ.setdefault("TRITON_INTERPRET", "1")  # before Triton is imported: its jit reads it then
triton = pytest.importorskip("triton", reason="Triton is not installed (pip install ember-inductor[triton])")

from _dynamic_cases import (  # noqa: E402
    assert_twice,
    close,
    cnn_sweep,
    compile_dynamic,
    mlp_sweep,
    sequence_sweep,
    transformer_sweep,
)

import ember  # noqa: E402
import ember._inductor.dynamic_compile as dynamic_compile  # noqa: E402
from ember._inductor import config  # noqa: E402
from ember._inductor.runtime.triton_graph import TritonCompiledGraph  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                                reason="TRITON_INTERPRET was set to something else than 1")


@pytest.fixture(autouse=True)
def _triton_on_cpu():
    ember._dynamo.reset()
    with config.patch(triton_on_cpu=True, fallback_on_compile_error=False):
        yield
    ember._dynamo.reset()


def test_mlp_batch_sweep_compiles_twice():
    assert_twice(mlp_sweep(sizes=(4, 6, 8, 10, 12, 16, 20, 24, 32, 40)))


def test_cnn_block_batch_sweep_compiles_twice():
    """Batch norm's ``1/n`` and running-variance ``k*n/(n-1)`` are float kernel arguments here."""
    assert_twice(cnn_sweep(sizes=(2, 3, 4, 5)))


def test_transformer_layer_batch_sweep_compiles_twice():
    assert_twice(transformer_sweep(sizes=(2, 3, 4, 5, 6), seq=4))


def test_sequence_length_sweep_compiles_twice():
    assert_twice(sequence_sweep(sizes=(4, 5, 6, 8, 9, 12, 16, 20, 24, 31)))


def test_triton_kernels_take_sizes_as_arguments():
    x = ember.randn(12, 40)
    compiled = compile_dynamic(lambda t: ((t.sin() * 2).sum(1), t.exp() / t.shape[0]), [x], [0])
    assert callable(compiled.accepts), dynamic_compile.last_fallback_reason
    graph = compiled.graphs[0]
    assert isinstance(graph, TritonCompiledGraph)
    # the kernels' size arguments are expressions over s0, evaluated per call, not the hint's numbers
    sizes = [str(s) for kernel in graph.steps if isinstance(kernel, list) for k in kernel for s in k.sizes]
    assert any("s0" in s for s in sizes), sizes
    assert "480" not in graph.source and "12" not in sizes
    for rows in (12, 3, 29):
        y = ember.randn(rows, 40)
        assert compiled.accepts((y,))
        s, e = compiled(y)
        close(s, (y.sin() * 2).sum(1), 1e-5)
        close(e, y.exp() / rows, 1e-6)


def test_persistent_reduction_assumes_its_row_fits():
    """A row reduction over a dynamic length is persistent at its hint (one block), assuming every length
    fits the block: a longer row is refused (the caller compiles a looped kernel)."""
    from ember._inductor.codegen import triton as tgen

    x = ember.randn(3, 64)
    compiled = compile_dynamic(lambda t: t.softmax(-1), [x], [1])
    assert callable(compiled.accepts), dynamic_compile.last_fallback_reason
    assert any("<=" in a and str(tgen.PERSISTENT_LIMIT) in a for a in compiled.assumptions), compiled.assumptions
    y = ember.randn(3, 100)
    assert compiled.accepts((y,))
    close(compiled(y)[0], y.softmax(-1), 1e-5)
    assert not compiled.accepts((ember.randn(3, tgen.PERSISTENT_LIMIT + 1),))


def test_split_reduction_with_a_dynamic_length(monkeypatch):
    """A full reduction of many elements is split in chunks at its hint; the split kernels read the length
    as an argument and their partial buffer is sized per call, so any length is right."""
    from ember._inductor.codegen import triton as tgen

    monkeypatch.setattr(tgen, "SPLIT_MIN_ELEMENTS", 512)  # small sizes and few chunks: the interpreter is slow
    monkeypatch.setattr(tgen, "SPLIT", 4)
    x = ember.randn(4, 256)
    compiled = compile_dynamic(lambda t: (t.sum(), t.abs().amax()), [x], [0])
    assert callable(compiled.accepts), dynamic_compile.last_fallback_reason
    kinds = [k.kind for step in compiled.graphs[0].steps if isinstance(step, list) for k in step]
    assert "split" in kinds, kinds
    for rows in (4, 2, 7):
        y = ember.randn(rows, 256)
        total, peak = compiled(y)
        close(total, y.sum(), 1e-2)
        close(peak, y.abs().amax(), 0)


def test_persistent_block_covers_the_longest_row_at_run_time():
    """Rows of a dynamic length and of a static one reduced in one persistent kernel: the block is sized
    from the longest row of each call (at the hint the static row is longer)."""
    x, w = ember.randn(3, 32), ember.randn(3, 64)
    compiled = compile_dynamic(lambda t, v: t.sum(-1) + v.amax(-1), [x, w], [1])
    assert callable(compiled.accepts), dynamic_compile.last_fallback_reason
    for cols in (32, 100, 7):
        y = ember.randn(3, cols)
        assert compiled.accepts((y, w))
        close(compiled(y, w)[0], y.sum(-1) + w.amax(-1), 1e-5)
