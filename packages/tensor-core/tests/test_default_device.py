"""ember.set_default_device / get_default_device and `with ember.device(...)` (the meta device stands in
for an accelerator on machines without one)."""

import threading

import numpy as np
import pytest

import ember

FACTORIES = {
    "zeros": lambda: ember.zeros(2, 3),
    "zeros tuple": lambda: ember.zeros((2, 3)),
    "ones": lambda: ember.ones(2),
    "empty": lambda: ember.empty(2),
    "full": lambda: ember.full((2,), 1.5),
    "arange": lambda: ember.arange(4),
    "linspace": lambda: ember.linspace(0, 1, 5),
    "eye": lambda: ember.eye(3),
    "randn": lambda: ember.randn(2),
    "rand": lambda: ember.rand(2),
    "randint": lambda: ember.randint(0, 5, (3,)),
    "randperm": lambda: ember.randperm(4),
    "tensor": lambda: ember.tensor([1.0, 2.0]),
    "as_tensor list": lambda: ember.as_tensor([1, 2]),
}


@pytest.fixture
def reset_default():
    yield
    ember.set_default_device(None)


@pytest.mark.parametrize("name", list(FACTORIES))
def test_factories_allocate_on_the_default_device(name, reset_default):
    ember.set_default_device("meta")
    assert ember.get_default_device() == ember.device("meta")
    t = FACTORIES[name]()
    assert t.device == ember.device("meta"), name
    ember.set_default_device(None)
    assert FACTORIES[name]().device == ember.device("cpu")


def test_explicit_device_and_tensor_inputs_win(reset_default):
    ember.set_default_device("meta")
    assert ember.zeros(2, device="cpu").device.type == "cpu"
    cpu = ember.from_numpy(np.ones(3, dtype=np.float32))  # from_numpy shares memory: always the cpu
    assert cpu.device.type == "cpu"
    assert ember.zeros_like(cpu).device.type == "cpu"
    assert (cpu + 1).device.type == "cpu"


def test_reset_and_errors(reset_default):
    assert ember.get_default_device() == ember.device("cpu")
    ember.set_default_device(ember.device("meta"))
    ember.set_default_device(None)
    assert ember.zeros(1).device.type == "cpu"
    with pytest.raises(RuntimeError):
        ember.set_default_device("nodevice")


def test_device_context_manager_nests_and_restores(reset_default):
    with ember.device("meta") as d:
        assert d == ember.device("meta") and ember.ones(1).device.type == "meta"
        with ember.device("cpu"):
            assert ember.ones(1).device.type == "cpu"
        assert ember.ones(1).device.type == "meta"
    assert ember.ones(1).device.type == "cpu"
    ember.set_default_device("meta")
    with ember.device("cpu"):
        assert ember.ones(1).device.type == "cpu"
    assert ember.ones(1).device.type == "meta"


def test_default_is_per_thread(reset_default):
    ember.set_default_device("meta")
    seen = []
    thread = threading.Thread(target=lambda: seen.append((ember.get_default_device(), ember.zeros(1).device)))
    thread.start()
    thread.join()
    assert seen == [(ember.device("cpu"), ember.device("cpu"))]
    assert ember.zeros(1).device.type == "meta"


@pytest.mark.cuda
def test_cuda_default(reset_default):
    ember.set_default_device("cuda")
    assert ember.get_default_device() == ember.device("cuda", ember.cuda.current_device())
    assert ember.randn(3).device.type == "cuda" and ember.tensor([1, 2]).device.type == "cuda"
    with ember.device("cpu"):
        assert ember.zeros(1).device.type == "cpu"
