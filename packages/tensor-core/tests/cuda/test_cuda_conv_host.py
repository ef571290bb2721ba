"""Host-side logic of the convolutions' cuda path, without a GPU (these tests run on every machine).

A ``conv{n}d`` call under autograd asks its plans four times (the composite's meta and decomposition, then the
``convolution`` prim's meta and kernel). Those two plans are memoised with a flat key of the common calls
(``nn_conv._conv_key``/``_convolution_key``: tensors' shapes and dtypes, ints and tuples of ints); every other
call keeps the general key (``_spatial._key``), which keeps argument types apart, so the checks of the plans
still run for bools, floats and numpy integers. The derivative reads the recorded tuples as they are
(``_tup``), and the fast kernels ask the array namespace once per array type (``cuda_conv._namespace``). A fast
kernel's launch passes its arrays and one struct of the plan's scalars (built once per plan), recorded here by a
stand-in for CuPy's RawModule.
"""

import numpy as np
import pytest

import ember
import ember.autograd
from ember._ops import _spatial, nn_conv
from ember.autograd.derivatives import nn_conv as conv_derivatives
from ember.cuda.kernels import conv as cuda_conv
from ember.cuda.kernels import conv_fast

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
    general = _spatial._key

    def counting(value):
        calls.append(value)
        return general(value)

    model = ember.nn.Sequential(ember.nn.Conv2d(3, 4, 3, padding=1), ember.nn.ReLU(), ember.nn.Conv2d(4, 5, 3))
    x = _tensors()[0]
    model(x).sum().backward()
    monkeypatch.setattr(_spatial, "_key", counting)
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

    monkeypatch.setattr(cuda_conv, "_array_namespace", namespace)
    monkeypatch.setattr(cuda_conv, "_NAMESPACES", {np.ndarray: np})
    a = np.zeros(3).view(_DeviceArray)
    assert cuda_conv._namespace(a, a) is stand_in and cuda_conv._namespace(a[1:], a) is stand_in
    assert len(asked) == 1
    assert cuda_conv._namespace(np.zeros(2), np.zeros(1)) is np and len(asked) == 1
    assert cuda_conv._namespace(np.zeros(2), a) is stand_in and len(asked) == 2  # mixed types: asked every time
    assert cuda_conv._namespace(np.zeros(2), a) is stand_in and len(asked) == 3


def test_backward_entry_wraps_the_fused_gradients(monkeypatch):
    """``convolution_backward_cuda`` hands the fused backward the arrays and wraps its results (None kept)."""
    xp = object()
    monkeypatch.setattr(cuda_conv, "_NAMESPACES", {np.ndarray: np, _DeviceArray: xp})
    seen = []
    gx, gw, gb = np.ones((2, 3, 6, 6)), np.ones((4, 3, 3, 3)), np.ones(4)

    def fused(*args):
        seen.append(args)
        return gx, gw, None if not args[-1][2] else gb

    monkeypatch.setattr(cuda_conv, "_fast_conv_backward", fused)
    x, w, _ = _tensors()
    grad = ember.Tensor._make(np.zeros((2, 4, 6, 6)).view(_DeviceArray), x.device)
    for mask in ((True, True, True), (True, True, False)):
        got = cuda_conv.convolution_backward_cuda(grad, x, w, (1, 1), (1, 1), (1, 1), 1, mask)
        assert seen[-1][:4] == (xp, grad._data, x._data, w._data) and seen[-1][4:] == ((1, 1),) * 3 + (mask,)
        assert got[0]._data is gx and got[1]._data is gw and all(t.device == x.device for t in got[:2])
        assert (got[2] is None) if not mask[2] else (got[2]._data is gb)
    assert cuda_conv.convolution_backward_cuda(grad, x, w, (1, 1), (1, 1), (1, 1), 2, mask) is None  # groups


# -- the fast kernels' launches: pointers and one struct built once per plan ----------------------------------


class _Host(np.ndarray):
    """A numpy array in a CuPy array's place (CuPy's ``_c_contiguous``)."""

    @property
    def _c_contiguous(self):
        return self.flags.c_contiguous


class _RecordingModule:
    """``cupy.RawModule`` whose functions record their launches (name, grid, block, args) and compute nothing."""

    launches = []

    def __init__(self, code):
        self.code = code

    def get_function(self, name):
        return lambda grid, block, args: self.launches.append((name, grid, block, args))


@pytest.fixture
def recording_xp(monkeypatch):
    import types

    _RecordingModule.launches = []
    monkeypatch.setattr(conv_fast, "_fast_device", lambda xp, *arrays: "recording")
    monkeypatch.setattr(conv_fast, "_fast_plans", {})
    monkeypatch.setattr(conv_fast, "_fast_modules", {})
    return types.SimpleNamespace(empty=lambda shape, dtype: np.zeros(shape, dtype).view(_Host),
                                 matmul=lambda a, b: np.matmul(a, b).view(_Host),
                                 ascontiguousarray=np.ascontiguousarray, RawModule=_RecordingModule)


def _fields(kernel, struct):
    """The struct argument's fields by name (read through the layout of its size's index type)."""
    index = np.int64 if struct.nbytes == 8 * len(conv_fast._FAST_FIELDS[kernel]) else np.int32
    record = np.frombuffer(struct.tobytes(), conv_fast._fast_struct_dtype(kernel, index))[0]
    return {name: int(record[name]) for name in record.dtype.names}


def _check_launches(launches, expected_kernels):
    """Each launch passes arrays and, last, one struct (a one-element numpy array of a void dtype)."""
    assert [name for name, *_ in launches] == [f"ember_conv_{k}" for k in expected_kernels]
    for name, grid, block, args in launches:
        *arrays, struct = args
        assert all(isinstance(a, _Host) for a in arrays), name
        assert type(struct) is np.ndarray and struct.dtype.kind == "V" and struct.size == 1, name
        assert block == (conv_fast._FAST_THREADS,) and len(grid) == 1 and grid[0] >= 1


def test_fast_launches_pass_pointers_and_one_struct_built_once(recording_xp):
    """The CNN's second layer (64x32x8x8, 3x3, padding 1): forward and backward launches take their arrays and the
    plan's cached struct (the same object at every call), whose fields are the sizes and parameters."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 32, 8, 8)).astype(np.float32).view(_Host)
    w = rng.standard_normal((64, 32, 3, 3)).astype(np.float32).view(_Host)
    b = rng.standard_normal(64).astype(np.float32).view(_Host)
    gy = rng.standard_normal((64, 64, 8, 8)).astype(np.float32).view(_Host)
    launches = _RecordingModule.launches
    structs = []
    for _ in range(2):
        del launches[:]
        assert cuda_conv._fast_conv_forward(recording_xp, x, w, b, (1, 1), (1, 1), (1, 1), (1, 1), 1) is not None
        assert cuda_conv._fast_conv_backward(recording_xp, gy, x, w, (1, 1), (1, 1), (1, 1), (True, True, True))
        _check_launches(launches, ("im2col", "output", "grad_rows", "im2col", "col2im"))
        structs.append([args[-1] for *_, args in launches])
    assert all(a is b for a, b in zip(*structs))
    im2col, output, rows, _, col2im = structs[0]
    assert structs[0][0] is not structs[0][3]  # forward's and backward's plans: their own structs
    assert _fields("im2col", im2col) == dict(
        total=32 * 9 * 64 * 64, N=64, D=1, H=8, W=8, KD=1, KH=3, KW=3, OD=1, OH=8, OW=8, sd=1, sh=1, sw=1, pd=0,
        ph=1, pw=1, dd=1, dh=1, dw=1, xn=32 * 64, xc=64, xd=0, xh=8, xw=1)
    assert im2col.nbytes == 4 * 25  # 32-bit indexing
    assert _fields("output", output) == dict(total=64 * 64 * 64, CO=64, N=64, P=64, has_bias=1)
    assert _fields("grad_rows", rows) == dict(CO=64, N=64, P=64)
    assert _fields("col2im", col2im) == dict(
        total=64 * 32 * 64, C=32, N=64, D=1, H=8, W=8, KD=1, KH=3, KW=3, OD=1, OH=8, OW=8, sd=1, sh=1, sw=1, pd=0,
        ph=1, pw=1, dd=1, dh=1, dw=1)
    del launches[:]
    cuda_conv._fast_conv_forward(recording_xp, x, w, None, (1, 1), (1, 1), (1, 1), (1, 1), 1)  # no bias: its own plan
    assert _fields("output", launches[1][3][-1])["has_bias"] == 0


def test_fast_paths_decline_before_launching(recording_xp, monkeypatch):
    """Declined calls (a dtype the kernels lack, another device, kernels that did not build) launch nothing."""
    x = np.ones((2, 3, 5, 5), np.float32).view(_Host)
    w = np.ones((4, 3, 3, 3), np.float32).view(_Host)
    params = ((1, 1), (1, 1), (1, 1), (1, 1), 1)
    assert cuda_conv._fast_conv_forward(recording_xp, x.astype(np.int32), w.astype(np.int32), None, *params) is None
    monkeypatch.setattr(conv_fast, "_fast_device", lambda xp, *arrays: None)
    assert cuda_conv._fast_conv_forward(recording_xp, x, w, None, *params) is None
    monkeypatch.setattr(conv_fast, "_fast_device", lambda xp, *arrays: "unbuilt")
    conv_fast._fast_modules[("unbuilt", np.dtype(np.float32), False)] = None
    assert cuda_conv._fast_conv_forward(recording_xp, x, w, None, *params) is None
    assert cuda_conv._fast_conv_backward(recording_xp, x[:, :1].copy().view(_Host), x, w[:1], (1, 1), (1, 1), (1, 1),
                                       (True, True, True)) is None
    assert _RecordingModule.launches == []
