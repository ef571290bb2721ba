"""ember.device parsing, equality, and the unavailable cuda device."""

import pytest

import ember


def test_parsing_and_printing():
    d = ember.device("cuda:1")
    assert (d.type, d.index) == ("cuda", 1)
    assert str(d) == "cuda:1" and repr(d) == "device(type='cuda', index=1)"
    assert ember.device("cuda", 1) == d and hash(ember.device("cuda", 1)) == hash(d)
    assert ember.device("cpu").index is None and str(ember.device("cpu")) == "cpu"
    assert ember.device(d) is d
    assert ember.device("meta") == "meta"
    assert ember.device("cpu") != ember.device("meta")


@pytest.mark.parametrize(
    "bad, match",
    [("gpu", "Expected one of"), ("cuda:x", "Invalid device string"), ("cuda:-1", "Invalid device string")],
)
def test_bad_strings(bad, match):
    with pytest.raises(RuntimeError, match=match):
        ember.device(bad)


def test_devices_are_immutable():
    with pytest.raises(AttributeError):
        ember.device("cpu").type = "cuda"


def test_tensor_devices():
    x = ember.zeros(2)
    assert x.device == ember.device("cpu") and x.is_cpu and not x.is_meta and x.get_device() == -1
    m = ember.zeros(2, device="meta")
    assert m.device.type == "meta" and m.is_meta and m.data_ptr() == 0
    with pytest.raises((TypeError, NotImplementedError)):
        m.numpy()


def test_cuda_absent_is_a_clear_error():
    if ember._device.get_backend("cuda").is_available():
        pytest.skip("a CUDA backend is available here")
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        ember.zeros(2, device="cuda")
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        ember.ones(2).cuda()
