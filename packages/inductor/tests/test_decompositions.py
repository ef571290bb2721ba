"""The decomposition table: every op_db op traced with it leaves only core ops and equals eager."""

from __future__ import annotations

import operator
import warnings

import pytest

import ember
from ember._inductor.aot import decompositions as decomps
from ember._inductor.aot.decompositions import (
    CORE_OPS,
    KEEP_WHOLE,
    OVERRIDES,
    PRIM_DECOMPOSITIONS,
    get_decompositions,
    inductor_decompositions,
    reaches_lowering,
)
from ember._ops import registry
from ember.fx.experimental.proxy_tensor import make_fx
from ember.testing import assert_close, op_db
from ember.utils import _pytree as pytree

TABLE = inductor_decompositions()

# Values that are not defined by the op (uninitialised memory): compare metadata only.
_UNDEFINED_VALUES = {"empty", "empty_like", "empty_strided"}


def _sample_dtypes(info):
    """float32 (when supported) and one more dtype per op, rotating through its list so the whole
    op_db covers integers, bool, half and complex without running every dtype of every op."""
    dtypes = list(info.dtypes)
    chosen = [ember.float32] if ember.float32 in dtypes else []
    other = dtypes[sum(map(ord, info.name)) % len(dtypes)]
    if other not in chosen:
        chosen.append(other)
    return chosen


def _trace(op, sample, table):
    """``(gm, tensors)``: ``op`` on ``sample`` traced by make_fx, its tensors as placeholders."""
    flat, spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
    positions = [i for i, v in enumerate(flat) if isinstance(v, ember.Tensor)]

    def call(*tensors):
        values = list(flat)
        for i, t in zip(positions, tensors):
            values[i] = t
        input, args, kwargs = pytree.tree_unflatten(values, spec)
        result = op(input, *args, **kwargs)
        return tuple(result) if isinstance(result, tuple) else result  # namedtuples as plain tuples

    tensors = [flat[i] for i in positions]
    return make_fx(call, decomposition_table=table)(*tensors), tensors


def _graph_ops(gm):
    return {n.target.name for n in gm.graph.nodes if n.op == "call_function" and n.target is not operator.getitem}


# Each prim of a decomposition rounds to a half type where the eager op's kernel computes in float32
# and rounds once (the compiler's generated code also computes half types in float32): looser bounds.
_HALF_TOLERANCE = (5e-2, 1e-3)


def _tolerance(info, dtype):
    if dtype in (ember.float16, ember.bfloat16):
        return info.tolerance(dtype) or _HALF_TOLERANCE
    return info.tolerance(dtype)


def _compare(name, label, actual, expected, tolerance):
    if isinstance(expected, ember.Tensor):
        assert isinstance(actual, ember.Tensor), label
        assert actual.shape == expected.shape and actual.dtype == expected.dtype, label
        if name in _UNDEFINED_VALUES:
            return
        rtol, atol = tolerance if tolerance else (None, None)
        assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True, msg=label)
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), label
        for a, e in zip(actual, expected):
            _compare(name, label, a, e, tolerance)
    else:
        assert actual == expected, label


@pytest.mark.parametrize("name", sorted(op_db))
def test_opdb_decomposes_to_core_and_matches_eager(name):
    info = op_db[name]
    op = info.op
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for dtype in _sample_dtypes(info):
            for sample in list(info.sample_inputs(info, "cpu", dtype, False))[:4]:
                gm, tensors = _trace(op, sample, TABLE)
                outside = _graph_ops(gm) - CORE_OPS
                assert not outside, f"{name} ({dtype}): {sorted(outside)} reach lowering outside CORE_OPS"
                expected = sample.call(op)
                expected = tuple(expected) if isinstance(expected, tuple) else expected
                _compare(name, f"{name} {dtype} {sample!r}", gm(*tensors), expected, _tolerance(info, dtype))


@pytest.mark.parametrize("name", sorted(set(PRIM_DECOMPOSITIONS) | set(OVERRIDES)))
def test_own_decompositions_all_dtypes(name):
    """Our decompositions against the eager op on every op_db dtype and sample."""
    info = op_db[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for dtype in info.dtypes:
            for sample in info.sample_inputs(info, "cpu", dtype, False):
                gm, tensors = _trace(info.op, sample, TABLE)
                assert name not in _graph_ops(gm), f"{name} was not decomposed"
                _compare(name, f"{name} {dtype} {sample!r}", gm(*tensors), sample.call(info.op), _tolerance(info, dtype))


def _decomposed(fn, *args):
    gm = make_fx(fn, decomposition_table=TABLE)(*args)
    return gm, gm(*args)


def test_sigmoid_extremes_and_structure():
    x = ember.tensor([-1000.0, -30.0, 0.0, 30.0, 1000.0, float("nan")])
    gm, out = _decomposed(ember.sigmoid, x)
    assert [n.target.name for n in gm.graph.nodes if n.op == "call_function"] == ["neg", "exp", "add", "reciprocal"]
    assert_close(out, ember.sigmoid(x), equal_nan=True)
    assert out[0].item() == 0.0 and out[4].item() == 1.0


def test_clamp_nan_and_crossed_bounds():
    x = ember.tensor([float("nan"), -2.0, 0.5, 3.0])
    for kwargs in ({"min": 0.0, "max": 1.0}, {"min": 1.0, "max": 0.0}, {"max": ember.tensor([0.0, 0.0, 0.0, 5.0])}):
        _, out = _decomposed(lambda t, kw=kwargs: ember.clamp(t, **kw), x)
        assert_close(out, ember.clamp(x, **kwargs), equal_nan=True)
    ints = ember.tensor([-3, 0, 7])
    _, out = _decomposed(lambda t: ember.clamp(t, min=0.5), ints)
    assert out.dtype == ember.float32 and out.tolist() == [0.5, 0.5, 7.0]


def test_lerp_exact_at_ends():
    start = ember.tensor([1e8, -3.0, 0.1])
    end = ember.tensor([1.0, 7.0, 0.3])
    for weight in (0.0, 1.0, ember.tensor([0.0, 1.0, 0.75])):
        _, out = _decomposed(lambda a, b, w=weight: ember.lerp(a, b, w), start, end)
        assert_close(out, ember.lerp(start, end, weight), rtol=0, atol=0)


def test_var_corrections():
    x = ember.randn(3, 4, dtype=ember.float64)
    for kwargs in ({}, {"dim": 1, "correction": 0}, {"dim": (0, 1), "keepdim": True}, {"dim": 0, "correction": 5}):
        _, out = _decomposed(lambda t, kw=kwargs: ember.var(t, **kw), x)
        assert_close(out, ember.var(x, **kwargs), equal_nan=True)



def test_var_mean_reads_its_input_once():
    # the two sibling sums of one shifted pass give both statistics (layer_norm's backward recomputes them)
    x = ember.randn(4, 6, 32)
    gm, (var, mean) = _decomposed(lambda t: ember.var_mean(t, -1, correction=0, keepdim=True), x)
    assert [n.target.name for n in gm.graph.nodes if n.op == "call_function"].count("sum") == 2
    want_var, want_mean = ember.var_mean(x, -1, correction=0, keepdim=True)
    assert_close(var, want_var)
    assert_close(mean, want_mean)

def test_core_set_is_closed():
    """Every functional registry op is decomposed by the table or reaches lowering in CORE_OPS."""
    unknown = CORE_OPS - set(registry)
    assert not unknown, f"CORE_OPS names ops the registry lacks: {sorted(unknown)}"
    for op in registry.values():
        if op.kind == "inplace":
            continue  # functionalization (aot/functionalize.py) removes mutations before decomposition
        assert (op in TABLE) != reaches_lowering(op), op.name
        assert op in TABLE or op.name in CORE_OPS, f"{op.name} is neither decomposed nor in CORE_OPS"


def test_table_entries():
    for name, reason in KEEP_WHOLE.items():
        assert registry[name].category == "composite" and reason
        assert registry[name] not in TABLE and reaches_lowering(name)
    for name, fn in OVERRIDES.items():
        assert registry[name].category == "composite" and TABLE[registry[name]].__wrapped__ is fn
    for name, fn in PRIM_DECOMPOSITIONS.items():
        assert registry[name].category == "prim" and TABLE[registry[name]].__wrapped__ is fn
        assert name not in CORE_OPS
    assert TABLE[registry["gelu"]].__wrapped__ is registry["gelu"].decomposition
    assert not reaches_lowering("gelu") and reaches_lowering("matmul")
    assert inductor_decompositions() is not inductor_decompositions()  # callers may edit their copy


def test_get_decompositions():
    picked = get_decompositions(["gelu", registry["sigmoid"], "matmul", "scaled_dot_product_attention"])
    assert picked == {registry["gelu"]: TABLE[registry["gelu"]], registry["sigmoid"]: TABLE[registry["sigmoid"]]}
    assert picked[registry["sigmoid"]].__wrapped__ is decomps._sigmoid
    with pytest.raises(TypeError, match="not_an_op"):
        get_decompositions(["not_an_op"])
    with pytest.raises(TypeError, match="registry Op"):
        reaches_lowering(3)


@pytest.mark.parametrize(
    ("fn", "error", "match"),
    [
        (lambda x: ember.masked_fill(x, x, 1.0), RuntimeError, "boolean masks"),
        (lambda x: ember.clamp(x), RuntimeError, "At least one of 'min' or 'max'"),
        (lambda x: ember.nn.functional.gelu(x, approximate="fast"), RuntimeError, "approximate"),
        (lambda x: ember.addcdiv(x.long(), x.long(), x.long()), RuntimeError, "Integer division"),
    ],
)
def test_decomposed_calls_raise_the_eager_error(fn, error, match):
    """A tracer calls table entries directly: each entry runs the op's checks first, as eager does."""
    x = ember.randn(3)
    with pytest.raises(error, match=match):
        fn(x)  # eager
    with pytest.raises(error, match=match):
        make_fx(fn, decomposition_table=TABLE)(x)
