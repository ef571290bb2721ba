"""The C++ positional recorder (``ember._C.PositionalRecorder``) builds the node its Python reference builds.

Over op_db's samples that the positional recorder takes, the same call is recorded by the compiled
recorder and by its reference (``recorder.reference``, the Python ``record_positional``), and the
outputs (values, flags, views' bases) and nodes (class, edges, input metadata, needed mask, saved
values and versions, saved outputs) must be the same: the comparison of ``test_record_paths``.
``test_record_paths`` itself compares the compiled recorder (what ``_fast_recorder`` returns) with
``make_node``. Then the cases the compiled recorder hands to its reference or does itself on purpose:
trailing arguments, a tensor subclass, saved-tensor hooks, anomaly mode, gradients through each.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_record_paths import OPS, _array, _outputs, _positional_calls, _same_node, _seeded

import ember
from ember.autograd import _record
from ember.autograd._table import DERIVATIVES
from ember.testing import op_db

pytestmark = pytest.mark.skipif(_record._NativeRecorder is None, reason="ember._C was built without the recorder")

_CPU = ember.device("cpu")


def _recorders(op):
    native = _record._fast_recorder(DERIVATIVES[op])
    assert isinstance(native, _record._NativeRecorder)
    return native, native.reference


# ops with *args after the tensor (view's sizes) keep the Python recorder: the compiled one saves no *args value
NATIVE_OPS = [name for name in OPS if DERIVATIVES[op_db[name].op].var_positional is None]


def test_ops_with_star_args_keep_the_python_recorder():
    star = [name for name in OPS if name not in NATIVE_OPS]
    assert star  # view, permute, expand among op_db's samples
    for name in star:
        recorder = _record._fast_recorder(DERIVATIVES[op_db[name].op])
        assert recorder is not None and not isinstance(recorder, _record._NativeRecorder), name


@pytest.mark.parametrize("name", NATIVE_OPS)
def test_native_recorder_builds_the_reference_node(name):
    info = op_db[name]
    native, reference = _recorders(info.op)
    for label, args, case in _positional_calls(info):
        ours = _seeded(case, lambda: native(args, _CPU))
        theirs = _seeded(case, lambda: reference(args, _CPU))
        where = f"{name} {label}"
        assert (ours is NotImplemented) == (theirs is NotImplemented), where
        if theirs is NotImplemented:
            continue
        outs, refs = _outputs(ours), _outputs(theirs)
        assert len(outs) == len(refs), where
        for i, (o, r) in enumerate(zip(outs, refs)):
            if not isinstance(r, ember.Tensor):
                continue
            assert type(o) is type(r), where
            assert (o.requires_grad, o._output_nr, o._version) == (r.requires_grad, r._output_nr, r._version), where
            np.testing.assert_array_equal(_array(o), _array(r), err_msg=f"{where}: output {i}")
            assert (o._view_info is None) == (r._view_info is None), where
        node = next((o.grad_fn for o in outs if isinstance(o, ember.Tensor) and o.grad_fn is not None), None)
        ref_node = next((r.grad_fn for r in refs if isinstance(r, ember.Tensor) and r.grad_fn is not None), None)
        assert (node is None) == (ref_node is None), where
        if node is not None:
            _same_node(node, ref_node, where)


def _leaf(values):
    return ember.tensor(values, dtype=ember.float64, requires_grad=True)


def test_takes_the_common_calls_and_hands_back_the_rest():
    native, reference = _recorders(_record.registry["mul"])
    x = _leaf([1.0, 2.0])
    c = ember.tensor([3.0, 4.0], dtype=ember.float64)
    # taken: two plain tensors, a tensor and a number
    for args in ((x, c), (x, 2.5), (c, x)):
        out = native(args, _CPU)
        assert type(out.grad_fn).__name__ == "MulBackward0"
    # no argument requires grad: NotImplemented, as the reference answers
    assert native((c, c), _CPU) is NotImplemented
    # a list where a tensor belongs: the reference's answer
    assert native((x, [1.0, 2.0]), _CPU) is reference((x, [1.0, 2.0]), _CPU)


def test_gradients_match_with_saved_tensor_hooks_and_anomaly_mode():
    native, reference = _recorders(_record.registry["mul"])
    packed = []

    def pack(t):
        packed.append(t)
        return t

    for recorder in (native, reference):
        packed.clear()
        x = _leaf([1.0, -2.0, 3.0])
        w = _leaf([0.5, 0.25, -1.0])
        with ember.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            y = recorder((x, w), _CPU)
        assert len(packed) == 2  # both inputs saved through the hook
        y.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), [0.5, 0.25, -1.0])
        np.testing.assert_array_equal(w.grad.numpy(), [1.0, -2.0, 3.0])
        with pytest.warns(UserWarning, match="Anomaly Detection"), ember.autograd.detect_anomaly():
            z = recorder((x, w), _CPU)
        assert z.grad_fn._anomaly_trace  # the forward trace is recorded


def test_inplace_write_after_saving_is_detected():
    native, _ = _recorders(_record.registry["mul"])
    x = _leaf([1.0, 2.0])
    c = ember.tensor([3.0, 4.0], dtype=ember.float64)
    y = native((x, c), _CPU)
    c.add_(1)  # c was saved at version 0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_exp_saves_its_output():
    exp_native, exp_reference = _recorders(_record.registry["exp"])
    for recorder in (exp_native, exp_reference):
        x = ember.tensor([0.5, -1.0], dtype=ember.float32, requires_grad=True)
        y = recorder((x,), _CPU)
        assert y.grad_fn._saved_results is not None
        y.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), np.exp([0.5, -1.0]).astype(np.float32), rtol=1e-6)
