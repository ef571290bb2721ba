"""ember.use_deterministic_algorithms: the switches, the table of nondeterministic ops and its errors and
warnings, the fill of uninitialised memory, and the cudnn flag's independence."""

import warnings

import numpy as np
import pytest

import ember
from ember import _deterministic


@pytest.fixture(autouse=True)
def restore():
    yield
    ember.use_deterministic_algorithms(False)
    ember.utils.deterministic.fill_uninitialized_memory = True


def test_switches_and_debug_mode():
    assert not ember.are_deterministic_algorithms_enabled() and ember.get_deterministic_debug_mode() == 0
    ember.use_deterministic_algorithms(True)
    assert ember.are_deterministic_algorithms_enabled() and not ember.is_deterministic_algorithms_warn_only_enabled()
    assert ember.get_deterministic_debug_mode() == 2
    ember.use_deterministic_algorithms(True, warn_only=True)
    assert ember.is_deterministic_algorithms_warn_only_enabled() and ember.get_deterministic_debug_mode() == 1
    ember.set_deterministic_debug_mode("default")
    assert not ember.are_deterministic_algorithms_enabled()
    ember.set_deterministic_debug_mode(2)
    assert ember.are_deterministic_algorithms_enabled() and not ember.is_deterministic_algorithms_warn_only_enabled()
    with pytest.raises(TypeError, match="'mode' must be bool"):
        ember.use_deterministic_algorithms(1)
    with pytest.raises(RuntimeError, match="debug_mode"):
        ember.set_deterministic_debug_mode("loud")


def test_put_without_accumulate_raises_on_cpu():
    index, source = ember.tensor([0, 0]), ember.tensor([1.0, 2.0])
    ember.use_deterministic_algorithms(True)
    with pytest.raises(RuntimeError, match="put_ on cpu does not have a deterministic implementation"):
        ember.zeros(3).put_(index, source)
    with pytest.raises(RuntimeError, match="put on cpu does not have a deterministic implementation"):
        ember.put(ember.zeros(3), index, source)
    # accumulating is deterministic on the cpu: values, positional or keyword
    np.testing.assert_array_equal(ember.zeros(3).put_(index, source, True).numpy(), [3.0, 0.0, 0.0])
    np.testing.assert_array_equal(ember.zeros(3).put_(index, source, accumulate=True).numpy(), [3.0, 0.0, 0.0])
    np.testing.assert_array_equal(ember.zeros(3).index_add_(0, index, source).numpy(), [3.0, 0.0, 0.0])
    ember.use_deterministic_algorithms(True, warn_only=True)
    with pytest.warns(UserWarning, match="put_ on cpu does not have a deterministic implementation.*warn_only=True"):
        out = ember.zeros(3).put_(ember.tensor([1]), ember.tensor([5.0]))
    np.testing.assert_array_equal(out.numpy(), [0.0, 5.0, 0.0])  # warn-only still computes
    ember.use_deterministic_algorithms(False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ember.zeros(3).put_(index, source)


def test_a_marked_op_raises_only_where_marked_and_when_its_condition_holds():
    x = ember.ones(4)
    try:
        _deterministic.mark_nondeterministic("cumsum", "cpu", lambda a: a["input"].dtype is ember.float32)
        assert ember.cumsum(x, 0)[-1].item() == 4.0  # mode off: runs
        ember.use_deterministic_algorithms(True)
        with pytest.raises(RuntimeError, match="cumsum on cpu"):
            ember.cumsum(x, 0)
        np.testing.assert_array_equal(ember.cumsum(x.double(), 0).numpy(), [1, 2, 3, 4])  # condition false
        assert ember.cumsum(x.to("meta"), 0).shape == (4,)  # not marked on meta
        x.requires_grad_(True)
        with pytest.raises(RuntimeError, match="cumsum on cpu"):  # the autograd path checks too
            ember.cumsum(x, 0)
    finally:
        _deterministic.unmark_nondeterministic("cumsum", "cpu")
    assert ember.cumsum(x, 0).shape == (4,)


def test_empty_is_filled_in_deterministic_mode():
    ember.use_deterministic_algorithms(True)
    assert np.isnan(ember.empty(3).numpy()).all()
    assert np.isnan(ember.empty(2, 2, dtype=ember.float64).numpy()).all()
    assert np.isnan(ember.empty(2, dtype=ember.bfloat16).float().numpy()).all()
    assert np.isnan(ember.empty(2, dtype=ember.complex64).numpy().real).all()
    assert (ember.empty(3, dtype=ember.int32).numpy() == np.iinfo(np.int32).max).all()
    assert (ember.empty(3, dtype=ember.uint8).numpy() == 255).all()
    assert ember.empty(3, dtype=ember.bool).numpy().all()
    assert np.isnan(ember.empty_like(ember.ones(2)).numpy()).all()
    assert np.isnan(ember.empty_strided((2, 2), (1, 2)).numpy()).all()
    ember.utils.deterministic.fill_uninitialized_memory = False
    ember.empty(3)  # not filled: any values


def test_cudnn_flag_is_independent():
    ember.backends.cudnn.deterministic = True
    try:
        assert not ember.are_deterministic_algorithms_enabled()
        ember.zeros(3).put_(ember.tensor([0, 0]), ember.tensor([1.0, 2.0]))  # no error
    finally:
        ember.backends.cudnn.deterministic = False
    ember.use_deterministic_algorithms(True)
    assert ember.backends.cudnn.deterministic is False


@pytest.mark.cuda
@pytest.mark.parametrize("name", ["index_add_", "scatter_add_", "index_put_", "put_", "scatter_reduce",
                                  "embedding_bag"])
def test_cuda_atomic_ops_raise(name):
    x = ember.zeros(4, device="cuda")
    index = ember.tensor([0, 0, 1], device="cuda")
    source = ember.ones(3, device="cuda")
    calls = {
        "index_add_": lambda: x.index_add_(0, index, source),
        "scatter_add_": lambda: x.scatter_add_(0, index, source),
        "index_put_": lambda: x.index_put_((index,), source, accumulate=True),
        "put_": lambda: x.put_(index, source, accumulate=True),
        "scatter_reduce": lambda: x.scatter_reduce(0, index, source, "sum"),
        "embedding_bag": lambda: ember.nn.functional.embedding_bag(
            index, ember.ones(4, 2, device="cuda"), ember.tensor([0], device="cuda")),
    }
    calls[name]()  # mode off: runs
    ember.use_deterministic_algorithms(True)
    with pytest.raises(RuntimeError, match="on cuda does not have a deterministic implementation"):
        calls[name]()
    ember.use_deterministic_algorithms(True, warn_only=True)
    with pytest.warns(UserWarning, match="deterministic"):
        calls[name]()
    assert np.isnan(ember.empty(2, device="cuda").cpu().numpy()).all()


def test_a_device_without_its_own_kernel_is_checked_through_the_backend_fallback(monkeypatch):
    # cuda runs most prims through its backend's generic kernel (the CPU kernel on CuPy arrays): the guard
    # must wrap that one too. A stand-in backend hands out a fallback for a device type with no kernel.
    op = ember._ops.registry["cumsum"]
    calls = []

    class Backend:
        def fallback_kernel(self, op_):
            return lambda *args, **kwargs: calls.append(op_.name) or "ran"

    monkeypatch.setattr(_deterministic, "get_backend", lambda device_type: Backend())
    try:
        _deterministic.mark_nondeterministic("cumsum", "fakedev")
        assert op.kernels.get("fakedev") is None  # mode off: nothing
        ember.use_deterministic_algorithms(True, warn_only=True)
        kernel = op.kernels.get("fakedev")
        with pytest.warns(UserWarning, match="cumsum on fakedev"):
            assert kernel(ember.ones(2), 0) == "ran"
        assert calls == ["cumsum"] and op.checked_kernels.get("fakedev") is None
        # composites and views without a kernel run their decomposition / strided view instead: no fallback
        _deterministic.mark_nondeterministic("index_add_", "fakedev")
        assert ember._ops.registry["index_add_"].kernels.get("fakedev") is None
    finally:
        _deterministic.unmark_nondeterministic("cumsum", "fakedev")
        _deterministic.unmark_nondeterministic("index_add_", "fakedev")
