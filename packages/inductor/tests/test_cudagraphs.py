"""CUDA graphs' bookkeeping (runtime/cudagraphs.py) on the CPU, with a fake graph capture injected.

The fake "captures" by running the graph once and "replays" by running it again into the same output buffers: what a CUDA graph does to static memory. With
it the tests check what does not need a GPU: warm-up, static input buffers, parameters read in place,
outputs overwritten by the next replay (invalidated, or copied out for gradients), a forward whose backward
is pending, one recording per signature and its limit, the reasons a graph runs without CUDA graphs, and
``mode="reduce-overhead"`` end to end. The real capture runs in test_gpu_models.py (marked ``cuda``).
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

import ember
from ember._inductor import config
from ember._inductor.runtime import cudagraphs
from ember.fx.experimental.proxy_tensor import make_fx


class FakeGraph:
    def __init__(self, fn, outputs):
        self.fn = fn
        self.outputs = outputs


def _tensors(outputs):
    return [o for o in (outputs if isinstance(outputs, (tuple, list)) else (outputs,)) if isinstance(o, ember.Tensor)]


class FakeGraphs:
    """A graph capture for cpu tensors: replay = run the function again, results copied into the captured
    outputs' memory."""

    def __init__(self, fail=None):
        self.captures = 0
        self.replays = 0
        self.fail = fail

    def supports(self, device):
        return True

    def capture(self, fn, device):
        if self.fail is not None:
            raise self.fail
        self.captures += 1
        outputs = fn()  # (a real capture computes nothing; the runner replays once after it)
        return FakeGraph(fn, outputs), outputs

    def replay(self, graph, device):
        self.replays += 1
        for old, new in zip(_tensors(graph.outputs), _tensors(graph.fn())):
            old._data[...] = new._data


@pytest.fixture
def fake(monkeypatch):
    backend = FakeGraphs()
    monkeypatch.setattr(cudagraphs, "capture_backend", backend)
    cudagraphs.counters.clear()
    return backend


def _runner(fn, *examples, role="inference", group=None):
    gm = make_fx(fn)(*examples)
    return cudagraphs.cudagraphify(gm, gm, role=role, group=group, name="f")


def _f(x, w):
    return ((x * w).sin() + 1, x.sum())


def test_warmup_then_one_recording_then_replays(fake):
    x, w = ember.randn(4, 3), ember.randn(4, 3)
    f = _runner(_f, x, w)
    for _ in range(4):
        x = ember.randn(4, 3)
        a, s = f(x, w)
        np.testing.assert_allclose(a.numpy(), ((x * w).sin() + 1).numpy(), rtol=1e-6)
        np.testing.assert_allclose(s.numpy(), x.sum().numpy(), rtol=1e-6)
    assert (fake.captures, fake.replays) == (1, 3)  # call 1 warms up, call 2 records (and launches), 2 replays
    assert cudagraphs.counters["warmups"] == 1 and cudagraphs.counters["recordings"] == 1


def test_warmup_runs_setting(fake):
    with config.patch(cudagraph_warmup_runs=3):
        f = _runner(_f, ember.randn(2), ember.randn(2))
    for _ in range(3):
        f(ember.randn(2), ember.randn(2))
    assert fake.captures == 0
    f(ember.randn(2), ember.randn(2))
    assert fake.captures == 1


def test_inputs_copied_into_static_buffers_parameters_read_in_place(fake):
    w = ember.nn.Parameter(ember.randn(5))
    x = ember.randn(5)
    f = _runner(lambda x, w: x * w, x, w)
    f(x, w)
    f(x, w)
    (rec,) = f.recordings.values()
    assert [i for i, _ in rec.copies] == [0]  # x is copied; the parameter is not
    assert rec.static_args[1].data_ptr() == w.data_ptr() and rec.static_args[0].data_ptr() != x.data_ptr()
    with ember.no_grad():
        w.mul_(2)  # an optimizer step: in place, same address
    x2 = ember.randn(5)
    np.testing.assert_allclose(f(x2, w).numpy(), (x2 * w).detach().numpy(), rtol=1e-6)
    assert fake.captures == 1


def test_a_parameter_at_a_new_address_records_again(fake):
    x, w = ember.randn(3), ember.nn.Parameter(ember.randn(3))
    f = _runner(lambda x, w: x + w, x, w)
    f(x, w), f(x, w)
    w2 = ember.nn.Parameter(ember.randn(3))
    f(x, w2)  # a new signature: warm-up, then a second recording
    out = f(x, w2)
    np.testing.assert_allclose(out.numpy(), (x + w2).detach().numpy())
    assert len(f.recordings) == 2


def test_output_of_previous_replay_raises_when_touched(fake):
    x = ember.randn(3)
    f = _runner(lambda x: x * 2, x)
    f(x)  # warm-up: fresh memory, never invalidated
    a = f(ember.ones(3))
    b = f(ember.full((3,), 5.0))
    np.testing.assert_allclose(b.numpy(), np.full(3, 10.0))
    with pytest.raises(RuntimeError, match=r"overwritten by a subsequent run.*cudagraph_mark_step_begin"):
        a + 1
    with pytest.raises(RuntimeError, match="clone the tensor"):
        _ = a.shape
    assert cudagraphs.counters["invalidated"] == 1


def test_outputs_dropped_before_the_next_call_are_not_touched(fake):
    x = ember.randn(3)
    f = _runner(lambda x: x * 2, x)
    for _ in range(4):
        out = f(x).clone()  # the replay's tensor dies at once
    np.testing.assert_allclose(out.numpy(), (x * 2).numpy())
    assert cudagraphs.counters["invalidated"] == 0


def test_gradients_of_a_backward_graph_are_copied_out(fake):
    g = ember.randn(4)
    f = _runner(lambda g: g * 3, g, role="backward")
    f(g)
    first = f(ember.ones(4))  # kept alive, as autograd keeps .grad
    second = f(ember.full((4,), 2.0))
    np.testing.assert_allclose(first.numpy(), np.full(4, 3.0))
    np.testing.assert_allclose(second.numpy(), np.full(4, 6.0))
    assert cudagraphs.counters["copied_out"] == 1


def test_forward_with_pending_backward_runs_without_graphs(fake):
    group = cudagraphs.CudaGraphGroup("g")
    x = ember.randn(3)
    fw = _runner(lambda x: x.exp(), x, role="forward", group=group)
    bw = _runner(lambda x: x * 1, x, role="backward", group=group)
    fw(x), bw(x)  # warm-ups
    o1 = fw(ember.zeros(3))  # recorded; its backward has not run
    o2 = fw(ember.ones(3))  # would overwrite o1 (saved for that backward): runs without graphs
    np.testing.assert_allclose(o1.numpy(), np.ones(3))
    np.testing.assert_allclose(o2.numpy(), np.full(3, np.e), rtol=1e-6)
    assert any("backward that has not run" in r for r in fw.skips)
    bw(x)  # the backward ran: the next forward replays
    o3 = fw(ember.ones(3))
    assert sum(fw.skips.values()) == 1  # o3 replayed
    with pytest.raises(RuntimeError, match="overwritten"):
        o1 * 1
    np.testing.assert_allclose(o3.numpy(), np.full(3, np.e), rtol=1e-6)


def test_mark_step_begin_ends_the_pending_backward(fake):
    group = cudagraphs.CudaGraphGroup("g")
    x = ember.randn(3)
    fw = _runner(lambda x: x + 1, x, role="forward", group=group)
    fw(x)
    keep = fw(x)
    ember.compiler.cudagraph_mark_step_begin()
    fw(x)  # replayed: keep is invalidated rather than protected
    assert not fw.skips
    with pytest.raises(RuntimeError, match="cudagraph_mark_step_begin"):
        keep * 1


def test_an_input_that_is_its_own_previous_output(fake):
    h = ember.zeros(3)
    f = _runner(lambda h: h + 1, h)
    for _ in range(5):
        h = f(h)  # the input is the recording's own output: copied, never read in place
    np.testing.assert_allclose(h.numpy(), np.full(3, 5.0))


def test_new_shapes_are_new_recordings_up_to_the_limit(fake):
    with config.patch(cudagraph_max_recordings=2, cudagraph_warmup_runs=0):
        f = _runner(lambda x: x * 2, ember.randn(2))
    for n in (2, 3, 2, 3, 4):
        x = ember.randn(n)
        np.testing.assert_allclose(f(x).numpy(), (x * 2).numpy())
    assert len(f.recordings) == 2 and cudagraphs.counters["recordings"] == 2
    assert any("cudagraph_max_recordings=2" in r for r in f.skips)


def test_random_ops_never_recorded(fake, caplog):
    x = ember.randn(8)
    gm = make_fx(lambda x: ember.nn.functional.dropout(x, 0.5, training=True) + ember.rand(8))(x)
    with caplog.at_level(logging.INFO, logger="ember._inductor.cudagraphs"):
        f = cudagraphs.cudagraphify(gm, gm, name="drop")
        a, b = f(x), f(x)
    assert fake.captures == 0
    assert not np.array_equal(a.numpy(), b.numpy())  # fresh draws each call
    assert "random ops" in caplog.text


def test_mutating_graph_never_recorded(fake):
    x = ember.randn(3)
    gm = make_fx(lambda x: x.add_(1))(x.clone())
    f = cudagraphs.cudagraphify(gm, gm)
    f(x.clone()), f(x.clone())
    assert fake.captures == 0 and any("mutated inputs" in r for r in f.skips)


def test_failed_capture_runs_without_graphs(monkeypatch, caplog):
    monkeypatch.setattr(cudagraphs, "capture_backend", FakeGraphs(fail=RuntimeError("operation not permitted")))
    x = ember.randn(3)
    f = _runner(lambda x: x - 1, x)
    with caplog.at_level(logging.WARNING, logger="ember._inductor.cudagraphs"):
        outs = [f(x) for _ in range(3)]
    for out in outs:
        np.testing.assert_allclose(out.numpy(), (x - 1).numpy())
    assert "capture failed: RuntimeError: operation not permitted" in caplog.text


def test_cpu_graphs_run_without_cuda_graphs_by_default(monkeypatch, caplog):
    monkeypatch.setattr(cudagraphs, "capture_backend", None)  # the CuPy backend: cuda only
    x = ember.randn(3)
    f = _runner(lambda x: x * 4, x)
    with caplog.at_level(logging.INFO, logger="ember._inductor.cudagraphs"):
        out = f(x)
        f(x)
    np.testing.assert_allclose(out.numpy(), (x * 4).numpy())
    assert f.skips == {"an input is on cpu": 2}
    assert caplog.text.count("an input is on cpu") == 1  # logged once


def test_settings_and_modes():
    assert config.mode_options("reduce-overhead") == {"cudagraphs": True}
    assert "cudagraphs" not in config.mode_options("max-autotune-no-cudagraphs")
    with config.patch(**{"triton.cudagraphs": True}):
        assert config.cudagraphs is True
    assert config.cudagraphs is False
    ember.compile(lambda x: x, options={"triton.cudagraphs": True})  # a known option name


class _MLP(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = ember.nn.Linear(6, 8)
        self.fc2 = ember.nn.Linear(8, 1)

    def forward(self, x):
        return self.fc2(ember.relu(self.fc1(x)))


def test_reduce_overhead_training_matches_eager(fake):
    """ember.compile(mode="reduce-overhead") through dynamo, aot and the C++ compiler, with the fake capture:
    the forward and backward are recorded once and replayed; 6 SGD steps equal eager's."""
    ember.manual_seed(0)
    eager = _MLP()
    model = _MLP()
    model.load_state_dict(eager.state_dict())
    compiled = ember.compile(model, mode="reduce-overhead")
    opts = [ember.optim.SGD(m.parameters(), lr=0.1) for m in (eager, model)]
    x, y = ember.randn(5, 6), ember.randn(5, 1)
    losses = {"eager": [], "compiled": []}
    for _ in range(6):
        for name, m, opt in (("eager", eager, opts[0]), ("compiled", compiled, opts[1])):
            opt.zero_grad()
            loss = ((m(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            losses[name].append(loss.item())
    np.testing.assert_allclose(losses["compiled"], losses["eager"], rtol=1e-5)
    assert fake.captures == 2  # one forward and one backward recording
    assert fake.replays >= 8


def test_no_pending_backward_without_a_backward_runner(fake):
    group = cudagraphs.CudaGraphGroup("g")  # the backward ran eagerly (a compile error): no runner says it ran
    x = ember.randn(3)
    fw = _runner(lambda x: x * 3, x, role="forward", group=group)
    fw(x)
    kept = fw(x)
    fw(x)  # replayed (not skipped): nothing could ever end the "pending" state
    assert not fw.skips and fake.replays == 2
    with pytest.raises(RuntimeError, match="overwritten"):
        kept * 1


def test_mode_reduce_overhead_reaches_the_compiled_graphs(monkeypatch, caplog):
    """Through ember.compile on the CPU with the real (CuPy) capture: the graphs get runners, which run
    them without CUDA graphs and say why; the answers are eager's."""
    monkeypatch.setattr(cudagraphs, "capture_backend", None)
    f = ember.compile(lambda x: (x * 2).exp(), mode="reduce-overhead")
    x = ember.randn(4)
    with caplog.at_level(logging.INFO, logger="ember._inductor.cudagraphs"):
        out = f(x)
    np.testing.assert_allclose(out.numpy(), (x * 2).exp().numpy(), rtol=1e-6)
    assert "runs without CUDA graphs: an input is on cpu" in caplog.text


def test_pytorch_attribute_spelling():
    config.triton.cudagraphs = True
    try:
        assert config.cudagraphs is True
    finally:
        config.triton.cudagraphs = False
    assert config.cudagraphs is False and config.triton.cudagraphs is False


class _FakeCupy:
    """The parts of CuPy's API CuPyGraphs uses (documented in CuPy 13/14), recording the calls."""

    def __init__(self, fail_during_capture=False):
        self.calls = []
        self.fail = fail_during_capture
        fake = self

        class Event:
            pass

        class Stream:
            def __init__(self, non_blocking=False, name="side"):
                self.name = name
                self.ptr = 7 if name == "side" else 0
                fake.calls.append(("Stream", non_blocking))

            def record(self):
                fake.calls.append(("record", self.name))
                return Event()

            def wait_event(self, event):
                fake.calls.append(("wait_event", self.name))

            def __enter__(self):
                fake.calls.append(("enter", self.name))
                fake.current = self
                return self

            def __exit__(self, *exc):
                fake.calls.append(("exit", self.name))
                fake.current = fake.null

            def begin_capture(self):
                fake.calls.append(("begin_capture", self.name))

            def end_capture(self):
                fake.calls.append(("end_capture", self.name))
                return Graph()

        class Graph:
            def launch(self, stream=None):
                fake.calls.append(("launch", stream.name))

        class MemoryPool:
            def malloc(self, size):  # pragma: no cover - nothing allocates in these tests
                raise AssertionError

        class Device:
            def __init__(self, index):
                self.index = index

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

        def using_allocator(allocator):
            fake.calls.append(("using_allocator", type(allocator.__self__).__name__))
            return Device(0)

        self.null = Stream.__new__(Stream)
        self.null.name, self.null.ptr = "null", 0
        self.current = self.null
        runtime = type("runtime", (), {"getDevice": staticmethod(lambda: 0)})
        self.cuda = type("cuda", (), {
            "Stream": Stream, "MemoryPool": MemoryPool, "Device": Device, "runtime": runtime,
            "using_allocator": staticmethod(using_allocator),
            "get_current_stream": staticmethod(lambda: fake.current),
        })


def test_cupy_graphs_calls_cupys_capture_api(monkeypatch):
    import sys

    from ember._inductor.runtime import triton_launch

    fake = _FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(triton_launch, "use_ember_stream", lambda: None)
    backend = cudagraphs.CuPyGraphs()
    device = ember.device("cpu")  # only its index is read

    def body():
        assert fake.current.name == "side"  # the work queues on the capturing stream
        fake.calls.append(("body", None))
        return "outputs"

    recording, outputs = backend.capture(body, device)
    assert outputs == "outputs"
    backend.replay(recording, device)
    names = [c[0] for c in fake.calls]
    assert names == ["Stream", "record", "wait_event", "enter", "using_allocator", "begin_capture", "body",
                     "end_capture", "exit", "launch"]
    assert ("Stream", True) in fake.calls  # a non-blocking side stream (capture refuses the legacy one)
    assert ("using_allocator", "MemoryPool") in fake.calls  # the recording's private pool
    assert fake.calls[-1] == ("launch", "null")  # replays on the current stream


def test_cupy_graphs_ends_a_failed_capture(monkeypatch):
    import sys

    from ember._inductor.runtime import triton_launch

    fake = _FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(triton_launch, "use_ember_stream", lambda: None)

    def body():
        raise RuntimeError("operation not permitted when stream is capturing")

    with pytest.raises(RuntimeError, match="capturing"):
        cudagraphs.CuPyGraphs().capture(body, ember.device("cpu"))
    assert ("end_capture", "side") in fake.calls and fake.current is fake.null
