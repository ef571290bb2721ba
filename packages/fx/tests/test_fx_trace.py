"""Symbolic tracing: what gets recorded, how, and the errors for code that cannot be traced."""

from __future__ import annotations

import math
import operator

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F  # noqa: N812 - PyTorch's alias
from ember import fx
from ember.fx import PH, GraphModule, Proxy, TraceError, Tracer, symbolic_trace


def _close(a, b):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-6)


def _ops(gm):
    return [(n.op, n.target if isinstance(n.target, str) else n.target.__name__) for n in gm.graph.nodes]


def wrapped_len_helper(x):
    # len() on a proxy is not traceable; wrapping records this function as one call.
    return x * len(x)


fx.wrap("wrapped_len_helper")


def count_rows(x):
    return len(x)


@fx.wrap
def decorated_helper(x, k):
    return x + k if k > 0 else x


def test_function_tracing_records_ops_operators_methods():
    def f(x, y):
        z = ember.relu(x) + y * 2
        return z.view(-1).sum(dim=0, keepdim=True) - F.softmax(y, dim=0).max()

    gm = symbolic_trace(f)
    assert type(gm).__name__ == "f"
    assert _ops(gm) == [
        ("placeholder", "x"),
        ("placeholder", "y"),
        ("call_function", "relu"),
        ("call_function", "mul"),
        ("call_function", "add"),
        ("call_method", "view"),
        ("call_method", "sum"),
        ("call_function", "softmax"),
        ("call_method", "max"),
        ("call_function", "sub"),
        ("output", "output"),
    ]
    x, y = ember.randn(2, 3), ember.randn(2, 3)
    _close(gm(x, y), f(x, y))


def test_ember_op_target_is_the_registry_op():
    gm = symbolic_trace(lambda x: F.relu(x))
    (node,) = gm.graph.find_nodes(op="call_function")
    assert node.target is ember._ops.get("relu")
    assert "relu = ember.relu(x)" in gm.code


def test_module_tracing_leaves_parameters_buffers_and_constants():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.scale = nn.Parameter(ember.tensor([2.0, 3.0, 4.0]))
            self.register_buffer("shift", ember.ones(3))
            self.const = ember.tensor([1.0, 0.0, -1.0])  # a plain tensor attribute

        def forward(self, x):
            return self.lin(x) * self.scale + self.shift + self.const + ember.tensor(0.5)

    m = M()
    gm = symbolic_trace(m)
    ops = _ops(gm)
    assert ("call_module", "lin") in ops and ("get_attr", "scale") in ops and ("get_attr", "shift") in ops
    assert ("get_attr", "const") in ops and ("get_attr", "_tensor_constant0") in ops
    assert gm.scale is m.scale and gm.lin is m.lin  # shared, not copied
    assert "shift" in dict(gm.named_buffers())
    x = ember.randn(4, 3)
    _close(gm(x), m(x))


def test_user_modules_are_traced_into_ember_layers_are_leaves():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 2, 3, padding=1)
            self.bn = nn.BatchNorm2d(2)

        def forward(self, x):
            return F.relu(self.bn(self.conv(x)))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block()
            self.head = nn.Sequential(nn.Flatten(), nn.Linear(2 * 4 * 4, 3))

        def forward(self, x):
            return self.head(self.block(x))

    net = Net().eval()
    gm = symbolic_trace(net)
    assert [n.target for n in gm.graph.find_nodes(op="call_module")] == ["block.conv", "block.bn", "head.0", "head.1"]
    x = ember.randn(2, 2, 4, 4)
    _close(gm(x), net(x))


def test_custom_leaf_module():
    class Inner(nn.Module):
        def forward(self, x):
            return x.exp() if x.shape[0] > 100 else x.neg()  # shape[0] is traced: only a leaf survives

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            return self.inner(x) + 1

    class LeafTracer(Tracer):
        def is_leaf_module(self, m, qualname):
            return isinstance(m, Inner) or super().is_leaf_module(m, qualname)

    with pytest.raises(TraceError, match="control flow"):
        symbolic_trace(Outer())
    outer = Outer()
    gm = GraphModule(outer, LeafTracer().trace(outer))
    assert _ops(gm)[1] == ("call_module", "inner")
    x = ember.randn(3)
    _close(gm(x), -x + 1)


def test_python_control_flow_on_non_tensor_values():
    class M(nn.Module):
        def __init__(self, depth):
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(3, 3) for _ in range(depth))
            self.use_residual = True

        def forward(self, x):
            for layer in self.layers:
                x = layer(x) + x if self.use_residual else layer(x)
            return x

    m = M(3)
    gm = symbolic_trace(m)
    assert [n.target for n in gm.graph.find_nodes(op="call_module")] == ["layers.0", "layers.1", "layers.2"]
    x = ember.randn(2, 3)
    _close(gm(x), m(x))


def test_concrete_args_specialise_and_ph_keeps_symbolic():
    def f(x, flag):
        return x.relu() if flag else x.neg()

    with pytest.raises(TraceError):
        symbolic_trace(f)
    gm = symbolic_trace(f, concrete_args={"flag": False})
    assert [n.target for n in gm.graph.find_nodes(op="call_method")] == ["neg"]
    x = ember.randn(4)
    _close(gm(x), -x)
    _close(gm(x, False), -x)
    gm2 = symbolic_trace(lambda a, b: a * b, concrete_args={"b": PH})
    assert len(gm2.graph.find_nodes(op="placeholder")) == 2
    with pytest.raises(TraceError, match=r"concrete_args names \['nope'\]"):
        symbolic_trace(f, concrete_args={"nope": 1})


def test_default_and_keyword_only_arguments():
    def f(x, y=3.0, *, scale=2.0):
        return x * y * scale

    gm = symbolic_trace(f)
    assert "def forward(self, x, y = 3.0, scale = 2.0)" in gm.code
    x = ember.ones(2)
    _close(gm(x), x * 6.0)
    _close(gm(x, 1.0, 5.0), x * 5.0)


def test_varargs_are_rejected_with_reason():
    with pytest.raises(TraceError, match=r"\*args has no fixed arity"):
        symbolic_trace(lambda *args: args[0])


def test_tuple_unpacking_of_known_length():
    def f(x):
        a, b = x.chunk(2)
        q, r = ember.split(x, 2)
        return a * b + q - r

    gm = symbolic_trace(f)
    assert sum(n.target is operator.getitem for n in gm.graph.nodes) == 4
    x = ember.randn(4)
    _close(gm(x), f(x))


def test_wrap_by_name_and_decorator():
    def f(x):
        return decorated_helper(wrapped_len_helper(x), 2)

    gm = symbolic_trace(f)
    targets = [n.target for n in gm.graph.find_nodes(op="call_function")]
    assert [t.__name__ for t in targets] == ["wrapped_len_helper", "decorated_helper"]
    assert wrapped_len_helper(ember.ones(3)).shape == (3,)  # unpatched after tracing
    x = ember.randn(5)
    _close(gm(x), x * 5 + 2)


def test_wrap_errors():
    with pytest.raises(TypeError, match="lambda"):
        fx.wrap(lambda x: x)
    with pytest.raises(NotImplementedError, match="top level of a module"):
        fx.wrap("wrapped_len_helper")


def test_autowrap_math_and_custom_functions():
    def f(x):
        return x / math.sqrt(x.shape[-1]) * count_rows(x)

    with pytest.raises(RuntimeError, match="'len' is not supported"):
        symbolic_trace(f)  # math is autowrapped by default, count_rows is not

    tracer = Tracer(autowrap_functions=(count_rows,))
    graph = tracer.trace(f)
    targets = [n.target for n in graph.nodes if n.op == "call_function"]
    assert math.sqrt in targets and count_rows in targets
    gm = GraphModule(tracer.root, graph)
    assert "math.sqrt(" in gm.code
    x = ember.randn(4, 9)
    _close(gm(x), x / 3.0 * 4)
    assert count_rows.__module__ == __name__ and len(ember.ones(3)) == 3  # restored


def test_param_shapes_constant():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(ember.randn(3, 4))

        def forward(self, x):
            return x.reshape(-1, self.w.shape[0]) @ self.w

    m = M()
    dynamic = symbolic_trace(m)
    assert any(n.target is getattr for n in dynamic.graph.nodes)
    tracer = Tracer(param_shapes_constant=True)
    gm = GraphModule(m, tracer.trace(m))
    assert not any(n.target is getattr for n in gm.graph.nodes)
    assert "reshape(-1, 3)" in gm.code
    x = ember.randn(2, 6)
    _close(gm(x), m(x))


def test_bool_error_explains_fix():
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(TraceError) as info:
        symbolic_trace(f)
    msg = str(info.value)
    assert "symbolically traced variables cannot be used as inputs to control flow" in msg
    assert "concrete_args" in msg and "ember.fx.wrap" in msg and "is_leaf_module" in msg


def test_len_and_iteration_errors():
    with pytest.raises(RuntimeError, match=r"'len' is not supported in symbolic tracing.*x.shape\[0\]"):
        symbolic_trace(lambda x: x * len(x))

    def loop(x):
        return [v for v in x]

    with pytest.raises(TraceError, match="Proxy object cannot be iterated.*unbind"):
        symbolic_trace(loop)
    with pytest.raises(TraceError, match="used as a Python index or size"):
        symbolic_trace(lambda x: [1, 2, 3][x.argmax()])


def test_module_as_argument_is_rejected():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            return ember.add(x, self.lin)

    with pytest.raises(NotImplementedError, match="cannot be an argument"):
        symbolic_trace(M())


def test_patches_are_undone_after_an_error():
    call, getattr_ = nn.Module.__call__, nn.Module.__getattr__
    with pytest.raises(TraceError):
        symbolic_trace(lambda x: bool(x))
    assert nn.Module.__call__ is call and nn.Module.__getattr__ is getattr_
    assert math.sqrt(4.0) == 2.0 and not hasattr(math.sqrt, "__fx_wrapped__")


def test_outputs_nested_structures_and_kwargs_calls():
    def f(x, y):
        return {"sum": ember.add(x, y, alpha=2), "pair": (x.t(), [y])}

    gm = symbolic_trace(f)
    x, y = ember.randn(2, 2), ember.randn(2, 2)
    out = gm(x, y)
    _close(out["sum"], x + 2 * y)
    _close(out["pair"][0], x.t())
    _close(out["pair"][1][0], y)


def test_attribute_proxy_and_getitem_with_slices():
    def f(x):
        n = x.shape[1]
        return x[:, 1:n, None] * x.ndim

    gm = symbolic_trace(f)
    assert "getitem_1 = x[:, 1:getitem, None]" in gm.code
    x = ember.randn(2, 4)
    _close(gm(x), f(x))


def test_proxy_repr_and_graph_appending_tracer():
    g = fx.Graph()
    p = Proxy(g.placeholder("x"))
    q = (p + 1).relu()
    g.output(q.node)
    assert repr(q) == "Proxy(relu)"
    gm = GraphModule(nn.Module(), g)
    _close(gm(ember.tensor([-2.0, 0.5])), ember.tensor([0.0, 1.5]))


def test_tensor_op_with_proxy_argument_goes_through_ember_function():
    const = ember.tensor([1.0, 2.0])

    def f(x):
        return ember.maximum(const, x) + const.mul(x)

    gm = symbolic_trace(f)
    reads = gm.graph.find_nodes(op="get_attr")
    assert [n.target for n in reads] == ["_tensor_constant0"] * 2  # one attribute for the one constant
    x = ember.tensor([0.0, 3.0])
    _close(gm(x), f(x))


def test_record_stack_traces():
    tracer = Tracer()
    tracer.record_stack_traces = True

    def f(x):
        return x.relu()

    graph = tracer.trace(f)
    node = graph.find_nodes(op="call_method")[0]
    assert "test_fx_trace.py" in node.stack_trace and "return x.relu()" in node.stack_trace


def test_trace_graph_module_again():
    m = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    gm = symbolic_trace(symbolic_trace(m))
    assert [n.target for n in gm.graph.find_nodes(op="call_module")] == ["0", "1"]
    x = ember.randn(2, 3)
    _close(gm(x), m(x))


def test_real_tensor_indexed_by_traced_values():
    table = ember.arange(12.0).reshape(3, 4)

    def f(x):
        n = x.shape[0]
        rows = table[:n, 1:]  # a core tensor sliced with a traced bound
        out = x.clone()
        out[0] = rows.sum()  # a traced tensor written
        buf = ember.zeros(2)  # no traced input: created while tracing, stored as a constant
        buf[1] = x.sum()  # a core tensor written with a traced value
        return rows, out, buf

    gm = symbolic_trace(f)
    assert "getitem_1 = _tensor_constant0[:getitem, 1:]" in gm.code
    assert sum(n.target is operator.setitem for n in gm.graph.nodes) == 2
    x = ember.tensor([1.0, 2.0])
    rows, out, buf = gm(x)
    _close(rows, table[:2, 1:])
    _close(out, ember.tensor([float(table[:2, 1:].sum()), 2.0]))
    _close(buf, ember.tensor([0.0, 3.0]))


def test_buffer_attributes_proxied_only_on_request():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("m", ember.ones(3))

        def forward(self, x):
            return x + self.m.sum() + self.m

    m = M()
    baked = symbolic_trace(m)  # as in PyTorch: m.sum() is evaluated while tracing
    assert "_tensor_constant0" in baked.code and "m = self.m" in baked.code

    class BufferTracer(Tracer):
        proxy_buffer_attributes = True

    gm = GraphModule(m, BufferTracer().trace(m))
    assert "sum_1 = m.sum()" in gm.code and "_tensor_constant" not in gm.code
    with ember.no_grad():
        m.m.mul_(2)  # the recorded graph follows the buffer, the baked one does not
    x = ember.zeros(3)
    _close(gm(x), ember.full((3,), 8.0))
    _close(baked(x), ember.full((3,), 5.0))


def test_structured_inputs_are_indexed_symbolically():
    def f(batch, pair):
        return batch["x"] * batch["scale"] + pair[0] - pair[1][0]

    gm = symbolic_trace(f)
    assert "getitem = batch['x']" in gm.code
    batch = {"x": ember.randn(3), "scale": ember.full((3,), 2.0)}
    pair = (ember.ones(3), [ember.full((3,), 0.5)])
    _close(gm(batch, pair), batch["x"] * 2 + 0.5)
    # structures in concrete_args: one placeholder per leaf; the fixed leaf is specialised away
    gm2 = symbolic_trace(f, concrete_args={"batch": {"x": PH, "scale": 3.0}, "pair": (PH, [PH])})
    assert [n.name for n in gm2.graph.find_nodes(op="placeholder")] == ["batch_1", "batch_2", "pair_1", "pair_2"]
    assert "mul = batch_1 * 3.0" in gm2.code and "getitem" not in gm2.code
    out = gm2({"x": ember.ones(3), "scale": None}, (ember.ones(3), [ember.full((3,), 0.5)]))
    _close(out, ember.full((3,), 3.0 + 1.0 - 0.5))


def test_wrap_builtin_len_in_one_module():
    from _fx_wrap_len_helper import scale_by_length

    gm = symbolic_trace(lambda x: scale_by_length(x) + 1)
    assert [n.target for n in gm.graph.find_nodes(op="call_function")][0] is len
    assert "len_1 = len(x)" in gm.code
    _close(gm(ember.ones(4)), ember.full((4,), 5.0))
    with pytest.raises(RuntimeError, match="'len' is not supported"):
        symbolic_trace(lambda x: x * len(x))  # this module did not register len
    import _fx_wrap_len_helper

    assert "len" not in vars(_fx_wrap_len_helper)  # the patch is removed after tracing
