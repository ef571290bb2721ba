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
    assert ember.cuda.memory_reserved() == ember.cuda.memory_allocated()
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
