"""The lowerings' device rule: ``device=`` arguments naming the graph's own device are lowered.

A graph compiled to Triton for cuda is lowered from meta examples, and its ``_to_copy`` / factory calls
carry ``device=cuda:0``. They must become loops like on cpu, not extern calls of the eager op (each one a
Python call and a launch: layer_norm's float64 statistics ran as four extern copies, 6x slower than
torch.compile on an H100). No GPU is needed: lowering reads only shapes, strides and dtypes.
"""

from __future__ import annotations

import ember
from ember._inductor import ir
from ember._inductor.graph import GraphLowering
from ember._inductor.lowering import graph_device, on_graph_device
from ember._ops import registry as R
from ember.fx.experimental.proxy_tensor import make_fx


def _lower(device_arg, graph_dev):
    """Lower ``maximum(x.to(float64), zeros(()))``, its copy and factory naming ``device_arg``, for a graph
    on ``graph_dev``. The lowering runs the graph on meta examples, so without a GPU the stand-in for
    "cuda" is a device every machine has: ``meta`` (the rule compares types and indices alone)."""

    def fn(x):
        wide = R["_to_copy"](x, dtype=ember.float64, device="meta")
        zero = R["zeros"]((), dtype=ember.float64, device="meta")
        return R["maximum"](wide, zero)

    x = ember.empty((4, 8), device="meta")
    gm = make_fx(fn)(x)
    for node in gm.graph.nodes:
        if "device" in node.kwargs:
            node.kwargs = {**node.kwargs, "device": ember.device(device_arg)}
    with graph_device(graph_dev):
        return GraphLowering(gm, [x]).run()


def _externs(graph):
    return [b for b in graph.buffers if isinstance(b, ir.ExternKernel)]


def test_device_rule():
    assert on_graph_device(None)
    assert on_graph_device("cpu") and not on_graph_device("cuda")
    with graph_device("cuda"):
        assert on_graph_device(ember.device("cuda", 0)) and on_graph_device("cuda")
        assert not on_graph_device("cpu")
    with graph_device("cuda:1"):
        assert not on_graph_device("cuda:0") and on_graph_device("cuda")
    assert on_graph_device("cpu")  # restored after the block


def test_copies_and_factories_on_the_graph_device_lower():
    graph = _lower("meta", "meta")
    assert not _externs(graph), str(graph)


def test_another_device_stays_an_extern_call():
    graph = _lower("meta", "cpu")
    assert len(_externs(graph)) == 2 and "another device" in str(graph), str(graph)


def test_compile_graph_triton_lowers_with_the_device_it_is_given():
    # aot hands meta examples: the device comes from compile_fx (a cross-entropy ``arange(n, device=...)``
    # stayed an extern call on cuda, whose host copy made every CUDA-graph capture fail)
    import pytest

    pytest.importorskip("triton", reason="Triton is not installed")
    from ember._inductor.runtime.triton_graph import compile_graph_triton

    def fn(x):
        return R["add"](x, R["arange"](8, dtype=ember.float32, device="meta"))

    x = ember.empty((4, 8), device="meta")
    gm = make_fx(fn)(x)
    assert not _externs(compile_graph_triton(gm, [x], device="meta").graph)
    assert len(_externs(compile_graph_triton(gm, [x]).graph)) == 1  # without it: the meta examples say cpu
