"""Dynamic shapes in Triton kernels on the GPU: the twins of test_dynamic_kernels.py's sweeps on cuda
(every test is marked ``cuda``; the lead runs them on the GPU machine)."""

from __future__ import annotations

import pytest
from _dynamic_cases import (
    assert_twice,
    close,
    cnn_sweep,
    compile_dynamic,
    mlp_sweep,
    sequence_sweep,
    transformer_sweep,
)
from _triton_cases import cuda_device

import ember
import ember._inductor.dynamic_compile as dynamic_compile
from ember._inductor import config

pytestmark = pytest.mark.cuda


@pytest.fixture
def cuda():
    cuda_device()
    ember._dynamo.reset()
    with config.patch(fallback_on_compile_error=False, triton_on_cpu=False):
        yield "cuda"
    ember._dynamo.reset()


def test_mlp_batch_sweep_compiles_twice(cuda):
    assert_twice(mlp_sweep(cuda))


def test_cnn_block_batch_sweep_compiles_twice(cuda):
    assert_twice(cnn_sweep(cuda))


def test_transformer_layer_batch_sweep_compiles_twice(cuda):
    assert_twice(transformer_sweep(cuda, seq=32))


def test_sequence_length_sweep_compiles_twice(cuda):
    assert_twice(sequence_sweep(cuda))


def test_kernels_take_sizes_as_arguments(cuda):
    x = ember.randn(12, 40, device=cuda)
    compiled = compile_dynamic(lambda t: ((t.sin() * 2).sum(1), t.exp()), [x], [0])
    assert callable(compiled.accepts), dynamic_compile.last_fallback_reason
    for rows in (12, 3, 29, 1000):
        y = ember.randn(rows, 40, device=cuda)
        assert compiled.accepts((y,))
        s, e = compiled(y)
        close(s, (y.sin() * 2).sum(1), 1e-5)
        close(e, y.exp(), 1e-6)
