"""Each guard kind, with the real translator: changing only that thing makes exactly one recompile,
and unchanged calls never recompile (issue 26, Checks)."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember._dynamo.testing import CompileCounter

SCALE = 2.0


def helper_a(t):
    return t + 1


def helper_b(t):
    return t - 1


HELPER = helper_a


pytestmark = pytest.mark.usefixtures("fresh_caches")  # conftest.py: empty compile caches for every test


def by_constant(x, n):
    return x * n


def by_list(x, items):
    out = x
    for item in items:
        out = out + item
    return out


def by_dict(x, d):
    out = x
    for key in d:
        out = out * d[key]
    return out


def by_optional(x, bias):
    if bias is None:
        return x * 2
    return x + bias


def by_global(x):
    return x * SCALE


def by_global_function(x):
    return HELPER(x)


def by_tensor(x):
    return x.sin() * 2


def ones(*shape):
    return ember.ones(*shape)


# name, function, first arguments, arguments that change one guarded thing, words of the reason
CASES = [
    ("EQUALS_MATCH", by_constant, lambda: (ones(2), 2), lambda: (ones(2), 3), "L['n'] == 2"),
    ("TYPE_MATCH", by_constant, lambda: (ones(2), 2), lambda: (ones(2), 2.0), "L['n']"),
    ("LEN_MATCH", by_list, lambda: (ones(2), [1, 2]), lambda: (ones(2), [1, 2, 3]), "len(L['items'])"),
    ("DICT_KEYS", by_dict, lambda: (ones(2), {"a": 2, "b": 3}), lambda: (ones(2), {"b": 3, "a": 2}), "keys()"),
    ("IS_NONE", by_optional, lambda: (ones(2), None), lambda: (ones(2), ones(2)), "L['bias']"),
    ("TENSOR_MATCH size", by_tensor, lambda: (ones(3),), lambda: (ones(4),), "size mismatch"),
    ("TENSOR_MATCH dtype", by_tensor, lambda: (ones(3),), lambda: (ones(3).double(),), "dtype mismatch"),
    ("TENSOR_MATCH stride", by_tensor, lambda: (ones(2, 3),), lambda: (ones(3, 2).t(),), "stride mismatch"),
    (
        "TENSOR_MATCH requires_grad",
        by_tensor,
        lambda: (ones(3),),
        lambda: (ones(3).requires_grad_(),),
        "requires_grad mismatch",
    ),
]


def same(a, b):
    np.testing.assert_allclose(np.asarray(a.detach()), np.asarray(b.detach()), rtol=1e-6)


@pytest.mark.parametrize(("name", "fn", "first", "changed", "words"), CASES, ids=[c[0] for c in CASES])
def test_changing_one_guarded_thing_recompiles_once(name, fn, first, changed, words):
    counter = CompileCounter()
    compiled = ember.compile(fn, backend=counter)
    a, b = first(), changed()
    for _ in range(2):
        same(compiled(*a), fn(*a))
    assert len(compiled._cache.entries) == 1
    for _ in range(2):
        same(compiled(*b), fn(*b))
    assert len(compiled._cache.entries) == 2, compiled._cache.recompile_reasons
    same(compiled(*a), fn(*a))  # the first entry still serves the first arguments
    assert len(compiled._cache.entries) == 2
    (reason,) = compiled._cache.recompile_reasons
    assert words in reason, reason


def test_grad_mode_is_guarded():
    compiled = ember.compile(by_tensor, backend="eager")
    x = ones(3)
    compiled(x)
    with ember.no_grad():
        compiled(x)
        compiled(x)
    compiled(x)
    assert len(compiled._cache.entries) == 2 and "grad mode" in compiled._cache.recompile_reasons[0]


def test_a_global_value_is_guarded(monkeypatch):
    compiled = ember.compile(by_global, backend="eager")
    x = ones(2)
    same(compiled(x), x * 2.0)
    monkeypatch.setitem(globals(), "SCALE", 5.0)
    same(compiled(x), x * 5.0)
    same(compiled(x), x * 5.0)
    assert len(compiled._cache.entries) == 2 and "G['SCALE']" in compiled._cache.recompile_reasons[0]


def test_a_global_function_is_guarded_by_identity(monkeypatch):
    compiled = ember.compile(by_global_function, backend="eager")
    x = ones(2)
    same(compiled(x), x + 1)
    monkeypatch.setitem(globals(), "HELPER", helper_b)
    same(compiled(x), x - 1)
    same(compiled(x), x - 1)
    assert len(compiled._cache.entries) == 2 and "G['HELPER']" in compiled._cache.recompile_reasons[0]


def test_module_training_flag_is_guarded():
    model = ember.nn.Dropout(0.5)
    compiled = ember.compile(model, backend="eager")
    x = ones(4)
    model.eval()
    same(compiled(x), x)
    model.train()
    compiled(x)
    compiled(x)
    model.eval()
    same(compiled(x), x)
    cache = compiled._compiled_call._cache
    assert len(cache.entries) == 2 and "training" in cache.recompile_reasons[0]


def test_unchanged_calls_never_recompile():
    compiled = ember.compile(by_list, backend="eager")
    for _ in range(5):
        compiled(ember.randn(2), [1, 2])  # new tensors, same specs and constants
    assert len(compiled._cache.entries) == 1 and compiled._cache.recompile_reasons == []


class Net(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = ember.nn.Linear(2, 2)

    def forward(self, x):
        return self.fc(x).relu()


def test_a_hook_added_later_recompiles_and_runs():
    model = Net()
    compiled = ember.compile(model, backend="eager")
    x = ember.randn(3, 2)
    compiled(x)
    model.fc.register_forward_hook(lambda module, args, out: out * 3)
    same(compiled(x), model(x))
    same(compiled(x), model.fc(x).relu())  # the hook triples fc's output before relu
    assert len(compiled._compiled_call._cache.entries) == 2


def test_replacing_a_submodule_or_parameter_recompiles():
    # guards read submodules and parameters from the module's stores: a replacement must be seen
    model = Net()
    compiled = ember.compile(model, backend="eager")
    x = ember.randn(3, 2)
    same(compiled(x), model(x))
    model.fc = ember.nn.Linear(2, 2)
    same(compiled(x), model(x))
    cache = compiled._compiled_call._cache
    assert len(cache.entries) == 2 and "fc" in cache.recompile_reasons[0]
    # a new parameter of the same spec is a new graph input value: read, not recompiled
    model.fc.weight = ember.nn.Parameter(ember.ones(2, 2))
    same(compiled(x), model(x))
    assert len(cache.entries) == 2


def test_graph_inputs_are_read_from_the_module_stores(monkeypatch):
    # a hit reads nested parameters and buffers from their modules' dicts (as the guards do), not
    # through Module.__getattr__; the values are the module's current ones
    model = ember.nn.Sequential(Net(), ember.nn.BatchNorm1d(2))
    compiled = ember.compile(model, backend="eager")
    x = ember.randn(4, 2)
    same(compiled(x), model(x))
    with ember.no_grad():
        model[0].fc.weight.mul_(3.0)
    expected = model(x)
    calls = []
    original = ember.nn.Module.__getattr__
    monkeypatch.setattr(ember.nn.Module, "__getattr__", lambda self, name: calls.append(name) or original(self, name))
    actual = compiled(x)
    monkeypatch.undo()
    same(actual, expected)
    assert calls == []


def matmul_relu(a, b):
    return (a @ b).relu()


def test_autocast_state_is_guarded():
    compiled = ember.compile(matmul_relu, backend="eager")
    a, b = ember.randn(4, 4), ember.randn(4, 4)
    assert compiled(a, b).dtype == ember.float32
    with ember.autocast("cpu", dtype=ember.bfloat16):
        assert compiled(a, b).dtype == ember.bfloat16
        compiled(a, b)
    assert compiled(a, b).dtype == ember.float32
    assert len(compiled._cache.entries) == 2 and "autocast" in compiled._cache.recompile_reasons[0]
