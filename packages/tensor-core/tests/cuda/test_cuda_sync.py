"""ember.cuda._sync: the host-synchronisation hook and set_sync_debug_mode, and the ops that must not read
values back (CPU tests: these run on every machine).

Without a GPU the hook is exercised directly and through stand-ins (a CuPy-like array whose ``get()`` is the
wait, a stand-in of CuPy's ``syncdetect`` module). The ops that must stay on the device on cuda (one-value
mask writes, ``masked_fill``, ``clip_grad_norm_``) are run on CPU tensors with every host read of a tensor
value made to fail, and the CUDA kernels of ``masked_fill`` run with numpy standing in for CuPy. The same
ops on the GPU under ``set_sync_debug_mode("error")`` are in ``test_cuda_sync_gpu.py``.
"""

from __future__ import annotations

import types
import warnings

import numpy as np
import pytest

import ember
from ember._ops import indexing, masks
from ember._tensor import Tensor
from ember.cuda import _backend, _sync


@pytest.fixture(autouse=True)
def _default_mode():
    yield
    _sync.set_sync_debug_mode("default")


# -- the mode -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value, expected", [("default", 0), ("warn", 1), ("error", 2), (0, 0), (1, 1), (2, 2)])
def test_mode_names_and_numbers(value, expected):
    ember.cuda.set_sync_debug_mode(value)
    assert ember.cuda.get_sync_debug_mode() == expected


@pytest.mark.parametrize("value", ["warning", 3, -1, True, 1.0, None])
def test_a_bad_mode_raises_and_keeps_the_old_one(value):
    ember.cuda.set_sync_debug_mode("warn")
    with pytest.raises(RuntimeError, match="invalid value of debug_mode"):
        ember.cuda.set_sync_debug_mode(value)
    assert ember.cuda.get_sync_debug_mode() == 1


def test_default_mode_runs_the_wait_silently():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _sync.host_sync("Tensor.item()", lambda: 42) == 42
        assert _sync.host_sync("Tensor.item()") is None


def test_warn_mode_warns_naming_the_call_and_waits():
    ember.cuda.set_sync_debug_mode("warn")
    with pytest.warns(UserWarning, match=r"synchronizing CUDA operation: Tensor\.item\(\)") as caught:
        assert _sync.host_sync("Tensor.item()", lambda: 7) == 7
    assert caught[0].filename == __file__  # points at the program's line, not ember's


def test_error_mode_raises_before_the_wait():
    ember.cuda.set_sync_debug_mode("error")
    waited = []
    with pytest.raises(RuntimeError, match=r"synchronizing CUDA operation: ember\.cuda\.synchronize\(\)"):
        _sync.host_sync("ember.cuda.synchronize()", lambda: waited.append(1))
    assert waited == []


def test_record_collects_reasons_with_their_place_in_any_mode():
    with _sync.record() as reasons:
        _sync.host_sync("first")
        with _sync.record() as inner:
            _sync.host_sync("second", lambda: None)
    _sync.host_sync("after")  # nothing records it
    assert [r.split(" (at ")[0] for r in reasons] == ["first", "second"]
    assert [r.split(" (at ")[0] for r in inner] == ["second"]
    assert "test_record_collects_reasons_with_their_place_in_any_mode" in reasons[0]


# -- CuPy's own waits ---------------------------------------------------------------------------------------------


@pytest.fixture
def fake_syncdetect(monkeypatch):
    """A stand-in of ``cupy._core.syncdetect`` with the hook installed (its own check counts its calls)."""
    calls = []
    module = types.SimpleNamespace(_declare_synchronize=lambda: calls.append(1))
    monkeypatch.setattr(_sync, "_cupy_original", None)
    assert _sync.install_cupy_hook(module)
    assert _sync.install_cupy_hook(module)  # installing twice keeps one hook
    module.calls = calls
    return module


def test_cupy_waits_are_reported_and_cupys_check_still_runs(fake_syncdetect):
    with _sync.record() as reasons:
        fake_syncdetect._declare_synchronize()  # what CuPy calls before ndarray.get()
    assert len(reasons) == 1 and reasons[0].startswith("a device-to-host copy or wait inside CuPy")
    assert fake_syncdetect.calls == [1]


def test_a_wait_ember_reported_is_not_reported_again_by_cupy(fake_syncdetect):
    with _sync.record() as reasons:
        _sync.host_sync("Tensor.item()", fake_syncdetect._declare_synchronize)
    assert [r.split(" (at ")[0] for r in reasons] == ["Tensor.item()"]


def test_error_mode_stops_a_hidden_cupy_wait(fake_syncdetect):
    ember.cuda.set_sync_debug_mode("error")
    with pytest.raises(RuntimeError, match="inside CuPy"):
        fake_syncdetect._declare_synchronize()


def test_a_cupy_without_the_detector_is_left_alone():
    assert not _sync.install_cupy_hook(types.SimpleNamespace())


class _DeviceArray:
    """A stand-in of a CuPy array: ``get()`` is the copy that waits for the GPU."""

    def __init__(self, values):
        self.values = np.asarray(values)
        self.reads = 0

    def get(self):
        self.reads += 1
        return self.values


def test_host_reads_of_cuda_tensors_go_through_the_hook():
    array = _DeviceArray([1.0, 2.0])
    with _sync.record() as reasons:
        out = _backend.to_numpy(array)
    np.testing.assert_array_equal(out, [1.0, 2.0])
    assert array.reads == 1 and reasons[0].startswith("a copy of a cuda tensor to the host")
    ember.cuda.set_sync_debug_mode("error")
    with pytest.raises(RuntimeError, match="a copy of a cuda tensor to the host"):
        _backend.to_numpy(array)
    assert array.reads == 1  # refused before the copy


# -- ops that must not read values back ------------------------------------------------------------------------


@pytest.fixture
def no_value_reads(monkeypatch):
    """Every host read of a tensor's values raises (the reads that would wait for the GPU on cuda)."""

    def refuse(*args, **kwargs):
        raise AssertionError("a tensor value was read on the host")

    for name in ("item", "tolist", "__bool__", "__float__", "__int__"):
        monkeypatch.setattr(Tensor, name, refuse)
    monkeypatch.setattr(indexing, "_count_true", refuse)


def test_one_value_mask_writes_need_no_count(no_value_reads):
    x = ember.arange(12.0).reshape(3, 4)
    expected = np.arange(12.0).reshape(3, 4)
    rows = np.array([True, False, True])
    cols = np.array([False, True, True, False])
    x[ember.tensor(rows)] = 5.0
    expected[rows] = 5.0
    x[:, ember.tensor(cols)] = ember.tensor([-1.0])  # a one-element tensor, after a slice
    expected[:, cols] = -1.0
    x.index_put_((ember.tensor(rows),), ember.tensor(2.0), accumulate=True)
    expected[rows] += 2.0
    np.testing.assert_array_equal(x.numpy(), expected)


def test_a_mask_write_of_many_values_still_counts(monkeypatch):
    counted = []
    original = indexing._count_true
    monkeypatch.setattr(indexing, "_count_true", lambda mask: counted.append(1) or original(mask))
    x = ember.zeros(3, 2)
    x[ember.tensor([True, False, True])] = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(x.numpy(), [[1, 2], [0, 0], [3, 4]])
    assert counted


def test_masked_fill_and_its_decomposition_need_no_count(no_value_reads):
    # the decomposition (index_put with the mask) is what other backends run: its one value needs no count
    x = ember.arange(6.0).reshape(2, 3)
    mask = ember.tensor([[True, False, True], [False, False, True]])
    expected = np.where(mask.numpy(), -np.inf, np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(ember.masked_fill(x, mask, -np.inf).numpy(), expected)
    np.testing.assert_array_equal(masks._masked_fill_decomp(x, mask, -np.inf).numpy(), expected)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float16, ember.bfloat16, ember.int64, ember.bool])
def test_masked_fill_cuda_kernels_with_numpy_standing_in(dtype):
    # the CUDA kernels are written over the array namespace: with numpy arrays they must equal the CPU op
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((3, 4)) * 3).to(dtype)
    data = x.numpy()
    mask = ember.tensor(rng.random((1, 4)) > 0.5)
    for value in (1, ember.tensor(0, dtype=ember.int64)):
        expected = ember.masked_fill(x, mask, value).numpy()
        out = masks._masked_fill_cuda(x, mask, value)
        assert out.dtype == data.dtype
        np.testing.assert_array_equal(out, expected)
        y = ember.tensor(data.copy())
        masks._masked_fill_inplace_cuda(y, mask, value)
        np.testing.assert_array_equal(y.numpy(), expected)


def test_clip_grad_norm_reads_no_value(no_value_reads):
    rng = np.random.default_rng(1)
    grads = [rng.standard_normal(shape).astype(np.float32) for shape in ((4, 3), (3,), (2, 2, 2))]
    params = []
    for g in grads:
        p = ember.nn.Parameter(ember.zeros(g.shape))
        p.grad = ember.tensor(g)
        params.append(p)
    total = ember.nn.utils.clip_grad_norm_(params, 1.0)
    norm = np.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in grads))
    np.testing.assert_allclose(total.numpy(), norm, rtol=1e-6)
    for p, g in zip(params, grads):
        np.testing.assert_allclose(p.grad.numpy(), g * min(1.0 / (norm + 1e-6), 1.0), rtol=1e-6)


def test_the_cached_causal_bias_is_for_the_gpu_only():
    # CPU attention has its own kernel and traced graphs build their masks from ops: no cached tensor there
    from ember._ops import nn_attention

    assert nn_attention.causal_bias(3, 4, ember.zeros(2, 3, 4)) is None


def test_causal_attention_through_the_bias_equals_the_masked_chain(monkeypatch):
    # the GPU's route (scores + cached bias, one softmax) run on the CPU: the same values and gradients
    from ember._ops import nn_attention

    derivatives = pytest.importorskip("ember.autograd.derivatives.nn_attention")
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal((2, 3, 5, 4)) for _ in range(3)]  # float64

    def run():
        q, k, v = (ember.tensor(a, requires_grad=True) for a in arrays)
        with ember.no_grad():  # the decomposition (the GPU's forward)
            out = nn_attention._scaled_dot_product_attention_decomp(q, k, v, is_causal=True)
        # the derivative's formula (the CPU kernel's forward, then the backward that the GPU runs too)
        result = ember.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        grads = ember.autograd.grad((result * result).sum(), (q, k, v))
        return [out.numpy()] + [g.numpy() for g in grads]

    chain = run()
    bias = np.where(np.tril(np.ones((5, 5), bool)), 0.0, -np.inf)

    def cpu_bias(seq_l, seq_s, scores):
        assert (seq_l, seq_s) == (5, 5)
        return ember.tensor(bias, dtype=scores.dtype)

    monkeypatch.setattr(nn_attention, "causal_bias", cpu_bias)
    monkeypatch.setattr(derivatives, "causal_bias", cpu_bias)
    for ours, expected in zip(run(), chain):
        np.testing.assert_allclose(ours, expected, rtol=1e-12, atol=1e-14)
