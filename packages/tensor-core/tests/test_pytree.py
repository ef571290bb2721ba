"""ember.utils._pytree: flatten/unflatten, maps, specs, registration and JSON serialisation."""

from __future__ import annotations

import json
from collections import OrderedDict, defaultdict, deque, namedtuple

import pytest

import ember
from ember.utils import _pytree as pytree
from ember.utils._pytree import (
    LeafSpec,
    TreeSpec,
    register_pytree_node,
    tree_flatten,
    tree_leaves,
    tree_map,
    tree_map_only,
    tree_structure,
    tree_unflatten,
    treespec_dumps,
    treespec_loads,
)

Point = namedtuple("Point", "x y")


def _examples():
    """Nested structures covering every built-in node type, None and empty containers."""
    return [
        1,
        None,
        [],
        (),
        {},
        [1, 2, 3],
        (1, [2, (3, 4)], {"b": 5, "a": 6}),
        {"z": [None, 1], "a": {"q": (2,), "p": []}},
        OrderedDict([("y", 1), ("x", [2, 3])]),
        [Point(1, [2, 3]), Point(x={"k": 4}, y=None)],
        {1: "s", "two": 2.5, (3, 4): [5]},
        defaultdict(list, {"a": [1], "b": 2}),
        deque([1, (2, 3)], maxlen=4),
    ]


@pytest.mark.parametrize("tree", _examples(), ids=lambda t: type(t).__name__)
def test_round_trip_and_leaf_order(tree):
    leaves, spec = tree_flatten(tree)
    rebuilt = tree_unflatten(leaves, spec)
    assert rebuilt == tree and type(rebuilt) is type(tree)
    assert spec.num_leaves == len(leaves)
    assert tree_leaves(tree) == leaves
    assert tree_structure(tree) == spec


def test_leaf_order_is_depth_first_and_dicts_keep_insertion_order():
    tree = {"b": [1, (2, 3)], "a": 4, "c": {"y": 5, "x": 6}}
    leaves, spec = tree_flatten(tree)
    assert leaves == [1, 2, 3, 4, 5, 6]
    assert spec.context == ["b", "a", "c"]
    assert tree_structure({"a": 1, "b": 2}) != tree_structure({"b": 2, "a": 1})
    assert tree_structure([1, 2]) == tree_structure([3, 4])
    assert tree_structure([1, 2]) != tree_structure((1, 2))


def test_none_is_a_leaf_and_unregistered_types_are_leaves():
    assert tree_flatten(None) == ([None], LeafSpec())
    assert tree_leaves([None, {"a": None}]) == [None, None]

    class Box:
        pass

    box = Box()
    assert tree_leaves([box]) == [box]
    t = ember.ones(2)
    assert tree_leaves({"t": t})[0] is t


def test_treespec_repr_and_properties():
    spec = tree_structure({"w": 1, "b": [2, (3, None)]})
    assert repr(spec) == (
        "TreeSpec(dict, ['w', 'b'], [*,\n  TreeSpec(list, None, [*,\n    TreeSpec(tuple, None, [*,\n      *])])])"
    )
    assert repr(LeafSpec()) == "*"
    assert spec.num_leaves == 4 and spec.num_nodes == 7 and spec.num_children == 2
    assert not spec.is_leaf() and spec.children_specs[0].is_leaf()
    assert LeafSpec() == TreeSpec(None, None, [])
    assert hash(tree_structure([1, {"a": 2}])) == hash(tree_structure([5, {"a": 6}]))
    assert repr(tree_structure(Point(1, 2))) == "TreeSpec(namedtuple, <class 'test_pytree.Point'>, [*,\n  *])"


def test_return_types_are_named_tuple_nodes():
    result = ember.max(ember.tensor([[1.0, 5.0], [3.0, 2.0]]), 0)
    leaves, spec = tree_flatten(result)
    assert leaves[0] is result.values and leaves[1] is result.indices
    assert spec.context is ember.return_types.max
    rebuilt = tree_unflatten(leaves, spec)
    assert type(rebuilt) is ember.return_types.max and rebuilt.values is result.values
    assert treespec_loads(treespec_dumps(spec)) == spec


def test_unflatten_errors():
    spec = tree_structure([1, 2])
    with pytest.raises(ValueError, match="`leaves` has length 1 but the spec refers to a pytree that holds 2"):
        tree_unflatten([1], spec)
    with pytest.raises(TypeError, match="treespec must be a TreeSpec"):
        tree_unflatten([1], [1])


def test_tree_map_with_rests_and_is_leaf():
    tree = {"a": [1, 2], "b": (3,)}
    assert tree_map(lambda x: x * 10, tree) == {"a": [10, 20], "b": (30,)}
    assert tree_map(lambda x, y: x + y, tree, {"a": [5, 6], "b": (7,)}) == {"a": [6, 8], "b": (10,)}
    # a leaf of the first tree may face a whole subtree of the others
    assert tree_map(lambda x, y: (x, y), [1, 2], [[9, 9], 3]) == [(1, [9, 9]), (2, 3)]
    with pytest.raises(ValueError, match="spec expects"):
        tree_map(lambda x, y: x, [1, 2], (1, 2))
    with pytest.raises(ValueError, match="context"):
        tree_map(lambda x, y: x, {"a": 1}, {"b": 1})
    # is_leaf keeps the lists whole
    assert tree_map(len, {"a": [1, 2], "b": [3]}, is_leaf=lambda x: isinstance(x, list)) == {"a": 2, "b": 1}


def test_tree_map_only():
    tree = (1, "s", 2.0, [True, ember.ones(2)])
    out = tree_map_only(int, lambda x: x + 1, tree)
    assert out[:3] == (2, "s", 2.0) and out[3][0] == 2  # bool is an int, as in Python
    out = tree_map_only((int, float), lambda x: -x, (1, "s", 2.0))
    assert out == (-1, "s", -2.0)
    out = tree_map_only(ember.Tensor, lambda t: t * 3, tree)
    assert out[3][1].tolist() == [3.0, 3.0]
    out = tree_map_only(lambda x: isinstance(x, str), str.upper, tree)
    assert out[1] == "S"
    out = tree_map_only(int | float, lambda x: 0, (1, 2.0, "s"))
    assert out == (0, 0, "s")
    assert pytree.tree_all(lambda x: x > 0, [1, (2, 3)]) and not pytree.tree_any(lambda x: x > 5, [1, (2, 3)])


class _Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def __eq__(self, other):
        return type(other) is _Pair and (self.a, self.b) == (other.a, other.b)


@pytest.fixture
def pair_registered():
    register_pytree_node(
        _Pair,
        lambda p: ([p.a, p.b], "pair"),
        lambda children, ctx: _Pair(*children),
        serialized_type_name="test_pytree._Pair",
    )
    yield
    pytree._deregister_pytree_node(_Pair)


def test_register_pytree_node(pair_registered):
    tree = [_Pair(1, {"x": _Pair(2, 3)}), 4]
    leaves, spec = tree_flatten(tree)
    assert leaves == [1, 2, 3, 4]
    assert tree_unflatten([10, 20, 30, 40], spec) == [_Pair(10, {"x": _Pair(20, 30)}), 40]
    assert treespec_loads(treespec_dumps(spec)) == spec
    with pytest.raises(ValueError, match="already registered as pytree node"):
        register_pytree_node(_Pair, lambda p: ([], None), lambda c, x: None)
    with pytest.raises(TypeError, match="flatten_fn must be callable"):
        register_pytree_node(type("Other", (), {}), 3, lambda c, x: None)


def test_treespec_dumps_loads():
    for tree in _examples():
        spec = tree_structure(tree)
        if any(isinstance(x, Point) for x in tree_leaves(tree, is_leaf=lambda x: isinstance(x, Point))):
            with pytest.raises(NotImplementedError, match="_register_namedtuple"):
                treespec_dumps(spec)
            continue
        if isinstance(tree, dict) and any(isinstance(k, tuple) for k in tree):
            with pytest.raises(NotImplementedError, match="not all JSON scalars"):
                treespec_dumps(spec)
            continue
        text = treespec_dumps(spec)
        assert json.loads(text)[0] == 1
        assert treespec_loads(text) == spec, tree
    with pytest.raises(ValueError, match="Unknown protocol 2"):
        treespec_dumps(tree_structure([1]), protocol=2)


def test_treespec_loads_never_resolves_unregistered_names():
    text = json.dumps([1, {"type": "os.system", "context": "null", "children_spec": []}])
    with pytest.raises(ValueError, match="unknown type 'os.system'"):
        treespec_loads(text)
    with pytest.raises(ValueError, match="not a serialized TreeSpec"):
        treespec_loads("{")
    bad_factory = json.dumps(
        [1, {"type": "collections.defaultdict", "context": json.dumps(["eval", []]), "children_spec": []}]
    )
    with pytest.raises(ValueError, match="not a builtin type"):
        treespec_loads(bad_factory)
    with pytest.raises(NotImplementedError, match="not a builtin"):
        treespec_dumps(tree_structure(defaultdict(lambda: 0, {"a": 1})))


# -- parity with torch.utils._pytree ---------------------------------------------------------------------


@pytest.mark.parity
@pytest.mark.parametrize("tree", _examples(), ids=lambda t: type(t).__name__)
def test_parity_leaves_and_spec_text(tree):
    from torch.utils import _pytree as torch_pytree  # lazily: only parity runs have torch

    ours_leaves, ours_spec = tree_flatten(tree)
    theirs_leaves, theirs_spec = torch_pytree.tree_flatten(tree)
    assert ours_leaves == theirs_leaves
    assert ours_spec.num_leaves == theirs_spec.num_leaves
    assert ours_spec.num_nodes == theirs_spec.num_nodes
    assert repr(ours_spec) == repr(theirs_spec)


@pytest.mark.parity
def test_parity_json_layout():
    from torch.utils import _pytree as torch_pytree

    for tree in [[1, (2, 3)], {"b": 1, "a": [None, 2]}, OrderedDict(y=1, x=(2,)), ()]:
        assert treespec_dumps(tree_structure(tree)) == torch_pytree.treespec_dumps(torch_pytree.tree_structure(tree))


# -- key paths ---------------------------------------------------------------------------------------------


def test_key_entries_str_get_and_equality():
    assert str(pytree.SequenceKey(2)) == "[2]" and pytree.SequenceKey(2).get("abc") == "c"
    assert str(pytree.MappingKey("a")) == "['a']" and pytree.MappingKey("a").get({"a": 7}) == 7
    assert str(pytree.MappingKey(1)) == "[1]"
    assert str(pytree.GetAttrKey("x")) == ".x" and pytree.GetAttrKey("x").get(Point(4, 5)) == 4
    assert pytree.SequenceKey(1) == pytree.SequenceKey(1) != pytree.SequenceKey(2)
    assert len({pytree.MappingKey("a"), pytree.MappingKey("a")}) == 1
    with pytest.raises(AttributeError):  # frozen, as PyTorch's dataclasses (FrozenInstanceError)
        pytree.SequenceKey(0).idx = 1
    assert pytree.keystr((pytree.MappingKey("a"), pytree.SequenceKey(0), pytree.GetAttrKey("y"))) == "['a'][0].y"
    assert pytree.keystr(()) == ""


def test_flatten_with_path_hand_computed():
    tree = {"a": [1, Point(2, 3)], "b": deque([4]), "c": defaultdict(int, {1: 5}), "d": OrderedDict(q=6), "e": None}
    pairs, spec = pytree.tree_flatten_with_path(tree)
    assert [(pytree.keystr(p), leaf) for p, leaf in pairs] == [
        ("['a'][0]", 1), ("['a'][1].x", 2), ("['a'][1].y", 3), ("['b'][0]", 4), ("['c'][1]", 5),
        ("['d']['q']", 6), ("['e']", None),
    ]
    assert spec == tree_structure(tree)
    # each path leads back to its leaf
    for path, leaf in pairs:
        node = tree
        for key in path:
            node = key.get(node)
        assert node == leaf
    assert pytree.tree_leaves_with_path(5) == [((), 5)]
    assert pytree.tree_leaves_with_path([[1], {"x": 2}], is_leaf=lambda t: t == [1]) == [
        ((pytree.SequenceKey(0),), [1]), ((pytree.SequenceKey(1), pytree.MappingKey("x")), 2),
    ]


def test_map_with_path_and_rests():
    out = pytree.tree_map_with_path(lambda p, x, y: (pytree.keystr(p), x + y), [1, {"k": 2}], [10, {"k": 20}])
    assert out == [("[0]", 11), {"k": ("[1]['k']", 22)}]
    with pytest.raises(ValueError):
        pytree.tree_map_with_path(lambda p, x, y: x, [1, 2], [1])


def test_with_path_needs_flatten_with_keys_fn():
    class Box:
        def __init__(self, v):
            self.v = v

    register_pytree_node(Box, lambda b: ([b.v], None), lambda c, _: Box(*c))
    try:
        assert tree_leaves([Box(1)]) == [1]
        with pytest.raises(ValueError, match="flatten_with_keys_fn"):
            pytree.tree_flatten_with_path([Box(1)])
    finally:
        pytree._deregister_pytree_node(Box)
    register_pytree_node(
        Box, lambda b: ([b.v], None), lambda c, _: Box(*c),
        flatten_with_keys_fn=lambda b: ([(pytree.GetAttrKey("v"), b.v)], None),
    )
    try:
        assert pytree.tree_leaves_with_path({"b": Box(3)}) == [((pytree.MappingKey("b"), pytree.GetAttrKey("v")), 3)]
    finally:
        pytree._deregister_pytree_node(Box)
    with pytest.raises(TypeError, match="flatten_with_keys_fn must be callable"):
        register_pytree_node(Box, lambda b: ([], None), lambda c, _: Box(0), flatten_with_keys_fn=3)


def _torch_keys_to_ours(torch_pytree, path):
    convert = {
        torch_pytree.SequenceKey: lambda k: pytree.SequenceKey(k.idx),
        torch_pytree.MappingKey: lambda k: pytree.MappingKey(k.key),
        torch_pytree.GetAttrKey: lambda k: pytree.GetAttrKey(k.name),
    }
    return tuple(convert[type(k)](k) for k in path)


@pytest.mark.parity
@pytest.mark.parametrize("tree", _examples(), ids=lambda t: type(t).__name__)
def test_parity_flatten_with_path(tree):
    from torch.utils import _pytree as torch_pytree

    ours, ours_spec = pytree.tree_flatten_with_path(tree)
    theirs, theirs_spec = torch_pytree.tree_flatten_with_path(tree)
    assert [(_torch_keys_to_ours(torch_pytree, p), leaf) for p, leaf in theirs] == ours
    assert [torch_pytree.keystr(p) for p, _ in theirs] == [pytree.keystr(p) for p, _ in ours]
    assert repr(ours_spec) == repr(theirs_spec)
    for ours_key, theirs_key in [
        (pytree.SequenceKey(3), torch_pytree.SequenceKey(3)),
        (pytree.MappingKey("a"), torch_pytree.MappingKey("a")),
        (pytree.GetAttrKey("x"), torch_pytree.GetAttrKey("x")),
    ]:
        assert str(ours_key) == str(theirs_key) and repr(ours_key) == repr(theirs_key)


@pytest.mark.parity
def test_parity_map_with_path():
    from torch.utils import _pytree as torch_pytree

    tree = {"w": [1, Point(2, 3)], "b": (4, deque([5]))}
    other = {"w": [10, Point(20, 30)], "b": (40, deque([50]))}
    ours = pytree.tree_map_with_path(lambda p, x, y: (pytree.keystr(p), x * y), tree, other)
    theirs = torch_pytree.tree_map_with_path(lambda p, x, y: (torch_pytree.keystr(p), x * y), tree, other)
    assert ours == theirs
