"""Partitioners: forward + backward graphs from a joint graph, composed, equal eager grads."""

from __future__ import annotations

import operator

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember._inductor import debug
from ember._inductor.aot.decompositions import CORE_OPS, inductor_decompositions
from ember._inductor.aot.joint import trace_joint
from ember._inductor.aot.partitioners import (
    PartitionInfo,
    default_partition,
    is_random,
    is_recomputable,
    min_cut_rematerialization_partition,
)
from ember._inductor.exc import InductorError
from ember._ops import registry
from ember.testing import assert_close

PARTITIONERS = [default_partition, min_cut_rematerialization_partition]
TABLE = inductor_decompositions()


def _flat(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _split(fn, primals, partition, decompose=True):
    joint = trace_joint(fn, primals, decompositions=TABLE if decompose else None)
    n = joint.num_fwd_outputs
    tangents = [ember.randn(joint.aot_info.outputs and _fwd_shape(joint, i)) for i in joint.aot_info.tangent_outputs]
    fw, bw = partition(joint, [*primals, *tangents], num_fwd_outputs=n)
    return joint, fw, bw, tangents


def _fwd_shape(joint, i):
    out = list(joint.graph.nodes)[-1].args[0][i]
    return tuple(out.meta["val"].shape)


def _run_split(fn, primals, partition, decompose=True, seed=None):
    """Forward outputs and grads of the partitioned graphs, and eager's, for the same tangents."""
    joint, fw, bw, tangents = _split(fn, primals, partition, decompose)
    n = joint.num_fwd_outputs
    if seed is not None:
        ember.manual_seed(seed)
    outs = fw(*[p.detach() for p in primals])
    assert len(outs) == n + len(fw.partition_info.saved)
    grads = bw(*outs[n:], *tangents)
    assert len(grads) == len(primals)

    if seed is not None:
        ember.manual_seed(seed)
    eager = _flat(fn(*primals))
    wanted = [p for p in primals if p.requires_grad]
    expected = ember.autograd.grad(
        [eager[i] for i in joint.aot_info.tangent_outputs], wanted, tangents, allow_unused=True
    )
    expected_by_primal = iter(expected)
    expected = [next(expected_by_primal) if p.requires_grad else None for p in primals]
    return outs[:n], grads, eager, expected, fw, bw


def _mlp(x, w, b):
    return (F.relu(x @ w + b).sin().sum(),)


def _gelu_layer_norm(x, g, b):
    return F.gelu(F.layer_norm(x, (8,), g, b)).tanh().sum()


def _two_outputs(x, y):
    return x.exp() * y, (x - y).sigmoid().mean(dim=0)


def _views(x):
    return (x.t() @ x.reshape(4, 6).transpose(0, 1).reshape(4, 6).t()).softmax(-1)


def _pool(x):
    return F.max_pool2d(x, 2).square().sum()


def _cross_entropy(x, w, t):
    return F.cross_entropy(x @ w, t)


CASES = {
    "mlp": (_mlp, lambda: [ember.randn(3, 4, requires_grad=True), ember.randn(4, 5, requires_grad=True),
                           ember.randn(5, requires_grad=True)]),
    "gelu_layer_norm": (_gelu_layer_norm, lambda: [ember.randn(4, 8, requires_grad=True),
                                                   ember.randn(8, requires_grad=True), ember.randn(8, requires_grad=True)]),
    "two_outputs_one_frozen": (_two_outputs, lambda: [ember.randn(3, 4, requires_grad=True), ember.randn(3, 4)]),
    "views": (_views, lambda: [ember.randn(6, 4, dtype=ember.float64, requires_grad=True)]),
    "max_pool": (_pool, lambda: [ember.randn(1, 2, 4, 4, requires_grad=True)]),
    "cross_entropy": (_cross_entropy, lambda: [ember.randn(5, 3, requires_grad=True),
                                               ember.randn(3, 4, requires_grad=True), ember.tensor([0, 3, 1, 2, 0])]),
}


@pytest.mark.parametrize("partition", PARTITIONERS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("decompose", [True, False], ids=["decomposed", "composite"])
def test_forward_and_backward_compose_to_eager(case, partition, decompose):
    fn, make = CASES[case]
    ember.manual_seed(0)
    primals = make()
    outs, grads, eager, expected, fw, bw = _run_split(fn, primals, partition, decompose)
    for a, e in zip(outs, eager):
        assert_close(a, e.detach())
    for g, e in zip(grads, expected):
        if e is None:
            assert g is None
        else:
            assert_close(g, e)
    # the forward never reads a tangent; the backward recomputes only what min-cut chose
    assert not any(n.op == "placeholder" and n.name.startswith("tangents") for n in fw.graph.nodes)
    if partition is default_partition:
        assert fw.partition_info.recomputed == []


def _saved_bytes(fn, primals, partition):
    _joint, fw, _bw, _t = _split(fn, primals, partition)
    return fw.partition_info


def test_min_cut_saves_the_matmul_not_the_pointwise_chain():
    """relu(x @ w).sin().sum(): the backward needs relu's output (for cos and relu's mask); min-cut
    saves the matmul (an extern output, materialised anyway) and recomputes relu in the backward."""
    primals = [ember.randn(3, 4, requires_grad=True), ember.randn(4, 5, requires_grad=True)]
    fn = lambda x, w: F.relu(x @ w).sin().sum()  # noqa: E731
    mincut = _saved_bytes(fn, primals, min_cut_rematerialization_partition)
    default = _saved_bytes(fn, primals, default_partition)
    assert mincut.saved == ["primals_1", "primals_2", "matmul"]
    assert mincut.saved_bytes == 3 * 5 * 4
    assert "maximum" in mincut.recomputed  # relu, decomposed as maximum(x, 0)
    # the default partition saves relu's output, the value the backward reads
    assert "maximum" in default.saved and "matmul" not in default.saved


def test_min_cut_saves_fewer_bytes_on_gelu_layer_norm():
    ember.manual_seed(0)
    primals = CASES["gelu_layer_norm"][1]()
    mincut = _saved_bytes(_gelu_layer_norm, primals, min_cut_rematerialization_partition)
    default = _saved_bytes(_gelu_layer_norm, primals, default_partition)
    assert mincut.saved_bytes < default.saved_bytes / 2, (mincut, default)
    # besides the primals only per-row statistics cross (reductions are never recomputed): the row sums
    # or, smaller, their float32 casts (layer_norm's one-pass moments sum in float64), (4, 1) floats each
    sums = [n for n in mincut.saved if not n.startswith("primals")]
    assert sums and all(n.startswith(("sum", "_to_copy")) for n in sums), mincut
    assert mincut.saved_bytes == len(sums) * 4 * 4, mincut


def test_pointwise_chain_from_primal_is_recomputed():
    x = ember.randn(8, 8, requires_grad=True)
    info = _saved_bytes(lambda x: x.sin().cos().exp().sum(), [x], min_cut_rematerialization_partition)
    assert info.saved == ["primals_1"] and info.saved_bytes == 0
    assert info.recomputed == ["sin", "cos", "exp"]


@pytest.mark.parametrize("partition", PARTITIONERS, ids=lambda p: p.__name__)
def test_random_ops_are_saved_not_recomputed(partition):
    x = ember.randn(4, 6, requires_grad=True)
    fn = lambda x: (F.dropout(x.sin(), 0.5) * 3).sum()  # noqa: E731
    outs, grads, eager, expected, fw, bw = _run_split(fn, [x], partition, seed=7)
    assert_close(outs[0], eager[0].detach())
    assert_close(grads[0], expected[0])
    assert [n.target.name for n in fw.graph.nodes if n.op == "call_function" and is_random(n.target)] == ["bernoulli"]
    assert not any(n.op == "call_function" and is_random(n.target) for n in bw.graph.nodes)
    # the mask (or its scaled form) crosses as a saved value
    bernoulli_users = {"bernoulli", "div"}
    assert bernoulli_users & set(fw.partition_info.saved), fw.partition_info


def test_unread_random_op_stays_in_forward():
    """A draw nothing reads still runs (eager mode draws it), so later draws match eager."""
    x = ember.randn(3, requires_grad=True)

    def fn(x):
        ember.rand(5)
        return (x * ember.rand(3)).sum()

    for partition in PARTITIONERS:
        outs, grads, eager, expected, fw, _bw = _run_split(fn, [x], partition, seed=3)
        assert [n.target.name for n in fw.graph.nodes if n.op == "call_function"].count("rand") == 2
        assert_close(outs[0], eager[0].detach())
        assert_close(grads[0], expected[0])


def test_is_random_and_is_recomputable():
    randoms = {op.name for op in registry.values() if is_random(op)}
    assert {"rand", "randn", "bernoulli", "dropout", "rrelu", "uniform_", "multinomial"} <= randoms
    assert not is_random(registry["mul"]) and not is_random(operator.getitem)
    for name in ("mul", "sin", "where", "view", "expand", "scalar_tensor", "cat", "_to_copy"):
        assert is_recomputable(registry[name]), name
    for name in ("matmul", "convolution", "sum", "amax", "sort", "bernoulli", "rand", "cumsum", "linalg_inv"):
        assert not is_recomputable(registry[name]), name
    assert is_recomputable(operator.getitem)


def test_grad_of_unused_primal_is_none():
    x, y = ember.randn(3, requires_grad=True), ember.randn(3, requires_grad=True)
    for partition in PARTITIONERS:
        _joint, fw, bw, tangents = _split(lambda x, y: x.exp().sum() + 0 * y.detach().sum(), [x, y], partition)
        outs = fw(x.detach(), y.detach())
        grads = bw(*outs[1:], *tangents)
        assert grads[1] is None
        assert_close(grads[0], x.detach().exp() * tangents[0])


def test_long_chain_has_no_recursion_limit():
    x = ember.randn(4, requires_grad=True)

    def fn(x):
        for _ in range(1100):  # deeper than the default recursion limit (1000)
            x = x.sin()
        return x.sum()

    _joint, fw, bw, tangents = _split(fn, [x], min_cut_rematerialization_partition, decompose=False)
    # the backward needs the input of each sin: the first 1099 results, all recomputed from x
    assert fw.partition_info.saved == ["primals_1"] and len(fw.partition_info.recomputed) == 1099


def test_graphs_and_summary_print():
    primals = [ember.randn(3, 4, requires_grad=True), ember.randn(4, 5, requires_grad=True)]
    _joint, fw, bw, _t = _split(lambda x, w: F.relu(x @ w).sin().sum(), primals, min_cut_rematerialization_partition)
    text = str(fw.partition_info)
    assert isinstance(fw.partition_info, PartitionInfo) and bw.partition_info is fw.partition_info
    assert "partitioner: min_cut" in text and "  matmul" in text and "recomputed in the backward (2)" in text
    assert "matmul = ember.matmul(primals_1, primals_2)" in fw.code
    assert "def forward(self, primals_1, primals_2, matmul, tangents_1)" in bw.code
    assert "maximum" in str(bw.graph)


def test_debug_stage_written(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_COMPILE_DEBUG", "1")
    monkeypatch.setenv("EMBER_COMPILE_DEBUG_DIR", str(tmp_path))
    if not debug.enabled():
        pytest.skip("debug output is configured off by ember._inductor.config in this environment")
    x = ember.randn(3, requires_grad=True)
    with debug.compiling("fn") as folder:
        _split(lambda x: x.sin().sum(), [x], min_cut_rematerialization_partition)
    files = sorted(folder.glob("*_partition.txt"))
    assert len(files) == 1
    text = files[0].read_text()
    assert "partitioner: min_cut" in text and "backward graph:" in text and "sin = ember.sin(primals_1)" in text


def test_bad_num_fwd_outputs():
    x = ember.randn(3, requires_grad=True)
    joint = trace_joint(lambda x: x.sin().sum(), [x])
    for partition in PARTITIONERS:
        with pytest.raises(ValueError, match="num_fwd_outputs=5"):
            partition(joint, [x, ember.ones(())], num_fwd_outputs=5)


def _opdb_cases():
    from ember.testing import op_db

    return sorted(name for name, info in op_db.items() if info.supports_autograd and ember.float64 in info.dtypes)


@pytest.mark.parametrize("name", _opdb_cases())
def test_opdb_grads_through_both_partitioners(name):
    """Every differentiable op_db op (first float64 sample): the joint graph with the inductor decompositions
    holds only CORE_OPS ops; split by each partitioner, forward then backward run eagerly equal eager
    autograd's values and grads."""
    import warnings

    from ember.testing import op_db
    from ember.utils import _pytree as pytree

    info = op_db[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sample = next(iter(info.sample_inputs(info, "cpu", ember.float64, False)))
    flat, spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
    positions = [i for i, v in enumerate(flat) if isinstance(v, ember.Tensor)]
    primals = [flat[i].detach().clone().requires_grad_(flat[i].dtype.is_floating_point) for i in positions]

    def fn(*tensors):
        values = list(flat)
        for i, t in zip(positions, tensors):
            values[i] = t
        input, args, kwargs = pytree.tree_unflatten(values, spec)
        out = info.op(input, *args, **kwargs)
        out = out if isinstance(out, (tuple, list)) else (out,)
        return tuple(t for t in out if isinstance(t, ember.Tensor) and t.dtype.is_floating_point)

    try:
        eager = fn(*primals)
        differentiable = [t for t in eager if t.requires_grad]
        tangents = [ember.randn(tuple(t.shape), dtype=t.dtype) for t in differentiable]
        wanted = [p for p in primals if p.requires_grad]
        expected = ember.autograd.grad(differentiable, wanted, tangents, allow_unused=True) if tangents else ()
    except NotImplementedError as exc:
        pytest.skip(f"eager autograd has no derivative for an input: {exc}")
    if not differentiable:
        pytest.skip("no differentiable output")
    try:
        joint = trace_joint(fn, primals, decompositions=TABLE)
    except InductorError as exc:
        pytest.skip(f"not traceable ahead of time (data-dependent): {exc}")
    n = joint.num_fwd_outputs
    assert len(joint.aot_info.tangent_outputs) == len(tangents)
    reaching = {t.target.name for t in joint.graph.nodes if t.op == "call_function" and t.target is not operator.getitem}
    assert reaching <= CORE_OPS, f"{name}: {sorted(reaching - CORE_OPS)} reach lowering outside CORE_OPS"
    for partition in PARTITIONERS:
        fw, bw = partition(joint, [*primals, *tangents], num_fwd_outputs=n)
        outs = fw(*[p.detach() for p in primals])
        for a, e in zip(outs[:n], eager):
            assert_close(a, e.detach(), equal_nan=True)
        grads = iter(g for g, p in zip(bw(*outs[n:], *tangents), primals) if p.requires_grad)
        for e in expected:
            g = next(grads)
            if g is None:  # no dependency in the decomposed graph: the grad is zero
                assert e is None or not e.any(), (name, partition.__name__)
            elif e is not None:
                assert_close(g, e, equal_nan=True, msg=f"{name} {partition.__name__}")


def _hand_joint_with_constant(constant):
    """The joint graph of ``(x * c).sin().sum()`` with ``c`` a module constant (get_attr), and ``c`` also
    returned as a forward output, written node by node."""
    from ember.fx import Graph, GraphModule
    from ember.fx.passes.fake_tensor_prop import FakeTensorProp

    root = ember.nn.Module()
    root.c = constant
    g = Graph()
    x, t = g.placeholder("primals_1"), g.placeholder("tangents_1")
    c = g.get_attr("c")
    mul = g.call_function(registry["mul"], (x, c))
    total = g.call_function(registry["sum"], (g.call_function(registry["sin"], (mul,)),))
    grad = g.call_function(registry["mul"], (g.call_function(registry["cos"], (mul,)), c))
    grad = g.call_function(registry["mul"], (grad, t))
    g.output((total, c, grad))
    gm = GraphModule(root, g)
    FakeTensorProp(gm).propagate(ember.randn(3), ember.ones(()))
    return gm


@pytest.mark.parametrize("partition", PARTITIONERS, ids=lambda p: p.__name__)
def test_constants_are_read_not_saved(partition):
    c, x = ember.randn(3), ember.randn(3)
    fw, bw = partition(_hand_joint_with_constant(c), [x, ember.ones(())], num_fwd_outputs=2)
    assert "c" not in fw.partition_info.saved
    assert sum(1 for n in bw.graph.nodes if n.op == "get_attr") == 1
    outs = fw(x)
    assert_close(outs[0], (x * c).sin().sum())
    assert outs[1] is c or bool((outs[1] == c).all())
    (grad,) = bw(*outs[2:], ember.ones(()))
    assert_close(grad, (x * c).cos() * c)


# -- parity: bytes saved for the backward, ours against PyTorch's partitioners -------------------


def _mlp_parity(lib, x, w1, b1, w2, b2):
    F_ = lib.nn.functional
    return (F_.gelu(x @ w1 + b1).tanh() @ w2 + b2).sigmoid().sum()


def _block_parity(lib, x, wq, wk, wv, wo, g1, b1, w1, w2, g2, b2):
    F_ = lib.nn.functional
    d = x.shape[-1]
    h = F_.layer_norm(x, (d,), g1, b1)
    att = ((h @ wq) @ (h @ wk).transpose(-2, -1) / d**0.5).softmax(-1)
    x = x + (att @ (h @ wv)) @ wo
    h = F_.layer_norm(x, (d,), g2, b2)
    return (x + F_.gelu(h @ w1) @ w2).sum()


PARITY_CASES = {
    "mlp": (_mlp_parity, [(64, 32), (32, 128), (128,), (128, 32), (32,)]),
    "transformer_block": (
        _block_parity,
        [(2, 16, 32), (32, 32), (32, 32), (32, 32), (32, 32), (32,), (32,), (32, 128), (128, 32), (32,), (32,)],
    ),
}


def _torch_saved_bytes(torch, fn, arrays, partition):
    """Bytes of the values PyTorch's forward saves, views of inputs not counted."""
    from functorch.compile import aot_function
    from torch._decomp import core_aten_decompositions

    found = {}

    def base(node):  # follow views back to what they alias
        while node.op == "call_function" and hasattr(node.target, "_schema") and any(
            a.alias_info for a in node.target._schema.arguments[:1]
        ):
            node = node.args[0]
        return node

    def fw_compiler(gm, inputs):
        saved = [n for n in gm.graph.nodes if n.op == "output"][0].args[0][1:]
        found["bytes"] = sum(
            n.meta["val"].numel() * n.meta["val"].element_size()
            for n in saved
            if n is not None and base(n).op != "placeholder" and isinstance(n.meta.get("val"), torch.Tensor)
        )
        return gm

    compiled = aot_function(
        lambda *a: fn(torch, *a), fw_compiler, lambda gm, inputs: gm, partition_fn=partition,
        decompositions=core_aten_decompositions(),
    )
    compiled(*[torch.tensor(a, requires_grad=True) for a in arrays]).backward()
    return found["bytes"]


@pytest.mark.parity
@pytest.mark.parametrize("case", sorted(PARITY_CASES))
def test_min_cut_saves_no_more_than_pytorch(case):
    """Our min-cut saves no more bytes than PyTorch's min-cut partitioner on the same function (ours is
    memory-first: PyTorch also keeps values its backward's matmuls read, to spare their recomputation)."""
    torch = pytest.importorskip("torch")
    import warnings

    import numpy as np
    from functorch.compile import min_cut_rematerialization_partition as torch_min_cut

    fn, shapes = PARITY_CASES[case]
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    primals = [ember.tensor(a, requires_grad=True) for a in arrays]
    joint = trace_joint(lambda *a: fn(ember, *a), primals, decompositions=TABLE)
    ours = min_cut_rematerialization_partition(joint, primals, num_fwd_outputs=1)[0].partition_info.saved_bytes
    default = default_partition(joint, primals, num_fwd_outputs=1)[0].partition_info.saved_bytes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = _torch_saved_bytes(torch, fn, arrays, torch_min_cut)
    assert 0 < ours <= theirs, (ours, theirs)
    assert ours < default


@pytest.mark.parametrize("seed", range(6))
def test_max_flow_matches_scipy_on_random_networks(seed):
    """The pure-Python max flow gives scipy's flow value and the same source side of the min cut."""
    scipy_sparse = pytest.importorskip("scipy.sparse")
    from scipy.sparse.csgraph import maximum_flow

    from ember._inductor.aot.partitioners import _max_flow

    rng = np.random.default_rng(seed)
    n = 40
    edges = {}
    for _ in range(160):
        u, v = (int(a) for a in rng.integers(0, n, size=2))
        if u != v:
            edges[(u, v)] = int(rng.integers(1, 50)) if rng.random() < 0.8 else 10**6
    source, sink = 0, n - 1
    value, reachable = _max_flow(edges, n, source, sink)
    rows, cols = zip(*edges)
    capacity = scipy_sparse.csr_matrix(
        (np.fromiter(edges.values(), dtype=np.int32), (rows, cols)), shape=(n, n)
    )
    result = maximum_flow(capacity, source, sink)
    assert value == result.flow_value
    residual = (capacity - result.flow).tocsr()
    seen, frontier = {source}, [source]
    while frontier:
        u = frontier.pop()
        for k in range(residual.indptr[u], residual.indptr[u + 1]):
            v = int(residual.indices[k])
            if residual.data[k] > 0 and v not in seen:
                seen.add(v)
                frontier.append(v)
    assert reachable == seen
