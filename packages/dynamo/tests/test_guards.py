"""The guard compiler: one generated check per cache entry; each kind holds and fails as it should."""

from __future__ import annotations

import pytest

import ember
from ember._dynamo.guards import Guard, GuardCheck, GuardKind, TensorSpec, describe_failure, order_guards
from ember._dynamo.source import AttrSource, GetItemSource, GlobalSource, LocalSource

X = LocalSource("x")


def spec_of(t, dynamic=()):
    shape = tuple(None if i in dynamic else s for i, s in enumerate(t.shape))
    stride = tuple(None if i in dynamic else s for i, s in enumerate(t.stride()))
    return TensorSpec(t.dtype, t.device, shape, stride, t.requires_grad)


class Holder:
    def __init__(self, value):
        self.value = value


SENTINEL = object()

# kind, expected, a value that holds, a value that fails, words in the failure message
CASES = [
    (GuardKind.TYPE_MATCH, int, 3, 3.0, "type(L['x']) changed"),
    (GuardKind.ID_MATCH, SENTINEL, SENTINEL, object(), "different object"),
    (GuardKind.EQUALS_MATCH, 3, 3, 4, "== 3 failed: got 4"),
    (GuardKind.EQUALS_MATCH, 3, 3, 3.0, "== 3 failed: got 3.0"),  # same value, other type
    (GuardKind.LEN_MATCH, 2, [1, 2], [1, 2, 3], "len(L['x']) == 2 failed: got 3"),
    (GuardKind.DICT_KEYS, ["a", "b"], {"a": 1, "b": 2}, {"b": 2, "a": 1}, "keys()"),
    (GuardKind.DICT_KEYS, [], {}, {"a": 1}, "keys() == [] failed: got ['a']"),
    (GuardKind.IS_NONE, None, None, 0, "is None failed"),
    (GuardKind.NOT_NONE, None, 0, None, "is not None failed"),
]


@pytest.mark.parametrize(("kind", "expected", "good", "bad", "words"), CASES, ids=lambda v: str(v)[:20])
def test_each_python_guard_kind_holds_and_fails(kind, expected, good, bad, words):
    check = GuardCheck([Guard(X, kind, expected)])
    assert check({"x": good}, {}) is True
    assert check({"x": bad}, {}) is False
    assert words in check.explain_failure({"x": bad}, {})
    assert check.explain_failure({"x": good}, {}) is None


def test_module_training_guard():
    m = ember.nn.Linear(2, 2)
    check = GuardCheck([Guard(X, GuardKind.MODULE_TRAINING, True)])
    assert check({"x": m}, {})
    m.eval()
    assert not check({"x": m}, {})
    assert check.explain_failure({"x": m}, {}) == "L['x'].training == True failed: got False"


def test_grad_mode_guard():
    check = GuardCheck([Guard(None, GuardKind.GRAD_MODE, True)])
    assert check({}, {})
    with ember.no_grad():
        assert not check({}, {})
        assert "grad mode changed" in check.explain_failure({}, {})


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda t: ember.randn(3, 5), "size mismatch at index 1: expected 4, actual 5"),
        (lambda t: ember.randn(3, 4, 1), "has 3 dims, expected 2"),
        (lambda t: t.double(), "dtype mismatch"),
        (lambda t: t.clone().requires_grad_(), "requires_grad mismatch"),
        (lambda t: ember.randn(4, 3).t(), "stride mismatch at index 0: expected 4, actual 1"),
        (lambda t: [t], "is not a tensor"),
    ],
    ids=["size", "ndim", "dtype", "requires_grad", "stride", "not-a-tensor"],
)
def test_tensor_match_fails_on_each_property(change, words):
    t = ember.randn(3, 4)
    check = GuardCheck([Guard(X, GuardKind.TENSOR_MATCH, spec_of(t))])
    assert check({"x": t}, {}) and check({"x": ember.zeros(3, 4)}, {})
    other = change(t)
    assert not check({"x": other}, {})
    assert words in check.explain_failure({"x": other}, {})


def test_tensor_match_with_a_dynamic_dim_accepts_any_size_there():
    t = ember.randn(3, 4)
    check = GuardCheck([Guard(X, GuardKind.TENSOR_MATCH, spec_of(t, dynamic={0}))])
    assert check({"x": ember.randn(7, 4)}, {})
    assert check({"x": ember.randn(1, 4)}, {})
    assert not check({"x": ember.randn(7, 5)}, {})
    assert not check({"x": ember.randn(7)}, {})


def test_attribute_and_item_paths_are_read_once_and_missing_paths_fail():
    source = AttrSource(GetItemSource(X, 0), "value")
    guards = [Guard(source, GuardKind.TYPE_MATCH, int), Guard(source, GuardKind.EQUALS_MATCH, 5)]
    check = GuardCheck(guards)
    assert check.source.count(".value") == 1  # the path is read into one local
    assert check({"x": [Holder(5)]}, {})
    assert not check({"x": [Holder(6)]}, {})
    assert not check({"x": []}, {})  # IndexError inside the check: no match, no exception
    assert not check({"x": [object()]}, {})  # AttributeError
    assert "cannot be read" in check.explain_failure({"x": []}, {})


def test_global_source():
    check = GuardCheck([Guard(GlobalSource("scale"), GuardKind.EQUALS_MATCH, 2.0)])
    assert check({}, {"scale": 2.0})
    assert not check({}, {"scale": 3.0})
    assert not check({}, {})


def test_order_is_cheap_first_and_deduplicated():
    t = ember.randn(2)
    tensor = Guard(X, GuardKind.TENSOR_MATCH, spec_of(t))
    grad = Guard(None, GuardKind.GRAD_MODE, True)
    typ = Guard(X, GuardKind.TYPE_MATCH, ember.Tensor)
    deep = Guard(AttrSource(LocalSource("m"), "training"), GuardKind.EQUALS_MATCH, True)
    shallow = Guard(LocalSource("n"), GuardKind.EQUALS_MATCH, 1)
    ordered = order_guards([grad, tensor, deep, typ, shallow, typ])
    assert ordered == [typ, shallow, deep, tensor, grad]


def test_empty_guard_list_always_holds():
    assert GuardCheck([])({}, {})


def test_describe_failure_of_one_guard():
    guard = Guard(LocalSource("n"), GuardKind.EQUALS_MATCH, 1)
    assert describe_failure(guard, {"n": 1}, {}) is None
    assert describe_failure(guard, {"n": 2}, {}) == "L['n'] == 1 failed: got 2"
    assert describe_failure(guard, {}, {}).startswith("L['n'] cannot be read: KeyError")


def test_unknown_kind_is_refused_when_compiling():
    class Odd:
        value = "ODD"

    with pytest.raises(ValueError, match="no rule for kind"):
        GuardCheck([Guard(X, Odd(), None)])


def test_autocast_guard():
    from ember._dynamo.guards import autocast_state

    assert autocast_state() == ()
    outside = GuardCheck([Guard(None, GuardKind.AUTOCAST, ())])
    assert outside({}, {})
    with ember.autocast("cpu", dtype=ember.bfloat16):
        state = autocast_state()
        assert state == (("cpu", ember.bfloat16),)
        assert not outside({}, {})
        assert "autocast changed" in outside.explain_failure({}, {})
        inside = GuardCheck([Guard(None, GuardKind.AUTOCAST, state)])
        assert inside({}, {})
        with ember.autocast("cpu", enabled=False):
            assert outside({}, {}) and not inside({}, {})
    assert not inside({}, {})
