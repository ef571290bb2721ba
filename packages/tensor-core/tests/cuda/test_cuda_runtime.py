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


# --------------------------------------------------------------------------- random ops on cuda tensors


@pytest.mark.parametrize(
    "name, args, dtype",
    [("uniform_", (-2.0, 3.0), ember.float32), ("uniform_", (0.0, 1.0), ember.bfloat16),
     ("uniform_", (0.0, 1.0), ember.complex64), ("normal_", (1.0, 2.0), ember.float64),
     ("normal_", (0.0, 1.0), ember.bfloat16), ("random_", (0, 10), ember.int64), ("exponential_", (1.5,), ember.float32),
     ("bernoulli_", (0.3,), ember.float32)],
)
def test_in_place_samplers_on_cuda_draw_what_cpu_draws(name, args, dtype):
    # the GPU's generator draws on the host (the same stream as a CPU generator) and the values are copied
    expected = getattr(ember.zeros(4, 5, dtype=dtype), name)(*args, generator=ember.Generator().manual_seed(3))
    x = ember.zeros(4, 5, dtype=dtype, device="cuda")
    base = ember.zeros(4, 10, dtype=dtype, device="cuda")
    view = base[:, ::2]  # a strided view is filled in place
    assert getattr(x, name)(*args, generator=ember.Generator("cuda").manual_seed(3)) is x
    getattr(view, name)(*args, generator=ember.Generator("cuda").manual_seed(3))
    for got in (x, view):
        assert got.device.type == "cuda" and got.dtype is dtype
        np.testing.assert_array_equal(got.cpu().numpy(), expected.numpy())
    assert (base[:, 1::2].cpu() == 0).all()
    ember.manual_seed(5)
    a = getattr(ember.zeros(6, dtype=dtype, device="cuda"), name)(*args)  # the GPU's default generator
    ember.manual_seed(5)
    b = getattr(ember.zeros(6, dtype=dtype, device="cuda"), name)(*args)
    np.testing.assert_array_equal(a.cpu().numpy(), b.cpu().numpy())
    with pytest.raises(RuntimeError, match="generator"):
        getattr(x, name)(*args, generator=ember.Generator("cpu"))


def test_bernoulli_with_probabilities_on_cuda():
    p = ember.rand(50, 40)
    expected = ember.zeros(50, 40).bernoulli_(p, generator=ember.Generator().manual_seed(1))
    got = ember.zeros(50, 40, device="cuda").bernoulli_(p.cuda(), generator=ember.Generator("cuda").manual_seed(1))
    np.testing.assert_array_equal(got.cpu().numpy(), expected.numpy())
    drawn = ember.bernoulli(p.cuda(), generator=ember.Generator("cuda").manual_seed(2))
    assert drawn.device.type == "cuda" and drawn.dtype is ember.float32
    np.testing.assert_array_equal(drawn.cpu().numpy(), ember.bernoulli(p, generator=ember.Generator().manual_seed(2)))
    with pytest.raises(RuntimeError, match=r"probabilities in \[0, 1\]"):
        ember.bernoulli((p * 3).cuda())


@pytest.mark.parametrize("replacement", [True, False])
@pytest.mark.parametrize("shape", [(7,), (5, 7), (3, 1000)])
def test_multinomial_on_cuda_draws_what_cpu_draws(shape, replacement):
    weights = ember.rand(*shape, dtype=ember.float64)
    weights[..., 2] = 0.0  # a category that can't be drawn with replacement (without: only last)
    n = 4 if replacement or shape[-1] >= 4 else shape[-1]
    expected = ember.multinomial(weights, n, replacement, generator=ember.Generator().manual_seed(9))
    got = ember.multinomial(weights.cuda(), n, replacement, generator=ember.Generator("cuda").manual_seed(9))
    assert got.device.type == "cuda" and got.dtype is ember.int64 and got.shape == expected.shape
    np.testing.assert_array_equal(got.cpu().numpy(), expected.numpy())
    probs = ember.softmax(ember.randn(2, 50, device="cuda"), dim=-1)  # sampling tokens, as a language model does
    tokens = ember.multinomial(probs, 1)
    assert tokens.shape == (2, 1) and tokens.device.type == "cuda" and ((tokens >= 0) & (tokens < 50)).all()
    with pytest.raises(RuntimeError, match="sum of probabilities <= 0"):
        ember.multinomial(ember.zeros(2, 3, device="cuda"), 1, True)
    with pytest.raises(RuntimeError, match="inf"):
        ember.multinomial(ember.tensor([1.0, float("inf")], device="cuda"), 1)


def test_nn_init_fills_cuda_parameters_in_place():
    w = ember.empty(64, 32, device="cuda")
    ember.nn.init.uniform_(w, -0.5, 0.5)
    host = w.cpu().numpy()
    assert w.device.type == "cuda" and host.min() >= -0.5 and host.max() < 0.5 and host.std() > 0.2
    ember.nn.init.normal_(w, 0.0, 0.1)
    assert abs(float(w.std().item()) - 0.1) < 0.02


def test_default_generator_bernoulli_draws_on_the_gpu():
    # dropout's sampler: with the default generator the uniforms come from ember's Philox kernels on the GPU,
    # keyed by the GPU generator, so they are reproducible under ember.manual_seed
    p = ember.full((1000, 100), 0.3, device="cuda")
    ember.manual_seed(7)
    a = ember.bernoulli(p)
    ember.manual_seed(7)
    b = ember.bernoulli(p)
    c = ember.bernoulli(p)
    assert a.device.type == "cuda" and a.dtype is ember.float32
    np.testing.assert_array_equal(a.cpu().numpy(), b.cpu().numpy())
    assert not np.array_equal(b.cpu().numpy(), c.cpu().numpy())  # the generator's state moved on
    assert set(np.unique(a.cpu().numpy())) <= {0.0, 1.0}
    assert abs(float(a.mean().item()) - 0.3) < 0.01  # 1e5 draws: the standard error is 0.0015
