"""The fused CUDA row kernels (ember.cuda.kernels.rows) and the fused CUDA Adam step, against CPU results.

Forward ops are compared with the same call on CPU (ember's CPU kernels), backward helpers with CPU
autograd, and the CUDA Adam/AdamW step with the CPU single-tensor loop, within float tolerances (the
kernels accumulate in float32/float64 in another order than the CPU kernels).
"""

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember._ops._registry import get as get_op

pytestmark = pytest.mark.cuda

TOL = {np.float32: (2e-5, 2e-6), np.float64: (1e-11, 1e-12), np.float16: (2e-3, 2e-3), "bfloat16": (2e-2, 2e-2),
       # float16 Adam: the second moment of small gradients is subnormal in float16, so the kernel (float32 math,
       # float16 state) and the CPU loop (every op rounded to float16) may differ by a fraction of lr per step
       "adam16": (5e-2, 5e-2)}
FLOATS = [np.float32, np.float64, np.float16, "bfloat16"]


@pytest.fixture(scope="module")
def rows():
    ember.cuda.init()
    from ember.cuda.kernels import rows

    rows.register()
    return rows


def _edtype(dtype):
    return ember.bfloat16 if dtype == "bfloat16" else {np.float32: ember.float32, np.float64: ember.float64,
                                                      np.float16: ember.float16}[dtype]


def make(shape, dtype=np.float32, seed=0, scale=3.0):
    """A CPU tensor of normal values of ``dtype``."""
    rng = np.random.default_rng(seed)
    x = ember.from_numpy(np.asarray(rng.standard_normal(shape) * scale, dtype=np.float64))
    return x.to(_edtype(dtype))


def to_cuda(t):
    try:
        return t.to("cuda")
    except TypeError as exc:  # a CuPy without bfloat16
        pytest.skip(str(exc))


def close(actual, expected, dtype):
    rtol, atol = TOL[dtype]
    a = actual.cpu().to(ember.float64).numpy()
    e = expected.cpu().to(ember.float64).numpy()
    assert a.shape == e.shape
    np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)


def _took_kernel(name):
    from ember.cuda import _backend

    assert name not in _backend.generic_ops or get_op(name).kernels["cuda"].__name__ == f"{name}_cuda"


# -- softmax, log_softmax ----------------------------------------------------------------------------------

SOFTMAX_SHAPES = [
    ((7,), 0), ((4, 10), 1), ((64, 33), -1), ((16, 512), 1), ((8, 1000), 1), ((4, 2048), 1), ((3, 8192), 1),
    ((2, 20000), 1), ((5, 7, 9), 1), ((5, 7, 9), 0), ((2, 3, 40), 2), ((300, 40), 0), ((2, 100, 3, 5), 1),
    ((), 0), ((0, 5), 1), ((6, 0), 1),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape, dim", SOFTMAX_SHAPES)
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "softmin"])
def test_softmax_forward(rows, name, shape, dim, dtype):
    x = make(shape, dtype)
    fn = getattr(F, name)
    close(fn(to_cuda(x), dim=dim), fn(x, dim=dim), dtype)
    assert get_op(name).kernels["cuda"].__name__ == f"{name}_cuda"


def test_softmax_dtype_argument_and_strided_input(rows):
    x = make((6, 50), np.float16)
    xc = to_cuda(x)
    close(F.softmax(xc, dim=1, dtype=ember.float32), F.softmax(x, dim=1, dtype=ember.float32), np.float32)
    y = make((40, 30), np.float32)
    close(F.log_softmax(to_cuda(y).t(), dim=1), F.log_softmax(y.t(), dim=1), np.float32)


def test_softmax_special_values(rows):
    x = ember.tensor([[0.0, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf], [np.nan, 1.0, 2.0], [1e30, -1e30, 0.0]])
    for fn in (F.softmax, F.log_softmax):
        a = fn(to_cuda(x), dim=1).cpu().numpy()
        e = fn(x, dim=1).numpy()
        np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape, dim", [((4, 10), 1), ((8, 1000), 1), ((2, 20000), 1), ((5, 7, 9), 1), ((3, 600), 0),
                                        ((300, 40), 0)])
def test_softmax_backward(rows, shape, dim, dtype):
    for name, fn in (("softmax", rows.softmax_backward), ("log_softmax", rows.log_softmax_backward)):
        x = make(shape, dtype).requires_grad_(True)
        g = make(shape, dtype, seed=1)
        y = getattr(F, name)(x, dim=dim)
        y.backward(g)
        dx = fn(to_cuda(g)._data, to_cuda(y.detach())._data, dim)
        # float16: the CPU formula rounds each of its ops to float16, the kernel computes in float32
        close(ember.Tensor._make(dx, ember.device("cuda", 0)), x.grad, "bfloat16" if dtype == np.float16 else dtype)


def test_softmax_autograd_on_cuda(rows):
    x = make((16, 300), np.float32)
    g = make((16, 300), np.float32, seed=2)
    xc = to_cuda(x).requires_grad_(True)
    F.log_softmax(xc, dim=1).backward(to_cuda(g))
    x.requires_grad_(True)
    F.log_softmax(x, dim=1).backward(g)
    close(xc.grad, x.grad, np.float32)


# -- layer_norm --------------------------------------------------------------------------------------------

LN_CASES = [((4, 10), (10,)), ((64, 33), (33,)), ((8, 1000), (1000,)), ((3, 4096), (4096,)), ((2, 20000), (20000,)),
            ((2, 3, 4, 5), (4, 5)), ((5, 6, 1), (1,)), ((0, 8), (8,))]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("affine", ["none", "weight", "both"])
@pytest.mark.parametrize("shape, normalized", LN_CASES)
def test_layer_norm_forward(rows, shape, normalized, affine, dtype):
    x = make(shape, dtype, scale=2.0)
    w = make(normalized, dtype, seed=3) if affine != "none" else None
    b = make(normalized, dtype, seed=4) if affine == "both" else None
    expected = F.layer_norm(x, normalized, w, b, 1e-5)
    actual = F.layer_norm(to_cuda(x), normalized, None if w is None else to_cuda(w), None if b is None else to_cuda(b),
                          1e-5)
    close(actual, expected, dtype)
    assert get_op("layer_norm").kernels["cuda"].__name__ == "layer_norm_cuda"


def test_layer_norm_half_input_float32_params(rows):
    x = make((8, 64), np.float16)
    w, b = make((64,), np.float32, seed=5), make((64,), np.float32, seed=6)
    close(F.layer_norm(to_cuda(x), (64,), to_cuda(w), to_cuda(b)), F.layer_norm(x, (64,), w, b), np.float16)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape, normalized", [((4, 10), (10,)), ((8, 1000), (1000,)), ((2, 20000), (20000,)),
                                               ((2, 3, 4, 5), (4, 5))])
@pytest.mark.parametrize("affine", [False, True])
def test_layer_norm_backward(rows, shape, normalized, affine, dtype):
    x = make(shape, dtype, scale=2.0).requires_grad_(True)
    w = make(normalized, dtype, seed=3).requires_grad_(True) if affine else None
    b = make(normalized, dtype, seed=4).requires_grad_(True) if affine else None
    g = make(shape, dtype, seed=7)
    F.layer_norm(x, normalized, w, b, 1e-5).backward(g)
    mask = (True, affine, affine)
    dx, dw, db = rows.layer_norm_backward_tensor(to_cuda(g), to_cuda(x.detach()), normalized,
                                                 None if w is None else to_cuda(w.detach()), 1e-5, mask)
    loose = {np.float16: "bfloat16"}.get(dtype, dtype)  # float16 parameter gradients sum many rounded terms
    close(dx, x.grad, dtype)
    if affine:
        close(dw, w.grad, loose)
        close(db, b.grad, loose)
    else:
        assert dw is None and db is None


def test_layer_norm_autograd_on_cuda(rows):
    x = make((6, 128), np.float32)
    w, b = make((128,), np.float32, seed=1), make((128,), np.float32, seed=2)
    g = make((6, 128), np.float32, seed=3)
    leaves = [to_cuda(t).requires_grad_(True) for t in (x, w, b)]
    F.layer_norm(leaves[0], (128,), leaves[1], leaves[2]).backward(to_cuda(g))
    cpu = [t.clone().requires_grad_(True) for t in (x, w, b)]
    F.layer_norm(cpu[0], (128,), cpu[1], cpu[2]).backward(g)
    for a, e in zip(leaves, cpu):
        close(a.grad, e.grad, np.float32)


# -- cross_entropy, nll_loss ---------------------------------------------------------------------------------

def _targets(shape, classes, seed=0, dtype=ember.int64, ignore=None):
    rng = np.random.default_rng(seed)
    t = np.asarray(rng.integers(0, classes, size=shape), dtype=np.int64)
    if ignore is not None and t.size:
        t.reshape(-1)[:: 3] = ignore
    return ember.from_numpy(t).to(dtype)


# (64, 1000) and smaller reduce in one single-block launch; (4, 20000) and (70000, 3) take the per-target
# kernel and the reduction kernel
CE_SHAPES = [((8, 10), (8,)), ((64, 1000), (64,)), ((4, 20000), (4,)), ((70000, 3), (70000,)), ((4, 5, 3, 2), (4, 3, 2)),
             ((7,), ()), ((0, 6), (0,)), ((3, 6, 0), (3, 0))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, "bfloat16"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape, tshape", CE_SHAPES)
def test_cross_entropy_forward(rows, shape, tshape, reduction, dtype):
    classes = shape[1] if len(shape) >= 2 else shape[0]
    x = make(shape, dtype)
    for weighted in (False, True):
        for smoothing in (0.0, 0.1):
            for ignore in (-100, 1):
                t = _targets(tshape, classes, ignore=ignore if ignore != -100 else None)
                w = make((classes,), dtype, seed=5).abs() if weighted else None
                kwargs = dict(weight=w, ignore_index=ignore, reduction=reduction, label_smoothing=smoothing)
                expected = F.cross_entropy(x, t, **kwargs)
                kwargs["weight"] = None if w is None else to_cuda(w)
                actual = F.cross_entropy(to_cuda(x), to_cuda(t), **kwargs)
                close(actual, expected, dtype)
    assert get_op("cross_entropy").kernels["cuda"].__name__ == "cross_entropy_cuda"


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape, tshape", CE_SHAPES)
def test_nll_loss_forward(rows, shape, tshape, reduction, dtype):
    classes = shape[1] if len(shape) >= 2 else shape[0]
    x = F.log_softmax(make(shape, dtype), dim=1 if len(shape) >= 2 else 0)
    for weighted in (False, True):
        for ignore in (-100, 2):
            t = _targets(tshape, classes, seed=1, ignore=ignore if ignore != -100 else None)
            w = make((classes,), dtype, seed=5).abs() if weighted else None
            expected = F.nll_loss(x, t, weight=w, ignore_index=ignore, reduction=reduction)
            actual = F.nll_loss(to_cuda(x), to_cuda(t), weight=None if w is None else to_cuda(w), ignore_index=ignore,
                                reduction=reduction)
            close(actual, expected, dtype)


def test_class_losses_uint8_targets_and_errors(rows, monkeypatch):
    x = make((6, 5), np.float32)
    t = _targets((6,), 5, dtype=ember.uint8)
    close(F.cross_entropy(to_cuda(x), to_cuda(t)), F.cross_entropy(x, t), np.float32)
    close(F.nll_loss(to_cuda(x), to_cuda(t)), F.nll_loss(x, t), np.float32)
    bad = ember.tensor([0, 1, 7, 2, 3, 4])
    for fn in (F.cross_entropy, F.nll_loss):
        # the kernel flags the target; the error comes at the next synchronizing call (a host read here)
        loss = fn(to_cuda(x), to_cuda(bad))
        with pytest.raises(IndexError, match="Target 7 is out of bounds"):
            loss.item()
        close(fn(to_cuda(x), to_cuda(t)), fn(x, t), np.float32)  # the flag was reset
        fn(to_cuda(x), to_cuda(bad), reduction="none")
        with pytest.raises(IndexError, match="Target 7 is out of bounds"):
            ember.cuda.synchronize()
        ember.cuda.synchronize()  # reported once
    monkeypatch.setattr(rows, "CHECK_TARGETS", False)
    for fn in (F.cross_entropy, F.nll_loss):
        # unchecked (no wait for the GPU): NaN marks the bad target
        assert np.isnan(fn(to_cuda(x), to_cuda(bad)).item())
        losses = fn(to_cuda(x), to_cuda(bad), reduction="none").cpu().numpy()
        assert np.isnan(losses[2]) and np.isfinite(np.delete(losses, 2)).all()


def test_cross_entropy_probability_targets(rows):
    x = make((5, 7), np.float32)
    p = F.softmax(make((5, 7), np.float32, seed=9), dim=1)
    for smoothing in (0.0, 0.2):
        close(F.cross_entropy(to_cuda(x), to_cuda(p), label_smoothing=smoothing),
              F.cross_entropy(x, p, label_smoothing=smoothing), np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_backward(rows, reduction, dtype):
    for shape in ((8, 10), (16, 3000), (7,)):
        classes = shape[-1]
        tshape = shape[:1] if len(shape) == 2 else ()
        for weighted in (False, True):
            for smoothing in (0.0, 0.1):
                x = make(shape, dtype).requires_grad_(True)
                t = _targets(tshape, classes, seed=2, ignore=1 if len(shape) == 2 else None)
                w = make((classes,), dtype, seed=5).abs() if weighted else None
                loss = F.cross_entropy(x, t, weight=w, ignore_index=1, reduction=reduction, label_smoothing=smoothing)
                g = make(tuple(loss.shape), dtype, seed=3)
                loss.backward(g)
                dx = rows.cross_entropy_backward(
                    to_cuda(g)._data, to_cuda(x.detach())._data, to_cuda(t)._data,
                    None if w is None else to_cuda(w)._data, 1, smoothing, reduction)
                # (float64: the CPU formula multiplies the int64 one-hot by 1 - eps in the default float32)
                close(ember.Tensor._make(dx, ember.device("cuda", 0)), x.grad, np.float32)


def test_cross_entropy_autograd_on_cuda(rows):
    x = make((32, 100), np.float32)
    t = _targets((32,), 100)
    xc = to_cuda(x).requires_grad_(True)
    F.cross_entropy(xc, to_cuda(t), label_smoothing=0.05).backward()
    x.requires_grad_(True)
    F.cross_entropy(x, t, label_smoothing=0.05).backward()
    close(xc.grad, x.grad, np.float32)


# -- fused Adam/AdamW ------------------------------------------------------------------------------------------

ADAM_CASES = [
    dict(), dict(weight_decay=0.1), dict(amsgrad=True), dict(maximize=True, weight_decay=0.01),
    dict(amsgrad=True, weight_decay=0.05, betas=(0.8, 0.99)),
]


def _adam_run(device, dtype, opt_cls, kwargs, steps=4, compute=None, **extra):
    """Parameters and optimizer after ``steps`` steps on ``device``; values drawn in ``dtype``, computed in
    ``compute`` (default ``dtype``)."""
    shapes = [(33, 17), (17,), (1000,), (0,), (4, 5, 6)]
    cast = (lambda t: t) if compute is None else (lambda t: t.to(compute))
    params = [ember.nn.Parameter(cast(make(s, dtype, seed=i, scale=1.0)).to(device)) for i, s in enumerate(shapes)]
    opt = opt_cls(params, lr=0.01, **kwargs, **extra)
    for k in range(steps):
        for i, p in enumerate(params):
            p.grad = cast(make(p.shape, dtype, seed=100 * k + i, scale=1.0)).to(device)
        opt.step()
    return params, opt


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("kwargs", ADAM_CASES)
@pytest.mark.parametrize("opt_name", ["Adam", "AdamW"])
def test_fused_adam_matches_cpu(rows, opt_name, kwargs, dtype):
    from ember.optim import adam as adam_module

    opt_cls = getattr(ember.optim, opt_name)
    # float16: the reference is the CPU loop in float32 from the same float16 values (the float16 CPU loop
    # underflows eps and the second moment to 0 and divides by 0); the kernel keeps float16 state
    compute = ember.float32 if dtype == np.float16 else None
    cpu_params, cpu_opt = _adam_run("cpu", dtype, opt_cls, kwargs, foreach=False, compute=compute)
    cuda_params, cuda_opt = _adam_run("cuda", dtype, opt_cls, kwargs)
    assert adam_module._default_impl(cuda_params, False) is adam_module._fused_adam
    tol = "adam16" if dtype == np.float16 else dtype
    for a, e in zip(cuda_params, cpu_params):
        close(a.detach(), e.detach(), tol)
        sa, se = cuda_opt.state[a], cpu_opt.state[e]
        assert set(sa) == set(se)
        assert float(sa["step"]) == float(se["step"])
        for key in sa:
            if key != "step":
                assert sa[key].device.type == "cuda"
                close(sa[key], se[key], tol)


def test_fused_adam_explicit_fused_and_complex(rows):
    cpu_params, _ = _adam_run("cpu", np.float32, ember.optim.Adam, {}, foreach=False)
    cuda_params, _ = _adam_run("cuda", np.float32, ember.optim.Adam, {}, fused=True)
    for a, e in zip(cuda_params, cpu_params):
        close(a.detach(), e.detach(), np.float32)
    z = ember.nn.Parameter(ember.complex(make((10,), np.float32), make((10,), np.float32, seed=1)))
    zc = ember.nn.Parameter(z.detach().to("cuda"))
    opts = [ember.optim.AdamW([z], lr=0.1, foreach=False), ember.optim.AdamW([zc], lr=0.1)]
    for k in range(3):
        g = ember.complex(make((10,), np.float32, seed=10 + k), make((10,), np.float32, seed=20 + k))
        z.grad, zc.grad = g, g.to("cuda")
        for o in opts:
            o.step()
    np.testing.assert_allclose(zc.detach().cpu().numpy(), z.detach().numpy(), rtol=2e-5, atol=2e-6)


def test_fused_adam_one_launch_per_group(rows, monkeypatch):
    from ember.cuda.kernels import optim_kernels

    calls = []
    real = optim_kernels._kernel

    def counting(dtype):
        k = real(dtype)
        return lambda *a: (calls.append(dtype), k(*a))

    monkeypatch.setattr(optim_kernels, "_kernel", counting)
    _adam_run("cuda", np.float32, ember.optim.Adam, {}, steps=2)
    assert calls == ["float32", "float32"]
