"""The hot paths of recording and backward agree with the general ones.

Small ops take shortcuts: checked CPU kernels (``Op.checked_kernels["cpu"]``) instead of
the meta function and the kernel, a per-op recorder instead of
``make_node`` (``_record._fast_recorder``, called by the dispatcher through
``autograd_recorders``), a lazily found storage, a plain ``FormulaNode.apply``
and a hand-off of gradients along chains in the engine. Each test here puts a
shortcut next to the general path or a hand-computed value (numpy), including
the calls that must leave the shortcut.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember._ops import _dispatch, registry
from ember.autograd import _record


def _leaf(values, dtype=ember.float64):
    return ember.tensor(values, dtype=dtype, requires_grad=True)


def _np(t):
    return t.detach().numpy()


# -- checked kernels -----------------------------------------------------------------------------------


def test_checked_kernel_leaves_promotion_and_broadcasting_to_the_general_path():
    a = ember.tensor([1.0, 2.0, 3.0])
    b = ember.tensor([[1.0], [2.0]], dtype=ember.float64)
    assert registry["mul"].checked_kernels["cpu"](a, b) is None  # two dtypes: not its call
    out = a * b
    assert out.dtype is ember.float64 and tuple(out.shape) == (2, 3)
    np.testing.assert_array_equal(out.numpy(), np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]]))


def test_checked_kernel_keeps_the_meta_functions_errors():
    with pytest.raises(RuntimeError, match="must match the size"):
        ember.ones(3) * ember.ones(4)
    with pytest.raises(RuntimeError, match="Negation, the `-` operator, on a bool tensor"):
        ember.tensor([True]).neg()  # a unary op with an extra check
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        registry["tanh_backward"](ember.tensor([1]), ember.tensor([1]))


def test_checked_kernels_compute_quietly_in_the_inputs_dtype():
    x = ember.tensor([0.0, 1.0, float("inf")], dtype=ember.float32)
    with np.errstate(all="raise"):  # PyTorch computes inf/nan silently; numpy's own setting is untouched
        y = x.sin()
        z = x * float("inf")
        assert np.geterr()["invalid"] == "raise"
    assert y.dtype is ember.float32 and z.dtype is ember.float32
    assert np.isnan(y.numpy()[2]) and np.isnan(z.numpy()[0])


# -- recording -------------------------------------------------------------------------------------


def test_recorded_chain_matches_hand_computed_gradients():
    x = _leaf([0.3, -0.7, 1.1])
    c = ember.tensor([0.5, 2.0, -1.0], dtype=ember.float64)
    y = (x * c + x).sin().exp().tanh()
    y.sum().backward()
    xv, cv = _np(x), c.numpy()
    u = xv * cv + xv
    s = np.exp(np.sin(u))
    expected = (1 - np.tanh(s) ** 2) * s * np.cos(u) * (cv + 1)
    np.testing.assert_allclose(_np(x.grad), expected, rtol=1e-12)


def test_recorder_is_registered_with_the_dispatcher_and_cleared_with_the_handler():
    x = _leaf([1.0, 2.0])
    (x * 3.0).sum()
    assert registry["mul"] in _dispatch.autograd_recorders
    handler = _dispatch._autograd_handler
    try:
        _dispatch.set_autograd_handler(handler)
        assert _dispatch.autograd_recorders == {}
        y = x * 3.0  # the handler builds it again
        assert registry["mul"] in _dispatch.autograd_recorders
        assert y.grad_fn.name() == "MulBackward0"
    finally:
        _dispatch.set_autograd_handler(handler)


def test_calls_the_recorder_leaves_to_the_general_path():
    x = _leaf([1.0, 2.0])
    recorder = _record._fast_recorder(_record.DERIVATIVES[registry["add"]])
    assert recorder((x, x, 2), ember.device("cpu")) is NotImplemented  # alpha passed: not its call
    assert recorder((x, [1.0, 2.0]), ember.device("cpu")) is NotImplemented  # a list
    y = ember.add(x, x, alpha=2)
    y.sum().backward()
    np.testing.assert_allclose(_np(x.grad), [3.0, 3.0])


def test_only_the_argument_that_needs_a_gradient_gets_one():
    x = _leaf([1.0, 2.0])
    w = ember.tensor([3.0, 4.0], dtype=ember.float64)
    y = x * w
    assert y.grad_fn.next_functions[1] == (None, 0)
    y.sum().backward()
    np.testing.assert_allclose(_np(x.grad), [3.0, 4.0])
    assert w.grad is None


def test_binary_recorder_covers_numbers_and_tensors_in_either_position():
    x = _leaf([1.0, 2.0])
    w = _leaf([3.0, -4.0])
    c = ember.tensor([0.5, 0.25], dtype=ember.float64)
    recorder = _record._fast_recorder(_record.DERIVATIVES[registry["mul"]])
    cpu = ember.device("cpu")
    assert recorder((c, c), cpu) is NotImplemented  # nothing requires grad
    assert recorder((x, "a"), cpu) is NotImplemented  # not a tensor or a number
    assert recorder((x, x, x), cpu) is NotImplemented  # three arguments: not its call
    y = ember.mul(2.0, x) + c * w + ember.sub(x, w) / w  # number first, grad second, both need one
    assert y.grad_fn.next_functions[0][0].next_functions[0][0].next_functions[0] == (None, 0)
    y.sum().backward()
    xv, wv, cv = _np(x), _np(w), c.numpy()
    np.testing.assert_allclose(_np(x.grad), 2.0 + 1 / wv, rtol=1e-12)
    np.testing.assert_allclose(_np(w.grad), cv - xv / wv**2, rtol=1e-12)


def test_saved_input_modified_in_place_raises_with_versions():
    x = _leaf([0.5, 1.0])
    h = x * 1.0
    y = h.sin()  # saves its input
    h.add_(1.0)
    with pytest.raises(RuntimeError, match="is at version 1; expected version 0"):
        y.sum().backward()


def test_saved_output_modified_in_place_raises_with_versions():
    x = _leaf([0.5, 1.0])
    y = x.exp()  # saves its output
    y.mul_(2.0)
    with pytest.raises(RuntimeError, match="is at version 1; expected version 0"):
        y.sum().backward()


def test_saved_output_gives_double_backward_its_history():
    x = _leaf([0.2, -0.4])
    (g,) = ember.autograd.grad(x.exp().sum(), x, create_graph=True)
    (gg,) = ember.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(_np(gg), np.exp([0.2, -0.4]), rtol=1e-12)


def test_saved_tensor_hooks_still_see_every_saved_tensor():
    packed = []

    def pack(t):
        packed.append(tuple(t.shape))
        return t

    x = _leaf([0.2, 0.4])
    with ember.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = x.sin().exp()  # sin saves its input, exp its output
    assert packed == [(2,), (2,)]
    y.sum().backward()
    np.testing.assert_allclose(_np(x.grad), np.exp(np.sin([0.2, 0.4])) * np.cos([0.2, 0.4]), rtol=1e-12)


# -- tanh_backward and sigmoid_backward ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.complex128])
def test_tanh_and_sigmoid_backward_values(dtype):
    rng = np.random.default_rng(0)
    g = rng.standard_normal(5)
    y = rng.uniform(-0.9, 0.9, 5)
    if dtype.is_complex:
        g, y = g + 1j * rng.standard_normal(5), y + 0.5j * rng.uniform(-0.9, 0.9, 5)
    gt, yt = ember.tensor(g, dtype=dtype), ember.tensor(y, dtype=dtype)
    tol = 1e-6 if dtype is ember.float32 else 1e-12
    np.testing.assert_allclose(registry["tanh_backward"](gt, yt).numpy(), g * np.conj(1 - y * y), rtol=tol)
    np.testing.assert_allclose(registry["sigmoid_backward"](gt, yt).numpy(), g * np.conj(y - y * y), rtol=tol)


def test_tanh_and_sigmoid_backward_are_not_public_functions_or_methods():
    for name in ("tanh_backward", "sigmoid_backward"):
        assert not hasattr(ember, name)
        assert not hasattr(ember.Tensor, name)


@pytest.mark.parametrize("fn", ["tanh", "sigmoid"])
def test_double_backward_through_the_fused_formulas(fn):
    x = _leaf([0.3, -1.2, 2.0])
    (g,) = ember.autograd.grad(getattr(x, fn)().sum(), x, create_graph=True)
    assert g.grad_fn.name() == f"{fn.capitalize()}BackwardBackward0"
    (gg,) = ember.autograd.grad(g.sum(), x)
    xv = _np(x)
    if fn == "tanh":
        t = np.tanh(xv)
        expected = -2 * t * (1 - t * t)
    else:
        s = 1 / (1 + np.exp(-xv))
        expected = s * (1 - s) * (1 - 2 * s)
    np.testing.assert_allclose(_np(gg), expected, rtol=1e-12)


# -- storage and metadata ----------------------------------------------------------------------------


def test_storage_of_a_result_is_found_when_first_asked():
    y = ember.ones(4) * 2.0
    storage = y.untyped_storage()
    assert storage.nbytes == 16 and storage.data_ptr() == y.data_ptr()
    assert y.storage_offset() == 0
    view = y[1:]
    assert view.storage_offset() == 1 and view.untyped_storage() is storage
    view.add_(1.0)
    assert y._version == 1 and y.tolist() == [2.0, 3.0, 3.0, 3.0]


def test_sum_backward_of_views_keeps_their_geometry():
    base = _leaf(np.arange(6.0).reshape(2, 3))
    h = base * 1.0
    v = h.t()[1:]  # a view with an offset and strides
    v.sum().backward()
    np.testing.assert_array_equal(_np(base.grad), [[0.0, 1.0, 1.0], [0.0, 1.0, 1.0]])


# -- the engine's hand-off along chains --------------------------------------------------------------


def test_branches_and_chains_sum_their_gradients():
    x = _leaf([0.5, -1.5])
    a = x.sin()
    b = a * 2.0  # a feeds two nodes: its gradient is a sum
    c = a.exp()
    (b + c + x).sum().backward()
    xv = _np(x)
    expected = np.cos(xv) * (2.0 + np.exp(np.sin(xv))) + 1.0
    np.testing.assert_allclose(_np(x.grad), expected, rtol=1e-12)


# -- numpy's error state -------------------------------------------------------------------------------
# The engine ignores numpy's floating-point errors once per backward instead of around every kernel; the
# user's code that runs inside backward must still see the user's own numpy settings.


def test_add_and_sub_overflow_to_inf_silently():
    a = ember.tensor([3e38, 1.0])
    with np.errstate(all="raise"):
        np.testing.assert_array_equal((a + a).numpy(), np.array([np.inf, 2.0], np.float32))
        np.testing.assert_array_equal((a - (-a)).numpy(), np.array([np.inf, 2.0], np.float32))


def test_backward_computes_inf_silently_and_restores_the_users_error_state():
    x = _leaf([1000.0, 0.0])
    with np.errstate(all="raise", under="ignore"):
        before = np.geterr()
        y = (x.exp() * 2.0).sin()  # exp(1000) overflows: the gradients are inf/nan, as in PyTorch
        y.sum().backward()
        assert np.geterr() == before
    g = _np(x.grad)
    assert not np.isfinite(g[0])
    np.testing.assert_allclose(g[1], np.cos(2.0) * 2.0)


def test_user_code_inside_backward_sees_the_users_error_state():
    seen = []

    def record(*args):
        seen.append(np.geterr()["divide"])

    class Double(ember.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        def backward(ctx, g):
            record()
            return g * 2

    x = _leaf([1.0, 2.0])
    with ember.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: (record(), t)[1]):
        y = x.exp()
    y.register_hook(lambda g: record())
    y.grad_fn.register_hook(lambda gi, go: record())
    x.register_hook(lambda g: record())
    with np.errstate(divide="raise"):
        Double.apply(y).sin().sum().backward()
    # the tensor hook, the custom backward, the unpack hook, the node hook, the leaf hook
    assert seen == ["raise"] * 5
    np.testing.assert_allclose(_np(x.grad), np.cos(2 * np.exp([1.0, 2.0])) * 2 * np.exp([1.0, 2.0]))


def test_ember_function_override_inside_backward_sees_the_users_error_state():
    seen = []

    class Logged(ember.Tensor):
        @classmethod
        def __ember_function__(cls, func, types, args=(), kwargs=None):
            seen.append(np.geterr()["over"])
            return super().__ember_function__(func, types, args, kwargs)

    x = _leaf([0.5, 1.5])
    c = ember.tensor([2.0, 3.0], dtype=ember.float64).as_subclass(Logged)
    y = (x * c).sum()  # mul saves the subclass constant for its formula
    seen.clear()
    with np.errstate(over="raise"):
        y.backward()
    assert seen and set(seen) == {"raise"}
    np.testing.assert_array_equal(_np(x.grad), np.array([2.0, 3.0]))
