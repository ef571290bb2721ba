"""ember.autocast / ember.amp: dtypes per policy, gradients, nesting, decorator, cache, capture, GradScaler."""

import pickle
import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.utils._python_dispatch import active_modes


def _x(*shape, dtype=ember.float32, requires_grad=False):
    g = np.random.default_rng(0)
    return ember.tensor(g.standard_normal(shape).astype(np.float32), dtype=dtype, requires_grad=requires_grad)


def test_policies_on_cpu():
    a, b = _x(4, 4), _x(4, 4, dtype=ember.bfloat16)
    with ember.autocast("cpu"):
        assert (a @ a).dtype is ember.bfloat16
        assert ember.mm(a, a).dtype is ember.bfloat16
        assert F.linear(a, a).dtype is ember.bfloat16
        assert F.mse_loss(b, b).dtype is ember.float32  # float32 list
        assert ember.cat([a, b]).dtype is ember.float32  # promote
        assert ember.cat([b, b]).dtype is ember.bfloat16
        assert ember.relu(b).dtype is ember.bfloat16  # not listed: input dtype
        assert (a + b).dtype is ember.float32  # ordinary type promotion
        assert ember.mm(a.double(), a.double()).dtype is ember.float64  # float64 is never cast
    assert (a @ a).dtype is ember.float32
    np.testing.assert_allclose(
        _bf16_matmul(a), (a.bfloat16() @ a.bfloat16()).float().numpy(), rtol=0, atol=0
    )


def _bf16_matmul(a):
    with ember.autocast("cpu"):
        return (a @ a).float().numpy()


def test_values_equal_explicit_casts():
    x, w = _x(3, 5), _x(4, 5)
    with ember.autocast("cpu", dtype=ember.float16):
        y = F.linear(x, w)
    assert y.dtype is ember.float16
    np.testing.assert_array_equal(y.numpy(), F.linear(x.half(), w.half()).numpy())


def test_gradients_of_float32_parameters_are_float32():
    model = ember.nn.Sequential(ember.nn.Linear(5, 8), ember.nn.ReLU(), ember.nn.Linear(8, 3))
    x, target = _x(6, 5), ember.tensor([0, 1, 2, 0, 1, 2])
    with ember.autocast("cpu"):
        out = model(x)
        loss = F.cross_entropy(out, target)
    assert out.dtype is ember.bfloat16 and loss.dtype is ember.float32
    loss.backward()
    for p in model.parameters():
        assert p.dtype is ember.float32 and p.grad.dtype is ember.float32
    # the same gradient as the explicitly cast computation
    grads = [p.grad.clone() for p in model.parameters()]
    for p in model.parameters():
        p.grad = None
    w1, b1, w2, b2 = (p.bfloat16() for p in model.parameters())
    manual = F.linear(ember.relu(F.linear(x.bfloat16(), w1, b1)), w2, b2)
    F.cross_entropy(manual.float(), target).backward()
    for g, p in zip(grads, model.parameters()):
        np.testing.assert_allclose(g.numpy(), p.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_nesting_and_disabled_regions():
    a = _x(2, 2)
    assert not ember.is_autocast_enabled("cpu")
    with ember.autocast("cpu"):
        assert ember.is_autocast_enabled("cpu")
        with ember.autocast("cpu", enabled=False):
            assert not ember.is_autocast_enabled("cpu")
            assert (a @ a).dtype is ember.float32
        with ember.autocast("cpu", dtype=ember.float16):
            assert ember.get_autocast_dtype("cpu") is ember.float16
            assert (a @ a).dtype is ember.float16
        assert ember.get_autocast_dtype("cpu") is ember.bfloat16
        assert (a @ a).dtype is ember.bfloat16
    assert not ember.is_autocast_enabled("cpu")
    assert not any(type(m).__name__ == "AutocastMode" for m in active_modes())


def test_region_closes_on_error():
    with pytest.raises(ValueError):
        with ember.autocast("cpu"):
            raise ValueError("boom")
    assert not ember.is_autocast_enabled("cpu") and not active_modes()


def test_decorator_form_and_reentry():
    region = ember.autocast("cpu")

    @region
    def f(a):
        return a @ a

    @region
    def g(a):
        return f(a) + 0  # the same object entered twice

    a = _x(3, 3)
    assert f(a).dtype is ember.bfloat16 and g(a).dtype is ember.bfloat16
    assert not ember.is_autocast_enabled("cpu")
    assert ember.amp.autocast is ember.autocast


def test_cache_casts_each_weight_once():
    w = _x(4, 4, requires_grad=True)
    a = _x(4, 4)
    casts = []

    class Count(ember.utils._python_dispatch.DispatchMode):
        def __ember_dispatch__(self, func, types, args=(), kwargs=None):
            if func.name == "_to_copy" and args[0] is w:
                casts.append(1)
            return func(*args, **(kwargs or {}))

    with Count():
        with ember.autocast("cpu"):
            ember.mm(a, w), ember.mm(a, w), F.linear(a, w)
        assert len(casts) == 1
        with ember.autocast("cpu", cache_enabled=False):
            ember.mm(a, w), ember.mm(a, w)
        assert len(casts) == 3
        with ember.autocast("cpu"):
            ember.mm(a, w)
        assert len(casts) == 4  # the cache empties when the outermost region closes


def test_cache_is_not_filled_under_no_grad():
    w = _x(4, 4, requires_grad=True)
    a = _x(2, 4)
    with ember.autocast("cpu"):
        with ember.no_grad():
            ember.mm(a, w)
        y = ember.mm(a, w)  # must cast again, with an edge to w
    y.float().sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), np.repeat(a.bfloat16().float().numpy().sum(0)[:, None], 4, 1),
                               rtol=1e-2)


def test_grad_scaler_does_not_grow_past_float32():
    w = ember.nn.Parameter(ember.ones(1))
    opt = ember.optim.SGD([w], lr=0.0)
    scaler = ember.amp.GradScaler("cpu", init_scale=3e38, growth_interval=1)
    scaler.scale(w.sum()).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == np.float32(3e38)


def test_make_fx_records_the_casts():
    from ember.fx.experimental.proxy_tensor import make_fx

    def f(x, w):
        with ember.autocast("cpu"):
            y = F.linear(x, w)
        return y.float().sum()

    x, w = _x(3, 4), _x(2, 4)
    gm = make_fx(f)(x, w)
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    names = [getattr(t, "name", str(t)) for t in targets]
    assert names.count("_to_copy") >= 3 and "linear" in names
    linear = next(n for n in gm.graph.nodes if getattr(n.target, "name", None) == "linear")
    assert all(getattr(a.target, "name", None) == "_to_copy" for a in linear.args[:2])
    np.testing.assert_allclose(gm(x, w).item(), f(x, w).item(), rtol=1e-6)


def test_disabled_region_inside_a_mode_entered_in_the_region_keeps_the_stack_order():
    from ember.fx.experimental.proxy_tensor import make_fx

    def f(x):
        with ember.autocast("cpu", enabled=False):
            return x @ x

    x = _x(2, 2)
    with ember.autocast("cpu"):
        gm = make_fx(f)(x)  # make_fx's mode is pushed after the autocast mode and must leave first
        assert (x @ x).dtype is ember.bfloat16
    assert not active_modes()
    assert all(getattr(n.target, "name", None) != "_to_copy" for n in gm.graph.nodes)


def test_profiler_and_autocast_in_either_order():
    profiler = pytest.importorskip("ember.profiler")
    a = _x(4, 4)
    with ember.autocast("cpu"), profiler.profile():
        assert (a @ a).dtype is ember.bfloat16
    with profiler.profile() as prof, ember.autocast("cpu"):
        assert (a @ a).dtype is ember.bfloat16
    assert {"aten::_to_copy", "aten::matmul"} <= {e.key for e in prof.key_averages()}
    assert not active_modes()


def test_argument_errors_and_disabling_warnings():
    with pytest.raises(ValueError, match="device_type"):
        ember.autocast(0)
    with pytest.raises(RuntimeError, match="unsupported autocast device_type 'xpu9'"):
        ember.autocast("xpu9")
    with pytest.warns(UserWarning, match="not supported"):
        region = ember.autocast("cpu", dtype=ember.float64)
    with region:
        assert not ember.is_autocast_enabled("cpu")
    if not ember.cuda.is_available():
        with pytest.warns(UserWarning, match="CUDA is not available"):
            with ember.autocast("cuda"):
                assert not ember.is_autocast_enabled("cuda")


def test_custom_fwd_and_bwd():
    seen = {}

    class Square(ember.autograd.Function):
        @staticmethod
        @ember.amp.custom_fwd(device_type="cpu", cast_inputs=ember.float32)
        def forward(ctx, x):
            seen["fwd"] = (x.dtype, ember.is_autocast_enabled("cpu"))
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @ember.amp.custom_bwd(device_type="cpu")
        def backward(ctx, grad):
            seen["bwd"] = ember.is_autocast_enabled("cpu")
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    x = _x(3, dtype=ember.bfloat16, requires_grad=True)
    with ember.autocast("cpu"):
        y = Square.apply(x)
    assert seen["fwd"] == (ember.float32, False) and y.dtype is ember.float32
    y.sum().backward()
    assert seen["bwd"] is False and x.grad.dtype is ember.bfloat16


def test_policy_tables_name_registered_ops_and_read_dtype_arguments():
    from ember._autocast import _dtype_given
    from ember._autocast_policy import AUTOCAST_OPS, POLICIES, policy_of
    from ember._ops import registry

    assert sorted(n for n in AUTOCAST_OPS if n not in registry) == []
    assert POLICIES["cuda"]["softmax"] == "float32_unless_dtype" and "softmax" not in POLICIES["cpu"]
    assert policy_of("binary_cross_entropy", "cuda", (), {}) == "banned"
    assert policy_of("binary_cross_entropy", "cpu", (), {}) == "float32"
    assert policy_of("pad", "cpu", (None, (1, 1), "reflect"), {}) == "float32"
    assert policy_of("pad", "cpu", (None, (1, 1, 1, 1, 1, 1), "reflect"), {}) is None  # reflection_pad3d
    assert policy_of("pad", "cpu", (None, (1, 1), "constant"), {}) is None
    softmax, total = registry["softmax"], registry["sum"]
    x = ember.ones(2)
    assert _dtype_given(softmax, (x, 0, 3, ember.float16), {})
    assert not _dtype_given(softmax, (x, 0, 3, None), {})
    assert _dtype_given(total, (x, None, False), {"dtype": ember.float16})
    assert not _dtype_given(total, (x, None, False), {"dtype": None})


# ---- GradScaler ----------------------------------------------------------------------------------


def _step(model, opt, scaler, x, poison=False):
    opt.zero_grad()
    with ember.autocast("cpu"):
        loss = model(x).float().pow(2).mean()
    scaler.scale(loss).backward()
    if poison:
        next(model.parameters()).grad[0, 0] = float("inf")
    scaler.step(opt)
    scaler.update()
    return loss


def test_grad_scaler_skips_inf_steps_and_adapts_scale():
    model = ember.nn.Linear(3, 2)
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    scaler = ember.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
    x = _x(4, 3)
    before = [p.detach().clone() for p in model.parameters()]
    _step(model, opt, scaler, x, poison=True)
    assert scaler.get_scale() == 4.0
    for p, q in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.detach().numpy(), q.numpy())  # skipped
    _step(model, opt, scaler, x)
    assert scaler.get_scale() == 4.0 and scaler._get_growth_tracker() == 1
    _step(model, opt, scaler, x)
    assert scaler.get_scale() == 8.0 and scaler._get_growth_tracker() == 0
    assert not np.array_equal(next(model.parameters()).detach().numpy(), before[0].numpy())


def test_grad_scaler_unscales_to_the_true_gradient():
    w = ember.nn.Parameter(ember.tensor([1.0, -2.0]))
    opt = ember.optim.SGD([w], lr=1.0)
    scaler = ember.amp.GradScaler("cpu", init_scale=1024.0)
    scaler.scale((w * 3).sum()).backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3072.0, 3072.0])
    scaler.unscale_(opt)
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 3.0])
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    np.testing.assert_array_equal(w.detach().numpy(), [-2.0, -5.0])
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        scaler.unscale_(opt)
    scaler.update()
    with pytest.raises(RuntimeError, match="Closure"):
        scaler.step(opt, closure=lambda: 0)


def test_grad_scaler_state_dict_round_trip_and_disabled():
    scaler = ember.amp.GradScaler("cpu", init_scale=4.0, growth_factor=3.0, backoff_factor=0.25, growth_interval=5)
    scaler.scale(ember.ones(()))
    scaler.update(new_scale=6.0)
    state = scaler.state_dict()
    assert state == {"scale": 6.0, "growth_factor": 3.0, "backoff_factor": 0.25, "growth_interval": 5,
                     "_growth_tracker": 0}
    other = ember.amp.GradScaler("cpu")
    other.load_state_dict(state)
    assert other.state_dict() == state
    restored = pickle.loads(pickle.dumps(scaler))
    assert restored.get_scale() == 6.0
    off = ember.amp.GradScaler("cpu", enabled=False)
    t = ember.ones(2)
    assert off.scale(t) is t and off.get_scale() == 1.0 and off.state_dict() == {}
    with pytest.raises(RuntimeError, match="empty"):
        other.load_state_dict({})
    with pytest.raises(ValueError, match="growth_factor"):
        ember.amp.GradScaler("cpu", growth_factor=0.5)


def test_cuda_aliases_without_cuda():
    if ember.cuda.is_available():
        pytest.skip("checks the warnings given without CUDA")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scaler = ember.cuda.amp.GradScaler()
    assert not scaler.is_enabled() and any("CUDA is not available" in str(w.message) for w in caught)
    assert issubclass(ember.cuda.amp.autocast, ember.autocast)


@pytest.mark.cuda
def test_float16_on_cuda():
    a = ember.randn(8, 8, device="cuda")
    w = ember.randn(8, 8, device="cuda", requires_grad=True)
    with ember.autocast("cuda"):
        y = a @ w
        assert y.dtype is ember.float16
        assert ember.softmax(y, 0).dtype is ember.float32
        assert ember.sum(y, dtype=ember.float16).dtype is ember.float16
        assert ember.exp(y).dtype is ember.float32
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(ember.sigmoid(y), ember.ones_like(y))
    y.float().sum().backward()
    assert w.grad.dtype is ember.float32
    with ember.cuda.amp.autocast():
        assert (a @ a).dtype is ember.float16
    # a scale whose products fit float16: the matmul's backward runs in float16 under autocast, and at
    # the default 2**16 the scaled gradients of this sum overflow (a skipped step, as in PyTorch)
    scaler = ember.amp.GradScaler(init_scale=2.0**8)
    opt = ember.optim.SGD([w], lr=0.1)
    w.grad = None
    before = w.detach().clone()
    with ember.autocast("cuda"):
        loss = (a @ w).float().sum()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0**8
    assert not ember.equal(w.detach(), before)  # the step was taken
    overflow = ember.amp.GradScaler()  # the default scale overflows float16 here: step skipped, scale halved
    w.grad = None
    before = w.detach().clone()
    with ember.autocast("cuda"):
        loss = (a @ w * 1000).float().sum()
    overflow.scale(loss).backward()
    overflow.step(opt)
    overflow.update()
    assert overflow.get_scale() == 32768.0 and ember.equal(w.detach(), before)
