"""The positional recorder (``ember.autograd._record._fast_recorder``) on the calls it took on lately.

It records calls that pass positional arguments after the differentiable ones (dims, indices,
targets) and calls of view ops. Each test checks, first, that the call went through that recorder
(the general ``make_node`` is made to fail meanwhile), and then the gradients against numpy, so a
node wired wrongly by the recorder (a wrong saved argument, a view without its base) fails here.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.autograd import _record


@contextlib.contextmanager
def _only_the_positional_recorder(monkeypatch):
    """Fail any call that the general path would record (make_node), so the test sees the fast path's node."""

    def refuse(*args, **kwargs):
        raise AssertionError("the call took the general path (make_node), not the positional recorder")

    with monkeypatch.context() as patch:
        patch.setattr(_record, "make_node", refuse)
        yield


def _leaf(array):
    return ember.tensor(np.asarray(array, dtype=np.float64), requires_grad=True)


def _rng():
    return np.random.default_rng(7)


def test_reduction_with_a_dim_argument(monkeypatch):
    a = _rng().standard_normal((3, 4))
    g = _rng().standard_normal(3)
    x = _leaf(a)
    with _only_the_positional_recorder(monkeypatch):
        y = ember.sum(x, 1)
        z = ember.mean(x, 0, True)
    assert type(y.grad_fn).__name__ == "SumBackward0"
    (y * ember.tensor(g)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.repeat(g[:, None], 4, axis=1))
    x.grad = None
    z.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((3, 4), 1 / 3))


def test_log_softmax_with_a_dim_argument(monkeypatch):
    a = _rng().standard_normal((2, 5))
    g = _rng().standard_normal((2, 5))
    x = _leaf(a)
    with _only_the_positional_recorder(monkeypatch):
        y = F.log_softmax(x, 1)
    (y * ember.tensor(g)).sum().backward()
    softmax = np.exp(a) / np.exp(a).sum(1, keepdims=True)
    np.testing.assert_allclose(x.grad.numpy(), g - softmax * g.sum(1, keepdims=True), rtol=1e-12)


def test_gather_with_an_index_tensor_after_the_input(monkeypatch):
    a = _rng().standard_normal((3, 4))
    index = np.array([[0, 0, 3], [1, 2, 1], [3, 3, 3]])
    x = _leaf(a)
    with _only_the_positional_recorder(monkeypatch):
        y = ember.gather(x, 1, ember.tensor(index))
    np.testing.assert_allclose(y.detach().numpy(), np.take_along_axis(a, index, 1))
    y.sum().backward()
    expected = np.zeros((3, 4))
    np.add.at(expected, (np.arange(3)[:, None].repeat(3, 1), index), 1.0)
    np.testing.assert_allclose(x.grad.numpy(), expected)


def test_view_ops_keep_their_base(monkeypatch):
    a = _rng().standard_normal((3, 4))
    w = _rng().standard_normal((4, 3))
    x = _leaf(a)
    with _only_the_positional_recorder(monkeypatch):
        b = x * 1.0
        v = ember.transpose(b, 0, 1)
        row = ember.select(b, 0, 1)
    assert v._base is b and v._view_info is not None and v._view_info[0] is b
    assert type(v.grad_fn).__name__ == "TransposeBackward0"
    ((v * ember.tensor(w)).sum() + row.sum()).backward()
    expected = w.T.copy()
    expected[1] += 1.0
    np.testing.assert_allclose(x.grad.numpy(), expected)


def test_in_place_write_through_a_recorded_view_reaches_the_base(monkeypatch):
    x = _leaf(_rng().standard_normal((3, 4)))
    with _only_the_positional_recorder(monkeypatch):
        b = x * 1.0
        v = ember.transpose(b, 0, 1)
    v.mul_(3.0)  # the base's history now goes through the write
    b.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((3, 4), 3.0))


def test_trailing_tensor_that_requires_grad_without_a_formula_raises():
    x = _leaf(_rng().standard_normal((4, 3)))
    target = ember.tensor([0, 1, 2, 1])
    weight = _leaf([1.0, 2.0, 0.5])
    recorder = _record._fast_recorder(_record.DERIVATIVES[ember._ops.registry["nll_loss"]])
    assert recorder((x, target, weight), x.device) is NotImplemented  # left to make_node, which checks
    with pytest.raises(NotImplementedError, match="weight"):
        F.nll_loss(x, target, weight)
    # the same weight as a constant is recorded positionally, with the right gradient
    loss = F.nll_loss(x, target, weight.detach())
    loss.backward()
    expected = np.zeros((4, 3))
    w = np.array([1.0, 2.0, 0.5])
    expected[np.arange(4), [0, 1, 2, 1]] = -w[[0, 1, 2, 1]] / w[[0, 1, 2, 1]].sum()
    np.testing.assert_allclose(x.grad.numpy(), expected)


def test_a_constant_argument_keeps_no_metadata_and_broadcasting_still_sums():
    a = _rng().standard_normal((3, 1))
    c = _rng().standard_normal((3, 4))
    x = _leaf(a)
    y = x * ember.tensor(c)
    assert y.grad_fn._input_meta[1] is None  # no gradient flows to the constant: nothing to check it against
    assert y.grad_fn._input_meta[0][0] == (3, 1)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), c.sum(1, keepdims=True))


def test_a_node_that_saves_nothing_shares_the_empty_mapping():
    x = _leaf([0.5, -1.0])
    y = -x
    assert len(y.grad_fn._saved) == 0
    with pytest.raises(TypeError):
        y.grad_fn._saved["input"] = x  # the class's read-only mapping, not a dict one node could fill for all
    g = ember.tensor([1.0, 2.0], dtype=ember.float64)
    y.backward(g)
    y.backward(g)  # a node that saved no tensor runs again after its release, as in PyTorch
    np.testing.assert_allclose(x.grad.numpy(), [-2.0, -4.0])
    e = x.exp()
    e.sum().backward()
    with pytest.raises(RuntimeError, match="second time"):
        e.sum().backward()  # its saved result was freed


def test_ops_with_an_inplace_flag(monkeypatch):
    a = np.array([[1.0, -2.0, 3.0], [-0.5, 0.25, -4.0]])
    x = _leaf(a)
    with _only_the_positional_recorder(monkeypatch):
        r = F.relu(x)
        leaky = F.leaky_relu(x, 0.2, False)
    (r.sum() + leaky.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), (a > 0) + np.where(a > 0, 1.0, 0.2))
    # inplace=True passed positionally is not the recorder's: the write is recorded on the tensor it changes
    x.grad = None
    b = x * 2.0
    out = F.leaky_relu(b, 0.2, True)
    assert out is b and b._version == 1
    b.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * np.where(a > 0, 1.0, 0.2))


def test_an_optional_tensor_left_out(monkeypatch):
    a = _rng().standard_normal((2, 3))
    w = _rng().standard_normal((4, 3))
    x, weight = _leaf(a), _leaf(w)
    with _only_the_positional_recorder(monkeypatch):
        y = F.linear(x, weight, None)
    assert y.grad_fn.next_functions[2] == (None, 0)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.tile(w.sum(0), (2, 1)))
    np.testing.assert_allclose(weight.grad.numpy(), np.tile(a.sum(0), (4, 1)))


def test_view_ops_with_sizes_or_dims_after_the_tensor(monkeypatch):
    # view(*shape), permute(*dims), expand(*sizes): the *args after the tensor, saved for the formula
    w = _leaf(np.arange(24).reshape(2, 3, 4))
    weights = np.arange(24, dtype=np.float64).reshape(2, 12)
    with _only_the_positional_recorder(monkeypatch):
        y = (w * 2).view(6, 4).permute(1, 0)
        z = y.transpose(0, 1).view((2, 12))  # contiguous again: a view
        e = w[:1, :1, :1].view(1).expand(3)
    (z * ember.tensor(weights)).sum().backward()
    expected = 2 * weights.reshape(2, 3, 4)  # (e is not part of this loss)
    np.testing.assert_array_equal(w.grad.numpy(), expected)
    assert y._base is not None and z.grad_fn is not None and e.grad_fn is not None
    w.grad = None
    e.sum().backward()
    assert w.grad.numpy()[0, 0, 0] == 3 and w.grad.numpy().sum() == 3

