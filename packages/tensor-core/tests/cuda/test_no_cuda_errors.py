"""Without CuPy (or a GPU) ember imports, reports CUDA unavailable and says how to install it.

These run everywhere: CuPy's absence is simulated, so they also run on a GPU machine.
"""

import pytest

import ember
from ember import _device
from ember.cuda import _runtime


class _NoCupy:
    """Stands in for ``import cupy`` failing, whatever this machine has."""

    def find_spec(self, name, path=None, target=None):
        if name == "cupy" or name.startswith("cupy."):
            raise ModuleNotFoundError("No module named 'cupy'")
        return None


@pytest.fixture
def no_cupy(monkeypatch):
    import sys

    monkeypatch.setattr(sys, "meta_path", [_NoCupy(), *sys.meta_path])
    for name in [n for n in sys.modules if n == "cupy" or n.startswith("cupy.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(_runtime, "_state", {})  # probe again, through the real code path
    monkeypatch.setattr(_device._CUDABackend, "_ready", False)


def test_is_available_false_and_count_zero(no_cupy):
    assert ember.cuda.is_available() is False
    assert ember.cuda.device_count() == 0


@pytest.mark.parametrize(
    "call",
    [
        lambda: ember.zeros(2, device="cuda"),
        lambda: ember.tensor([1.0], device="cuda"),
        lambda: ember.ones(2).cuda(),
        lambda: ember.ones(2).to("cuda:0"),
        lambda: ember.cuda.current_device(),
        lambda: ember.cuda.synchronize(),
        lambda: ember.cuda.memory_allocated(),
        lambda: ember.cuda.Stream(),
        lambda: ember.cuda.Event(enable_timing=True),
        lambda: ember.Generator("cuda"),
    ],
)
def test_every_use_names_the_install_command(no_cupy, call):
    with pytest.raises(RuntimeError) as info:
        call()
    assert "pip install ember-core[cuda]" in str(info.value)


def test_real_reason_mentions_install_when_cupy_missing():
    # Here (CI) CuPy is absent; on the GPU machine it is present and the reason is None.
    reason = _runtime.unavailable_reason()
    try:
        import cupy  # noqa: F401
    except ImportError:
        assert "pip install ember-core[cuda]" in reason
        assert ember.cuda.is_available() is False
    else:
        assert reason is None or "GPU" in reason


def test_manual_seed_without_cuda_still_works(no_cupy):
    # ember.manual_seed seeds the CUDA generators only when they exist
    ember.manual_seed(5)
    a = ember.rand(3)
    ember.manual_seed(5)
    assert ember.rand(3).tolist() == a.tolist()


def test_cuda_device_object_needs_no_cupy(no_cupy):
    d = ember.device("cuda:1")
    assert (d.type, d.index, str(d)) == ("cuda", 1, "cuda:1")


def test_seeding_without_cuda_does_nothing(no_cupy):
    # as torch.cuda.manual_seed/manual_seed_all: seeding code must run on machines without a GPU
    ember.cuda.manual_seed(0)
    ember.cuda.manual_seed_all(0)
    assert ember.cuda.is_available() is False
