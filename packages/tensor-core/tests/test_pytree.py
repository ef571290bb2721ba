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
