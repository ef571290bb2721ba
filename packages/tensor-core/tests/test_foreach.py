"""ember._foreach_* list ops: each equals its per-tensor op, tensor by tensor (same bits), on lists of
tensors of different shapes; the list checks; the per-tensor fallback for what the direct kernels don't take.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.utils._python_dispatch import TorchDispatchMode

RNG = np.random.default_rng(0)
SHAPES = [(3, 4), (5,), (), (2, 1, 3)]


def _list(dtype=np.float32, positive=False):
    out = []
    for shape in SHAPES:
        a = RNG.standard_normal(shape).astype(dtype)
        out.append(ember.tensor(np.abs(a) + 0.5 if positive else a))
    return out


def _copy(tensors):
    return [t.clone() for t in tensors]


def _assert_same(got, expected):
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_array_equal(g.numpy(), e.numpy())


# (foreach name, per-tensor method, extra operand lists/values: callables of nothing, kwargs)
INPLACE = [
    ("_foreach_add_", "add_", lambda: (_list(),), {}),
    ("_foreach_add_", "add_", lambda: (_list(),), {"alpha": -0.5}),
    ("_foreach_add_", "add_", lambda: (0.25,), {}),
    ("_foreach_add_", "add_", lambda: ([1.0, 2, -3.5, 0.5],), {}),
    ("_foreach_sub_", "sub_", lambda: (_list(),), {"alpha": 2.0}),
    ("_foreach_mul_", "mul_", lambda: (_list(),), {}),
    ("_foreach_mul_", "mul_", lambda: (ember.tensor(0.3),), {}),
    ("_foreach_div_", "div_", lambda: (_list(positive=True),), {}),
    ("_foreach_div_", "div_", lambda: ([2.0, 3.0, 5.0, 7.0],), {}),
    ("_foreach_lerp_", "lerp_", lambda: (_list(), 0.1), {}),
    ("_foreach_lerp_", "lerp_", lambda: (_list(), 0.9), {}),
    ("_foreach_addcmul_", "addcmul_", lambda: (_list(), _list()), {"value": 0.5}),
    ("_foreach_addcdiv_", "addcdiv_", lambda: (_list(), _list(positive=True)), {"value": -2.0}),
]


@pytest.mark.parametrize(("name", "method", "make", "kwargs"), INPLACE, ids=[f"{c[0]}-{i}" for i, c in
                                                                               enumerate(INPLACE)])
def test_inplace_list_op_equals_the_per_tensor_op(name, method, make, kwargs):
    tensors = _list()
    operands = make()
    expected = _copy(tensors)
    for i, t in enumerate(expected):
        getattr(t, method)(*[o[i] if isinstance(o, list) else o for o in operands], **kwargs)
    data = [t._data for t in tensors]
    versions = [t._version for t in tensors]
    assert getattr(ember, name)(tensors, *operands, **kwargs) is None
    _assert_same(tensors, expected)
    assert all(t._data is d for t, d in zip(tensors, data))
    assert [t._version for t in tensors] == [v + 1 for v in versions]


@pytest.mark.parametrize("per_tensor_values", [False, True])
@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
def test_addc_with_a_value_per_tensor(name, per_tensor_values):
    tensors, t1, t2 = _list(), _list(), _list(positive=True)
    values = [0.5, -1.0, 2.0, 0.25] if per_tensor_values else 0.75
    expected = [getattr(ember, name)(t, a, b, value=values[i] if per_tensor_values else values)
                for i, (t, a, b) in enumerate(zip(tensors, t1, t2))]
    _assert_same(getattr(ember, f"_foreach_{name}")(tensors, t1, t2, values), expected)
    getattr(ember, f"_foreach_{name}_")(tensors, t1, t2, values)
    _assert_same(tensors, expected)


@pytest.mark.parametrize("name", ["sqrt", "neg", "abs", "exp", "reciprocal"])
def test_unary_list_ops(name):
    tensors = _list(positive=True)
    expected = [getattr(ember, name)(t) for t in tensors]
    _assert_same(getattr(ember, f"_foreach_{name}")(tensors), expected)
    getattr(ember, f"_foreach_{name}_")(tensors)
    _assert_same(tensors, expected)


def test_outplace_binary_list_ops():
    a, b = _list(), _list(positive=True)
    _assert_same(ember._foreach_add(a, b, alpha=3), [ember.add(x, y, alpha=3) for x, y in zip(a, b)])
    _assert_same(ember._foreach_sub(a, 1.5), [x - 1.5 for x in a])
    _assert_same(ember._foreach_mul(a, [1.0, 2.0, 3.0, 4.0]), [x * s for x, s in zip(a, [1.0, 2.0, 3.0, 4.0])])
    _assert_same(ember._foreach_div(a, b), [x / y for x, y in zip(a, b)])
    _assert_same(ember._foreach_lerp(a, b, 0.3), [ember.lerp(x, y, 0.3) for x, y in zip(a, b)])
    _assert_same(ember._foreach_maximum(a, b), [ember.maximum(x, y) for x, y in zip(a, b)])
    _assert_same(ember._foreach_minimum(a, b), [ember.minimum(x, y) for x, y in zip(a, b)])
    _assert_same(ember._foreach_sign(a), [x.sign() for x in a])
    _assert_same(ember._foreach_clamp_min(a, 0.0), [x.clamp(min=0.0) for x in a])
    _assert_same(ember._foreach_clamp_max(a, [0.0, 0.1, 0.2, 0.3]),
                 [x.clamp(max=m) for x, m in zip(a, [0.0, 0.1, 0.2, 0.3])])


def test_maximum_minimum_clamp_copy_zero_in_place():
    a, b = _list(), _list()
    a[0]._data.reshape(-1)[0] = np.nan  # NaN wins, as in ember.maximum
    expected = [ember.maximum(x, y) for x, y in zip(a, b)]
    ember._foreach_maximum_(a, b)
    _assert_same(a, expected)
    expected = [ember.minimum(x, y) for x, y in zip(a, b)]
    ember._foreach_minimum_(a, b)
    _assert_same(a, expected)
    c = _list()
    expected = [x.clamp(min=-0.2) for x in c]
    ember._foreach_clamp_min_(c, -0.2)
    _assert_same(c, expected)
    expected = [x.clamp(max=m) for x, m in zip(c, [0.1, 0.2, 0.3, 0.4])]
    ember._foreach_clamp_max_(c, [0.1, 0.2, 0.3, 0.4])
    _assert_same(c, expected)
    ember._foreach_copy_(c, b)
    _assert_same(c, b)
    ember._foreach_zero_(c)
    assert all(not x.numpy().any() for x in c)


def test_norm():
    a = _list(np.float64)
    for ord_ in (2.0, 1.0, float("inf")):
        norms = ember._foreach_norm(a, ord_)
        expected = [np.linalg.norm(x.numpy().reshape(-1), ord_) for x in a]
        np.testing.assert_allclose([n.item() for n in norms], expected, rtol=1e-12)
    assert ember._foreach_norm(a, dtype=ember.float32)[0].dtype is ember.float32


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_norm_direct_path_gives_the_norm_ops_bits(dtype, monkeypatch):
    # plain CPU tensors take the norm op's CPU kernel without dispatching it: the same bits as ember.norm
    rng = np.random.default_rng(5)
    a = [ember.tensor(rng.standard_normal(shape).astype(dtype)) for shape in ((7,), (40, 30), (3, 1, 200), ())]
    a.append(a[1].t())  # a transposed view
    expected = {o: [ember.norm(x, o).numpy() for x in a] for o in (2.0, 1, float("inf"), 3.0)}
    dispatched = []
    from ember._ops import registry

    kernels = registry["norm"].kernels
    real = kernels["cpu"]
    monkeypatch.setitem(kernels, "cpu", lambda *a, **k: dispatched.append(1) or real(*a, **k))
    for o, want in expected.items():
        got = ember._foreach_norm(a, o)
        for g, w in zip(got, want):
            assert g.dtype == ember.from_numpy(w).dtype and g.shape == ()
            np.testing.assert_array_equal(g.numpy(), w)
    assert not dispatched


def test_norm_direct_path_is_one_profiler_row():
    import ember.profiler

    a = [ember.randn(5), ember.randn(3, 4)]
    with ember.profiler.profile() as prof:
        ember._foreach_norm(a, 2.0)
    assert [e.key for e in prof.key_averages()] == ["aten::_foreach_norm"]


def test_list_errors():
    with pytest.raises(RuntimeError, match="Tensor list must have at least one tensor"):
        ember._foreach_add_([], 1)
    with pytest.raises(RuntimeError, match="Tensor lists must have the same number of tensors, got 4 and 3"):
        ember._foreach_add_(_list(), _list()[:3])
    with pytest.raises(TypeError, match="must be a list or tuple of Tensors"):
        ember._foreach_mul_(ember.ones(3), 2.0)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        ember._foreach_add_([ember.ones(3)], [ember.ones(2, 3)])  # the per-tensor op's own error


def test_tensors_the_direct_kernels_do_not_take_go_through_the_per_tensor_ops():
    ints = [ember.tensor([1, 2, 3]), ember.tensor([[4]])]
    ember._foreach_add_(ints, 2)
    assert ints[0].tolist() == [3, 4, 5] and ints[1].tolist() == [[6]]
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        ember._foreach_mul_(ints, 0.5)
    mixed = [ember.ones(2), ember.ones(2, dtype=ember.float64)]
    ember._foreach_add_(mixed, [ember.ones(2, dtype=ember.float64), ember.ones(2)])  # other dtype per pair
    assert [m.dtype for m in mixed] == [ember.float32, ember.float64]
    assert [m.tolist() for m in mixed] == [[2.0, 2.0], [2.0, 2.0]]
    broadcast = [ember.ones(2, 3)]
    ember._foreach_mul_(broadcast, [ember.tensor([1.0, 2.0, 3.0])])
    assert broadcast[0].tolist() == [[1.0, 2.0, 3.0]] * 2


def test_a_dispatch_mode_sees_the_per_tensor_ops():
    seen = []

    class Record(TorchDispatchMode):
        def __ember_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func.name)
            return func(*args, **(kwargs or {}))

    a, b = _list(), _list()
    expected = [ember.lerp(x, y, 0.2) for x, y in zip(a, b)]
    with Record():
        ember._foreach_lerp_(a, b, 0.2)
    assert seen == ["lerp_"] * len(a)
    _assert_same(a, expected)


def test_parameters_take_the_direct_path():
    params = [ember.nn.Parameter(t) for t in _list()]
    expected = [p.detach().clone().mul_(2.0) for p in params]
    with ember.no_grad():
        ember._foreach_mul_(params, 2.0)
    _assert_same([p.detach() for p in params], expected)


class _Proxy:
    """A non-tensor object that intercepts every op it appears in, as an FX proxy does."""

    calls = []

    @classmethod
    def __ember_function__(cls, func, types, args=(), kwargs=None):
        cls.calls.append((func.name, kwargs or {}))


class _Tagged(ember.Tensor):
    calls = []

    @classmethod
    def __ember_function__(cls, func, types, args=(), kwargs=None):
        cls.calls.append(func.name)
        return super().__ember_function__(func, types, args, kwargs)


def test_proxies_and_subclasses_see_the_per_tensor_ops():
    _Proxy.calls.clear()
    ember._foreach_add_([_Proxy(), _Proxy()], [ember.ones(1), ember.ones(1)], alpha=0.5)
    assert _Proxy.calls == [("add_", {"alpha": 0.5})] * 2
    _Tagged.calls.clear()
    tagged = [ember.ones(2).as_subclass(_Tagged), ember.ones(3).as_subclass(_Tagged)]
    ember._foreach_mul_(tagged, 3.0)
    assert _Tagged.calls == ["mul_", "mul_"]
    assert [t.tolist() for t in tagged] == [[3.0, 3.0], [3.0, 3.0, 3.0]]
