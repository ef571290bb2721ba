"""ember.cuda's runtime API on a real GPU (skipped without one, see the root conftest.py)."""

import numpy as np
import pytest

import ember

pytestmark = pytest.mark.cuda


def test_device_queries():
    import cupy

    count = cupy.cuda.runtime.getDeviceCount()
    assert ember.cuda.is_available() is True
    assert ember.cuda.device_count() == count
    assert 0 <= ember.cuda.current_device() < count
    props = ember.cuda.get_device_properties(0)
    raw = cupy.cuda.runtime.getDeviceProperties(0)
    assert props.total_memory == raw["totalGlobalMem"]
    assert props.multi_processor_count == raw["multiProcessorCount"]
    assert ember.cuda.get_device_name(0) == raw["name"].decode()
    assert ember.cuda.get_device_capability() == (raw["major"], raw["minor"])
    assert ember.cuda.get_device_name("cuda:0") == ember.cuda.get_device_name(ember.device("cuda", 0))


def test_device_errors():
    with pytest.raises(ValueError, match="Expected a cuda device"):
        ember.cuda.get_device_name("cpu")
    with pytest.raises(RuntimeError, match="Invalid device id"):
        ember.cuda.get_device_properties(ember.cuda.device_count())


def test_set_device_and_context():
    start = ember.cuda.current_device()
    with ember.cuda.device(0):
        assert ember.cuda.current_device() == 0
    assert ember.cuda.current_device() == start
    ember.cuda.set_device(0)
    assert ember.cuda.current_device() == 0
    ember.cuda.set_device(-1)  # ignored, as in PyTorch
    assert ember.cuda.current_device() == 0


def test_synchronize_and_events_time_work():
    start, end = ember.cuda.Event(enable_timing=True), ember.cuda.Event(enable_timing=True)
    x = ember.ones(4096, 4096, device="cuda")
    start.record()
    for _ in range(5):
        x = x * 1.0001
    end.record()
    end.synchronize()
    assert end.query()
    ms = start.elapsed_time(end)
    assert 0.0 < ms < 10_000.0
    ember.cuda.synchronize()
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        ember.cuda.Event().elapsed_time(end)


def test_stream_context_runs_ops_on_the_stream():
    import cupy

    s = ember.cuda.Stream(priority=-1)
    low, high = ember.cuda.Stream.priority_range()
    assert high <= s.priority <= low
    with ember.cuda.stream(s):
        assert ember.cuda.current_stream() == s
        assert cupy.cuda.get_current_stream().ptr == s.cuda_stream
        y = ember.arange(10, device="cuda", dtype=ember.float32) * 2
    s.synchronize()
    assert s.query()
    assert ember.cuda.current_stream() != s
    assert y.cpu().tolist() == [2.0 * i for i in range(10)]
    other = ember.cuda.Stream()
    other.wait_stream(s)
    e = s.record_event()
    other.wait_event(e)
    other.synchronize()


def test_memory_stats_follow_allocations():
    ember.cuda.empty_cache()
    ember.cuda.reset_peak_memory_stats()
    before = ember.cuda.memory_allocated()
    x = ember.empty(1 << 20, device="cuda")  # 4 MiB of float32
    after = ember.cuda.memory_allocated()
    assert after - before >= 4 * (1 << 20)
    assert ember.cuda.max_memory_allocated() >= after
    assert ember.cuda.memory_reserved() >= after
    del x
    assert ember.cuda.memory_allocated() == before
    assert ember.cuda.max_memory_allocated() >= after  # the peak stays
    ember.cuda.reset_peak_memory_stats()
    assert ember.cuda.max_memory_allocated() == before
    ember.cuda.empty_cache()
    # the freed 4 MiB block went back to the driver; cached blocks that share an allocation with live
    # arrays of other tests in this process may stay reserved (the pool frees whole allocations only)
    assert 0 <= ember.cuda.memory_reserved() - ember.cuda.memory_allocated() < 4 * (1 << 20)
    free, total = ember.cuda.mem_get_info()
    assert 0 < free <= total == ember.cuda.get_device_properties().total_memory
    summary = ember.cuda.memory_summary()
    assert "Allocated memory" in summary and "cuda:0" in summary


def test_cuda_seeding_is_reproducible_and_matches_cpu():
    ember.cuda.manual_seed(7)
    a = ember.rand(5, device="cuda")
    ember.cuda.manual_seed(7)
    b = ember.rand(5, device="cuda")
    assert a.cpu().tolist() == b.cpu().tolist()
    ember.manual_seed(11)  # seeds the CPU and every CUDA generator
    c = ember.randn(3, 4, device="cuda")
    d = ember.randn(3, 4)
    np.testing.assert_array_equal(c.cpu().numpy(), d.numpy())
    ember.cuda.manual_seed_all(3)
    assert ember.cuda.initial_seed() == 3
    state = ember.cuda.get_rng_state()
    e = ember.randint(0, 100, (6,), device="cuda")
    ember.cuda.set_rng_state(state)
    assert ember.randint(0, 100, (6,), device="cuda").cpu().tolist() == e.cpu().tolist()
    g = ember.Generator("cuda").manual_seed(1)
    assert ember.rand(2, generator=g, device="cuda").device == ember.device("cuda", 0)
    with pytest.raises(RuntimeError, match="generator"):
        ember.rand(2, generator=ember.Generator("cpu"), device="cuda")


# --------------------------------------------------------------------------- a bare "cuda" is the current device


def test_bare_cuda_device_means_the_current_device():
    dev = ember.device("cuda")
    assert dev.index is None and str(dev) == "cuda"  # the device object keeps no index, as in PyTorch
    current = ember.cuda.current_device()
    for t in (ember.ones(2, device="cuda"), ember.ones(2).cuda(), ember.ones(2).to("cuda"),
              ember.tensor([1.0], device=dev), ember.randn(2, device="cuda")):  # fmt: skip
        assert t.device == ember.device("cuda", current)
        assert t.get_device() == current


@pytest.mark.skipif(
    not ember.cuda.is_available() or ember.cuda.device_count() < 2, reason="needs two GPUs"
)
def test_bare_cuda_allocates_on_the_device_made_current():
    with ember.cuda.device(1):
        t = ember.zeros(3, device="cuda")
        u = ember.ones(3).cuda()
        assert ember.randn(2, device="cuda").device == ember.device("cuda", 1)
    assert t.device == ember.device("cuda", 1) and u.device == ember.device("cuda", 1)
    assert t._data.device.id == 1 and u._data.device.id == 1
    assert ember.zeros(3, device="cuda").device == ember.device("cuda", ember.cuda.current_device())


# --------------------------------------------------------------------------- pinned host memory


def test_pin_memory_copies_into_page_locked_memory():
    import cupy

    x = ember.arange(12.0).reshape(3, 4)
    assert not x.is_pinned()
    p = x.pin_memory()
    assert p is not x and p.is_pinned() and p.device.type == "cpu"
    assert p.dtype is x.dtype and p.shape == x.shape and p.is_contiguous()
    np.testing.assert_array_equal(p.numpy(), x.numpy())
    attributes = cupy.cuda.runtime.pointerGetAttributes(p.data_ptr())  # the driver's own answer
    assert getattr(attributes, "type", getattr(attributes, "memoryType", None)) == 1  # cudaMemoryTypeHost
    assert p.pin_memory() is p  # already pinned
    assert p[1:, ::2].is_pinned()  # a view of pinned memory is pinned
    assert x.t().pin_memory().tolist() == x.t().tolist()  # a strided source
    b = ember.randn(5, dtype=ember.bfloat16).pin_memory()
    assert b.is_pinned() and b.dtype is ember.bfloat16
    assert not ember.ones(2, device="cuda").is_pinned()
    with pytest.raises(RuntimeError, match="only dense CPU tensors can be pinned"):
        ember.ones(2, device="cuda").pin_memory()


def test_pin_memory_keeps_autograd_history():
    x = ember.randn(4, requires_grad=True)
    p = x.pin_memory()
    assert p.requires_grad and p.is_pinned()
    (p * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(4, 3.0, np.float32))


def test_non_blocking_copies_from_pinned_memory_are_ordered_on_the_stream():
    from ember.cuda import _pinned

    n = 1 << 20
    host_data = ember.arange(float(n)).pin_memory()
    on_gpu = host_data.to("cuda", non_blocking=True)
    doubled = on_gpu * 2  # queued after the copy on the same stream
    ember.cuda.synchronize()
    np.testing.assert_array_equal(doubled.cpu().numpy(), np.arange(n, dtype=np.float32) * 2)
    # the asynchronous upload itself: returns before the copy is done and keeps the host memory alive
    stream = ember.cuda.Stream()
    with ember.cuda.stream(stream):
        array = _pinned.to_device(ember.arange(float(n)).pin_memory()._data, None, non_blocking=True)
    del host_data  # the pinned source of the first copy may go now; the in-flight one is held
    stream.synchronize()
    np.testing.assert_array_equal(array.get(), np.arange(n, dtype=np.float32))
    # a pageable source, or non_blocking=False, copies synchronously
    assert _pinned.to_device(np.ones(3, np.float32), 0, non_blocking=True).get().tolist() == [1.0, 1.0, 1.0]
    y = ember.ones(3).cuda(non_blocking=True)
    assert y.cpu().tolist() == [1.0, 1.0, 1.0]


def test_cuda_extras_name_both_cupy_builds():
    import pathlib
    import re

    text = (pathlib.Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    extras = dict(re.findall(r'^(cuda\w*) = \["([^"]+)"\]', text, flags=re.M))
    assert extras["cuda12"].startswith("cupy-cuda12x") and extras["cuda13"].startswith("cupy-cuda13x")
    assert extras["cuda"] == extras["cuda12"]
