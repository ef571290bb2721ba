"""Variable trackers and the builder: which tracker a real value becomes, the guards it records,
how trackers fold constants and rebuild values after the graph."""

from __future__ import annotations

import collections
import functools
import math

import pytest

import ember
import ember.nn as nn
from ember._dynamo.exc import Unsupported
from ember._dynamo.graph import OutputGraph
from ember._dynamo.guards import GuardKind
from ember._dynamo.reconstruct import BuildList, Constant, FromSource, GraphOutput
from ember._dynamo.source import AttrSource, GetItemSource, IteratorItemSource, LocalSource
from ember._dynamo.translator import InstructionTranslatorBase
from ember._dynamo.variables.builtins import BuiltinVariable
from ember._dynamo.variables.constant import ConstantVariable
from ember._dynamo.variables.containers import DictVariable, ListVariable, NamedTupleVariable, TupleVariable
from ember._dynamo.variables.functions import PartialVariable, UserFunctionVariable
from ember._dynamo.variables.iterators import IteratorVariable
from ember._dynamo.variables.leaf import LeafCallableVariable
from ember._dynamo.variables.nn_module import NNModuleVariable
from ember._dynamo.variables.tensor import TensorVariable
from ember._dynamo.variables.user_objects import PythonModuleVariable, UserObjectVariable


def _tx():
    output = OutputGraph(globals())
    return InstructionTranslatorBase((lambda: None).__code__, globals(), {}, {}, output)


def _guards(tx):
    return {(g.source.name() if g.source else None, g.kind): g.expected for g in tx.output.guard_list()}


_Pair = collections.namedtuple("_Pair", "a b")


def _fn(t):
    return t


@pytest.mark.parametrize(
    "value, kind",
    [
        (ember.randn(2), TensorVariable),
        (3, ConstantVariable),
        (None, ConstantVariable),
        ((1, 2), TupleVariable),
        ([1, ember.randn(2)], ListVariable),
        ({"a": 1}, DictVariable),
        (_Pair(1, 2), NamedTupleVariable),
        (nn.Linear(2, 2), NNModuleVariable),
        (_fn, UserFunctionVariable),
        (ember.relu, LeafCallableVariable),
        (math.sqrt, LeafCallableVariable),
        (len, BuiltinVariable),
        (math, PythonModuleVariable),
        (functools.partial(_fn, 1), PartialVariable),
        (iter([1, 2]), IteratorVariable),
        (object(), UserObjectVariable),
    ],
    ids=lambda v: type(v).__name__,
)
def test_builder_picks_the_tracker_kind(value, kind):
    assert isinstance(_tx().output.wrap(value, LocalSource("v")), kind)


def test_builder_guards():
    tx = _tx()
    t = ember.randn(2, 3)
    tx.output.wrap([t, 5], LocalSource("v"))
    guards = _guards(tx)
    assert guards[("L['v']", GuardKind.TYPE_MATCH)] is list
    assert guards[("L['v']", GuardKind.LEN_MATCH)] == 2
    spec = guards[("L['v'][0]", GuardKind.TENSOR_MATCH)]
    assert spec.shape == (2, 3) and spec.dtype == ember.float32
    assert ("L['v'][1]", GuardKind.EQUALS_MATCH) not in guards  # not used yet
    m = nn.Linear(2, 2)
    tx.output.wrap(m, LocalSource("m"))
    assert _guards(tx)[("L['m']", GuardKind.ID_MATCH)] is m
    tx.output.wrap({"k": 1}, LocalSource("d"))
    assert _guards(tx)[("L['d']", GuardKind.DICT_KEYS)] == ["k"]


def test_constant_guard_recorded_when_the_value_is_used():
    tx = _tx()
    var = tx.output.wrap(7, LocalSource("n"))
    assert ("L['n']", GuardKind.EQUALS_MATCH) not in _guards(tx)
    assert isinstance(var.reconstruct(tx.output), FromSource)  # passed through: read again
    assert var.as_constant() == 7
    assert _guards(tx)[("L['n']", GuardKind.EQUALS_MATCH)] == 7
    assert isinstance(var.reconstruct(tx.output), Constant)


def test_same_object_wraps_to_the_same_tracker_and_tensor_to_one_placeholder():
    tx = _tx()
    lst, t = [1], ember.randn(2)
    assert tx.output.wrap(lst, LocalSource("a")) is tx.output.wrap(lst, LocalSource("b"))
    assert tx.output.wrap(t, LocalSource("a")) is tx.output.wrap(t, LocalSource("b"))
    assert tx.output.graph_inputs == [LocalSource("a")]


def test_tensor_tracker_records_ops_and_folds_metadata():
    tx = _tx()
    x = tx.output.wrap(ember.randn(2, 3), LocalSource("x"))
    assert x.example.device.type == "meta" and x.device == ember.device("cpu")
    assert x.getattr(tx, "shape").as_constant() == (2, 3)
    assert x.call_method(tx, "size", [ConstantVariable(1)], {}).as_constant() == 3
    y = x.call_method(tx, "sum", [], {"dim": ConstantVariable(0)})
    assert isinstance(y, TensorVariable) and tuple(y.example.shape) == (3,)
    assert isinstance(y.reconstruct(tx.output), GraphOutput)
    with pytest.raises(Unsupported, match="item"):
        y.call_method(tx, "item", [], {})
    with pytest.raises(Unsupported, match="bool"):
        y.truth(tx)


def test_containers_mutation_is_a_side_effect_only_for_frame_values():
    tx = _tx()
    outside = tx.output.wrap([1, 2], LocalSource("lst"))
    outside.call_method(tx, "append", [ConstantVariable(3)], {})
    inside = ListVariable([ConstantVariable(1)])
    inside.call_method(tx, "append", [ConstantVariable(2)], {})
    (effect,) = tx.output.side_effects.finish(tx.output)
    assert effect.target == FromSource(LocalSource("lst"))
    lst = [1, 2]
    effect.apply((), {"lst": lst}, {})
    assert lst == [1, 2, 3]
    rebuilt = inside.reconstruct(tx.output)
    assert rebuilt.inner == BuildList((Constant(1), Constant(2)))
    assert inside.reconstruct(tx.output) is rebuilt  # one object however often it is reached


def test_dict_tracker_methods():
    tx = _tx()
    d = DictVariable({"a": ConstantVariable(1)})
    d.setitem(tx, ConstantVariable("b"), ConstantVariable(2))
    assert [k.as_constant() for k in d.call_method(tx, "keys", [], {}).items] == ["a", "b"]
    assert d.call_method(tx, "get", [ConstantVariable("z"), ConstantVariable(0)], {}).as_constant() == 0
    assert d.call_method(tx, "pop", [ConstantVariable("a")], {}).as_constant() == 1
    with pytest.raises(Unsupported):
        d.getitem(tx, ConstantVariable("missing"))


def test_builtins_fold_constants():
    tx = _tx()
    c = ConstantVariable
    assert BuiltinVariable(len).call(tx, [ListVariable([c(1), c(2)])], {}).as_constant() == 2
    assert BuiltinVariable(max).call(tx, [c(3), c(9)], {}).as_constant() == 9
    assert BuiltinVariable(isinstance).call(tx, [c(3), BuiltinVariable(int)], {}).as_constant() is True
    items = BuiltinVariable(zip).call(tx, [ListVariable([c(1), c(2)]), ListVariable([c("a"), c("b")])], {})
    assert [t.as_constant() for t in items.unpack(tx)] == [(1, "a"), (2, "b")]
    with pytest.raises(Unsupported, match="print"):
        BuiltinVariable(print).call(tx, [c(1)], {})


def test_iterator_source_reads_without_advancing():
    it = iter([10, 20, 30])
    next(it)
    source = IteratorItemSource(LocalSource("it"), 1)
    assert source.read({"it": it}, {}) == 30
    assert eval(source.name(), {"L": {"it": it}, "G": {}}) == 30
    assert next(it) == 20


def test_attr_and_item_sources_read_and_print():
    obj = collections.namedtuple("O", "w")(w=[5, 6])
    source = GetItemSource(AttrSource(LocalSource("o"), "w"), 1)
    assert source.name() == "L['o'].w[1]"
    assert source.read({"o": obj}, {}) == 6
