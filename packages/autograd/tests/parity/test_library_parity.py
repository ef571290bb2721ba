"""ember.library against torch.library (run with ``nox -s parity``): the basic custom_op flow written once
for both libraries (a numpy kernel, register_fake, register_autograd), compared on values, gradients, meta
shapes, the library's ``ops.<ns>.<name>`` access and the errors' types and messages.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import ember
from ember._ops import registry

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_COUNTER = itertools.count()


@pytest.fixture(autouse=True)
def _remove_new_ops():
    before = set(registry)
    yield
    for name in set(registry) - before:
        ember.library._delete_op(name)


def _define(lib, name):
    """The same custom op in ``lib`` (torch or ember): sin(x) * scale through numpy, with fake and backward."""
    Tensor = lib.Tensor

    def numpy_sin_scale(x: Tensor, scale: float) -> Tensor:
        return lib.from_numpy(np.sin(x.detach().numpy()) * scale)

    # the annotations must be objects for torch's schema inference (this module does not postpone them)
    numpy_sin_scale.__annotations__ = {"x": Tensor, "scale": float, "return": Tensor}
    op = lib.library.custom_op(name, mutates_args=())(numpy_sin_scale)
    op.register_fake(lambda x, scale: lib.empty_like(x))

    def setup_context(ctx, inputs, output):
        x, scale = inputs
        ctx.save_for_backward(x)
        ctx.scale = scale

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.cos() * ctx.scale, None

    op.register_autograd(backward, setup_context=setup_context)
    return op


def test_values_gradients_and_meta_match():
    name = f"paritylib::sin_scale{next(_COUNTER)}"
    ours, theirs = _define(ember, name), _define(torch, name)
    values = np.linspace(-3, 3, 7)
    x_e = ember.tensor(values, requires_grad=True)
    x_t = torch.tensor(values, requires_grad=True)
    y_e, y_t = ours(x_e, 1.5), theirs(x_t, 1.5)
    np.testing.assert_allclose(y_e.detach().numpy(), y_t.detach().numpy(), rtol=1e-15)
    y_e.sum().backward()
    y_t.sum().backward()
    np.testing.assert_allclose(x_e.grad.numpy(), x_t.grad.numpy(), rtol=1e-15)
    m_e, m_t = ours(ember.empty(2, 3, device="meta"), 1.0), theirs(torch.empty(2, 3, device="meta"), 1.0)
    assert tuple(m_e.shape) == tuple(m_t.shape) and m_e.device.type == m_t.device.type == "meta"
    ns, op_name = name.split("::")
    via_ops = getattr(getattr(ember.ops, ns), op_name)(ember.tensor(values), 2.0)
    np.testing.assert_allclose(via_ops.numpy(), getattr(getattr(torch.ops, ns), op_name)(torch.tensor(values), 2.0))


def _errors(lib):
    Tensor = lib.Tensor

    def no_annotation(x):
        return x

    def one_arg(x):
        return x

    one_arg.__annotations__ = {"x": Tensor, "return": Tensor}
    return [
        lambda: lib.library.custom_op("paritylib::noann", mutates_args=())(no_annotation),
        lambda: lib.library.custom_op(f"paritylib::badmut{next(_COUNTER)}", mutates_args=("y",))(one_arg),
    ]


@pytest.mark.parametrize("index", [0, 1])
def test_errors_match(index):
    with pytest.raises(Exception) as theirs:
        _errors(torch)[index]()
    with pytest.raises(type(theirs.value)) as ours:
        _errors(ember)[index]()
    assert str(theirs.value).split(" Got func")[0] == str(ours.value).split(" Got func")[0]


def test_missing_backward_and_missing_fake_match():
    name = f"paritylib::plain{next(_COUNTER)}"
    for lib in (torch, ember):
        Tensor = lib.Tensor

        def plain(x):
            return lib.from_numpy(x.detach().numpy() * 2)

        plain.__annotations__ = {"x": Tensor, "return": Tensor}
        op = lib.library.custom_op(name, mutates_args=())(plain)
        y = op(lib.ones(2, requires_grad=True))
        with pytest.raises(RuntimeError, match="no autograd formula was registered"):
            y.sum().backward()
        with pytest.raises(RuntimeError, match="There was no fake impl registered for"):
            op(lib.empty(2, device="meta"))
