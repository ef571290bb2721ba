"""Bad inputs where ember and PyTorch both succeed but answer differently (issue 18).

For each, ember's answer is checked against an oracle written from the definition; the
comparison with PyTorch is in ``parity/test_bad_input_parity.py`` and the choices are listed
in docs/internals.rst ("Robustness").
"""

import contextlib
import math

import numpy as np
import pytest

import ember
import ember._ops as ops
import ember.nn.functional as F

NAN, INF = float("nan"), float("inf")


@contextlib.contextmanager
def decomposition_only(name):
    """Run op ``name`` through its decomposition (the path of devices without a fused kernel)."""
    op = ops.registry[name]
    kernel = op.kernels.pop("cpu")
    try:
        yield
    finally:
        op.kernels["cpu"] = kernel


def _hinge(z):
    """max(0, z) that keeps NaN, as the loss's definition does."""
    return z if math.isnan(z) else max(z, 0.0)


def multi_margin_oracle(x, y, p=1, margin=1.0, weight=None):
    out = []
    for row, t in zip(x, y):
        terms = [_hinge(margin - row[t] + row[i]) ** p * (1.0 if weight is None else weight[t])
                 for i in range(len(row)) if i != t]  # the target's own term is not in the sum
        out.append(sum(terms) / len(row))
    return out


def multilabel_margin_oracle(x, y):
    out = []
    for row, targets in zip(x, y):
        chosen = []
        for t in targets:
            if t == -1:
                break
            chosen.append(t)
        terms = [_hinge(1 - row[j] + row[i]) for j in chosen for i in range(len(row)) if i not in chosen]
        out.append(sum(terms) / len(row))
    return out


MULTI_MARGIN_CASES = [
    ([[0.1, NAN, 0.3], [0.2, 0.5, 0.1]], [0, 1]),  # NaN among the other classes
    ([[NAN, 0.2, 0.3]], [0]),  # NaN at the target
    ([[INF, 0.2, 0.3]], [0]),  # inf at the target: inf - inf only in the term left out
    ([[0.2, INF, 0.3]], [0]),  # inf elsewhere: an infinite loss
    ([[0.1, 0.2, 0.3]], [2]),
]


@pytest.mark.parametrize("path", ["kernel", "decomposition"])
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("x, y", MULTI_MARGIN_CASES)
def test_multi_margin_loss_propagates_nan(x, y, p, path):
    expected = multi_margin_oracle(x, y, p)
    with decomposition_only("multi_margin_loss") if path == "decomposition" else contextlib.nullcontext():
        got = F.multi_margin_loss(ember.tensor(x, dtype=ember.float64), ember.tensor(y), p=p, reduction="none")
    np.testing.assert_allclose(got.numpy(), np.array(expected), rtol=1e-12)
    with decomposition_only("multi_margin_loss") if path == "decomposition" else contextlib.nullcontext():
        mean = F.multi_margin_loss(ember.tensor(x, dtype=ember.float64), ember.tensor(y), p=p)
    assert math.isnan(mean.item()) == any(math.isnan(v) for v in expected)


MULTILABEL_CASES = [
    ([[0.1, NAN, 0.3, 0.4], [0.2, 0.5, 0.1, 0.0]], [[3, 0, -1, 1], [0, 1, 2, -1]]),
    ([[NAN, 0.2, 0.3, 0.4]], [[0, -1, 1, 1]]),  # NaN at a target
    ([[NAN, 0.2]], [[-1, 0]]),  # no targets: an empty sum, whatever the scores
    ([[INF, 0.2, 0.3]], [[0, -1, 0]]),  # inf at a target, which never meets itself in the sum
    ([[INF, INF, 0.3]], [[0, 1, -1]]),
    ([[0.1, 0.2, 0.4, 0.8]], [[3, 0, -1, 1]]),
]


@pytest.mark.parametrize("path", ["kernel", "decomposition"])
@pytest.mark.parametrize("x, y", MULTILABEL_CASES)
def test_multilabel_margin_loss_propagates_nan(x, y, path):
    expected = multilabel_margin_oracle(x, y)
    with decomposition_only("multilabel_margin_loss") if path == "decomposition" else contextlib.nullcontext():
        got = F.multilabel_margin_loss(ember.tensor(x, dtype=ember.float64), ember.tensor(y), reduction="none")
    np.testing.assert_allclose(got.numpy(), np.array(expected), rtol=1e-12)


def _stable_kth(row, k):
    """The index a stable ascending sort (NaN last) puts at position k - 1."""
    return int(np.argsort(np.asarray(row), kind="stable")[k - 1])


@pytest.mark.parametrize("path", ["kernel", "decomposition"])
def test_kthvalue_index_among_ties_is_the_stable_sort_position(path):
    rng = np.random.default_rng(0)
    data = rng.integers(0, 4, size=(6, 40)).astype(np.float32)  # many ties; rows over 32 take the partition path
    data[1, ::3] = np.nan
    x = ember.tensor(data)
    for k in (1, 7, 20, 40):
        with decomposition_only("kthvalue") if path == "decomposition" else contextlib.nullcontext():
            values, indices = ember.kthvalue(x, k, dim=1)
        for r in range(data.shape[0]):
            assert indices[r].item() == _stable_kth(data[r], k), (r, k)
        expected = np.sort(data, axis=1)[:, k - 1]
        np.testing.assert_array_equal(values.numpy(), expected)
    short = ember.tensor([3.0, 1.0, 2.0, 1.0, 1.0, 5.0])  # short rows take the sort path
    assert [ember.kthvalue(short, k).indices.item() for k in (1, 2, 3)] == [1, 3, 4]
    columns = ember.kthvalue(x.t(), 7, dim=0).indices.numpy()
    assert columns.tolist() == [_stable_kth(data[r], 7) for r in range(data.shape[0])]


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize(
    "shape, expected",
    [((0, 4, 4, 4), (0, 16, 2, 2)), ((2, 0, 4, 4), (2, 0, 2, 2)), ((2, 1, 0, 4), (2, 4, 0, 2)),
     ((3, 0, 1, 4, 4), (3, 0, 4, 2, 2))],
)
def test_pixel_unshuffle_of_empty_inputs_has_the_documented_shape(shape, expected, device):
    x = ember.ones(*shape, device=device)
    assert F.pixel_unshuffle(x, 2).shape == expected
    assert F.pixel_shuffle(F.pixel_unshuffle(x, 2), 2).shape == shape


@pytest.mark.parametrize("n", [1, 2, 3])
def test_convolution_without_input_channels_gives_the_bias(n):
    conv = getattr(F, f"conv{n}d")
    spatial, kernel = (5,) * n, (2,) * n
    bias = ember.tensor([1.5, -2.0, 0.25])
    x, w = ember.ones(2, 0, *spatial), ember.ones(3, 0, *kernel)
    expected = np.broadcast_to(np.array([1.5, -2.0, 0.25], np.float32).reshape(1, 3, *(1,) * n), (2, 3, *(4,) * n))
    np.testing.assert_array_equal(conv(x, w, bias).numpy(), expected)  # an empty sum plus the bias
    np.testing.assert_array_equal(conv(x, w).numpy(), np.zeros((2, 3, *(4,) * n), np.float32))
    assert conv(ember.ones(2, 0, *spatial, device="meta"), ember.ones(3, 0, *kernel, device="meta")).shape == \
        (2, 3, *(4,) * n)


def test_convolution_without_input_channels_through_the_decomposition():
    with decomposition_only("conv2d"):
        out = F.conv2d(ember.ones(1, 0, 3, 3), ember.ones(2, 0, 2, 2), ember.tensor([1.0, 2.0]))
    np.testing.assert_array_equal(out.numpy(), np.array([1.0, 2.0], np.float32).reshape(1, 2, 1, 1) * np.ones((1, 2, 2, 2)))
