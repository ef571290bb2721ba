"""ember.profiler: events and tables over a small model, schedules, traces, record_function, the hook."""

import json
import os

import numpy as np
import pytest

import ember
import ember.profiler as P
from ember._ops import _dispatch
from ember.profiler import _recorder

AUTOGRAD_PREFIX = "autograd::engine::evaluate_function: "


def _model_step(x, w, b):
    h = ember.matmul(x, w)
    h = ember.add(h, b)
    return ember.relu(h).sum()


def _by_key(prof, **kwargs):
    return {e.key: e for e in prof.key_averages(**kwargs)}


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((4, 3)).astype(np.float32))
    w = ember.tensor(rng.standard_normal((3, 5)).astype(np.float32), requires_grad=True)
    b = ember.tensor(rng.standard_normal(5).astype(np.float32), requires_grad=True)
    return x, w, b


def test_call_counts_equal_the_calls_made(data):
    x, w, b = data
    with ember.no_grad(), P.profile() as prof:
        for _ in range(3):
            _model_step(x, w, b)
        for _ in range(7):
            ember.mul(x, 2.0)
    rows = _by_key(prof)
    assert rows["aten::add"].count == 3
    assert rows["aten::relu"].count == 3
    assert rows["aten::sum"].count == 3
    assert rows["aten::matmul"].count == 3
    assert rows["aten::mul"].count == 7
    # only the calls made inside the block
    ember.mul(x, 2.0)
    assert _by_key(prof)["aten::mul"].count == 7


def test_self_and_total_times_are_consistent(data):
    x, w, b = data
    with P.profile() as prof, P.record_function("outer"):
        _model_step(x, w, b).backward()
    events = prof.events()
    assert len(events) > 5
    for e in events:
        children = sum(c.cpu_time_total for c in e.cpu_children)
        assert e.cpu_time_total >= children - 1e-6
        assert e.self_cpu_time_total == pytest.approx(e.cpu_time_total - children)
        for c in e.cpu_children:  # a child runs within its parent
            assert e.time_range.start <= c.time_range.start <= c.time_range.end <= e.time_range.end
    top = [e for e in events if e.cpu_parent is None]
    assert [e.name for e in top] == ["outer"]
    assert sum(e.self_cpu_time_total for e in events) == pytest.approx(top[0].cpu_time_total)
    averages = prof.key_averages()
    assert averages.self_cpu_time_total == pytest.approx(events.self_cpu_time_total)


def test_backward_nodes_are_recorded_with_pytorchs_names(data):
    x, w, b = data
    with P.profile() as prof:
        loss = (ember.mul(ember.matmul(x, w), 3.0) + b).sum()
        loss.backward()
    names = {e.name for e in prof.events()}
    assert AUTOGRAD_PREFIX + "MulBackward0" in names
    assert AUTOGRAD_PREFIX + "SumBackward0" in names
    node = next(e for e in prof.events() if e.name == AUTOGRAD_PREFIX + "MulBackward0")
    assert any(c.name.startswith("aten::") for c in node.cpu_children)  # the formula's ops nest in the node


def test_shapes_are_recorded_and_grouped():
    a, b = ember.ones(2, 3), ember.ones(2, 3)
    c = ember.ones(4)
    with P.profile(record_shapes=True) as prof:
        ember.add(a, b)
        ember.add(c, 1.0)
        ember.add(c, 2.0)
    adds = [e for e in prof.events() if e.name == "aten::add"]
    assert [e.input_shapes for e in adds] == [[[2, 3], [2, 3]], [[4], []], [[4], []]]
    grouped = [e for e in prof.key_averages(group_by_input_shape=True) if e.key == "aten::add"]
    assert sorted((str(e.input_shapes), e.count) for e in grouped) == [("[[2, 3], [2, 3]]", 1), ("[[4], []]", 2)]
    table = prof.key_averages(group_by_input_shape=True).table()
    assert "Input Shapes" in table and "[[2, 3], [2, 3]]" in table


def test_memory_counts_the_new_tensors_once():
    with P.profile(profile_memory=True) as prof:
        x = ember.zeros(1000, dtype=ember.float32)
        x.view(10, 100)  # a view allocates nothing
        x.add_(1)  # nor does an in-place op
    rows = _by_key(prof)
    assert rows["aten::zeros"].self_cpu_memory_usage == 4000
    assert rows["aten::view"].self_cpu_memory_usage == 0
    assert rows["aten::add_"].self_cpu_memory_usage == 0
    table = prof.key_averages().table()
    assert "CPU Mem" in table and "Self CPU Mem" in table and "3.91 Kb" in table


def test_table_columns_sorting_and_limit(data):
    x, w, b = data
    with ember.no_grad(), P.profile(activities=[P.ProfilerActivity.CPU]) as prof:  # no CUDA columns on a GPU
        for _ in range(4):
            ember.mul(x, 2.0)
        ember.sum(x)
    table = prof.key_averages().table(sort_by="count", row_limit=1)
    lines = table.splitlines()
    header = [c for c in lines[1].split("  ") if c.strip()]
    assert [c.strip() for c in header] == [
        "Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"]
    assert lines[3].split()[0] == "aten::mul" and lines[3].split()[-1] == "4"
    assert "aten::sum" not in table  # row_limit
    assert lines[-1].startswith("Self CPU time total:")
    with pytest.raises(ValueError, match="sort_by"):
        prof.key_averages().table(sort_by="nope")


def test_record_function_nests_and_decorates():
    @P.record_function("decorated")
    def f(t):
        return t * 2

    t = ember.ones(3)
    with P.profile() as prof:
        with P.record_function("outer"):
            with P.record_function("inner"):
                ember.add(t, 1)
            f(t)
            f(t)
    events = prof.events()
    outer = next(e for e in events if e.name == "outer")
    inner = next(e for e in events if e.name == "inner")
    assert inner.cpu_parent is outer
    assert [c.name for c in inner.cpu_children] == ["aten::add"]
    assert [c.name for c in outer.cpu_children] == ["inner", "decorated", "decorated"]
    assert _by_key(prof)["decorated"].count == 2
    with P.record_function("outside a profiler"):  # a no-op
        pass


def test_schedule_actions():
    s = P.schedule(skip_first=1, wait=1, warmup=1, active=2, repeat=2)
    A = P.ProfilerAction
    expected = [A.NONE, A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE,
                A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE, A.NONE, A.NONE]
    assert [s(i) for i in range(11)] == expected
    with pytest.raises(ValueError, match="active"):
        P.schedule(wait=0, warmup=0, active=0)


def test_profile_with_schedule_records_the_active_steps():
    saved = []

    def on_ready(prof):
        saved.append(sorted(e.name for e in prof.events() if e.name.startswith("ProfilerStep")))
        saved.append(_by_key(prof)["aten::mul"].count)

    t = ember.ones(2)
    with P.profile(schedule=P.schedule(wait=1, warmup=1, active=2, repeat=2), on_trace_ready=on_ready) as prof:
        for _ in range(10):
            ember.mul(t, 2.0)
            prof.step()
    assert saved == [["ProfilerStep#2", "ProfilerStep#3"], 2, ["ProfilerStep#6", "ProfilerStep#7"], 2]
    assert not _dispatch.state.modes


def test_chrome_trace_is_valid_json(tmp_path, data):
    x, w, b = data
    with P.profile(record_shapes=True) as prof:
        with P.record_function("step"):
            _model_step(x, w, b).backward()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == len(prof.events())
    for e in spans:
        assert {"name", "ph", "ts", "dur", "pid", "tid", "cat"} <= set(e)
        assert e["dur"] >= 0
    assert {"aten::add", "step"} <= {e["name"] for e in spans}
    add = next(e for e in spans if e["name"] == "aten::add")
    assert add["args"]["Input Dims"] == [[4, 5], [5]]
    assert os.listdir(tmp_path) == ["trace.json"]  # written through a renamed temporary file


def test_tensorboard_trace_handler_writes_traces(tmp_path):
    folder = tmp_path / "tb"
    with P.profile(on_trace_ready=P.tensorboard_trace_handler(str(folder), worker_name="w0")):
        ember.ones(3).sum()
    (name,) = os.listdir(folder)
    assert name.startswith("w0.") and name.endswith(".pt.trace.json")
    json.loads((folder / name).read_text())


def test_export_stacks(tmp_path):
    with P.profile(with_stack=True) as prof:
        ember.ones(3).sum()
    path = tmp_path / "stacks.txt"
    prof.export_stacks(str(path))
    lines = path.read_text().splitlines()
    assert lines and all(" " in line for line in lines)
    assert any("test_profiler.py" in line and line.rsplit(" ", 1)[0].endswith("aten::sum") for line in lines)
    assert _by_key(prof, group_by_stack_n=1)["aten::sum"].stack[0].startswith(__file__)


def test_disabled_path_does_not_reach_the_profiler(monkeypatch):
    calls = []
    original = _recorder.Recorder.__ember_record__

    def counting(self, op, args, kwargs):
        calls.append(op.name)
        return original(self, op, args, kwargs)

    monkeypatch.setattr(_recorder.Recorder, "__ember_record__", counting)
    t = ember.ones(3, requires_grad=True)
    (t * 2).sum().backward()
    assert calls == []
    with P.profile():
        ember.mul(t, 2)
    assert calls == ["mul"]
    (t * 2).sum().backward()
    assert calls == ["mul"]
    from ember.autograd import _engine

    assert _engine.node_observer is None and not _dispatch.state.modes


def test_bad_arguments():
    with pytest.raises(TypeError, match="activities"):
        P.profile(activities=["cpu"])
    with pytest.raises(RuntimeError, match="didn't finish"):
        P.profile().events()
    with pytest.raises(ValueError, match="record_shapes"):
        with P.profile() as prof:
            pass
        prof.key_averages(group_by_input_shape=True)
    with pytest.raises(RuntimeError, match="with_stack"):
        prof.export_stacks("unused")
    with pytest.raises(TypeError, match="name"):
        P.record_function(3)


def test_autograd_profiler_names():
    with ember.autograd.profiler.profile(record_shapes=True) as prof:
        with ember.autograd.profiler.record_function("block"):
            ember.ones(2).sum()
    names = [e.name for e in prof.function_events]
    assert names == ["block", "aten::ones", "aten::sum"]
    assert "aten::sum" in prof.key_averages().table(sort_by="self_cpu_time_total")
    with ember.autograd.profiler.profile(enabled=False):
        pass
    with ember.autograd.profiler.emit_nvtx():
        pass


def test_flops_of_matrix_products():
    with P.profile(with_flops=True) as prof:
        ember.mm(ember.ones(4, 3), ember.ones(3, 5))
    assert _by_key(prof)["aten::mm"].flops == 2 * 4 * 3 * 5
    assert "Total MFLOPs" in prof.key_averages().table()


@pytest.mark.cuda
def test_cuda_times_from_events():
    a = ember.ones(256, 256, device="cuda")
    with P.profile(activities=[P.ProfilerActivity.CPU, P.ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            a = ember.matmul(a, a) * 1e-3
    row = _by_key(prof)["aten::matmul"]
    assert row.count == 3 and row.device_time_total > 0
    table = prof.key_averages().table(sort_by="cuda_time_total")
    assert "Self CUDA" in table and "Self CUDA time total" in table


def test_device_times_of_nested_ops_count_each_kernel_once():
    # an op's events bracket the kernels of the ops it calls: its total is its own bracket, its self time
    # what its timed children leave; a span without events (a backward node) sums its children
    from ember.profiler._events import FunctionEvent

    def timed(name, us, *children):
        event = FunctionEvent(0, name, 0, 0.0, 1.0, device_time=us)
        event.device_type = "CUDA"
        event.cpu_children.extend(children)
        return event

    inner = timed("aten::mul", 3.0)
    middle = timed("aten::linear", 10.0, timed("aten::mm", 6.0), inner)
    node = FunctionEvent(0, "autograd::engine::evaluate_function: X", 0, 0.0, 1.0)
    node.cpu_children.append(middle)
    assert middle.device_time_total == 10.0 and middle.self_device_time_total == 1.0
    assert inner.self_device_time_total == inner.device_time_total == 3.0
    assert node.device_time_total == 10.0 and node.self_device_time_total == 0.0
    # the sum of self times over the tree is the outermost bracket, not the brackets summed
    events = [node, middle, middle.cpu_children[0], inner]
    assert sum(e.self_device_time_total for e in events) == 10.0


def test_fused_fast_paths_keep_running_under_the_profiler():
    # the profiler only watches: a program keeps its fused paths under it (what is timed is what runs
    # without it); a dispatch mode that sees ops as values (a tracer) turns them off
    from ember.utils._python_dispatch import DispatchMode

    class Passthrough(DispatchMode):
        def __ember_dispatch__(self, op, types, args, kwargs):
            return op(*args, **kwargs)

    assert not _dispatch.ops_intercepted()
    with P.profile():
        assert not _dispatch.ops_intercepted()
        with Passthrough():
            assert _dispatch.ops_intercepted()
    with Passthrough(), P.profile():
        assert _dispatch.ops_intercepted()
    # a list op keeps its direct kernels under the profiler and is one row, as PyTorch shows it
    tensors = [ember.ones(3), ember.ones(2, 2)]
    with P.profile() as prof:
        ember._foreach_add_(tensors, 1.5)
    rows = _by_key(prof)
    assert rows["aten::_foreach_add_"].count == 1 and "aten::add_" not in rows
    np.testing.assert_array_equal(tensors[1].numpy(), np.full((2, 2), 2.5, np.float32))


def test_memory_of_a_kernel_that_returns_a_view_of_its_own_buffer():
    # convolution's CPU kernel returns a numpy view of the buffer it computed into: new memory all the same
    conv = ember.nn.Conv2d(1, 4, 3)
    with ember.no_grad(), P.profile(profile_memory=True) as prof:
        conv(ember.randn(8, 1, 8, 8)).view(-1)
    rows = _by_key(prof)
    output_bytes = 8 * 4 * 6 * 6 * 4
    assert rows["aten::conv2d"].cpu_memory_usage == output_bytes
    conv_rows = [row for key, row in rows.items() if key in ("aten::conv2d", "aten::convolution")]
    assert sum(row.self_cpu_memory_usage for row in conv_rows) == output_bytes  # counted once
    assert rows["aten::view"].self_cpu_memory_usage == 0
