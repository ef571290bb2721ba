"""The compiled dispatcher hot path (``ember._C.make_dispatch``, csrc/dispatch.h) against its Python reference.

``ember._ops._dispatch.dispatch`` is the compiled function when the extension has it; the Python
function stays as ``python_dispatch`` and gets every call the compiled one does not take. Both must
give the same result (bits, dtype, shape), the same error and warnings, and the same autograd node,
for op_db's positional samples with and without grad, and the compiled one must hand keyword calls,
sequences, subclasses, modes and mixed devices to the reference.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
from ember._ops import _dispatch, registry
from ember.testing import op_db

pytestmark = pytest.mark.skipif(
    _dispatch.dispatch is _dispatch.python_dispatch, reason="ember._C was built without make_dispatch"
)

_DTYPES = (ember.float32, ember.int64, ember.bool)
_OPS = sorted(n for n in op_db if "random" not in op_db[n].op.tags)


def _describe(result):
    if isinstance(result, ember.Tensor):
        grad_fn = None if result.grad_fn is None else result.grad_fn.name()
        return ("tensor", result.dtype, tuple(result.shape), np.ascontiguousarray(result._host_array()).tobytes(),
                result.requires_grad, grad_fn)
    if isinstance(result, (tuple, list)):
        return tuple(_describe(r) for r in result)
    return result


def _outcome(dispatch, op, args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = ("ok", _describe(dispatch(op, args, {})))
        except Exception as exc:  # noqa: BLE001 - the error is part of what is compared
            value = ("error", type(exc), str(exc))
    return value, [(w.category, str(w.message)) for w in caught]


def _positional(info, dtype, requires_grad):
    for sample in info.sample_inputs(info, "cpu", dtype, False):
        if not sample.kwargs:
            args = (sample.input, *sample.args)
            if requires_grad:  # the floating tensor arguments become leaves that require grad
                args = tuple(
                    a.detach().requires_grad_(True) if isinstance(a, ember.Tensor) and a.is_floating_point() else a
                    for a in args
                )
            yield args


@pytest.mark.parametrize("name", _OPS)
def test_op_db_positional_samples_give_what_the_reference_gives(name):
    info = op_db[name]
    count = 0
    for dtype in (d for d in _DTYPES if d in info.dtypes):
        grads = (False, True) if dtype.is_floating_point and info.supports_autograd else (False,)
        for requires_grad in grads:
            native = list(_positional(info, dtype, requires_grad))  # the sample functions are seeded
            reference = list(_positional(info, dtype, requires_grad))
            for a, b in zip(native, reference):
                assert _outcome(_dispatch.dispatch, info.op, a) == _outcome(_dispatch.python_dispatch, info.op, b), (
                    f"{name} {dtype} requires_grad={requires_grad}"
                )
                count += 1
    assert count > 0 or not any(d in info.dtypes for d in _DTYPES) or all(
        s.kwargs for d in _DTYPES if d in info.dtypes for s in info.sample_inputs(info, "cpu", d, False)
    )


def test_the_hot_paths_call_the_compiled_function():
    from ember import _tensor_methods

    assert _dispatch._dispatch_fast is _dispatch.dispatch
    assert _tensor_methods._dispatch is _dispatch.dispatch
    x = ember.ones(3, requires_grad=True)
    y = x * 2.0 + x
    assert y.grad_fn.name() == "AddBackward0"
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0, 3.0])


@pytest.fixture
def reference_calls(monkeypatch):
    """The ops the compiled function handed to the Python reference (the native function holds the original
    reference, which the spy cannot replace; it records through _dispatch_general and _run_mode instead)."""
    seen = []
    general, run_mode = _dispatch._dispatch_general, _dispatch._run_mode
    monkeypatch.setattr(_dispatch, "_dispatch_general", lambda op, *a: seen.append(op.name) or general(op, *a))
    monkeypatch.setattr(_dispatch, "_run_mode", lambda op, *a: seen.append(op.name) or run_mode(op, *a))
    return seen


def test_calls_outside_the_hot_path_go_to_the_reference(reference_calls):
    from ember.utils._python_dispatch import TorchDispatchMode

    x = ember.ones(2, 3)
    ember.add(x, x, alpha=2)  # a keyword
    assert ember.sum(x, (0, 1)).item() == 6.0  # a tuple argument: the reference's own loop takes it
    ember.cat([x, x])  # a list of tensors

    class Sub(ember.Tensor):
        pass

    ember.neg(x.as_subclass(Sub))  # a subclass that may override

    class Mode(TorchDispatchMode):
        def __ember_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Mode():
        ember.neg(x)
    assert reference_calls == ["add", "cat", "neg", "neg", "neg"]  # (the subclass: twice, its override runs neg again)
    reference_calls.clear()
    ember.neg(x)
    x * 2.0
    assert reference_calls == []


def test_a_number_for_a_tensor_is_named_on_both_paths():
    x = ember.ones(2, 2)
    op = registry["matmul"]
    native = _outcome(_dispatch.dispatch, op, (x, 2.0))
    assert native == _outcome(_dispatch.python_dispatch, op, (x, 2.0))
    assert native[0][0] == "error" and native[0][1] is TypeError and "argument 'other'" in native[0][2]


def test_a_failed_allocation_gives_the_reference_error(monkeypatch):
    op = registry["neg"]

    def no_memory(*args):
        raise MemoryError

    monkeypatch.setitem(op.checked_kernels, "cpu", no_memory)
    x = ember.ones(3)
    native = _outcome(_dispatch.dispatch, op, (x,))
    assert native == _outcome(_dispatch.python_dispatch, op, (x,))
    assert native[0][0] == "error" and issubclass(native[0][1], RuntimeError) and "allocate" in native[0][2].lower()


def test_other_errors_pass_unchanged(monkeypatch):
    op = registry["neg"]

    def broken(*args):
        raise ValueError("from the kernel")

    monkeypatch.setitem(op.checked_kernels, "cpu", broken)
    with pytest.raises(ValueError, match="from the kernel"):
        _dispatch.dispatch(op, (ember.ones(3),), {})


def test_grad_mode_and_the_handler_are_read_at_each_call():
    x = ember.ones(3, requires_grad=True)
    with ember.no_grad():
        assert ember.neg(x).grad_fn is None
    assert ember.neg(x).grad_fn is not None
    with ember.inference_mode():
        assert not ember.neg(x).requires_grad
