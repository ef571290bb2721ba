"""Pytree inputs and outputs: concrete_args structures become one placeholder per leaf, and the
generated forward takes and returns the original structures (in_spec / out_spec)."""

from __future__ import annotations

import copy
import importlib.util
import sys

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.fx import PH, Interpreter, Transformer, symbolic_trace
from ember.fx._pytree import tree_flatten_spec
from ember.utils._pytree import tree_structure


def _close(a, b, tol=1e-6):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


class Heads(nn.Module):
    """Takes a dict of features and a (mask, [bias]) pair, returns a nested structure."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 3)

    def forward(self, inputs, extra):
        mask, (bias,) = extra
        h = self.proj(inputs["feat"] * mask) + bias
        return {"logits": h, "aux": (ember.relu(h), [inputs["other"].sum()])}


def _inputs():
    inputs = {"feat": ember.randn(2, 4), "other": ember.randn(5)}
    extra = (ember.rand(2, 4), [ember.randn(3)])
    return inputs, extra


def _assert_same_structure_and_values(out, ref):
    assert tree_structure(out) == tree_structure(ref)
    for a, b in zip(*(tree_structure(x).flatten_up_to(x) for x in (out, ref))):
        _close(a, b)


def _traced():
    ember.manual_seed(0)
    model = Heads()
    concrete = {"inputs": {"feat": PH, "other": PH}, "extra": (PH, [PH])}
    return model, symbolic_trace(model, concrete_args=concrete)


def test_one_placeholder_per_leaf_and_structured_output():
    model, gm = _traced()
    names = [n.name for n in gm.graph.find_nodes(op="placeholder")]
    assert names == ["inputs_1", "inputs_2", "extra_1", "extra_2"]
    assert "def forward(self, inputs, extra):" in gm.code
    assert "inputs_1, inputs_2, extra_1, extra_2, = _tree_flatten_spec([inputs, extra], _in_spec)" in gm.code
    assert "return _tree_unflatten([" in gm.code
    assert gm._in_spec.num_leaves == 4 and gm._out_spec == tree_structure({"logits": 0, "aux": (0, [0])})
    # the output node returns the flat list of leaves
    (out_node,) = gm.graph.find_nodes(op="output")
    assert isinstance(out_node.args[0], list) and len(out_node.args[0]) == 3
    inputs, extra = _inputs()
    _assert_same_structure_and_values(gm(inputs, extra), model(inputs, extra))


def test_dict_inputs_are_read_by_key_not_by_order():
    model, gm = _traced()
    inputs, extra = _inputs()
    reordered = {"other": inputs["other"], "feat": inputs["feat"], "ignored": 1}
    _assert_same_structure_and_values(gm(reordered, extra), model(inputs, extra))
    with pytest.raises(TypeError, match=r"input\[0\] lacks the key\(s\) \['other'\]"):
        gm({"feat": inputs["feat"]}, extra)
    with pytest.raises(TypeError, match=r"input\[1\]\[1\] must be a sequence of 1 items"):
        gm(inputs, (extra[0], [extra[1][0], extra[1][0]]))


def test_interpreter_transformer_and_deepcopy_keep_the_structures():
    model, gm = _traced()
    inputs, extra = _inputs()
    ref = model(inputs, extra)
    _assert_same_structure_and_values(Interpreter(gm).run(inputs, extra), ref)
    flat = tree_flatten_spec([inputs, extra], gm._in_spec)
    flat_out = Interpreter(gm).run(*flat, enable_io_processing=False)
    assert isinstance(flat_out, list) and len(flat_out) == 3
    _assert_same_structure_and_values(Interpreter(gm).boxed_run(list(flat)), ref)

    class ReluToSigmoid(Transformer):
        def call_function(self, target, args, kwargs):
            if target is ember.relu:
                target = ember.sigmoid
            return super().call_function(target, args, kwargs)

    new = ReluToSigmoid(gm).transform()
    out = new(inputs, extra)
    _close(out["aux"][0], ember.sigmoid(ref["logits"]))
    copied = copy.deepcopy(gm)
    _assert_same_structure_and_values(copied(inputs, extra), ref)
    assert copied.code == gm.code


def test_mixed_fixed_and_symbolic_leaves_and_plain_arguments():
    def f(x, cfg, scale=2.0):
        return x * cfg["w"] + (cfg["b"] if cfg["use_bias"] else 0) * scale

    gm = symbolic_trace(f, concrete_args={"cfg": {"w": PH, "b": PH, "use_bias": True}})
    assert "def forward(self, x, cfg, scale = 2.0):" in gm.code
    x, w, b = ember.randn(3), ember.randn(3), ember.randn(3)
    _close(gm(x, {"w": w, "b": b, "use_bias": "ignored: specialised"}), x * w + b * 2.0)
    _close(gm(x, {"w": w, "b": b, "use_bias": True}, 3.0), x * w + b * 3.0)
    # a single-leaf output is still returned as traced (a tensor, not a list)
    assert isinstance(gm(x, {"w": w, "b": b, "use_bias": True}), ember.Tensor)


def test_names_do_not_shadow_the_structured_parameter():
    def f(x):
        x_sum = x["a"] + x["b"]
        return x_sum.neg()

    gm = symbolic_trace(f, concrete_args={"x": {"a": PH, "b": PH}})
    assert "def forward(self, x):" in gm.code and "x_1, x_2, = " in gm.code
    a, b = ember.randn(2), ember.randn(2)
    _close(gm({"a": a, "b": b}), -(a + b))


def test_to_folder_writes_the_specs(tmp_path):
    model, gm = _traced()
    folder = gm.to_folder(tmp_path / "pytree_pkg", "Heads")
    text = (folder / "module.py").read_text()
    assert "treespec_loads(" in text
    spec = importlib.util.spec_from_file_location(
        "fx_pytree_pkg", folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["fx_pytree_pkg"] = module
    try:
        spec.loader.exec_module(module)
        net = module.Heads()
    finally:
        sys.modules.pop("fx_pytree_pkg", None)
    inputs, extra = _inputs()
    _assert_same_structure_and_values(net(inputs, extra), model(inputs, extra))


def test_keyword_only_structured_parameter_after_a_default():
    def f(x, scale=2.0, *, cfg):
        return x * cfg["w"] * scale

    gm = symbolic_trace(f, concrete_args={"cfg": {"w": PH}})
    assert "def forward(self, x, scale = 2.0, *, cfg):" in gm.code
    x, w = ember.randn(2), ember.randn(2)
    _close(gm(x, cfg={"w": w}), x * w * 2.0)
    _close(gm(x, 0.5, cfg={"w": w}), x * w * 0.5)
