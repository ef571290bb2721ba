"""Every way of recording a call builds the same node.

A call reaches ember-autograd's recording by one of several paths
(``ember.autograd._record``): the positional recorder that the dispatcher calls
directly for calls without keywords, :func:`_record.record` with the general
``make_node``, and the same general path for a call that names its arguments by
keyword. They share one node-building helper (``new_node``); this test holds
them to it over op_db's samples: for the same call, each path's node has the
same class, edges (the same node objects), input metadata, needed-inputs mask,
layout, saved values (the same tensor objects at the same version counters,
or equal metadata and numbers) and saved outputs, and the outputs get the same
flags. It runs once with every differentiable input requiring grad and once per
input with only that one requiring it (what a formula of an input that needs
no gradient reads is then not saved).
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from _grad_samples import GradCase

import ember
from ember.autograd import _record
from ember.autograd._table import DERIVATIVES
from ember.autograd.graph import SavedTensor, TensorMeta
from ember.testing import op_db

_CPU = ember.device("cpu")


def _recordable(info):
    op = info.op
    return op in DERIVATIVES and ember.float64 in info.dtypes and _record._fast_recorder(DERIVATIVES[op]) is not None


OPS = sorted(name for name, info in op_db.items() if _recordable(info))


def _positional_calls(info):
    """``(label, args, leaves)`` per usable float64 sample: keyword-free calls the positional recorder takes."""
    entry = DERIVATIVES[info.op]
    for sample in info.sample_inputs(info, "cpu", ember.float64, False):
        if sample.kwargs:
            continue
        case = GradCase(info, sample)
        if not case.leaves:
            continue
        input, args, _ = case.arguments(case.leaves)
        args = (input, *args)
        variants = [("all", case.leaves)]
        if len(case.leaves) > 1:
            for j in range(len(case.leaves)):
                only = [leaf if i == j else leaf.detach() for i, leaf in enumerate(case.leaves)]
                variants.append((f"only {case.labels[j]}", only))
        for label, leaves in variants:
            call = case.arguments(leaves)
            call_args = (call[0], *call[1])
            if not _takes(call_args, len(entry.grad_args)):
                continue
            yield f"{sample.name} / {label}", call_args, case


def _takes(args, k):
    """Whether the positional recorder covers this call: its ``k`` differentiable arguments plain tensors and
    numbers, one requiring grad, and no tensor that requires grad among the arguments after them."""
    if len(args) < k:
        return False
    leading, rest = args[:k], args[k:]
    return (
        all(type(a) is ember.Tensor or a is None or type(a) in (int, float, bool, complex) for a in leading)
        and any(type(a) is ember.Tensor and a.requires_grad for a in leading)
        and not any(_requires_grad(a) for a in rest)
    )


def _requires_grad(value):
    if isinstance(value, (list, tuple)):
        return any(_requires_grad(v) for v in value)
    return isinstance(value, ember.Tensor) and value.requires_grad


def _seeded(case, fn):
    if "random" in case.info.op.tags:
        ember.manual_seed(case.seed)
    return fn()


def _by_keyword(entry, args):
    """The call with every argument after the first passed by keyword, where the signature allows it."""
    parameters = list(entry.op._call_signature.parameters.values())
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    if len(parameters) < len(args) or any(p.kind not in kinds for p in parameters[1 : len(args)]):
        return None
    return args[:1], {p.name: a for p, a in zip(parameters[1 : len(args)], args[1:])}


def _paths(info, args, case):
    """``{path name: result}`` of the same call recorded by each path."""
    op = info.op
    entry = DERIVATIVES[op]
    results = {
        "positional recorder": _seeded(case, lambda: _record._fast_recorder(entry)(args, _CPU)),
        "general (make_node)": _seeded(case, lambda: _record.record(op, entry, args, {}, _CPU)),
        "dispatcher": _seeded(case, lambda: op(*args)),
    }
    keyword = _by_keyword(entry, args)
    if keyword is not None:
        results["general, by keyword"] = _seeded(case, lambda: _record.record(op, entry, keyword[0], keyword[1], _CPU))
    return results


def _outputs(result):
    return list(result) if isinstance(result, tuple) else [result]


def _array(t):
    return np.asarray(t._data)  # the CPU array itself (no op: the comparison must not record or dispatch)


def _same_value(a, b, where):
    if isinstance(a, SavedTensor):
        assert isinstance(b, SavedTensor), where
        assert a._tensor is b._tensor, f"{where}: a different tensor saved"
        assert a._version == b._version, f"{where}: saved at version {a._version} vs {b._version}"
        assert a._is_output == b._is_output, where
    elif isinstance(a, TensorMeta):
        assert isinstance(b, TensorMeta), where
        assert (a.shape, a._np_dtype, a.device, a._strides, a._offset) == (
            b.shape,
            b._np_dtype,
            b.device,
            b._strides,
            b._offset,
        ), where
    elif isinstance(a, (list, tuple)):
        assert type(b) is type(a) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same_value(x, y, f"{where}[{i}]")
    elif isinstance(a, ember.Tensor):  # kept as given (a list holding None besides index tensors)
        assert a is b, f"{where}: a different tensor kept"
    else:
        assert type(a) is type(b) and (a == b or (a != a and b != b)), f"{where}: {a!r} vs {b!r}"


def _same_node(node, reference, where):
    assert type(node) is type(reference), where
    assert len(node.next_functions) == len(reference.next_functions), where
    for i, (e, r) in enumerate(zip(node.next_functions, reference.next_functions)):
        assert e[0] is r[0] and e[1] == r[1], f"{where}: edge {i} is {e}, expected {r}"
    assert tuple(node._input_meta) == tuple(reference._input_meta), f"{where}: input metadata"
    assert node._needed == reference._needed, f"{where}: needed inputs {node._needed} vs {reference._needed}"
    assert node._layout == reference._layout, f"{where}: layout"
    assert (node._num_outputs, node._output_meta) == (reference._num_outputs, reference._output_meta), where
    assert node._saved.keys() == reference._saved.keys(), f"{where}: saved {sorted(node._saved)}"
    for key in node._saved:
        _same_value(node._saved[key], reference._saved[key], f"{where}: saved {key}")
    ours, theirs = node._saved_results, reference._saved_results
    assert (ours is None) == (theirs is None), f"{where}: saved outputs"
    for i, (s, r) in enumerate(zip(ours or (), theirs or ())):
        assert (s is None) == (r is None), where
        if s is not None:
            assert (s._version, s._is_output) == (r._version, r._is_output), f"{where}: saved output {i}"
            np.testing.assert_array_equal(_array(s._tensor), _array(r._tensor), err_msg=f"{where}: saved output {i}")


@pytest.mark.parametrize("name", OPS)
def test_every_recording_path_builds_the_same_node(name):
    info = op_db[name]
    compared = 0
    for label, args, case in _positional_calls(info):
        versions = [a._version for a in args if isinstance(a, ember.Tensor)]
        results = _paths(info, args, case)
        if results["positional recorder"] is NotImplemented:
            continue  # fewer or more arguments than the recorder takes (a required saved argument missing)
        assert [a._version for a in args if isinstance(a, ember.Tensor)] == versions, f"{label}: inputs written"
        reference_name = "general (make_node)"
        reference = _outputs(results[reference_name])
        for path, result in results.items():
            where = f"{name} {label}: {path} vs {reference_name}"
            outs = _outputs(result)
            assert len(outs) == len(reference), where
            for i, (o, r) in enumerate(zip(outs, reference)):
                if not isinstance(r, ember.Tensor):
                    continue
                assert (o.requires_grad, o._output_nr, o._version) == (r.requires_grad, r._output_nr, r._version), (
                    f"{where}: output {i}"
                )
                np.testing.assert_array_equal(_array(o), _array(r), err_msg=f"{where}: output {i}")
                # a view's output knows its base (and the base's version then), whichever path recorded it
                ours, theirs = o._view_info, r._view_info
                assert (ours is None) == (theirs is None), f"{where}: output {i}'s view info"
                if ours is not None:
                    assert ours[0] is theirs[0] and ours[1] == theirs[1], f"{where}: output {i}'s view base"
            node = next((o.grad_fn for o in outs if isinstance(o, ember.Tensor) and o.grad_fn is not None), None)
            ref_node = next((r.grad_fn for r in reference if isinstance(r, ember.Tensor) and r.grad_fn is not None), None)
            assert (node is None) == (ref_node is None), where
            if node is not None:
                _same_node(node, ref_node, where)
                compared += 1
    if not compared:
        pytest.skip(f"{name}: no float64 sample is a keyword-free call that the positional recorder takes")


def test_the_paths_are_compared_for_most_recorded_ops():
    """The comparison above is not vacuous: most ops with a positional recorder have a sample it takes."""
    taken = [name for name in OPS if any(True for _ in _positional_calls(op_db[name]))]
    assert len(taken) >= 0.5 * len(OPS) and len(taken) >= 40, f"only {len(taken)} of {len(OPS)} ops compared"


def test_keyword_path_reads_the_keyword_not_the_default():
    """A saved argument passed by keyword is saved as given (the default would be a wrong value)."""
    x = ember.tensor([1.0, 2.0], dtype=ember.float64, requires_grad=True)
    y = ember.tensor([3.0, 4.0], dtype=ember.float64, requires_grad=True)
    out = ember.add(x, y, alpha=3)
    assert out.grad_fn._saved["alpha"] == 3
    out.sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), [3.0, 3.0])
