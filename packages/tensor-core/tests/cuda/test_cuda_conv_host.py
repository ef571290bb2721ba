"""Host-side logic of the convolutions' cuda path, without a GPU (these tests run on every machine).

A ``conv{n}d`` call under autograd asks its plans four times (the composite's meta and decomposition, then the
``convolution`` prim's meta and kernel). Those two plans are memoised with a flat key of the common calls
(``nn_conv._conv_key``/``_convolution_key``: tensors' shapes and dtypes, ints and tuples of ints); every other
call keeps the general key (``nn_conv._key``), which keeps argument types apart, so the checks of the plans
still run for bools, floats and numpy integers. The derivative reads the recorded tuples as they are
(``_tup``), and the fast kernels ask the array namespace once per array type (``nn_conv._namespace``).
"""

import numpy as np
import pytest

import ember
import ember.autograd
from ember._ops import nn_conv
from ember.autograd.derivatives import nn_conv as conv_derivatives

F = ember.nn.functional


def _tensors(n=2, batch=2, bias=True):
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((batch, 3, *(6,) * n)).astype(np.float32))
    w = ember.nn.Parameter(ember.tensor(rng.standard_normal((4, 3, *(3,) * n)).astype(np.float32)))
    b = ember.tensor(rng.standard_normal(4).astype(np.float32)) if bias else None
    return x, w, b


@pytest.mark.parametrize("params", [((1, 1), (1, 1), (1, 1), 1), (1, 0, 1, 1), ([2, 1], [1, 0], [1, 2], 1),
                                    ((1, 1), "same", (2, 1), 1), (1, "valid", 1, 1)])
@pytest.mark.parametrize("bias", [True, False])
def test_fast_keys_give_the_general_plans(params, bias):
    x, w, b = _tensors(bias=bias)
    stride, padding, dilation, groups = params
    args = ("conv2d", 2, x, w, b, stride, padding, dilation, groups)
    assert nn_conv._conv_key(*args) is not None
    plan = nn_conv._conv_plan(*args)
    assert plan == nn_conv._conv_plan.__wrapped__(*args)
    assert nn_conv._conv_plan(*args) is plan  # cached
    stride, pad_lo, _, dilation, groups, _, _ = plan
    prim = (x, w, b, stride, pad_lo, dilation, False, (0, 0), groups)
    assert nn_conv._convolution_key(*prim) is not None
    assert nn_conv._convolution_plan(*prim) == nn_conv._convolution_plan.__wrapped__(*prim)
    listed = (x, w, b, list(stride), list(pad_lo), list(dilation), False, [0, 0], groups)  # the formulas' lists
    assert nn_conv._convolution_key(*listed) == nn_conv._convolution_key(*prim)


def test_other_arguments_take_the_general_key():
    x, w, b = _tensors()
    common = (x, w, b, (1, 1), (1, 1), (1, 1), False, (0, 0), 1)
    for position, value in ((3, (True, 1)), (3, (1.0, 1)), (4, (np.int64(1), 1)), (5, 1.0), (6, 0), (6, np.True_),
                            (8, True), (8, np.int64(1)), (3, ember.tensor([1, 1])), (2, 1.0), (0, [1.0])):
        args = list(common)
        args[position] = value
        assert nn_conv._convolution_key(*args) is None, (position, value)
    assert nn_conv._conv_key("conv2d", 2, x, w, b, (1, 1), (1, 1), (True, 1), 1) is None
    assert nn_conv._conv_key("conv2d", 2, x, w, b, (1, 1), [1, 1.5], (1, 1), 1) is None


def test_memoised_plans_still_check_what_the_fast_key_declines():
    """A plan cached for ints must not answer for bools, floats or a non-bool ``transposed``."""
    x, w, b = _tensors()
    nn_conv._convolution_plan(x, w, b, (1, 1), (1, 1), (1, 1), False, (0, 0), 1)
    nn_conv._conv_plan("conv2d", 2, x, w, b, (1, 1), (1, 1), (1, 1), 1)
    for args, match in (((x, w, b, (True, 1), (1, 1), (1, 1), False, (0, 0), 1), "stride"),
                        ((x, w, b, (1, 1), (1.0, 1), (1, 1), False, (0, 0), 1), "padding"),
                        ((x, w, b, (1, 1), (1, 1), (1, 1), 0, (0, 0), 1), "transposed"),
                        ((x, w, b, (1, 1), (1, 1), (1, 1), False, (0, 0), True), "groups")):
        with pytest.raises(TypeError, match=match):
            nn_conv._convolution_plan(*args)
    with pytest.raises(TypeError, match="dilation"):
        F.conv2d(x, w, b, 1, 1, (1, True))
    # numpy integers are taken (as ints) through the general key: the same plan
    assert (nn_conv._convolution_plan(x, w, b, (np.int64(1), 1), (1, 1), (1, 1), False, (0, 0), np.int32(1))
            == nn_conv._convolution_plan(x, w, b, (1, 1), (1, 1), (1, 1), False, (0, 0), 1))


def test_conv_under_autograd_asks_no_general_key(monkeypatch):
    """Forward and backward of an nn.Conv2d (the CNN step's layer) key every plan with the fast keys."""
    calls = []
    general = nn_conv._key

    def counting(value):
        calls.append(value)
        return general(value)

    model = ember.nn.Sequential(ember.nn.Conv2d(3, 4, 3, padding=1), ember.nn.ReLU(), ember.nn.Conv2d(4, 5, 3))
    x = _tensors()[0]
    model(x).sum().backward()
    monkeypatch.setattr(nn_conv, "_key", counting)
    model(x).sum().backward()
    assert calls == []


@pytest.mark.parametrize("n", [1, 2, 3])
def test_conv_results_and_gradients_do_not_depend_on_the_key(n):
    """The same call keyed fast (ints) and generally (numpy integers): bit-identical outputs and gradients."""
    results = []
    for one in (1, np.int64(1)):
        x, w, b = _tensors(n=n)
        x.requires_grad_(True)
        b.requires_grad_(True)
        conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[n]
        out = conv(x, w, b, one, one, one, one)
        results.append((out, *ember.autograd.grad((out * out).sum(), [x, w, b])))
    for got, expected in zip(*results):
        np.testing.assert_array_equal(got.detach().numpy(), expected.detach().numpy())


def test_tup_reads_recorded_tuples_as_they_are():
    same = (1, 2)
    assert conv_derivatives._tup(same, 2) is same
    assert conv_derivatives._tup([1, 2], 2) == (1, 2)
    assert conv_derivatives._tup((3,), 2) == (3, 3)
    assert conv_derivatives._tup(2, 3) == (2, 2, 2)
    assert conv_derivatives._tup((np.int64(1), 2), 2) == (1, 2)
    assert conv_derivatives._tup((True, 2), 2) == (1, 2)  # (converted, as before)
    assert conv_derivatives._tup(ember.tensor([4, 5]), 2) == (4, 5)


class _DeviceArray(np.ndarray):
    """A numpy array that array_namespace takes for a GPU array (it has ``__cuda_array_interface__``)."""

    @property
    def __cuda_array_interface__(self):
        raise AssertionError("asked per call: the namespace should come from the array type")


def test_namespace_is_asked_once_per_array_type(monkeypatch):
    stand_in = object()
    asked = []

    def namespace(*arrays):
        asked.append(arrays)
        return stand_in

    monkeypatch.setattr(nn_conv, "_array_namespace", namespace)
    monkeypatch.setattr(nn_conv, "_NAMESPACES", {np.ndarray: np})
    a = np.zeros(3).view(_DeviceArray)
    assert nn_conv._namespace(a, a) is stand_in and nn_conv._namespace(a[1:], a) is stand_in
    assert len(asked) == 1
    assert nn_conv._namespace(np.zeros(2), np.zeros(1)) is np and len(asked) == 1
    assert nn_conv._namespace(np.zeros(2), a) is stand_in and len(asked) == 2  # mixed types: asked every time
    assert nn_conv._namespace(np.zeros(2), a) is stand_in and len(asked) == 3


def test_backward_entry_wraps_the_fused_gradients(monkeypatch):
    """``convolution_backward_cuda`` hands the fused backward the arrays and wraps its results (None kept)."""
    xp = object()
    monkeypatch.setattr(nn_conv, "_NAMESPACES", {np.ndarray: np, _DeviceArray: xp})
    seen = []
    gx, gw, gb = np.ones((2, 3, 6, 6)), np.ones((4, 3, 3, 3)), np.ones(4)

    def fused(*args):
        seen.append(args)
        return gx, gw, None if not args[-1][2] else gb

    monkeypatch.setattr(nn_conv, "_fast_conv_backward", fused)
    x, w, _ = _tensors()
    grad = ember.Tensor._make(np.zeros((2, 4, 6, 6)).view(_DeviceArray), x.device)
    for mask in ((True, True, True), (True, True, False)):
        got = nn_conv.convolution_backward_cuda(grad, x, w, (1, 1), (1, 1), (1, 1), 1, mask)
        assert seen[-1][:4] == (xp, grad._data, x._data, w._data) and seen[-1][4:] == ((1, 1),) * 3 + (mask,)
        assert got[0]._data is gx and got[1]._data is gw and all(t.device == x.device for t in got[:2])
        assert (got[2] is None) if not mask[2] else (got[2]._data is gb)
    assert nn_conv.convolution_backward_cuda(grad, x, w, (1, 1), (1, 1), (1, 1), 2, mask) is None  # groups
