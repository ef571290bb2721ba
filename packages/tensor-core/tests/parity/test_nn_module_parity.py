"""Module printing, state-dict keys and load errors agree with PyTorch for the same structure."""

from collections import OrderedDict

import pytest

import ember
from ember import nn

torch = pytest.importorskip("torch")


def _build(lib, ns):
    class Leaf(ns.Module):
        def __init__(self):
            super().__init__()
            self.weight = ns.Parameter(lib.ones(2, 3))
            self.register_buffer("running", lib.zeros(3))
            self.register_buffer("scratch", lib.zeros(1), persistent=False)

        def extra_repr(self):
            return "features=3"

    class Net(ns.Module):
        def __init__(self):
            super().__init__()
            self.body = ns.Sequential(OrderedDict([("a", Leaf()), ("b", Leaf())]))
            self.heads = ns.ModuleList([Leaf(), Leaf(), Leaf()])
            self.extra = ns.ParameterList([ns.Parameter(lib.ones(4))])
            self.table = ns.ModuleDict({"z": Leaf()})
            self.named = ns.ParameterDict({"b": ns.Parameter(lib.ones(2)), "a": ns.Parameter(lib.zeros(1, 2))})

    return Net()


def test_repr_and_state_dict_keys_match_torch():
    ours, theirs = _build(ember, nn), _build(torch, torch.nn)
    # ParameterList prints the dtype (ember.float32 / torch.float32); the rest is identical
    assert repr(ours).replace("ember.", "torch.") == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]


def test_load_error_message_matches_torch():
    ours, theirs = _build(ember, nn), _build(torch, torch.nn)
    sd_ours, sd_theirs = ours.state_dict(), theirs.state_dict()
    for sd, lib in ((sd_ours, ember), (sd_theirs, torch)):
        del sd["body.a.running"]
        sd["body.a.weight"] = lib.ones(3)
        sd["heads.9.weight"] = lib.ones(1)
    with pytest.raises(RuntimeError) as ours_err:
        ours.load_state_dict(sd_ours)
    with pytest.raises(RuntimeError) as theirs_err:
        theirs.load_state_dict(sd_theirs)
    assert str(ours_err.value).replace("ember.", "torch.") == str(theirs_err.value)
