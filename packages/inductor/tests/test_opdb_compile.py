"""Every op of ``ember.testing.op_db`` through ``compile_fx``: compiled equals eager.

For each op, the sample's tensors become the inputs of a function that calls
the op (everything else of the sample is a constant), ``make_fx`` traces it,
and :func:`~ember._inductor.compile_fx.compile_fx` compiles it (aot autograd,
decompositions, partition, lowering, C++). The compiled function must give
eager's values, shapes, dtypes and strides (but for the gaps of :data:`STRIDE_DIFFERENCES`).

What runs, to keep the file near 90 s once the kernel cache is warm:

* forward: the first :data:`FLOAT32_SAMPLES` samples in float32 and the first
  sample in ONE other dtype the op supports (chosen per op by a hash of its
  name, so together the ops cover every dtype);
* backward: float64, first sample, for the differentiable ops of a subset
  (:func:`_in_backward_subset`): vector-Jacobian products of the compiled
  function against eager autograd's;
* the table test: every op that reaches the lowering after aot (on every op's
  first sample) is in ``lowering.lowerings`` or ``lowering.fallbacks``, and so
  is every op of the decompositions' ``CORE_OPS``.

The compiler's failures fail these tests (``fallback_on_compile_error`` off);
known gaps are strict xfails in :data:`KNOWN_FAILURES`, each with its reason.
Samples whose op returns a Python value (``equal``, ``item``-like ops) have
nothing to compile and are skipped with that reason.
"""

from __future__ import annotations

import zlib

import pytest

import ember
from ember._inductor import config
from ember._inductor.compile_fx import compile_fx
from ember.fx.experimental.proxy_tensor import make_fx
from ember.testing import assert_close, op_db

OPS = sorted(op_db)
FLOAT32_SAMPLES = 2
OTHER_SAMPLES = 1

#: (op name, "forward"/"backward", dtype name or None for all) -> reason: strict xfails.
KNOWN_FAILURES: dict[tuple[str, str, str | None], str] = {}

_DATA_DEPENDENT = "the output's shape depends on the input's values: aot cannot trace it on meta tensors"
_BACKWARD_READS = (
    "its derivative formula reads tensor values (a zero test, a masked_select): the backward can't be traced"
)
_BACKWARD_WORD = "backward pass"

#: op name -> (why its graph runs eagerly, a word the logged reason contains). Only these ops may
#: fall back to eager for a whole graph; every other op must compile (its unsupported parts being
#: extern calls inside the compiled graph, listed in ``lowering.fallbacks``).
EAGER_GRAPHS: dict[str, tuple[str, str]] = {
    "argwhere": (_DATA_DEPENDENT, "argwhere"),
    "nonzero": (_DATA_DEPENDENT, "nonzero"),
    "masked_select": (_DATA_DEPENDENT, "masked_select"),
    "unique": (_DATA_DEPENDENT, "unique"),
    "unique_consecutive": (_DATA_DEPENDENT, "unique_consecutive"),
    "bincount": (_DATA_DEPENDENT, "bincount"),
    "one_hot": (f"num_classes=-1 (inferred from the values): {_DATA_DEPENDENT}", "num_classes"),
    # backward formulas that read values (aot traces the backward on meta tensors too)
    "cumprod": (_BACKWARD_READS, _BACKWARD_WORD),
    "linalg_svd": (_BACKWARD_READS, _BACKWARD_WORD),
    "linalg_vander": (_BACKWARD_READS, _BACKWARD_WORD),
    "masked_scatter": (_BACKWARD_READS, _BACKWARD_WORD),
}

#: The C++ backend has no complex dtypes: any graph with a complex value runs eagerly (its
#: reason names the complex dtype), whatever the op.
COMPLEX_RULE = "complex"

#: Ops whose values are uninitialized memory: only shapes and dtypes are compared.
UNINITIALIZED = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})

#: op name -> why the compiled output's strides differ from eager's (the values agree): known gaps.
#: Every other op must give eager's strides (those of dimensions longer than 1).
#: Compiled outputs take the layout of the graph's meta values where it is a dense permutation
#: (empty_strided's requested strides, rot90's transposed view, LAPACK's column-major results), so
#: only ops whose meta function disagrees with eager could differ: none in op_db now.
STRIDE_DIFFERENCES: dict[str, str] = {}


#: Ops whose backward is always checked (the others: a third of them, by a hash of the name).
BACKWARD_ALWAYS = frozenset(
    {
        "add",
        "mul",
        "div",
        "sub",
        "exp",
        "log",
        "tanh",
        "sigmoid",
        "relu",
        "sum",
        "mean",
        "amax",
        "softmax",
        "log_softmax",
        "matmul",
        "mm",
        "bmm",
        "where",
        "cat",
        "stack",
        "transpose",
        "reshape",
        "expand",
        "index_select",
        "gather",
        "nn.functional.gelu",
        "nn.functional.layer_norm",
        "nn.functional.linear",
        "nn.functional.conv2d",
        "nn.functional.cross_entropy",
        "nn.functional.silu",
        "var",
        "pow",
    }
)


def _in_backward_subset(name: str) -> bool:
    return name in BACKWARD_ALWAYS or zlib.crc32(name.encode()) % 3 == 0


def _other_dtype(info):
    """One dtype besides float32 for this op, picked by a hash of its name (stable across runs)."""
    others = [d for d in info.dtypes if d != ember.float32]
    if not others:
        return None
    return others[zlib.crc32(info.name.encode()) % len(others)]


def _cases():
    for name in OPS:
        info = op_db[name]
        dtypes = [(d, FLOAT32_SAMPLES) for d in (ember.float32,) if d in info.dtypes]
        other = _other_dtype(info)
        if other is not None:
            dtypes.append((other, OTHER_SAMPLES))
        for dtype, count in dtypes:
            marks = _xfail_marks(name, "forward", dtype)
            yield pytest.param(info, dtype, count, id=f"{name}-{dtype.name}", marks=marks)


def _backward_cases():
    for name in OPS:
        info = op_db[name]
        if info.supports_autograd and ember.float64 in info.dtypes and _in_backward_subset(name):
            yield pytest.param(info, id=name, marks=_xfail_marks(name, "backward", ember.float64))


def _xfail_marks(name, kind, dtype):
    for key in ((name, kind, dtype.name), (name, kind, None)):
        if key in KNOWN_FAILURES:
            return [pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[key])]
    return []


# --------------------------------------------------------------------------- a sample as a function


def _is_tensor(value):
    return isinstance(value, ember.Tensor)


def _leaves(value, found):
    """Append the tensors of ``value`` (a tensor, or lists/tuples/dicts of them) to ``found``."""
    if _is_tensor(value):
        found.append(value)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _leaves(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            _leaves(item, found)
    return found


def _rebuild(value, tensors):
    """``value`` with its tensors replaced, in order, by the next ones of the iterator ``tensors``."""
    if _is_tensor(value):
        return next(tensors)
    if isinstance(value, (list, tuple)):
        return type(value)(_rebuild(item, tensors) for item in value)
    if isinstance(value, dict):
        return {key: _rebuild(item, tensors) for key, item in value.items()}
    return value


def _as_function(info, sample):
    """``(fn, tensors)``: ``fn(*tensors)`` calls the op on the sample with those tensors in place."""
    structure = (sample.input, tuple(sample.args), dict(sample.kwargs))
    tensors = _leaves(structure, [])

    def fn(*inputs):
        inp, args, kwargs = _rebuild(structure, iter(inputs))
        return info.op(inp, *args, **kwargs)

    return fn, tensors


def _is_random(info):
    return "random" in getattr(info.op, "tags", ())


def _call(fn, args, info, seed=0):
    if _is_random(info):
        ember.manual_seed(seed)
    return fn(*args)


def _outputs(value):
    """The outputs as a flat list; raises _NotTensors when one is not a tensor."""
    if _is_tensor(value):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _outputs(item)]
    raise _NotTensors(f"the op returns a {type(value).__name__}, not tensors: nothing to compile")


class _NotTensors(Exception):
    pass


def _observable_strides(t):
    """The strides a user can observe: those of dimensions longer than 1 (none for 0 or 1 element)."""
    if t.numel() <= 1:
        return ()
    return tuple((d, s) for d, (n, s) in enumerate(zip(t.shape, t.stride())) if n > 1)


def _compare(got, want, info, dtype):
    got, want = _outputs(got), _outputs(want)
    assert len(got) == len(want), f"{len(got)} outputs, eager has {len(want)}"
    tol = info.tolerance(dtype)
    if tol is None and dtype in (ember.float16, ember.bfloat16):
        tol = (1e-2, 1e-2)
    rtol, atol = tol if tol is not None else (None, None)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, f"output {i}: dtype {g.dtype}, eager {w.dtype}"
        assert tuple(g.shape) == tuple(w.shape), f"output {i}: shape {tuple(g.shape)}, eager {tuple(w.shape)}"
        if info.name not in STRIDE_DIFFERENCES:
            assert _observable_strides(g) == _observable_strides(w), (
                f"output {i}: strides {tuple(g.stride())}, eager {tuple(w.stride())} (shape {tuple(w.shape)})"
            )
        if info.name in UNINITIALIZED:
            continue
        assert_close(g, w, rtol=rtol, atol=atol, equal_nan=True)


def _compile(fn, tensors, info, **kwargs):
    # the traced function returns the flat tuple of outputs (named tuples such as max's
    # (values, indices) become plain tuples: the comparison is on the flat lists)
    gm = make_fx(lambda *a: tuple(_outputs(_call(fn, a, info))))(*tensors)
    return compile_fx(gm, list(tensors), name=info.name, **kwargs)


def _check_fallbacks(info, fallbacks):
    """A graph runs eagerly only for the ops of EAGER_GRAPHS, for the reason listed there."""
    if not fallbacks or all(COMPLEX_RULE in reason for reason in fallbacks):
        return
    assert info.name in EAGER_GRAPHS, f"{info.name} ran eagerly: {fallbacks}"
    word = EAGER_GRAPHS[info.name][1]
    assert all(word in reason for reason in fallbacks), f"{info.name} ran eagerly for another reason: {fallbacks}"


@pytest.fixture(autouse=True)
def _strict():
    # random ops draw eager's numbers (fallback_random), so their compiled values can equal eager's
    with config.patch(fallback_on_compile_error=False, fallback_random=True):
        yield


# --------------------------------------------------------------------------- forward


@pytest.mark.parametrize("info, dtype, count", list(_cases()))
def test_compiled_matches_eager(info, dtype, count):
    samples = 0
    for sample in info.sample_inputs(info, "cpu", dtype, False):
        if samples >= count:
            break
        fn, tensors = _as_function(info, sample)
        want = _call(fn, tensors, info)
        try:
            _outputs(want)
        except _NotTensors as exc:
            pytest.skip(str(exc))
        compiled = _compile(fn, tensors, info)
        _check_fallbacks(info, compiled.fallbacks)
        if _is_random(info):
            ember.manual_seed(0)
        _compare(compiled(*tensors), want, info, dtype)
        samples += 1
    if samples == 0:
        pytest.skip(f"{info.name} has no {dtype} sample")


# --------------------------------------------------------------------------- backward


def _grad_leaves(tensors, differentiate):
    """Fresh leaves: those of ``tensors`` at the positions in ``differentiate`` require grad."""
    return [t.detach().requires_grad_(True) if i in differentiate else t for i, t in enumerate(tensors)]


def _eager_with_grad(info, sample, fn, tensors):
    """``(leaves, outputs)``: every float input differentiated, or only ``sample.input``'s where eager
    has no derivative for another argument (a loss's ``target``)."""
    floats = {i for i, t in enumerate(tensors) if t.is_floating_point()}
    first = {i for i in floats if i < len(_leaves(sample.input, []))}
    for differentiate in (floats, first):
        if not differentiate:
            continue
        leaves = _grad_leaves(tensors, differentiate)
        try:
            return leaves, _outputs(_call(fn, leaves, info))
        except NotImplementedError:
            continue
    pytest.skip("eager has no derivative for any floating-point input of this sample")


@pytest.mark.parametrize("info", list(_backward_cases()))
def test_compiled_backward_matches_eager(info):
    sample = next(iter(info.sample_inputs(info, "cpu", ember.float64, True)), None)
    if sample is None:
        pytest.skip(f"{info.name} has no float64 sample")
    fn, tensors = _as_function(info, sample)
    try:
        leaves, want = _eager_with_grad(info, sample, fn, tensors)
    except _NotTensors as exc:
        pytest.skip(str(exc))
    wrt = [t for t in leaves if t.requires_grad]
    diff = [w for w in want if w.requires_grad]
    if not diff:
        pytest.skip("no output of the sample requires grad")
    cotangents = [ember.randn(*w.shape, dtype=w.dtype) for w in diff]
    try:
        want_grads = ember.autograd.grad(diff, wrt, cotangents, allow_unused=True)
    except (RuntimeError, NotImplementedError) as exc:
        pytest.skip(f"eager has no gradient for this sample ({type(exc).__name__}: {exc})")
    compiled = _compile(fn, leaves, info)
    got = _outputs(compiled(*leaves))
    got_diff = [g for g, w in zip(got, want) if w.requires_grad]
    got_grads = ember.autograd.grad(got_diff, wrt, cotangents, allow_unused=True)
    _check_fallbacks(info, compiled.fallbacks)  # the backward graph is compiled at the first backward
    for i, (g, w) in enumerate(zip(got_grads, want_grads)):
        if w is None:
            assert g is None or not bool(g.abs().sum()), f"grad {i}: eager has none"
            continue
        assert g is not None, f"grad {i}: None, eager has one"
        assert_close(g, w, rtol=1e-6, atol=1e-7, equal_nan=True)


# --------------------------------------------------------------------------- the lowering table


def _differentiable_inputs(info, sample, fn, tensors):
    """The sample's tensors, with those eager autograd differentiates requiring grad (unchanged if none)."""
    try:
        leaves, outputs = _eager_with_grad(info, sample, fn, tensors)
        diff = [o for o in outputs if o.requires_grad and o.is_floating_point()]
        if diff:
            ember.autograd.grad([o.sum() for o in diff], [t for t in leaves if t.requires_grad], allow_unused=True)
            return leaves
    except (pytest.skip.Exception, RuntimeError, NotImplementedError):
        pass  # no eager gradient for this sample: the forward alone
    return tensors


def _ops_reaching_lowering():
    """Names of the call_function ops in every graph aot hands the compiler, on each op's first sample."""
    from ember._ops._registry import Op

    reached: dict[str, str] = {}  # op name -> the op_db entry that first brought it

    def recorder(source):
        def record(gm, example_inputs):
            for node in gm.graph.nodes:
                if node.op == "call_function" and isinstance(node.target, Op):
                    reached.setdefault(node.target.name, source)

            def run(*args):
                out = gm(*args)
                return tuple(out) if isinstance(out, (tuple, list)) else (out,)

            return run

        return record

    for name in OPS:
        info = op_db[name]
        dtype = ember.float32 if ember.float32 in info.dtypes else info.dtypes[0]
        sample = next(iter(info.sample_inputs(info, "cpu", dtype, False)), None)
        if sample is None:
            continue
        fn, tensors = _as_function(info, sample)
        try:
            _outputs(_call(fn, tensors, info))
        except _NotTensors:
            continue
        if info.supports_autograd:  # differentiate what eager can: the backward reaches lowering too
            tensors = _differentiable_inputs(info, sample, fn, tensors)
        compiled = _compile(fn, tensors, info, inner_compile=recorder(name))
        out = compiled(*tensors)
        diff = [o for o in _outputs(out) if o.requires_grad and o.is_floating_point()]
        if diff:  # the backward graph is handed over on the first backward
            ember.autograd.grad([o.sum() for o in diff], [t for t in tensors if t.requires_grad], allow_unused=True)
    return reached


def test_every_op_reaching_lowering_is_in_the_table():
    from ember._inductor import lowering

    known = {op.name for op in lowering.lowerings} | {op.name for op in lowering.fallbacks}
    reached = _ops_reaching_lowering()
    missing = {op: source for op, source in reached.items() if op not in known}
    assert not missing, (
        f"ops reaching the lowering without a lowering or a fallback entry (op: from sample of): {missing}"
    )


def test_core_ops_are_covered_by_the_table():
    from ember._inductor import lowering
    from ember._inductor.aot.decompositions import CORE_OPS

    known = {op.name for op in lowering.lowerings} | {op.name for op in lowering.fallbacks}
    assert sorted(set(CORE_OPS) - known) == []


def test_fallback_table_gives_reasons():
    from ember._inductor import lowering

    for op, reason in lowering.fallbacks.items():
        assert isinstance(reason, str) and len(reason) > 10, f"{op.name}: fallback without a reason"
