"""ember.nn containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict."""

from collections import OrderedDict

import numpy as np
import pytest

import ember
from ember import nn


class AddConst(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c

    def forward(self, x):
        return x + self.c

    def extra_repr(self):
        return f"c={self.c}"


def test_sequential_forward_indexing_and_names():
    s = nn.Sequential(AddConst(1), AddConst(2), AddConst(3))
    np.testing.assert_array_equal(s(ember.zeros(2)).numpy(), [6.0, 6.0])
    assert [n for n, _ in s.named_children()] == ["0", "1", "2"]
    assert s[-1].c == 3 and len(s) == 3
    tail = s[1:]
    assert type(tail) is nn.Sequential and [n for n, _ in tail.named_children()] == ["1", "2"]
    with pytest.raises(IndexError, match="index 3 is out of range"):
        s[3]
    named = nn.Sequential(OrderedDict([("first", AddConst(1)), ("second", AddConst(5))]))
    assert list(named._modules) == ["first", "second"]
    assert repr(named) == "Sequential(\n  (first): AddConst(c=1)\n  (second): AddConst(c=5)\n)"


def test_sequential_mutation():
    s = nn.Sequential(AddConst(0), AddConst(1))
    s.append(AddConst(2))
    s.insert(0, AddConst(-1))
    assert [m.c for m in s] == [-1, 0, 1, 2] and list(s._modules) == ["0", "1", "2", "3"]
    s.extend([AddConst(3)])
    popped = s.pop(1)
    assert popped.c == 0 and [m.c for m in s] == [-1, 1, 2, 3] and list(s._modules) == ["0", "1", "2", "3"]
    del s[1:3]
    assert [m.c for m in s] == [-1, 3] and list(s._modules) == ["0", "1"]
    s[0] = AddConst(9)
    assert s[0].c == 9
    assert [m.c for m in (s + nn.Sequential(AddConst(4)))] == [9, 3, 4]
    with pytest.raises(IndexError, match="Index out of range: 5"):
        s.insert(5, AddConst(0))


def test_module_list():
    ml = nn.ModuleList([AddConst(1), AddConst(1), AddConst(2)])
    assert repr(ml) == "ModuleList(\n  (0-1): 2 x AddConst(c=1)\n  (2): AddConst(c=2)\n)"
    ml.append(AddConst(3))
    ml.insert(0, AddConst(0))
    assert [m.c for m in ml] == [0, 1, 1, 2, 3]
    del ml[0]
    assert list(ml._modules) == ["0", "1", "2", "3"] and ml[0].c == 1
    assert type(ml[1:3]) is nn.ModuleList and len(ml[1:3]) == 2
    ml += [AddConst(7)]
    assert ml[-1].c == 7
    assert repr(nn.ModuleList()) == "ModuleList()"
    with pytest.raises(TypeError, match="ModuleList.extend should be called with an iterable, but got int"):
        ml.extend(3)


def test_module_dict():
    md = nn.ModuleDict({"b": AddConst(1), "a": AddConst(2)})
    assert list(md.keys()) == ["b", "a"]  # insertion order
    md["c"] = AddConst(3)
    assert "c" in md and len(md) == 3
    assert md.pop("b").c == 1 and list(md) == ["a", "c"]
    md.update([("d", AddConst(4))])
    assert [m.c for m in md.values()] == [2, 3, 4]
    with pytest.raises(ValueError, match="has length 1; 2 is required"):
        md.update([("x",)])


def test_parameter_list_and_state_dict():
    pl = nn.ParameterList([ember.ones(2, 3), nn.Parameter(ember.zeros(2))])
    assert all(isinstance(p, nn.Parameter) for p in pl)
    pl.append(ember.full((1,), 5.0))
    assert list(pl.state_dict()) == ["0", "1", "2"]
    assert len(list(pl.parameters())) == 3
    assert repr(pl) == (
        "ParameterList(\n"
        "    (0): Parameter containing: [ember.float32 of size 2x3]\n"
        "    (1): Parameter containing: [ember.float32 of size 2]\n"
        "    (2): Parameter containing: [ember.float32 of size 1]\n"
        ")"
    )
    with pytest.raises(RuntimeError, match="ParameterList should not be called."):
        pl(1)


def test_parameter_dict():
    pd = nn.ParameterDict({"b": ember.ones(2), "a": ember.zeros(1)})
    assert list(pd.keys()) == ["a", "b"]  # a plain dict is inserted in sorted order, as in PyTorch
    assert [n for n, _ in pd.named_parameters()] == ["a", "b"]
    pd["c"] = nn.Parameter(ember.ones(3))
    assert pd.get("zz") is None and "c" in pd
    assert pd.pop("a").shape == (1,)
    assert repr(pd) == (
        "ParameterDict(\n"
        "    (b): Parameter containing: [ember.FloatTensor of size 2]\n"
        "    (c): Parameter containing: [ember.FloatTensor of size 3]\n"
        ")"
    )
    merged = pd | nn.ParameterDict(OrderedDict(d=ember.ones(1)))
    assert list(merged.keys()) == ["b", "c", "d"]


def test_nested_state_dict_keys():
    net = nn.Sequential(nn.ModuleList([nn.ParameterList([ember.ones(1)])]), nn.ModuleDict({"x": AddConst(0)}))
    net[1]["x"].register_buffer("buf", ember.zeros(1))
    assert list(net.state_dict()) == ["0.0.0", "1.x.buf"]
