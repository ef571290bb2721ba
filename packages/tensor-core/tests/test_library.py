"""ember.library: custom ops as registry entries (kernels per device type, fake implementations on meta
tensors, mutated arguments, ``Library.define``/``impl`` from schema strings, ``ember.ops.<ns>.<name>``) and
the errors PyTorch raises. Autograd is tested in ember-autograd's tests/test_library_autograd.py and
``make_fx`` in ember-fx's tests/test_library_fx.py.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import ember
from ember import Tensor
from ember._ops import registry
from ember.library import Library, custom_op

_COUNTER = itertools.count()


@pytest.fixture(autouse=True)
def _remove_new_ops():
    """Remove the ops a test defines: registry-wide tests (every op has an OpInfo...) must not meet them."""
    before = set(registry)
    yield
    for name in set(registry) - before:
        ember.library._delete_op(name)


def _unique(prefix):
    """A fresh op name per test (the registry is global)."""
    return f"{prefix}{next(_COUNTER)}"


def _numpy_sin(namespace="embertest"):
    name = _unique("numpy_sin")

    @custom_op(f"{namespace}::{name}", mutates_args=())
    def op(x: Tensor) -> Tensor:
        return ember.from_numpy(np.sin(x.numpy()))

    return op, name


def test_custom_op_with_a_numpy_kernel():
    op, name = _numpy_sin()
    x = ember.tensor([0.0, 0.5, 2.0], dtype=ember.float64)
    np.testing.assert_allclose(op(x).numpy(), np.sin(x.numpy()), rtol=1e-15)
    assert op.name == f"embertest::{name}" and repr(op) == f"<CustomOpDef(embertest::{name})>"
    assert registry[f"embertest::{name}"] is op.op
    assert getattr(ember.ops.embertest, name) is op.op
    np.testing.assert_allclose(getattr(ember.ops.embertest, name)(x).numpy(), np.sin(x.numpy()), rtol=1e-15)


def test_keyword_and_default_arguments():
    @custom_op(f"embertest::{_unique('scale')}", mutates_args=())
    def scale(x: Tensor, factor: float = 2.0, *, shift: int = 0) -> Tensor:
        return ember.from_numpy(x.numpy() * factor + shift)

    x = ember.tensor([1.0, 2.0])
    np.testing.assert_array_equal(scale(x).numpy(), [2.0, 4.0])
    np.testing.assert_array_equal(scale(x, 3.0, shift=1).numpy(), [4.0, 7.0])
    np.testing.assert_array_equal(scale(x, factor=0.5).numpy(), [0.5, 1.0])
    with pytest.raises(TypeError):
        scale(x, 1.0, 2)  # shift is keyword-only


def test_meta_tensors_need_a_fake_then_use_it():
    op, _ = _numpy_sin()
    with pytest.raises(RuntimeError, match="There was no fake impl registered for"):
        op(ember.empty(2, 3, device="meta"))

    @op.register_fake
    def _(x):
        return ember.empty_like(x)

    out = op(ember.empty(2, 3, dtype=ember.float64, device="meta"))
    assert out.device.type == "meta" and tuple(out.shape) == (2, 3) and out.dtype == ember.float64
    # the fake is not run for real tensors
    np.testing.assert_allclose(op(ember.tensor([1.0])).numpy(), [np.sin(1.0)], rtol=1e-6)


def test_several_outputs_and_a_fake_with_new_shapes():
    @custom_op(f"embertest::{_unique('split_sum')}", mutates_args=())
    def split_sum(x: Tensor) -> tuple[Tensor, Tensor]:
        data = x.numpy()
        return ember.from_numpy(data.sum(0)), ember.from_numpy(data.sum(1))

    ember.library.register_fake(split_sum.name, lambda x: (x.new_empty(x.shape[1]), x.new_empty(x.shape[0])))
    x = ember.arange(6.0).reshape(2, 3)
    a, b = split_sum(x)
    np.testing.assert_array_equal(a.numpy(), [3.0, 5.0, 7.0])
    np.testing.assert_array_equal(b.numpy(), [3.0, 12.0])
    ma, mb = split_sum(ember.empty(4, 5, device="meta"))
    assert tuple(ma.shape) == (5,) and tuple(mb.shape) == (4,)


def test_mutated_arguments_are_written_and_versioned():
    @custom_op(f"embertest::{_unique('add_one_')}", mutates_args=("x",))
    def add_one_(x: Tensor) -> None:
        x.numpy()[...] += 1

    t = ember.zeros(3)
    version = t._version
    assert add_one_(t) is None
    np.testing.assert_array_equal(t.numpy(), [1.0, 1.0, 1.0])
    assert t._version > version
    assert add_one_.mutates_args == ("x",)


def test_kernels_per_device_type():
    @custom_op(f"embertest::{_unique('tagged')}", mutates_args=(), device_types="cpu")
    def tagged(x: Tensor) -> Tensor:
        return ember.from_numpy(x.numpy() + 1)

    assert "cpu" in tagged.op.kernels and "cuda" not in tagged.op.kernels
    np.testing.assert_array_equal(tagged(ember.zeros(2)).numpy(), [1.0, 1.0])

    @tagged.register_kernel("cpu")
    def _(x):
        return ember.from_numpy(x.numpy() + 10)

    np.testing.assert_array_equal(tagged(ember.zeros(2)).numpy(), [10.0, 10.0])
    ember.library.register_kernel(tagged, ["cuda"], lambda x: x + 100)
    assert "cuda" in tagged.op.kernels


def test_kernels_get_tensors_that_do_not_require_grad():
    seen = []

    @custom_op(f"embertest::{_unique('peek')}", mutates_args=())
    def peek(x: Tensor) -> Tensor:
        seen.append((x.requires_grad, ember.is_grad_enabled()))
        return ember.from_numpy(x.numpy() * 2)

    peek.register_autograd(lambda ctx, grad: grad * 2)
    peek(ember.ones(2, requires_grad=True))
    assert seen == [(False, False)]


def test_errors_match_pytorch():
    with pytest.raises(ValueError, match="Expected there to be a namespace in foo"):
        custom_op("foo", mutates_args=())(lambda x: x)
    with pytest.raises(ValueError, match="Parameter x must have a type annotation"):
        custom_op(f"embertest::{_unique('noann')}", mutates_args=())(lambda x: x)

    def f(x: Tensor) -> Tensor:
        return x

    with pytest.raises(ValueError, match=r"\{'y'\} in mutates_args were not found in the custom op's signature"):
        custom_op(f"embertest::{_unique('badmut')}", mutates_args=("y",))(f)
    with pytest.raises(ValueError, match="no custom op named"):
        ember.library.register_fake("embertest::never_defined", lambda x: x)
    with pytest.raises(AttributeError, match="has no attribute 'never_defined'"):
        ember.ops.embertest.never_defined  # noqa: B018
    with pytest.raises(ValueError, match="Unsupported kind"):
        Library("embertest", "WRONG")

    @custom_op(f"embertest::{_unique('bad_return')}", mutates_args=())
    def bad_return(x: Tensor) -> Tensor:
        return 3

    with pytest.raises(RuntimeError, match="must return a Tensor or a tuple of Tensors"):
        bad_return(ember.ones(1))


def test_redefinition_replaces_the_op():
    name = f"embertest::{_unique('again')}"
    @custom_op(name, mutates_args=())
    def one(x: Tensor) -> Tensor:
        return ember.from_numpy(x.numpy() + 1)

    @custom_op(name, mutates_args=())
    def two(x: Tensor) -> Tensor:
        return ember.from_numpy(x.numpy() + 2)

    namespace, opname = name.split("::")
    assert getattr(getattr(ember.ops, namespace), opname) is two.op
    np.testing.assert_array_equal(registry[name](ember.zeros(1)).numpy(), [2.0])


def test_library_define_and_impl():
    ns = _unique("emberlib")
    lib = Library(ns, "DEF")
    assert lib.define("mul(Tensor x, float s=3.0, *, bool negate=False) -> Tensor") == "mul"

    def mul(x, s=3.0, *, negate=False):
        return ember.from_numpy(x.numpy() * (-s if negate else s))

    lib.impl("mul", mul, "CPU")
    lib.impl("mul", lambda x, s=3.0, *, negate=False: ember.empty_like(x), "Meta")
    op = getattr(ember.ops, ns).mul
    np.testing.assert_array_equal(op(ember.ones(2)).numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(op(ember.ones(2), 2.0, negate=True).numpy(), [-2.0, -2.0])
    assert tuple(op(ember.empty(4, device="meta")).shape) == (4,)
    with pytest.raises(RuntimeError, match="not allowed in a Library of kind 'IMPL'"):
        Library(ns, "IMPL").define("other(Tensor x) -> Tensor")
    with pytest.raises(ValueError, match="Could not parse the schema"):
        lib.define("no arrow here")
    with pytest.raises(ValueError, match="unsupported dispatch key"):
        lib.impl("mul", mul, "XLA")


def test_module_level_define_and_impl():
    ns = _unique("emberdef")
    definition = ember.library.define(f"{ns}::twice", "(Tensor x) -> Tensor")

    @ember.library.impl(f"{ns}::twice", "cpu")
    def _(x):
        return ember.from_numpy(x.numpy() * 2)

    np.testing.assert_array_equal(definition(ember.ones(2)).numpy(), [2.0, 2.0])
    assert definition.tensor_parameters == ("x",)


def test_schema_argument_instead_of_annotations():
    @custom_op(f"embertest::{_unique('schema')}", mutates_args=(), schema="(Tensor x, int n) -> Tensor")
    def repeat(x, n):
        return ember.from_numpy(np.tile(x.numpy(), n))

    np.testing.assert_array_equal(repeat(ember.tensor([1.0, 2.0]), 2).numpy(), [1.0, 2.0, 1.0, 2.0])
    assert repeat.tensor_parameters == ("x",)
