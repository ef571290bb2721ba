"""The registry and dispatcher contracts: overrides, modes, the autograd slot, out= and in-place."""

import inspect
import sys

import numpy as np
import pytest

import ember
from ember._extensions import MissingDistributionError
from ember._ops import _dispatch, registry
from ember._ops._registry import COMPOSITE, PRIM, defop
from ember.overrides import disable_ember_function
from ember.utils._python_dispatch import DispatchMode, active_modes

# -- the registry ---------------------------------------------------------------------


def test_every_op_is_complete():
    for name, op in registry.items():
        assert callable(op.meta), name
        assert op.category in (PRIM, COMPOSITE), name
        if op.category == COMPOSITE:
            assert op.decomposition is not None, name
        elif op.kind != "view":
            assert op.kernels.keys() - {"meta"}, f"prim {name} has no kernel"
        assert op.kernels["meta"] is op.meta
        assert op.__doc__, f"op {name} has no docstring"


def test_signature_and_normalisation():
    add = registry["add"]
    assert list(inspect.signature(ember.add).parameters) == ["input", "other", "alpha", "out"]
    args, kwargs = add.normalize((ember.ones(1),), {"other": 2})
    assert len(args) == 2 and args[1] == 2 and kwargs == {"alpha": 1}
    with pytest.raises(TypeError, match="add\\(\\)"):
        add.normalize((), {"bogus": 1})


def test_duplicate_registration_raises():
    with pytest.raises(RuntimeError, match="already registered"):
        defop("add", registry["add"].meta)


def test_inplace_variants_are_linked():
    assert registry["add"].inplace is registry["add_"]
    assert registry["add_"].functional is registry["add"]
    assert registry["add_"].kind == "inplace"


# -- __ember_function__ ----------------------------------------------------------------


class Tagged(ember.Tensor):
    """A subclass that keeps its type through every op."""


def test_subclass_survives_ops():
    x = ember.tensor([1.0, 2.0]).as_subclass(Tagged)
    y = (x + 1).view(2, 1)[0]
    assert type(y) is Tagged
    np.testing.assert_array_equal(np.asarray(y), [2.0])
    pieces = x.split(1)
    assert all(type(p) is Tagged for p in pieces)


class Recorder:
    """A non-tensor object that intercepts every op it appears in (like an FX proxy)."""

    calls = []

    @classmethod
    def __ember_function__(cls, func, types, args=(), kwargs=None):
        cls.calls.append((func.name, types))
        return ("recorded", func.name)


def test_foreign_object_intercepts_functions_and_methods():
    Recorder.calls.clear()
    r = Recorder()
    assert ember.add(ember.ones(2), r) == ("recorded", "add")
    assert ember.ones(2) + r == ("recorded", "add")
    assert registry["index"](ember.ones(2), [r]) == ("recorded", "index")  # inside a list
    assert [c[0] for c in Recorder.calls] == ["add", "add", "index"]
    assert Recorder.calls[0][1] == (Recorder,)


class Declines:
    @classmethod
    def __ember_function__(cls, func, types, args=(), kwargs=None):
        return NotImplemented


def test_all_declining_raises_type_error():
    with pytest.raises(TypeError, match="no implementation found for 'add'"):
        ember.add(ember.ones(1), Declines())


def test_subclass_override_is_tried_first():
    order = []

    class Parent(ember.Tensor):
        @classmethod
        def __ember_function__(cls, func, types, args=(), kwargs=None):
            order.append("parent")
            return NotImplemented

    class Child(Parent):
        @classmethod
        def __ember_function__(cls, func, types, args=(), kwargs=None):
            order.append("child")
            return NotImplemented

    p = ember.ones(1).as_subclass(Parent)
    c = ember.ones(1).as_subclass(Child)
    with pytest.raises(TypeError):
        ember.add(p, c)
    assert order == ["child", "parent"]


def test_disable_ember_function():
    x = ember.ones(2).as_subclass(Tagged)
    with disable_ember_function():
        y = x + 1
    assert type(y) is ember.Tensor


# -- dispatch modes -------------------------------------------------------------------


class LogMode(DispatchMode):
    def __init__(self):
        self.calls = []

    def __ember_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls.append((func.name, args, kwargs))
        return func(*args, **kwargs)


def test_mode_sees_normalised_calls():
    x = ember.ones(2)
    with LogMode() as log:
        y = x.add(3, alpha=2)
    np.testing.assert_array_equal(np.asarray(y), [7.0, 7.0])
    name, args, kwargs = log.calls[0]
    assert name == "add" and args[0] is x and args[1] == 3 and kwargs == {"alpha": 2}
    assert active_modes() == ()


def test_mode_sees_decomposed_views_and_inplace():
    x = ember.zeros(2, 3)
    with LogMode() as log:
        x[0, 1:] = 5.0
        x.add_(1)
    assert [c[0] for c in log.calls] == ["select", "slice", "fill_", "add_"]
    np.testing.assert_array_equal(np.asarray(x), [[1, 6, 6], [1, 1, 1]])


def test_modes_nest_innermost_first():
    outer, inner = LogMode(), LogMode()
    with outer, inner:
        ember.ones(1) * 2
    # the inner mode runs the op below itself, which reaches the outer mode
    assert [c[0] for c in inner.calls] == ["ones", "mul"]
    assert [c[0] for c in outer.calls] == ["ones", "mul"]


def test_mode_can_replace_an_op():
    class Zeroing(DispatchMode):
        def __ember_dispatch__(self, func, types, args=(), kwargs=None):
            result = func(*args, **kwargs)
            return result * 0 if func.name == "add" else result

    with Zeroing():
        y = ember.ones(3) + 1
    np.testing.assert_array_equal(np.asarray(y), [0.0, 0.0, 0.0])


def test_mode_exit_out_of_order_raises():
    a, b = LogMode(), LogMode()
    a.__enter__()
    b.__enter__()
    with pytest.raises(RuntimeError, match="out of order"):
        a.__exit__(None, None, None)
    b.__exit__(None, None, None)
    a.__exit__(None, None, None)


# -- the autograd slot -------------------------------------------------------------------


def test_autograd_handler_sees_calls_with_requires_grad():
    seen = []

    def handler(op, args, kwargs, device):
        seen.append(op.name)
        return _dispatch.run_backend(op, args, kwargs, device)

    # Installed the way ember-autograd installs itself, which also drops the per-op
    # recorders that earlier tests' backward passes cached.
    previous = _dispatch._autograd_handler
    _dispatch.set_autograd_handler(handler)
    try:
        x = ember.ones(2, requires_grad=True)
        assert x.requires_grad
        x * 2
        ember.ones(2) * 2  # no input requires grad
        with ember.no_grad():
            x * 3
    finally:
        _dispatch.set_autograd_handler(previous)
    assert seen == ["mul"]


def test_missing_distributions_are_named(monkeypatch):
    from ember import _extensions

    # what core sees when ember-autograd is not installed (it may be, in this environment)
    monkeypatch.setattr(_extensions, "autograd", _extensions._AutogradSlot())
    x = ember.ones(1, requires_grad=True)
    with pytest.raises(MissingDistributionError, match="ember-autograd"):
        x.backward()
    with pytest.raises(MissingDistributionError, match="ember-autograd"):
        x.register_hook(lambda g: g)
    monkeypatch.setitem(sys.modules, "ember._dynamo", None)  # hide ember-dynamo (it may be installed)
    with pytest.raises(MissingDistributionError, match="ember-dynamo"):
        ember.compile(lambda v: v)


# -- out= and in-place ---------------------------------------------------------------------


def test_out_writes_and_returns_out():
    out = ember.empty(3)
    result = ember.add(ember.ones(3), 1, out=out)
    assert result is out
    np.testing.assert_array_equal(np.asarray(out), [2.0, 2.0, 2.0])


def test_out_resizes_only_when_empty():
    out = ember.empty(0)
    ember.mul(ember.ones(2, 2), 3, out=out)
    assert out.shape == (2, 2)
    with pytest.raises(RuntimeError, match="out has shape"):
        ember.mul(ember.ones(2, 2), 3, out=ember.empty(5))


def test_out_dtype_must_be_castable():
    with pytest.raises(RuntimeError, match="can't be cast"):
        ember.add(ember.ones(2), 1.5, out=ember.empty(2, dtype=ember.int64))
    out = ember.empty(2, dtype=ember.float64)
    ember.add(ember.ones(2), 1, out=out)  # float32 result into float64 is fine
    np.testing.assert_array_equal(np.asarray(out), [2.0, 2.0])


def test_inplace_checks_cast_and_shape_before_writing():
    x = ember.tensor([1, 2])
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        x += 1.5
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        x.add_(ember.ones(3, 2, dtype=ember.int64))
    np.testing.assert_array_equal(np.asarray(x), [1, 2])  # untouched
    assert x._version == 0
    x += 1
    np.testing.assert_array_equal(np.asarray(x), [2, 3])
    assert x._version == 1


def test_errors_leave_inputs_untouched():
    a = ember.ones(2, 3)
    before = a.numpy().copy()
    with pytest.raises(RuntimeError, match=r"size of tensor a \(3\) must match the size of tensor b \(4\)"):
        a + ember.ones(4)
    with pytest.raises(IndexError, match="Dimension out of range"):
        a.transpose(0, 5)
    with pytest.raises(TypeError, match="argument 'other' must be Tensor or Number"):
        ember.add(a, "x")
    np.testing.assert_array_equal(a.numpy(), before)


def test_alpha_rules():
    with pytest.raises(RuntimeError, match="alpha must not be a floating point"):
        ember.add(ember.tensor([1]), ember.tensor([1]), alpha=0.5)
    np.testing.assert_array_equal(np.asarray(ember.sub(ember.tensor([10]), ember.tensor([1]), alpha=3)), [7])


def test_mixed_promotion_in_arithmetic():
    cases = [
        (ember.tensor([1], dtype=ember.int32) + 1.5, ember.float32, [2.5]),
        (ember.tensor([200], dtype=ember.uint8) + 100, ember.uint8, [44]),
        (ember.tensor([1], dtype=ember.int32) + ember.tensor(1.5, dtype=ember.float64), ember.float64, [2.5]),
        (ember.tensor([1.0], dtype=ember.float16) * ember.tensor(3.0, dtype=ember.float64), ember.float16, [3.0]),
        (ember.tensor([1, 2]) / 2, ember.float32, [0.5, 1.0]),
        (2 - ember.tensor([1.0]), ember.float32, [1.0]),
        (1 / ember.tensor([4.0]), ember.float32, [0.25]),
    ]
    for result, dtype, values in cases:
        assert result.dtype is dtype
        np.testing.assert_allclose(np.asarray(result, dtype=np.float64), values)


def test_return_types_module_names_the_namedtuples():
    import pickle

    result = ember.max(ember.tensor([[1.0, 5.0], [7.0, 2.0]]), dim=1)
    assert type(result) is ember.return_types.max
    np.testing.assert_array_equal(result.values.numpy(), [5.0, 7.0])
    np.testing.assert_array_equal(result.indices.numpy(), [1, 0])
    assert "sort" in ember.return_types.__all__ and "topk" in ember.return_types.__all__
    # the class is importable by its qualified name, so the tuple type pickles (not its tensors)
    assert pickle.loads(pickle.dumps(type(result))) is ember.return_types.max


def test_a_cpu_tensor_with_dims_never_joins_another_device():
    # only zero-dim CPU tensors may join another device's op (as in PyTorch); the order does not matter
    meta = ember.empty(3, device="meta")
    cpu = ember.ones(3)
    scalar = ember.tensor(2.0)
    for call in (lambda: ember.add(cpu, meta), lambda: ember.add(meta, cpu), lambda: ember.add(cpu, meta, alpha=2),
                 lambda: ember.cat([cpu, meta]), lambda: ember.where(cpu > 0, meta, meta),
                 lambda: ember.addcmul(scalar, cpu, meta)):
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            call()
    assert ember.add(scalar, meta).device.type == "meta"
    assert ember.addcmul(scalar, meta, meta).device.type == "meta"


def test_a_device_is_one_object_however_it_is_spelled():
    # the dispatcher compares devices by identity first: "cuda:0" and ("cuda", 0) were two objects,
    # and a compiled graph's factory (device=ember.device("cuda", 0)) then failed against its inputs
    assert ember.device("cuda:0") is ember.device("cuda", 0)
    assert ember.device("cuda", 1) is ember.device("cuda:1")
    assert ember.device(ember.device("meta")) is ember.device("meta")


def test_equal_devices_from_different_objects_are_one_device():
    # and should two equal device objects still meet (one made around the cache), the check compares
    # type and index rather than failing
    a = ember.ones(3)
    other = object.__new__(type(a._device))
    for name, value in (("type", "cpu"), ("index", None), ("_key", ("cpu", None))):
        object.__setattr__(other, name, value)
    b = ember.Tensor._make(np.ones(3, np.float32), other)
    assert b._device is not a._device and b._device == a._device
    assert ember.add(a, b).tolist() == [2.0, 2.0, 2.0]
    assert ember.cat([b, a]).shape == (6,)


def test_parameters_and_scalar_tuples_take_the_hot_loop(monkeypatch):
    # nn.Parameter opts out of overrides, and a tuple of ints holds nothing to scan: neither sends a call to the
    # general scan any more, and the results are the general path's
    assert ember.nn.Parameter in _dispatch.PLAIN_TENSOR_TYPES
    general = []
    original = _dispatch._dispatch_general
    monkeypatch.setattr(_dispatch, "_dispatch_general", lambda *a: general.append(a[0].name) or original(*a))
    w = ember.nn.Parameter(ember.arange(6.0).reshape(2, 3))
    x = ember.ones(4, 3)
    out = ember.nn.functional.linear(x, w)
    np.testing.assert_array_equal(out.detach().numpy(), np.ones((4, 3)) @ np.arange(6.0).reshape(2, 3).T)
    assert ember.sum(x, (0, 1)).item() == 12.0
    assert general == []
    assert ember.cat((x, x)).shape == (8, 3)  # tensors inside a tuple: the general scan sees them
    assert general == ["cat"]
    # a size tuple without tensors: the general path finds the default device
    assert ember.zeros((2, 3)).shape == (2, 3)


def test_only_subclasses_that_opt_out_register_as_plain_tensors():
    class Overriding(ember.Tensor):
        @classmethod
        def __ember_function__(cls, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    for cls in (Overriding, int, ember.Tensor.__mro__[-1]):
        with pytest.raises(TypeError, match="opts out of overrides"):
            _dispatch.register_plain_tensor_type(cls)
    assert Overriding not in _dispatch.PLAIN_TENSOR_TYPES


def test_composites_whose_decomposition_checks_skip_their_meta():
    # reshape, flatten and conv*d raise their meta's errors from the decomposition itself
    for name in ("reshape", "flatten", "conv1d", "conv2d", "conv3d"):
        assert registry[name].decomposition_checks, name
    assert not registry["linear"].decomposition_checks
    x = ember.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="invalid for input of size 6"):
        x.reshape(4, 2)
    with pytest.raises(RuntimeError, match="start_dim cannot come after end_dim"):
        ember.flatten(x, 1, 0)
    with pytest.raises(RuntimeError):
        ember.nn.functional.conv2d(ember.ones(1, 2, 4, 4, requires_grad=True), ember.ones(1, 3, 3, 3))
