"""Views and in-place writes: the history of a storage that several tensors show.

An in-place op on a view rewrites the history of the view's base
(``CopySlices``), and every view of that base made earlier gets its history
rebuilt from the base's on next use (``AsStridedBackward0``). Values are
checked against hand-computed numpy results; :class:`TestParity` runs a
set of programs in PyTorch as well and compares every gradient.

Covered: writes through a view and through a view of a view, views made
before the base was written, views of other dtypes (``.real``/``.imag``,
``view_as_real``), in-place ops differentiated through a decomposition,
``detach``/``.data`` (writes that autograd must not see), the leaf errors,
saved values modified in place, ``as_strided`` over a base with a storage
offset and overlapping windows, multi-output views, and double backward
through ``CopySlices``.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember


def _leaf(values, dtype=ember.float64):
    return ember.tensor(values, dtype=dtype, requires_grad=True)


def _np(t):
    return t.detach().numpy()


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


#: Saved metadata instead of whole tensors (a formula parameter ``input_meta``) is what makes these pass.


class TestWriteThroughView:
    def test_mul_through_slice(self):
        a0, w0, g = _rand(4, 3), _rand(3, seed=1), _rand(4, 3, seed=2)
        a, w = _leaf(a0), _leaf(w0)
        b = a.clone()
        b[1:3].mul_(w)
        assert b.grad_fn.name() == "CopySlices"
        expected = a0.copy()
        expected[1:3] *= w0
        np.testing.assert_allclose(_np(b), expected)
        b.backward(ember.tensor(g))
        grad_a = g.copy()
        grad_a[1:3] *= w0
        np.testing.assert_allclose(_np(a.grad), grad_a)
        np.testing.assert_allclose(_np(w.grad), (g[1:3] * a0[1:3]).sum(0))

    def test_write_through_view_of_view(self):
        a0, g = _rand(3, 4), _rand(3, 4, seed=1)
        a = _leaf(a0)
        b = a.clone()
        v = b[1:]
        column = v[:, 2]
        column.mul_(3)
        b.backward(ember.tensor(g), retain_graph=True)
        expected = g.copy()
        expected[1:, 2] *= 3
        np.testing.assert_allclose(_np(a.grad), expected)
        # the intermediate view made before the write sees it too
        a.grad = None
        assert v.grad_fn.name() == "AsStridedBackward0"
        v.backward(ember.tensor(g[1:]))
        expected = np.zeros((3, 4))
        expected[1:] = g[1:]
        expected[1:, 2] *= 3
        np.testing.assert_allclose(_np(a.grad), expected)

    def test_view_made_before_the_base_is_written(self):
        a0, g = _rand(3, 4), _rand(4, seed=1)
        a = _leaf(a0)
        b = a.clone()
        v = b[0]
        b.mul_(2)
        assert v.grad_fn.name() == "AsStridedBackward0"
        np.testing.assert_allclose(_np(v), 2 * a0[0])
        v.backward(ember.tensor(g))
        expected = np.zeros((3, 4))
        expected[0] = 2 * g
        np.testing.assert_allclose(_np(a.grad), expected)

    def test_sibling_views(self):
        a0, g = _rand(2, 3), _rand(3, seed=1)
        a = _leaf(a0)
        b = a.clone()
        first, second = b[0], b[1]
        first.mul_(5)
        second.backward(ember.tensor(g), retain_graph=True)
        np.testing.assert_allclose(_np(a.grad), np.stack([np.zeros(3), g]))
        a.grad = None
        first.backward(ember.tensor(g))
        np.testing.assert_allclose(_np(a.grad), np.stack([5 * g, np.zeros(3)]))

    def test_regenerated_view_survives_later_writes(self):
        # the rebuilt history of a view keeps the geometry, not the base's values
        a0, g = _rand(2, 3), _rand(3, seed=1)
        a = _leaf(a0)
        b = a.clone()
        v = b[0]
        v.mul_(2)
        z = v.neg()
        b.add_(1)
        z.backward(ember.tensor(g))
        np.testing.assert_allclose(_np(a.grad), np.stack([-2 * g, np.zeros(3)]))

    def test_written_under_no_grad(self):
        a0, g = _rand(2, 3), _rand(3, seed=1)
        a = _leaf(a0)
        b = a * 3
        v = b[1]
        with ember.no_grad():
            v.mul_(10)  # autograd does not see it: the gradient is that of a * 3
        assert b.grad_fn.name() == "MulBackward0"
        v.backward(ember.tensor(g))
        np.testing.assert_allclose(_np(a.grad), np.stack([np.zeros(3), 3 * g]))

    def test_copy_into_view_of_constant(self):
        w0, g = _rand(4), _rand(3, 4, seed=1)
        w = _leaf(w0)
        z = ember.zeros(3, 4, dtype=ember.float64)
        z[1].copy_(w)
        assert z.requires_grad and z.grad_fn.name() == "CopySlices"
        z.backward(ember.tensor(g))
        np.testing.assert_allclose(_np(w.grad), g[1])

    def test_fill_through_view(self):
        a0, g = _rand(3, 2), _rand(3, 2, seed=1)
        a = _leaf(a0)
        b = a.clone()
        b[:, 1].fill_(7.0)
        b.backward(ember.tensor(g))
        expected = g.copy()
        expected[:, 1] = 0
        np.testing.assert_allclose(_np(a.grad), expected)

    def test_setitem_tensor_into_transposed_view(self):
        a0, v0, g = _rand(3, 4), _rand(2, 3, seed=1), _rand(3, 4, seed=2)
        a, v = _leaf(a0), _leaf(v0)
        b = a.clone()
        b.t()[1:3] = v
        b.backward(ember.tensor(g))
        expected = g.copy()
        expected[:, 1:3] = 0
        np.testing.assert_allclose(_np(a.grad), expected)
        np.testing.assert_allclose(_np(v.grad), g[:, 1:3].T)

    def test_setitem_with_index_tensor(self):
        a0, v0, g = _rand(4, 3), _rand(2, 3, seed=1), _rand(4, 3, seed=2)
        a, v = _leaf(a0), _leaf(v0)
        b = a.clone()
        b[ember.tensor([3, 0])] = v
        b.backward(ember.tensor(g))
        expected = g.copy()
        expected[[3, 0]] = 0
        np.testing.assert_allclose(_np(a.grad), expected)
        np.testing.assert_allclose(_np(v.grad), g[[3, 0]])

    def test_augmented_setitem_with_index_tensor(self):
        a0, v0, g = _rand(4, 3), _rand(3, 2, seed=1), _rand(4, 3, seed=2)
        a, v = _leaf(a0), _leaf(v0)
        b = a.clone()
        index = ember.tensor([0, 2])
        b[1:, index] += v  # index (read), add, index_put_ (write) into a view
        b.backward(ember.tensor(g))
        np.testing.assert_allclose(_np(a.grad), g)
        np.testing.assert_allclose(_np(v.grad), g[1:, [0, 2]])

    def test_base_written_after_a_view_was_used(self):
        a0, g = _rand(3, 4), _rand(4, seed=1)
        a = _leaf(a0)
        b = a.clone()
        z = b[0].neg()
        b.add_(1)
        z.backward(ember.tensor(g))
        expected = np.zeros((3, 4))
        expected[0] = -g
        np.testing.assert_allclose(_np(a.grad), expected)


class TestOtherDtypeViews:
    def test_imag_view_written(self):
        c0 = np.array([1 + 2j, 3 + 4j])
        c = _leaf(c0, ember.complex128)
        z = c.clone()
        z.imag.mul_(3)
        np.testing.assert_allclose(_np(z), [1 + 6j, 3 + 12j])
        z.backward(ember.tensor(np.array([1 + 1j, 2 - 1j])))
        np.testing.assert_allclose(_np(c.grad), [1 + 3j, 2 - 3j])

    def test_imag_view_read_after_write(self):
        c = _leaf(np.array([1 + 2j, 3 + 4j]), ember.complex128)
        z = c.clone()
        imag = z.imag
        imag.mul_(3)
        assert imag.grad_fn.name() == "AsStridedBackward0"
        imag.backward(ember.ones(2, dtype=ember.float64))
        np.testing.assert_allclose(_np(c.grad), [3j, 3j])

    def test_view_as_real_written_by_a_real_leaf(self):
        c0, w0 = np.array([1 + 2j, 3 + 4j, 5 - 1j]), _rand(3)
        c, w = _leaf(c0, ember.complex128), _leaf(w0)
        z = c.clone()
        ember.view_as_real(z)[:, 0].add_(w)
        np.testing.assert_allclose(_np(z), c0 + w0)
        g = np.array([1 + 1j, 2 - 1j, -1 + 0.5j])
        z.backward(ember.tensor(g))
        np.testing.assert_allclose(_np(c.grad), g)
        np.testing.assert_allclose(_np(w.grad), g.real)


class TestDecomposedInplace:
    def test_index_reduce_through_view(self):
        # index_reduce has no formula: its in-place form records the decomposition, then copies into the view
        x = _leaf(2.0)
        s = _leaf(3.0)
        base = ember.stack([x.clone(), x.detach()])
        target = base[0]
        target.index_reduce_(0, ember.tensor(0), s, "prod")
        gx, gs = ember.autograd.grad([base[0]], [x, s], [ember.tensor(1.0, dtype=ember.float64)])
        assert gx.item() == 3.0 and gs.item() == 2.0

    def test_put_through_view(self):
        a0, s0, g = _rand(2, 3), _rand(2, seed=1), _rand(2, 3, seed=2)
        a, s = _leaf(a0), _leaf(s0)
        b = a.clone()
        b[1].put_(ember.tensor([2, 0]), s, accumulate=True)
        b.backward(ember.tensor(g))
        np.testing.assert_allclose(_np(a.grad), g)
        np.testing.assert_allclose(_np(s.grad), g[1, [2, 0]])


class TestMultiOutputViews:
    def test_split_piece_written(self):
        a0, g = _rand(5, 2), _rand(5, 2, seed=1)
        a = _leaf(a0)
        b = a.clone()
        pieces = b.split(2)
        pieces[1].mul_(4)
        b.backward(ember.tensor(g))
        expected = g.copy()
        expected[2:4] *= 4
        np.testing.assert_allclose(_np(a.grad), expected)

    def test_unbind_gradients_join(self):
        a0 = _rand(3, 2)
        a = _leaf(a0)
        rows = a.unbind(0)
        assert rows[0].grad_fn is rows[2].grad_fn
        rows[2].backward(ember.ones(2, dtype=ember.float64))
        np.testing.assert_allclose(_np(a.grad), [[0, 0], [0, 0], [1, 1]])


class TestDetach:
    def test_detach_write_is_invisible(self):
        a0, g = _rand(3), _rand(3, seed=1)
        a = _leaf(a0)
        b = a * 2
        d = b.detach()
        d.mul_(3)
        np.testing.assert_allclose(_np(b), 6 * a0)
        assert b.grad_fn.name() == "MulBackward0" and not d.requires_grad
        b.backward(ember.tensor(g))
        np.testing.assert_allclose(_np(a.grad), 2 * g)

    def test_data_write_is_invisible(self):
        a0, g = _rand(3), _rand(3, seed=1)
        a = _leaf(a0)
        b = a * 2
        b.data.add_(1)
        np.testing.assert_allclose(_np(b), 2 * a0 + 1)
        b.backward(ember.tensor(g))
        np.testing.assert_allclose(_np(a.grad), 2 * g)

    def test_detached_tensor_written_with_a_grad_input(self):
        a0, w0 = _rand(3), _rand(3, seed=1)
        a, w = _leaf(a0), _leaf(w0)
        b = a * 2
        d = b.detach()
        d.mul_(w)
        assert d.grad_fn.name() == "MulBackward0"
        assert b.grad_fn.name() == "MulBackward0"  # b's history does not include w
        b.backward(ember.ones(3, dtype=ember.float64))
        assert w.grad is None
        np.testing.assert_allclose(_np(a.grad), [2.0, 2.0, 2.0])

    def test_view_of_detached_tensor_written_with_a_grad_input(self):
        a0, w0 = _rand(3), _rand(2, seed=1)
        a, w = _leaf(a0), _leaf(w0)
        b = a * 2
        d = b.detach()
        d[0:2].mul_(w)
        assert b.grad_fn.name() == "MulBackward0"
        assert d.grad_fn.name() == "CopySlices"
        b.backward(ember.ones(3, dtype=ember.float64))
        assert w.grad is None
        np.testing.assert_allclose(_np(a.grad), [2.0, 2.0, 2.0])

    def test_detach_in_place_of_a_view_is_an_error(self):
        b = _leaf(_rand(2, 3)).clone()
        with pytest.raises(RuntimeError, match="Can't detach views in-place"):
            b[0].detach_()


class TestErrors:
    def test_leaf_written_in_place(self):
        a = _leaf(_rand(3))
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
            a.mul_(2)
        with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
            a[1:].mul_(2)
        with ember.no_grad():
            a[1:].mul_(2)  # allowed: not recorded

    def test_saved_value_written_in_place(self):
        a = _leaf(_rand(3))
        y = a.clone()
        z = y * y
        y.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.backward(ember.ones(3, dtype=ember.float64))


class TestAsStrided:
    def test_base_with_offset_and_overlapping_windows(self):
        a = _leaf(np.arange(10.0))
        x = a[2:]  # storage offset 2
        y = ember.as_strided(x, (3, 3), (2, 1), 3)  # absolute offset 3; windows overlap
        np.testing.assert_allclose(_np(y), [[3, 4, 5], [5, 6, 7], [7, 8, 9]])
        g = _rand(3, 3)
        y.backward(ember.tensor(g))
        expected = np.zeros(10)
        for i in range(3):
            for j in range(3):
                expected[3 + 2 * i + j] += g[i, j]
        np.testing.assert_allclose(_np(a.grad), expected)

    def test_expanded_input(self):
        # each storage element appears in 3 rows of the input: its gradient is split among them
        a0, g = _rand(4), _rand(4, seed=1)
        a = _leaf(a0)
        e = a.unsqueeze(0).expand(3, 4)
        y = ember.as_strided(e, (4,), (1,), 0)
        y.backward(ember.tensor(g))
        np.testing.assert_allclose(_np(a.grad), g)

    def test_expanded_output(self):
        a0, g = _rand(3), _rand(2, 3, seed=1)
        a = _leaf(a0)
        y = ember.as_strided(a.clone(), (2, 3), (0, 1))
        y.backward(ember.tensor(g))
        np.testing.assert_allclose(_np(a.grad), g.sum(0))


class TestDoubleBackward:
    def test_through_copy_slices(self):
        a0, g, w = _rand(2, 3), _rand(2, 3, seed=1), _rand(2, 3, seed=2)
        a = _leaf(a0)
        b = a.clone()
        b[0].mul_(a[1])  # b0 = a0 * a1, b1 = a1
        (grad_a,) = ember.autograd.grad([b], [a], [ember.tensor(g)], create_graph=True)
        np.testing.assert_allclose(_np(grad_a), np.stack([g[0] * a0[1], g[0] * a0[0] + g[1]]))
        (second,) = ember.autograd.grad([grad_a], [a], [ember.tensor(w)])
        np.testing.assert_allclose(_np(second), np.stack([w[1] * g[0], w[0] * g[0]]))


# Programs run in both libraries: fn(lib, leaves) -> output. ``lib`` is ember or torch.
def _prog_slice_mul(lib, a, w):
    b = a * 1.5
    b[:, 1:3].mul_(w[:2])
    return b


def _prog_view_of_view_add(lib, a, w):
    b = a.clone()
    b.t()[1][1:].add_(w[:2])
    return b * b


def _prog_stale_view(lib, a, w):
    b = a.clone()
    v = b[1]
    b.mul_(w[:1])
    return v * 2


def _prog_two_writes(lib, a, w):
    b = a.clone()
    b[0].mul_(w[:1])
    b[:, 0].add_(w)
    return b.exp()


def _prog_index_put(lib, a, w):
    b = a.clone()
    b[lib.tensor([2, 0])] = w[:2].unsqueeze(1).expand(2, 4)
    return b


def _prog_masked_fill_view(lib, a, w):
    b = a * w[0]
    b[1:].masked_fill_(b[1:] > 0, 0.0)
    return b


def _prog_diagonal_write(lib, a, w):
    b = a[:, :3].clone()
    b.diagonal().mul_(w[:3])
    return b


def _prog_unfold_read(lib, a, w):
    b = a.clone()
    windows = b.reshape(-1).unfold(0, 3, 2)
    b[0].mul_(w[:1])
    return windows * 1.0


PROGRAMS = [
    _prog_slice_mul,
    _prog_view_of_view_add,
    _prog_stale_view,
    _prog_two_writes,
    _prog_index_put,
    _prog_masked_fill_view,
    _prog_diagonal_write,
    _prog_unfold_read,
]


@pytest.mark.parity
class TestParity:
    @pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__[len("_prog_") :])
    def test_gradients_match_torch(self, program):
        import torch

        a0, w0 = _rand(3, 4), _rand(3, seed=1)
        ea, ew = _leaf(a0), _leaf(w0)
        ta = torch.tensor(a0, requires_grad=True)
        tw = torch.tensor(w0, requires_grad=True)
        eout = program(ember, ea, ew)
        tout = program(torch, ta, tw)
        np.testing.assert_allclose(_np(eout), tout.detach().numpy())
        g = _rand(*tout.shape, seed=2)
        eout.backward(ember.tensor(g))
        tout.backward(torch.tensor(g))
        for e, t in ((ea, ta), (ew, tw)):
            if t.grad is None:
                assert e.grad is None
            else:
                np.testing.assert_allclose(_np(e.grad), t.grad.numpy(), rtol=1e-10, atol=1e-12)
