"""Generated Triton kernels run through Triton's interpreter on ember cpu tensors: compiled == eager.

``TRITON_INTERPRET=1`` is set before Triton is imported, and ``config.triton_on_cpu`` sends cpu graphs
through the Triton code generator, so CI (no GPU) runs the whole pipeline: aot, lowering, scheduling,
Triton source, the on-disk module cache, launches on numpy memory. The oracle is numpy (every IR op,
run as a one-op kernel) or ember's eager kernels (whole functions, forward and backward). The same
checks on a GPU are test_triton_cuda.py's (this file skips itself on a GPU backend).

The interpreter is slow (one Python-level run per program): sizes are small; op_db runs every op's first
float32 sample and a hashed sample of other dtypes and backward (:data:`OPDB_OTHER_DTYPE_FRACTION`,
:data:`OPDB_BACKWARD_FRACTION`).
"""

from __future__ import annotations

import os
import zlib

import numpy as np
import pytest

if os.environ.get("EMBER_TEST_BACKEND", "cpu") in ("cuda", "rocm"):
    # a GPU run: Triton compiles for the device (test_triton_cuda.py); the interpreter would be set for the
    # whole process
    pytest.skip("the GPU backend runs test_triton_cuda.py instead of the interpreter", allow_module_level=True)
os.environ.setdefault("TRITON_INTERPRET", "1")  # before Triton is imported: its jit reads it then
triton = pytest.importorskip("triton", reason="Triton is not installed (pip install ember-inductor[triton])")

from _triton_cases import (  # noqa: E402
    INT_CASES,
    OP_CASES,
    REDUCTIONS,
    VARIANTS,
    check,
    check_layer_norm_grads,
    compile_checked,
    flat_tensors,
    run_op,
    sample_function,
)

import ember  # noqa: E402
from ember._inductor import autotune, config, ir  # noqa: E402
from ember._inductor.codegen import triton as tgen  # noqa: E402
from ember._inductor.compile_fx import compile_fx  # noqa: E402
from ember._inductor.runtime import triton_graph, triton_launch  # noqa: E402
from ember.fx.experimental.proxy_tensor import make_fx  # noqa: E402
from ember.testing import assert_close, op_db  # noqa: E402

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
pytestmark = pytest.mark.skipif(not INTERPRETED, reason="TRITON_INTERPRET was set to something else than 1")

#: op_db: every op in float32 (first sample); one op in OPDB_OTHER_DTYPE_FRACTION also in one other dtype
#: it supports, one differentiable op in OPDB_BACKWARD_FRACTION backward in float64 (chosen by a hash of
#: the name: stable across runs, and the choice of dtype rotates through the op's dtypes).
OPDB_OTHER_DTYPE_FRACTION = 2
OPDB_BACKWARD_FRACTION = 4


@pytest.fixture(autouse=True)
def _triton_on_cpu():
    with config.patch(triton_on_cpu=True, fallback_on_compile_error=False):
        yield


@pytest.fixture
def launches(monkeypatch):
    """The kernels launched (by name), so a test knows the Triton path ran (not C++ or eager)."""
    names = []
    real = triton_launch.launch

    def counting(fn, kernel, *args, **kwargs):
        names.append(kernel.name)
        return real(fn, kernel, *args, **kwargs)

    monkeypatch.setattr(triton_launch, "launch", counting)
    return names


def test_every_ir_op_has_a_case():
    assert set(OP_CASES) == set(ir.OPS)


@pytest.mark.parametrize("name", sorted(OP_CASES))
def test_ir_op_matches_numpy(name):
    oracle, arrays, out_dtype = OP_CASES[name]
    if name == "erfinv":
        pytest.importorskip("scipy", reason="erfinv's oracle is scipy.special.erfinv")
    n = min(len(a) for a in arrays)
    arrays = [np.ascontiguousarray(a[:n]) for a in arrays]
    got = run_op(name, arrays, out_dtype)
    with np.errstate(all="ignore"):
        want = np.asarray(oracle(*arrays)).astype(got.dtype)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=2e-6, atol=2e-6,
                               err_msg=name)


@pytest.mark.parametrize("name", sorted(INT_CASES))
def test_integer_op_matches_numpy(name):
    oracle, arrays, out_dtype = INT_CASES[name]
    got = run_op(name, list(arrays), out_dtype)
    with np.errstate(all="ignore"):  # NaN and out-of-range casts give INT64_MIN on x86, as eager's
        want = np.asarray(oracle(*arrays)).astype(np.int64)
    np.testing.assert_array_equal(got, want, err_msg=name)


def test_float_to_narrow_integer_keeps_the_low_bits_of_the_32_bit_conversion():
    x = np.array([300.0, -1.5, 70000.0, np.nan], np.float32)
    got = run_op("to_dtype", [x], ember.int8)
    np.testing.assert_array_equal(got, np.array([44, -1, 112, 0], np.int8))


def test_nan_propagates_through_maximum_and_minimum():
    a = np.array([np.nan, 1.0, 2.0, np.nan], np.float32)
    b = np.array([1.0, np.nan, 3.0, np.nan], np.float32)
    np.testing.assert_array_equal(run_op("maximum", [a, b], ember.float32), np.maximum(a, b))
    np.testing.assert_array_equal(run_op("fmin", [a, b], ember.float32), np.fmin(a, b))


# --------------------------------------------------------------------------------------------
# whole functions through compile_fx


def test_pointwise_chain_with_broadcasting(launches):
    x, y = ember.randn(5, 7), ember.randn(7)
    check(lambda a, b: ember.sigmoid(a) * b + ember.tanh(a - 1), x, y)
    assert launches, "no Triton kernel ran"


def test_permuted_and_sliced_inputs():
    x = ember.randn(6, 8)
    check(lambda a: a.t().exp() * 2, x)
    check(lambda a: a[1:5, ::2] + a[1:5, 1::2], x)
    base = ember.randn(4, 10)
    check(lambda a: ember.relu(a) - 1, base[:, 2:7])  # a strided input (the kernel indexes its strides)


def test_inputs_in_another_layout_are_copied_into_the_examples():
    x = ember.randn(4, 6)
    gm = make_fx(lambda a: a * 2 + 1)(x)
    compiled = triton_graph.compile_graph_triton(gm, [x])
    other = ember.randn(6, 4).t()  # same shape, transposed strides
    got = compiled(other)
    assert_close(got if isinstance(got, ember.Tensor) else got[0], other * 2 + 1)
    expanded = ember.randn(1, 6).expand(4, 6)
    gm = make_fx(lambda a: a * 2 + 1)(expanded)
    compiled = triton_graph.compile_graph_triton(gm, [expanded])
    with pytest.raises(ValueError, match="expanded"):
        compiled(ember.randn(4, 6))


def test_scalar_output_and_constants():
    check(lambda a: (a * 3).sum() + 1, ember.randn(10), rtol=1e-5)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("rtype", sorted(REDUCTIONS))
def test_reduction_types_and_variants(rtype, variant, monkeypatch, launches):
    rows, length = VARIANTS[variant]
    if variant == "split" and rtype in ("argmax", "argmin"):
        variant = "looped"  # an argmax is never split (the partials would need their indices)
    kinds = []
    real_generate = tgen._KernelGen.generate

    def recording(self):
        out = real_generate(self)
        kinds.extend(k.kind for k in out)
        return out

    monkeypatch.setattr(tgen._KernelGen, "generate", recording)
    small = [{"XBLOCK": 2, "RBLOCK": 256, "num_warps": 4}]  # several loop iterations per row
    if variant != "persistent":
        real_configs = autotune.configs
        monkeypatch.setattr(autotune, "configs", lambda kind, x, r: small if kind in ("looped", "split")
                            else real_configs(kind, x, r))
    x = ember.randn(rows, length)
    if rtype in ("argmax", "argmin"):
        x[0, 3] = x[0, length - 2] = 50.0 if rtype == "argmax" else -50.0  # ties: the first index wins
    check(REDUCTIONS[rtype], x, rtol=1e-4, atol=1e-4)
    expected = {"split": "split", "looped": "looped", "persistent": "persistent"}[variant]
    assert expected in kinds, (variant, kinds)


def test_integer_division_by_zero_raises_like_eager():
    a, b = ember.tensor([5, 3]), ember.tensor([1, 2])

    def fn(x, y):
        return ember.floor_divide(x, y), ember.remainder(x, y), ember.fmod(x, y), (x * 2).sum() // y

    gm = make_fx(fn)(a, b)
    compiled = triton_graph.compile_graph_triton(gm, [a, b])
    assert "ember_err_ptr" in compiled.source
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        fn(a, ember.tensor([0, 2]))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        compiled(a, ember.tensor([0, 2]))
    got = compiled(a, b)  # the flag is the call's own: nothing left over from the failed call
    assert [t.tolist() for t in got] == [t.tolist() for t in fn(a, b)]


def test_argmax_with_nan_picks_the_first_nan():
    x = ember.randn(3, 40)
    x[1, 7] = float("nan")
    x[1, 20] = float("nan")
    check(lambda a: a.argmax(1), x)
    check(lambda a: a.amax(1), x)


def test_softmax_forward_and_backward():
    x = ember.randn(4, 33, requires_grad=True)
    compiled = compile_checked(lambda a: ember.softmax(a, -1), x)
    y = compiled(x)
    (y * ember.arange(33.0)).sum().backward()
    g_compiled = x.grad.clone()
    x.grad = None
    ref = ember.softmax(x, -1)
    (ref * ember.arange(33.0)).sum().backward()
    assert_close(y, ref, rtol=1e-5, atol=1e-6)
    assert_close(g_compiled, x.grad, rtol=1e-4, atol=1e-5)


def test_layer_norm_forward_and_backward():
    x = ember.randn(6, 20, requires_grad=True)
    w = ember.randn(20, requires_grad=True)
    b = ember.randn(20, requires_grad=True)

    def fn(a, weight, bias):
        return ember.nn.functional.layer_norm(a, (20,), weight, bias)

    compiled = compile_checked(fn, x, w, b)
    out = compiled(x, w, b)
    (out * out).sum().backward()
    grads = [t.grad.clone() for t in (x, w, b)]
    for t in (x, w, b):
        t.grad = None
    ref = fn(x, w, b)
    (ref * ref).sum().backward()
    assert_close(out, ref, rtol=1e-4, atol=1e-5)
    for g, t in zip(grads, (x, w, b)):
        assert_close(g, t.grad, rtol=1e-4, atol=1e-4)


def test_looped_layer_norm_forward_and_backward():
    # rows longer than the persistent limit: two loops, the row's statistics hoisted out of the second
    n = tgen.PERSISTENT_LIMIT + 200
    check_layer_norm_grads((ember.randn(3, n) * 3 + 5).requires_grad_(True), ember.randn(n, requires_grad=True))


def _grads_match(model, compiled_out, eager_fn, loss_fn):
    grads = [p.grad.clone() for p in model.parameters()]
    for p in model.parameters():
        p.grad = None
    ref = eager_fn()
    loss_fn(ref).backward()
    assert_close(compiled_out, ref, rtol=1e-4, atol=1e-4)
    for g, p in zip(grads, model.parameters()):
        assert_close(g, p.grad, rtol=1e-3, atol=1e-4)


def test_transformer_layer_and_cnn_forward_and_backward(launches):
    ember.manual_seed(0)
    layer = ember.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    x = ember.randn(2, 5, 16)
    compiled = compile_fx(layer, [x])
    out = compiled(x)
    out.sum().backward()
    assert compiled.fallbacks == [] and launches
    _grads_match(layer, out, lambda: layer(x), lambda t: t.sum())

    net = ember.nn.Sequential(ember.nn.Conv2d(1, 4, 3), ember.nn.BatchNorm2d(4), ember.nn.ReLU(),
                              ember.nn.MaxPool2d(2), ember.nn.Flatten(), ember.nn.Linear(36, 10))
    images, labels = ember.randn(3, 1, 8, 8), ember.tensor([1, 2, 3])
    compiled = compile_fx(net, [images])
    out = compiled(images)
    ember.nn.functional.cross_entropy(out, labels).backward()
    assert compiled.fallbacks == []
    _grads_match(net, out, lambda: net(images), lambda t: ember.nn.functional.cross_entropy(t, labels))


@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16], ids=["float16", "bfloat16"])
def test_half_inputs(dtype):
    x = ember.randn(4, 24).to(dtype)
    y = ember.randn(24).to(dtype)
    check(lambda a, b: a * b + 1, x, y, rtol=1e-2, atol=1e-2)
    check(lambda a: a.sum(1), x, rtol=2e-2, atol=2e-2)
    check(lambda a: ember.softmax(a.float(), -1).to(dtype), x, rtol=1e-2, atol=1e-2)


def test_extern_calls_between_kernels(launches):
    a, b = ember.randn(5, 6), ember.randn(6, 3)
    check(lambda x, w: ember.relu(x * 2) @ w + 1, a, b, rtol=1e-5, atol=1e-5)
    assert len(launches) >= 2  # a prologue and an epilogue around the matmul


def test_extern_calls_of_a_fixed_size_graph_skip_the_dispatcher(monkeypatch):
    # the kernel runs without the meta function's checks (made when the graph was traced): host time on cuda
    a, b = ember.randn(5, 6), ember.randn(6, 3)
    compiled = compile_checked(lambda x, w: ember.relu(x * 2) @ w + 1, a, b)
    expected = ember.relu(a * 2) @ b + 1
    op = ember._ops.registry["matmul"]
    calls = []
    meta = op.meta
    monkeypatch.setattr(op, "meta", lambda *args, **kwargs: calls.append(1) or meta(*args, **kwargs))
    assert_close(compiled(a, b), expected, rtol=1e-5, atol=1e-5)
    assert calls == []
    assert_close(ember.matmul(a, b), a @ b)  # eager calls still check
    assert calls


def test_intermediates_share_memory_as_the_scheduler_planned():
    x, w = ember.randn(16, 16), ember.randn(16, 16)

    def fn(a, w):
        h = ember.matmul(ember.exp(a), w)
        h = ember.matmul(ember.exp(h * 0.01), w)
        return ember.matmul(ember.exp(h * 0.01), w)

    gm = make_fx(fn)(x, w)
    compiled = triton_graph.compile_graph_triton(gm, [x, w])
    shared = [slot for slot in compiled.scheduler.storage.values()
              if list(compiled.scheduler.storage.values()).count(slot) > 1]
    assert shared, compiled.scheduler.storage  # some slot holds two buffers, one after the other
    assert len(compiled._slots) < len(compiled._slot_views)
    out = compiled(x, w)
    assert_close(out if isinstance(out, ember.Tensor) else out[0], fn(x, w), rtol=1e-5, atol=1e-5)


def test_debug_folder_shows_the_triton_source(tmp_path):
    with config.patch(debug=True, debug_dir=str(tmp_path)):
        compile_checked(lambda a: a.exp() + 1, ember.randn(3, 4))(ember.randn(3, 4))
    files = sorted(tmp_path.rglob("*triton*.txt"))
    assert files, "no Triton stage in the debug folder"
    text = files[0].read_text()
    assert "@triton.jit" in text and "tl.store(" in text


def test_module_is_cached_on_disk_with_the_autotune_choice(tmp_path):
    with config.patch(cache_dir=str(tmp_path)):
        x = ember.randn(3, 4)
        gm = make_fx(lambda a: a * 2 + 1)(x)
        g = triton_graph.compile_graph_triton(gm, [x])
        assert_close(g(x)[0] if isinstance(g(x), tuple) else g(x), x * 2 + 1)
        path = triton_launch.module_path(g.source)
        assert path.exists() and path.read_text() == g.source
        assert str(tmp_path) in g.module.__file__
        # under the interpreter nothing is benchmarked: the first config, no file
        assert g.autotuner.benchmarked == 0


# --------------------------------------------------------------------------------------------
# op_db


def _other_dtype(info):
    """One dtype besides float32 for this op, picked by a hash of its name (stable across runs)."""
    others = [d for d in info.dtypes if d != ember.float32 and not d.is_complex]
    return others[zlib.crc32(info.name.encode()) % len(others)] if others else None


def _opdb_cases():
    for name in sorted(op_db):
        info = op_db[name]
        if ember.float32 in info.dtypes:
            yield pytest.param(info, ember.float32, id=f"{name}-float32")
        other = _other_dtype(info)
        if other is not None and zlib.crc32(name.encode()) % OPDB_OTHER_DTYPE_FRACTION == 0:
            yield pytest.param(info, other, id=f"{name}-{other.name}")


@pytest.mark.parametrize("info, dtype", list(_opdb_cases()))
def test_opdb_sample(info, dtype):
    sample = next(iter(info.sample_inputs(info, "cpu", dtype, False)), None)
    if sample is None:
        pytest.skip(f"{info.name} has no {dtype} sample")
    fn, tensors = sample_function(info, sample)
    random = "random" in getattr(info.op, "tags", ())
    if random:
        ember.manual_seed(0)
    try:
        want = flat_tensors(fn(*tensors))
    except TypeError as exc:
        pytest.skip(f"the op returns a {exc}, not tensors: nothing to compile")
    # strict (the autouse fixture): a compiler bug raises; only known limits (data-dependent shapes) run eagerly
    gm = make_fx(lambda *a: tuple(flat_tensors(fn(*a))))(*tensors)
    with config.patch(fallback_random=True):  # random ops draw eager's numbers (compiled on the first call)
        compiled = compile_fx(gm, list(tensors), name=info.name)
        if random:
            ember.manual_seed(0)
        got = flat_tensors(compiled(*tensors))
    tol = info.tolerance(dtype) or ((1e-2, 1e-2) if dtype in (ember.float16, ember.bfloat16) else (None, None))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape)
        if info.name.startswith("empty") or info.name.startswith("new_empty"):
            continue
        assert_close(g, w, rtol=tol[0], atol=tol[1], equal_nan=True)


def _backward_cases():
    for name in sorted(op_db):
        info = op_db[name]
        if info.supports_autograd and ember.float64 in info.dtypes and \
                zlib.crc32(name.encode()) % OPDB_BACKWARD_FRACTION == 0:
            yield pytest.param(info, id=name)


@pytest.mark.parametrize("info", list(_backward_cases()))
def test_opdb_backward_sample(info):
    sample = next(iter(info.sample_inputs(info, "cpu", ember.float64, True)), None)
    if sample is None:
        pytest.skip(f"{info.name} has no float64 sample")
    fn, tensors = sample_function(info, sample)
    leaves = [t.detach().requires_grad_(t.is_floating_point()) for t in tensors]
    try:
        outs = [o for o in flat_tensors(fn(*leaves)) if o.requires_grad]
        if not outs:
            pytest.skip("no differentiable output")
        cotangents = [ember.ones_like(o) * 0.5 for o in outs]
        want = ember.autograd.grad(outs, [t for t in leaves if t.requires_grad], cotangents, allow_unused=True)
    except (TypeError, NotImplementedError) as exc:
        pytest.skip(f"no eager derivative to compare with: {exc}")
    leaves2 = [t.detach().requires_grad_(t.is_floating_point()) for t in tensors]
    gm = make_fx(lambda *a: tuple(o for o in flat_tensors(fn(*a))))(*leaves2)
    compiled = compile_fx(gm, list(leaves2), name=info.name)
    outs2 = [o for o in compiled(*leaves2) if o.requires_grad]
    got = ember.autograd.grad(outs2, [t for t in leaves2 if t.requires_grad], cotangents, allow_unused=True)
    for g, w in zip(got, want):
        if w is None:
            continue
        assert_close(g, w, rtol=1e-6, atol=1e-6, equal_nan=True)


def test_a_failing_extern_call_is_named_in_its_error():
    # what a CUDA-graph capture that refuses a call logs (cudagraphs.py reads the note)
    x, i = ember.randn(5, 3), ember.tensor([1, 4])
    compiled = compile_checked(lambda a, idx: a[idx] * 2, x, i)
    with pytest.raises(IndexError) as info:
        compiled(x, ember.tensor([1, 7]))
    if hasattr(info.value, "add_note"):
        assert any("extern call of index" in note for note in info.value.__notes__)


def test_random_constants_are_triton_constexpr_objects():
    # a GPU's Triton refuses a global annotated ``: tl.constexpr`` (the interpreter accepts it)
    from ember._inductor.runtime import triton_random

    for name in ("_M0", "_M1", "_W0", "_W1"):
        assert isinstance(getattr(triton_random, name), triton.language.constexpr), name


def test_per_row_integer_division_in_a_looped_kernel_flags_a_zero_divisor():
    # a row-invariant integer division stays inside the loop (its zero flag uses the row's mask)
    n = tgen.PERSISTENT_LIMIT + 100
    x, d = ember.randn(3, n), ember.randint(1, 5, (3, n))

    def fn(a, b):
        return (a * (b[:, 1:2] // b[:, :1])).sum(1)  # the quotient, per row, inside the reduction's loop

    compiled = compile_checked(fn, x, d)
    assert_close(compiled(x, d), fn(x, d), rtol=1e-4, atol=1e-4)
    d[1, 0] = 0
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        compiled(x, d)
