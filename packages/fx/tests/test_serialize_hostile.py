"""Hostile GraphModule files (issue 18, "Loading"): each must raise SerializationError, quickly and in little memory.

Each test edits a saved file's GraphModule record as an attacker would (the header checksum
recomputed) and checks the error names what is wrong. The probes that found the issue are
kept: names that are keywords or ``self``, a default naming an unknown variable,
``Linear(in_features=4294967300)`` in a tiny file, ``LSTM(num_layers=10**6)``.
"""

from __future__ import annotations

import io
import json
import random
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember import serialization
from ember.fx import PH, Graph, GraphModule, symbolic_trace
from ember.serialization import SerializationError

# A hostile file is refused within this time and this much memory (Python and numpy allocations).
_TIME_BOUND_S = 2.0
_MEMORY_BOUND = 20 * 2**20


# -- editing saved files -----------------------------------------------------------------------------


def _saved(gm):
    buffer = io.BytesIO()
    ember.save(gm, buffer)
    return buffer.getvalue()


def _tamper(data, edit):
    """``data`` with the GraphModule record edited by ``edit(record)``, the checksum recomputed."""
    return _edit_structure(data, lambda structure: edit(structure["root"]["v"]))


def _edit_structure(data, edit):
    """``data`` with its ``ember.structure`` edited by ``edit(structure)``, the checksum recomputed."""
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    structure = json.loads(header["__metadata__"]["ember.structure"])
    edit(structure)
    header["__metadata__"]["ember.structure"] = json.dumps(structure, separators=(",", ":"))
    header["__metadata__"]["ember.header_sha256"] = serialization._header_checksum(header)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + data[8 + n :]


def _get(record, key):
    """The value of ``key`` in ember's JSON for a dict (``{"t": "dict", "items": [[k, v], ...]}``)."""
    return next(v for k, v in record["items"] if k == key)


def _set(record, key, value):
    for item in record["items"]:
        if item[0] == key:
            item[1] = value
            return
    record["items"].append([key, value])


def _nodes(record):
    return _get(_get(record, "graph"), "nodes")


def _node(record, op, index=0):
    return [n for n in _nodes(record) if _get(n, "op") == op][index]


def _layer(record, name):
    return next(child for child_name, child in _get(record, "children") if child_name == name)


def _load(data):
    return ember.load(io.BytesIO(data))


def _refused(data, match):
    """Load ``data``: it must raise SerializationError matching ``match`` within the time and memory bounds."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(SerializationError, match=match):
            _load(data)
        elapsed = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert elapsed < _TIME_BOUND_S, f"refusing took {elapsed:.2f} s"
    assert peak < _MEMORY_BOUND, f"refusing allocated {peak / 2**20:.1f} MiB"


class _Defaults(nn.Module):
    def forward(self, x, scale=2.0):
        return ember.relu(x).sum(dim=0, keepdim=True) * scale


@pytest.fixture(scope="module")
def defaults_file():
    return _saved(symbolic_trace(_Defaults()))


# -- names in the generated code -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "match"),
    [
        ("class", "placeholder target 'class' is not an identifier"),  # SyntaxError before
        ("lambda", "placeholder target 'lambda' is not an identifier"),
        ("self", "do not make a valid signature: duplicate parameter name: 'self'"),  # SyntaxError before
        ("\uff53\uff45\uff4c\uff46", "is not an identifier that reads as itself"),  # NFKC: reads as "self"
        ("ember", "parameter name 'ember' is a name the generated code uses"),  # would hide the ember global
        ("inf", "parameter name 'inf' is a name the generated code uses"),
        ("***x", r"placeholder target '\*\*\*x' is not a parameter"),
        ("**x", "do not make a valid signature"),  # a ** parameter before another one
        ("x y", "is not an identifier"),
    ],
)
def test_placeholder_names_that_are_not_plain_parameters_are_refused(defaults_file, target, match):
    data = _tamper(defaults_file, lambda r: _set(_node(r, "placeholder"), "target", target))
    _refused(data, match)


def test_placeholder_order_and_duplicates_are_refused(defaults_file):
    # "scale" (with a default) before "x" (without): "non-default argument follows default argument"
    def swap(record):
        nodes = _nodes(record)
        nodes[0], nodes[1] = nodes[1], nodes[0]

    _refused(_tamper(defaults_file, swap), "non-default argument follows default argument")
    _refused(
        _tamper(defaults_file, lambda r: _set(_node(r, "placeholder", 1), "target", "x")),
        "duplicate parameter name: 'x'",
    )


def test_placeholder_target_that_names_another_node_is_refused(defaults_file):
    # def forward(self, relu): ... would read the parameter where the graph means node "relu"
    _refused(
        _tamper(defaults_file, lambda r: _set(_node(r, "placeholder"), "target", "relu")),
        "placeholder target 'relu' is the name of node 'relu'",
    )


def test_builtin_parameter_names_are_allowed_unless_the_code_calls_that_builtin():
    def uses_max(x, max=1.0):  # PyTorch-style code names parameters input, max, min ...
        return ember.clamp(x, max=max)

    x = ember.tensor([0.5, 3.0])
    np.testing.assert_allclose(_load(_saved(symbolic_trace(uses_max)))(x).numpy(), [0.5, 1.0])

    graph = Graph()  # forward(self, x): return len(x)
    graph.output(graph.call_function(len, (graph.placeholder("x"),)))
    data = _saved(GraphModule(nn.Module(), graph))
    assert _load(data)(x) == 2
    _refused(
        _tamper(data, lambda r: _set(_node(r, "placeholder"), "target", "len")),
        "parameter name 'len' is a name the generated code uses",
    )


@pytest.mark.parametrize(
    ("default", "match"),
    [
        (["n", "undefined_variable"], "refers to node 'undefined_variable', which is not defined before it"),
        (["n", "x"], "placeholder default must be a constant, not a Node"),  # NameError before
        (["f", "ember.relu"], "placeholder default must be a constant"),
        (["l", [["c", 1], ["n", "x"]]], "placeholder default must be a constant, not a Node"),
    ],
)
def test_placeholder_default_naming_a_variable_is_refused(defaults_file, default, match):
    data = _tamper(defaults_file, lambda r: _set(_node(r, "placeholder", 1), "args", ["t", [default]]))
    _refused(data, match)


def test_constant_defaults_still_load(defaults_file):
    for default in (["c", None], ["t", [["c", 1], ["e"]]], ["c", "text"]):
        data = _tamper(defaults_file, lambda r, d=default: _set(_node(r, "placeholder", 1), "args", ["t", [d]]))
        assert "scale = " in _load(data).code


@pytest.mark.parametrize("key", ["class", "lambda", "None", "\uff53\uff45\uff4c\uff46", "1x"])
def test_keyword_argument_names_must_be_identifiers_that_read_as_themselves(defaults_file, key):
    def edit(record):
        node = next(n for n in _nodes(record) if _get(n, "op") == "call_method")
        _set(node, "kwargs", ["d", [[["c", key], ["c", 1]]]])

    _refused(_tamper(defaults_file, edit), "keyword .* is not an identifier")


def test_keyword_self_clashes_with_the_receiver(defaults_file):
    def edit(record):
        _set(_node(record, "call_method"), "kwargs", ["d", [[["c", "self"], ["c", 1]]]])

    _refused(_tamper(defaults_file, edit), "keyword 'self' clashes with the receiver")

    def edit_module(record):
        _set(_node(record, "call_module"), "kwargs", ["d", [[["c", "self"], ["c", 1]]]])

    linear = _saved(symbolic_trace(nn.Sequential(nn.Linear(4, 2))))
    _refused(_tamper(linear, edit_module), "keyword 'self' clashes with the module")


def test_node_arity_is_checked(defaults_file):
    _refused(_tamper(defaults_file, lambda r: _set(_node(r, "output"), "args", ["t", []])), "output node cannot take 0")
    _refused(
        _tamper(defaults_file, lambda r: _set(_node(r, "call_method"), "args", ["t", []])),
        "call_method node cannot take 0",
    )
    _refused(
        _tamper(defaults_file, lambda r: _set(_node(r, "placeholder"), "args", ["t", [["c", 1], ["c", 2]]])),
        "placeholder node cannot take 2",
    )


def test_deeply_nested_arguments_are_refused_without_recursion_error(defaults_file):
    nested = ["c", 1]
    for _ in range(40):  # deeper than the loader's bound, within the file format's
        nested = ["l", [nested]]
    data = _tamper(defaults_file, lambda r: _set(_node(r, "call_method"), "args", ["t", [["n", "relu"], nested]]))
    _refused(data, "nested more than 32 deep")


def test_malformed_fields_raise_serialization_error(defaults_file):
    edits = [
        lambda r: _set(r, "format", "1"),
        lambda r: _set(r, "class_name", ""),
        lambda r: _set(r, "training", [[["unhashable"], True]]),
        lambda r: _set(r, "tensors", [[1, 2, 3, 4]]),
        lambda r: _set(r, "children", [["x", {"t": "dict", "items": [["kind", "holder"], ["children", 5]]}]]),
        lambda r: _set(_get(r, "graph"), "pytree", {"t": "dict", "items": []}),
        lambda r: _set(_node(r, "call_function"), "target", ["not", "a", "string"]),
        lambda r: _set(_node(r, "call_method"), "op", "call_everything"),
        lambda r: _set(_node(r, "call_method"), "name", "x"),  # repeated
    ]
    for edit in edits:
        _refused(_tamper(defaults_file, edit), "GraphModule")


def test_pytree_structures_and_names_are_checked():
    gm = symbolic_trace(lambda batch: batch["x"] * 2 + batch["y"], concrete_args={"batch": {"x": PH, "y": PH}})
    data = _saved(gm)

    def orig_args(names):
        return lambda r: _set(_get(_get(r, "graph"), "pytree"), "orig_args", names)

    _refused(_tamper(data, orig_args(["class"])), "original argument name 'class' is not an identifier")
    _refused(_tamper(data, orig_args(["_in_spec"])), "parameter name '_in_spec' is a name the generated code uses")
    _refused(_tamper(data, orig_args(["batch", "other"])), "one entry per original argument")

    def drop_placeholder(record):
        nodes = _nodes(record)
        nodes.remove(next(n for n in nodes if _get(n, "op") == "placeholder" and _get(n, "name") == "batch_2"))
        for n in nodes:  # the node that read it now reads the other leaf
            if _get(n, "op") == "call_function" and _get(n, "args") == ["t", [["n", "mul"], ["n", "batch_2"]]]:
                _set(n, "args", ["t", [["n", "mul"], ["n", "batch_1"]]])

    _refused(_tamper(data, drop_placeholder), "input structure has 2 leaves for 1 placeholders")
    spec = '[1, {"type": "builtins.dict", "context": "[\\"x\\"]", "children_spec": []}]'
    _refused(
        _tamper(data, lambda r: _set(_get(_get(r, "graph"), "pytree"), "in_spec", spec)), "bad input/output structure"
    )


def test_call_target_names_do_not_import_distributions():
    # ember.__getattr__ imports ember.onnx & co on attribute access; the allow-list must not reach it.
    code = textwrap.dedent(
        """
        import io, json, sys
        import ember
        from ember import serialization
        from ember.fx import symbolic_trace
        sys.path.insert(0, {tests!r})
        from test_serialize_hostile import _saved, _tamper, _node, _set
        data = _tamper(_saved(symbolic_trace(lambda x: ember.relu(x))),
                       lambda r: _set(_node(r, "call_function"), "target", "ember.onnx"))
        print("imported before" if "ember.onnx" in sys.modules else "not imported before")
        try:
            ember.load(io.BytesIO(data))
        except serialization.SerializationError as exc:
            print("refused:", exc)
        print("imported" if "ember.onnx" in sys.modules else "not imported")
        """
    ).format(tests=str(Path(__file__).parent))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "refused:" in result.stdout and "is not in the allow-list" in result.stdout
    assert "not imported before" in result.stdout and result.stdout.strip().endswith("not imported")


# -- what a layer record can make the loader allocate --------------------------------------------------------


@pytest.fixture(scope="module")
def linear_file():
    return _saved(symbolic_trace(nn.Sequential(nn.Linear(4, 2))))


def test_linear_with_a_size_the_file_does_not_carry_is_refused_without_allocating(linear_file):
    assert len(linear_file) < 2000  # a tiny file ...
    data = _tamper(linear_file, lambda r: _set(_get(_layer(r, "0"), "kwargs"), "in_features", 4294967300))
    # ... which used to make the loader allocate 4294967300 * 2 float32 before looking at its tensors
    _refused(data, r"tensor '0.weight' is a parameter of shape \[2, 4\], but .* shape \[2, 4294967300\]")


def test_a_huge_meta_weight_loads_without_allocating():
    # A meta tensor carries no bytes, so the file may name any size for it: it loads as meta.
    gm = symbolic_trace(nn.Sequential(nn.Linear(4, 2)))
    gm.get_submodule("0").weight = nn.Parameter(ember.empty(2, 4, device="meta"))

    def edit(structure):
        _set(_get(_layer(structure["root"]["v"], "0"), "kwargs"), "in_features", 4294967300)
        meta = next(t for t in structure["tensors"] if t["storage"] is None)
        meta["shape"], meta["stride"] = [2, 4294967300], [4294967300, 1]

    data = _edit_structure(_saved(gm), edit)
    tracemalloc.start()
    try:
        loaded = _load(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    weight = loaded.get_submodule("0").weight
    assert weight.shape == (2, 4294967300) and weight.device.type == "meta"
    assert peak < _MEMORY_BOUND


def test_lstm_with_a_million_layers_fails_fast():
    data = _saved(symbolic_trace(nn.Sequential(nn.LSTM(4, 3))))
    _refused(
        _tamper(data, lambda r: _set(_get(_layer(r, "0"), "kwargs"), "num_layers", 10**6)),
        r"LSTM with num_layers=1000000 needs more tensors than the 4 the file carries",
    )


@pytest.mark.parametrize(
    ("cls", "args", "match"),
    [
        ("Transformer", [], "never saved as a layer record"),  # num_encoder_layers=10**6 would loop
        ("ParameterList", [[1, 2, 3]], "never saved as a layer record"),
        ("MultiheadAttention", [8, 2], "never saved as a layer record"),
        ("RNNBase", ["LSTM", 4, 3, 10**6], "never saved as a layer record"),  # num_layers is its 4th argument
        ("Upsample", [], "file has no tensor|would replace|holds"),  # no tensors: '0.weight' has no place
        ("BatchNorm1d", [10**12], r"shape \[2, 4\], but .* shape \[1000000000000\]"),
        ("Embedding", [10**12, 10**6], r"shape \[2, 4\], but .* shape \[1000000000000, 1000000\]"),
    ],
)
def test_layer_classes_and_sizes_from_the_file_cannot_allocate(linear_file, cls, args, match):
    def edit(record):
        layer = _layer(record, "0")
        _set(layer, "class", cls)
        _set(layer, "args", args)
        _set(layer, "kwargs", {"t": "dict", "items": []})

    _refused(_tamper(linear_file, edit), match)


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("device", "cuda", "device is not a constructor argument a file may give"),
        ("dtype", "float64", "dtype is not a constructor argument"),
        ("in_features", 2**70, "out of the int64 range"),
        ("in_features", {"t": "dtype", "v": "float32"}, "constructor argument of type dtype is not a literal"),
        ("bias", False, "tensor '0.bias' would replace an attribute of Linear"),
        ("class", 1, "keyword 'class' is not an identifier"),
    ],
)
def test_constructor_arguments_are_literals(linear_file, key, value, match):
    data = _tamper(linear_file, lambda r: _set(_get(_layer(r, "0"), "kwargs"), key, value))
    _refused(data, match)


def test_every_layer_tensor_must_come_from_the_file(linear_file):
    def drop_bias(record):
        tensors = _get(record, "tensors")
        tensors[:] = [t for t in tensors if t[0] != "0.bias"]

    _refused(_tamper(linear_file, drop_bias), r"submodule 0: the file has no tensor for bias")

    def as_buffer(record):
        next(t for t in _get(record, "tensors") if t[0] == "0.bias")[2] = "buffer"

    _refused(_tamper(linear_file, as_buffer), "is a buffer of shape")

    def onto_an_attribute(record):
        next(t for t in _get(record, "tensors") if t[0] == "0.bias")[0] = "0.training"

    _refused(_tamper(linear_file, onto_an_attribute), "would replace an attribute")

    def twice(record):
        tensors = _get(record, "tensors")
        tensors.append(list(tensors[0]))
        tensors[-1][1] = tensors[1][1]  # another tensor at the same place

    _refused(_tamper(linear_file, twice), "is given twice")


def test_get_attr_cannot_walk_through_a_tensor():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def forward(self, x):
            return x @ self.fc.weight

    data = _saved(symbolic_trace(M()))
    _refused(
        _tamper(data, lambda r: _set(_node(r, "get_attr"), "target", "fc.weight.T")),
        "get_attr target 'fc.weight.T' is not reached through submodules",
    )


def test_tied_weights_stay_tied():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 3, bias=False)
            self.b = nn.Linear(3, 3, bias=False)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    loaded = _load(_saved(symbolic_trace(Tied())))
    assert loaded.a.weight is loaded.b.weight
    assert [n for n, _ in loaded.named_parameters()] == ["a.weight"]


def test_round_trips_keep_working():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.LazyLinear(2)).eval()
    x = ember.randn(2, 3, 5, 5)
    model(x)  # the lazy layer becomes a Linear
    gm = symbolic_trace(model)
    np.testing.assert_allclose(_load(_saved(gm))(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-6, atol=1e-6)
    lstm = nn.Sequential(nn.LSTM(4, 3, num_layers=2, bidirectional=True, proj_size=2)).eval()
    seq = ember.randn(5, 1, 4)
    np.testing.assert_allclose(
        _load(_saved(symbolic_trace(lstm)))(seq)[0].detach().numpy(), lstm(seq)[0].detach().numpy(), rtol=1e-6
    )


# -- the fuzz target, briefly (fuzz/run.py runs it for minutes) ----------------------------------------------


def test_fuzz_target_mutants_load_or_raise_serialization_error():
    fuzz = Path(__file__).resolve().parents[3] / "fuzz"
    if not (fuzz / "targets" / "graph_module.py").exists():
        pytest.skip("the repository's fuzz/ folder is not next to this checkout's packages")
    sys.path.insert(0, str(fuzz))
    try:
        from targets import graph_module as target
    finally:
        sys.path.remove(str(fuzz))
    seeds = target.seeds()
    for seed in seeds:
        target.load(seed)  # the seeds themselves load
    rng = random.Random(18)
    refused = 0
    for _ in range(150):
        start = time.perf_counter()
        try:
            target.load(target.mutate(rng.choice(seeds), rng))
        except SerializationError:
            refused += 1
        assert time.perf_counter() - start < _TIME_BOUND_S
    assert refused > 50  # the mutations reach the loader's checks


def test_a_sparse_tensor_cannot_become_a_parameter():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.table = ember.arange(6.0).reshape(2, 3).to_sparse()  # a plain tensor attribute

        def forward(self, x):
            return ember.sparse.mm(self.table, x)

    data = _saved(symbolic_trace(M()))
    assert _load(data).table.layout == ember.sparse_coo

    def as_parameter(record):
        next(t for t in _get(record, "tensors") if t[0] == "table")[2] = "parameter"

    _refused(
        _tamper(data, as_parameter), "a Parameter must be a strided tensor, not ember.sparse_coo"
    )  # RuntimeError before


def test_submodule_names_that_normalize_to_other_attributes_are_not_written_as_attributes(tmp_path):
    # Python reads the full-width name as "to_folder": the code called GraphModule.to_folder(path),
    # which writes files, where the graph calls the child module of that name.
    name = "\uff54\uff4f\uff3f\uff46\uff4f\uff4c\uff44\uff45\uff52"
    root = nn.Module()
    root.add_module(name, nn.Identity())
    graph = Graph()
    graph.placeholder("x")
    graph.output(graph.call_module(name, (str(tmp_path / "written"),)))
    loaded = _load(_saved(GraphModule(root, graph)))
    assert f"getattr(self, {name!r})" in loaded.code
    assert loaded(ember.ones(1)) == str(tmp_path / "written")  # the Identity child's answer
    assert not (tmp_path / "written").exists()


@pytest.mark.parametrize(("op", "name"), [("call_module", "to_folder"), ("call_module", "recompile")])
def test_children_named_like_graph_module_attributes_are_refused(tmp_path, op, name):
    # A child "to_folder" was registered, but self.to_folder(path) in forward is the method: it wrote files.
    root = nn.Module()
    root.add_module(name, nn.Identity())
    graph = Graph()
    graph.placeholder("x")
    graph.output(graph.create_node(op, name, (str(tmp_path / "written"),)))
    _refused(_saved(GraphModule(root, graph)), f"target '{name}' reads a method of the GraphModule")
    assert not (tmp_path / "written").exists()


@pytest.mark.parametrize("kind", ["parameter", "buffer", "tensor"])
def test_tensors_named_like_graph_module_attributes_are_refused(kind):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(ember.ones(2))

        def forward(self, x):
            return x * self.scale

    saved = _saved(symbolic_trace(M()))

    def to_meta(record):
        entry = next(t for t in _get(record, "tensors") if t[0] == "scale")
        entry[0], entry[2] = "meta", kind  # GraphModule sets self.meta = {}
        _set(_node(record, "get_attr"), "target", "meta")

    _refused(_tamper(saved, to_meta), "cannot build the GraphModule|target 'meta' reads a dict of the GraphModule")
