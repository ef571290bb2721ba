"""ember.nn layers against numpy references: default initialisations, modes, errors."""

import math

import numpy as np
import pytest

import ember
import ember.nn as nn


def test_linear_default_init_and_forward():
    ember.manual_seed(0)
    m = nn.Linear(400, 300)
    w, b = m.weight.detach().numpy(), m.bias.detach().numpy()
    bound = 1 / math.sqrt(400)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    assert w.var() == pytest.approx(bound**2 / 3, rel=0.03)  # U(-bound, bound)
    assert np.abs(b).max() <= bound
    x = np.random.default_rng(0).standard_normal((5, 400)).astype(np.float32)
    np.testing.assert_allclose(m(ember.from_numpy(x)).detach().numpy(), x @ w.T + b, rtol=1e-4, atol=1e-5)
    assert list(dict(m.named_parameters())) == ["weight", "bias"]
    assert nn.Linear(3, 2, bias=False).bias is None


def test_conv_default_init_bounds():
    m = nn.Conv2d(8, 16, 3, groups=2)
    fan_in = 4 * 9
    assert tuple(m.weight.shape) == (16, 4, 3, 3)
    assert m.weight.abs().max().item() <= 1 / math.sqrt(fan_in)
    assert m.bias.abs().max().item() <= 1 / math.sqrt(fan_in)
    assert tuple(nn.ConvTranspose2d(4, 6, 3, groups=2).weight.shape) == (4, 3, 3, 3)


def test_conv_errors():
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="not supported for strided"):
        nn.Conv2d(3, 4, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv1d(3, 4, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match='Only "zeros" padding mode'):
        nn.ConvTranspose2d(3, 4, 3, padding_mode="reflect")


def test_conv1d_matches_numpy_correlation():
    m = nn.Conv1d(1, 1, 3, bias=False)
    with ember.no_grad():
        m.weight.copy_(ember.tensor([[[1.0, 2.0, 3.0]]]))
    x = np.arange(6, dtype=np.float32)
    expected = np.correlate(x, np.array([1.0, 2.0, 3.0], np.float32), mode="valid")
    np.testing.assert_allclose(m(ember.from_numpy(x).reshape(1, 1, 6)).detach().numpy().ravel(), expected)


def test_pooling_against_numpy():
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 6)).astype(np.float32)
    blocks = x.reshape(2, 3, 2, 2, 3, 2)
    ex = ember.from_numpy(x)
    np.testing.assert_allclose(nn.MaxPool2d(2)(ex).numpy(), blocks.max(axis=(3, 5)))
    np.testing.assert_allclose(nn.AvgPool2d(2)(ex).numpy(), blocks.mean(axis=(3, 5)), rtol=1e-6)
    np.testing.assert_allclose(nn.AdaptiveAvgPool2d(1)(ex).numpy(), x.mean(axis=(2, 3), keepdims=True), rtol=1e-5)
    out, idx = nn.MaxPool2d(2, return_indices=True)(ex)
    assert tuple(idx.shape) == tuple(out.shape)


def test_batchnorm_train_eval_and_running_stats():
    m = nn.BatchNorm1d(3)
    np.testing.assert_array_equal(m.weight.detach().numpy(), np.ones(3))
    np.testing.assert_array_equal(m.bias.detach().numpy(), np.zeros(3))
    assert list(m.state_dict()) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    x = np.random.default_rng(0).standard_normal((8, 3)).astype(np.float32) * 2 + 1
    y = m(ember.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(y, (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(m.running_mean.numpy(), 0.1 * x.mean(0), rtol=1e-5)
    np.testing.assert_allclose(m.running_var.numpy(), 0.9 + 0.1 * x.var(0, ddof=1), rtol=1e-5)
    assert m.num_batches_tracked.item() == 1
    m.eval()
    y = m(ember.from_numpy(x)).detach().numpy()
    rm, rv = m.running_mean.numpy(), m.running_var.numpy()
    np.testing.assert_allclose(y, (x - rm) / np.sqrt(rv + 1e-5), rtol=1e-4, atol=1e-5)
    assert m.num_batches_tracked.item() == 1  # eval does not count


def test_batchnorm_momentum_none_is_cumulative_average():
    m = nn.BatchNorm1d(2, momentum=None, affine=False)
    rng = np.random.default_rng(1)
    batches = [rng.standard_normal((6, 2)).astype(np.float32) for _ in range(3)]
    for b in batches:
        m(ember.from_numpy(b))
    np.testing.assert_allclose(m.running_mean.numpy(), np.mean([b.mean(0) for b in batches], axis=0), rtol=1e-5)
    stats = nn.BatchNorm2d(2, track_running_stats=False)
    assert stats.running_mean is None and list(stats.state_dict()) == ["weight", "bias"]


def test_batchnorm_dim_errors_and_sync():
    with pytest.raises(ValueError, match="expected 4D input"):
        nn.BatchNorm2d(3)(ember.randn(2, 3))


def test_sync_batchnorm_is_single_process_batchnorm_and_errors_on_sync():
    x = ember.randn(4, 3, 5)
    sync, plain = nn.SyncBatchNorm(3), nn.BatchNorm1d(3)
    assert list(sync.state_dict()) == list(plain.state_dict())
    np.testing.assert_allclose(sync(x).detach().numpy(), plain(x).detach().numpy(), atol=1e-6)
    np.testing.assert_allclose(sync.running_var.numpy(), plain.running_var.numpy(), atol=1e-6)
    with pytest.raises(ValueError, match=r"expected at least 2D input \(got 1D input\)"):
        sync(ember.randn(3))
    grouped = nn.SyncBatchNorm(3, process_group=object())
    with pytest.raises(NotImplementedError, match="cannot synchronize batch statistics across processes"):
        grouped(x)
    grouped.eval()  # eval uses the running statistics: nothing to synchronize
    np.testing.assert_allclose(grouped(x).detach().numpy(), x.numpy() / np.sqrt(1 + 1e-5), atol=1e-6)


def test_convert_sync_batchnorm_shares_parameters():
    model = nn.Sequential(nn.Conv2d(1, 3, 1), nn.BatchNorm2d(3), nn.Sequential(nn.BatchNorm1d(2, affine=False)))
    bn = model[1]
    converted = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    assert converted is model
    assert type(model[1]) is nn.SyncBatchNorm and type(model[2][0]) is nn.SyncBatchNorm
    assert model[1].weight is bn.weight and model[1].running_mean is bn.running_mean
    assert model[2][0].weight is None and isinstance(model[0], nn.Conv2d)


def test_layer_group_rms_norm_against_numpy():
    x = np.random.default_rng(0).standard_normal((2, 4, 5)).astype(np.float32)
    ex = ember.from_numpy(x)
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    np.testing.assert_allclose(nn.LayerNorm(5)(ex).detach().numpy(), (x - mean) / np.sqrt(var + 1e-5), atol=1e-5)
    g = x.reshape(2, 2, 10)
    ref = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
    np.testing.assert_allclose(nn.GroupNorm(2, 4)(ex).detach().numpy(), ref, atol=1e-5)
    rms = np.sqrt((x**2).mean(-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(nn.RMSNorm(5, eps=1e-6)(ex).detach().numpy(), x / rms, rtol=1e-5)
    with pytest.raises(ValueError, match="divisible by num_groups"):
        nn.GroupNorm(3, 4)


def test_dropout_train_and_eval():
    x = ember.ones(1000)
    m = nn.Dropout(0.25)
    y = m(x).numpy()
    assert set(np.unique(y)) <= {0.0, np.float32(1 / 0.75)}
    assert (y == 0).mean() == pytest.approx(0.25, abs=0.05)
    m.eval()
    np.testing.assert_array_equal(m(x).numpy(), np.ones(1000))
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)
    y = nn.Dropout2d(0.5)(ember.ones(4, 8, 3, 3)).numpy()
    per_channel = y.reshape(4, 8, 9)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2).all(-1))  # whole channels


@pytest.mark.parametrize("name", ["dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
                                  "feature_alpha_dropout"])
@pytest.mark.parametrize("requires_grad", [False, True])
def test_dropout_identity_returns_the_input_itself(name, requires_grad):
    # evaluation, p = 0 and empty inputs: PyTorch returns the input tensor itself (no copy, no node)
    fn = getattr(ember.nn.functional, name)
    shape = {"dropout1d": (2, 3, 4), "dropout3d": (2, 3, 4, 5, 6)}.get(name, (2, 3, 4, 5))  # batched inputs
    x = ember.randn(*shape, requires_grad=requires_grad)
    assert fn(x, 0.5, False) is x
    assert fn(x, 0.0, True) is x
    empty = ember.zeros(0, *shape[1:])
    assert fn(empty, 0.5, True) is empty
    module = nn.Dropout(0.3).eval()
    assert module(x) is x and x.grad_fn is None


def test_embedding():
    ember.manual_seed(0)
    m = nn.Embedding(1000, 20, padding_idx=-1)
    w = m.weight.detach().numpy()
    assert m.padding_idx == 999
    np.testing.assert_array_equal(w[999], np.zeros(20))
    assert w[:999].std() == pytest.approx(1.0, rel=0.03)  # N(0, 1)
    idx = np.array([[1, 5], [999, 3]])
    np.testing.assert_array_equal(m(ember.from_numpy(idx)).detach().numpy(), w[idx])
    pre = ember.arange(6.0).reshape(3, 2)
    e = nn.Embedding.from_pretrained(pre)
    assert not e.weight.requires_grad
    np.testing.assert_array_equal(e(ember.tensor([2])).numpy(), [[4.0, 5.0]])
    assert nn.Embedding.from_pretrained(pre, freeze=False).weight.requires_grad
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        nn.Embedding(3, 2, padding_idx=3)
    with pytest.raises(AssertionError, match="2-dimensional"):
        nn.Embedding.from_pretrained(ember.ones(3))


def test_activations_and_flatten():
    x = np.linspace(-3, 3, 13).astype(np.float32)
    ex = ember.from_numpy(x)
    np.testing.assert_allclose(nn.ReLU()(ex).numpy(), np.maximum(x, 0))
    np.testing.assert_allclose(nn.LeakyReLU(0.2)(ex).numpy(), np.where(x > 0, x, 0.2 * x), rtol=1e-6)
    np.testing.assert_allclose(nn.Sigmoid()(ex).numpy(), 1 / (1 + np.exp(-x)), rtol=1e-6)
    np.testing.assert_allclose(nn.Tanh()(ex).numpy(), np.tanh(x), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(nn.Softmax(dim=0)(ex).numpy(), np.exp(x) / np.exp(x).sum(), rtol=1e-5)
    y = ember.from_numpy(x.copy())
    out = nn.ReLU(inplace=True)(y)
    np.testing.assert_array_equal(y.numpy(), np.maximum(x, 0))  # written in place
    assert out.data_ptr() == y.data_ptr()
    with pytest.raises(ValueError, match="must be greater than min_val"):
        nn.Hardtanh(1.0, 0.0)
    assert tuple(nn.Flatten()(ember.zeros(2, 3, 4)).shape) == (2, 12)
    assert tuple(nn.Unflatten(1, (3, 4))(ember.zeros(2, 12)).shape) == (2, 3, 4)


def test_losses_against_numpy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    y = rng.standard_normal((4, 3)).astype(np.float32)
    ex, ey = ember.from_numpy(x), ember.from_numpy(y)
    assert nn.MSELoss()(ex, ey).item() == pytest.approx(((x - y) ** 2).mean(), rel=1e-5)
    assert nn.L1Loss(reduction="sum")(ex, ey).item() == pytest.approx(np.abs(x - y).sum(), rel=1e-5)
    t = np.array([0, 2, 1, 2])
    logp = x - np.log(np.exp(x).sum(1, keepdims=True))
    ce = -logp[np.arange(4), t].mean()
    assert nn.CrossEntropyLoss()(ex, ember.from_numpy(t)).item() == pytest.approx(ce, rel=1e-5)
    assert nn.NLLLoss()(ember.from_numpy(logp), ember.from_numpy(t)).item() == pytest.approx(ce, rel=1e-5)
    z = (y > 0).astype(np.float32)
    bce = np.mean(np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x))))
    assert nn.BCEWithLogitsLoss()(ex, ember.from_numpy(z)).item() == pytest.approx(bce, rel=1e-5)
    with pytest.warns(UserWarning, match="reduction='sum'"):
        assert nn.MSELoss(size_average=False).reduction == "sum"
    w = nn.CrossEntropyLoss(weight=ember.ones(3))
    assert list(w.state_dict()) == ["weight"] and list(nn.CrossEntropyLoss().state_dict()) == []
