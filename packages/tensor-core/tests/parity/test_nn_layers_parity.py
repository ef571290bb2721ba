"""ember.nn layers against torch.nn: same constructor arguments, torch's weights copied over ->
same state_dict keys (names and order), same forward outputs and same parameter gradients.

The layer and loss comparisons run on the backend's device (``_parity_device``: ember's CUDA
results against PyTorch's CUDA results with the cuda backend). Reprs and constructor options
that are new in the pinned PyTorch are checked only under that version."""

import numpy as np
import pytest
import torch
from _parity_device import (
    EMBER_DEVICE,
    IS_PINNED_TORCH,
    PINNED_TORCH,
    TORCH_DEVICE,
    host,
    require_pinned_torch,
    torch_numpy,
)

import ember
import ember.nn as enn

pytestmark = pytest.mark.parity

# (class name, constructor args, constructor kwargs, input shape or list of shapes, input kind)
CASES = [
    ("Identity", (), {}, (3, 4), "float"),
    ("Linear", (5, 3), {}, (4, 5), "float"),
    ("Linear", (5, 3), {"bias": False}, (2, 4, 5), "float"),
    ("Bilinear", (3, 4, 2), {}, [(5, 3), (5, 4)], "float"),
    ("Conv1d", (2, 4, 3), {"stride": 2, "padding": 1}, (2, 2, 9), "float"),
    ("Conv1d", (2, 4, 3), {"padding": "same", "padding_mode": "circular"}, (2, 2, 9), "float"),
    ("Conv2d", (3, 4, 3), {}, (2, 3, 7, 6), "float"),
    (
        "Conv2d",
        (4, 6, (3, 2)),
        {"stride": (2, 1), "padding": 1, "dilation": (1, 2), "groups": 2},
        (2, 4, 9, 8),
        "float",
    ),
    ("Conv2d", (3, 4, 3), {"padding": "same", "padding_mode": "reflect"}, (2, 3, 6, 6), "float"),
    ("Conv2d", (3, 4, 4), {"padding": "same", "dilation": 2}, (2, 3, 9, 9), "float"),
    ("Conv2d", (3, 4, 3), {"padding": 2, "padding_mode": "replicate", "bias": False}, (2, 3, 5, 5), "float"),
    ("Conv2d", (3, 4, 3), {"padding": "valid"}, (2, 3, 5, 5), "float"),
    ("Conv3d", (2, 3, 2), {"padding": 1}, (1, 2, 4, 4, 4), "float"),
    ("ConvTranspose1d", (2, 3, 3), {"stride": 2, "output_padding": 1}, (2, 2, 5), "float"),
    ("ConvTranspose2d", (4, 2, 3), {"stride": 2, "padding": 1, "groups": 2}, (2, 4, 4, 4), "float"),
    ("ConvTranspose3d", (2, 2, 2), {"stride": 2}, (1, 2, 3, 3, 3), "float"),
    ("MaxPool1d", (3,), {"stride": 2}, (2, 3, 10), "float"),
    ("MaxPool2d", (2,), {}, (2, 3, 6, 6), "float"),
    ("MaxPool2d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True}, (2, 3, 7, 7), "float"),
    ("MaxPool3d", (2,), {}, (1, 2, 4, 4, 4), "float"),
    ("AvgPool1d", (3,), {"stride": 2, "padding": 1}, (2, 3, 10), "float"),
    ("AvgPool2d", (2,), {}, (2, 3, 6, 6), "float"),
    ("AvgPool2d", (3,), {"stride": 2, "padding": 1, "count_include_pad": False}, (2, 3, 7, 7), "float"),
    ("AvgPool3d", (2,), {}, (1, 2, 4, 4, 4), "float"),
    ("AdaptiveAvgPool1d", (4,), {}, (2, 3, 10), "float"),
    ("AdaptiveAvgPool2d", ((3, 2),), {}, (2, 3, 7, 5), "float"),
    ("AdaptiveAvgPool2d", (1,), {}, (2, 3, 7, 5), "float"),
    ("AdaptiveAvgPool3d", (2,), {}, (1, 2, 5, 4, 3), "float"),
    ("AdaptiveMaxPool1d", (4,), {}, (2, 3, 10), "float"),
    ("AdaptiveMaxPool2d", ((3, 2),), {}, (2, 3, 7, 5), "float"),
    ("BatchNorm1d", (3,), {}, (4, 3), "float"),
    ("BatchNorm1d", (3,), {"affine": False}, (4, 3, 5), "float"),
    ("BatchNorm2d", (3,), {}, (4, 3, 5, 5), "float"),
    ("BatchNorm2d", (3,), {"momentum": None}, (4, 3, 5, 5), "float"),
    ("BatchNorm2d", (3,), {"track_running_stats": False}, (4, 3, 5, 5), "float"),
    ("BatchNorm3d", (2,), {}, (2, 2, 3, 3, 3), "float"),
    ("LayerNorm", (5,), {}, (3, 4, 5), "float"),
    ("LayerNorm", ((4, 5),), {"elementwise_affine": False}, (3, 4, 5), "float"),
    ("LayerNorm", (5,), {"bias": False, "eps": 1e-3}, (3, 5), "float"),
    ("GroupNorm", (2, 4), {}, (3, 4, 5, 5), "float"),
    ("GroupNorm", (2, 4), {"bias": False}, (3, 4, 5, 5), "float"),
    ("BatchNorm2d", (3,), {"bias": False}, (4, 3, 5, 5), "float"),
    ("RMSNorm", (5,), {}, (3, 4, 5), "float"),
    ("RMSNorm", ((4, 5),), {"eps": 1e-4}, (3, 4, 5), "float"),
    ("InstanceNorm1d", (3,), {}, (2, 3, 6), "float"),
    ("InstanceNorm2d", (3,), {"affine": True, "track_running_stats": True}, (2, 3, 5, 5), "float"),
    ("LocalResponseNorm", (3,), {}, (2, 5, 4, 4), "float"),
    ("Embedding", (10, 4), {}, (3, 5), "index10"),
    ("Embedding", (10, 4), {"padding_idx": 2}, (3, 5), "index10"),
    ("EmbeddingBag", (10, 4), {"mode": "sum"}, (3, 5), "index10"),
    ("Flatten", (), {}, (2, 3, 4, 5), "float"),
    ("Flatten", (0, 2), {}, (2, 3, 4, 5), "float"),
    ("Unflatten", (1, (2, 3)), {}, (4, 6, 5), "float"),
    ("PReLU", (), {}, (3, 4), "float"),
    ("PReLU", (4,), {"init": 0.1}, (3, 4, 5), "float"),
    ("AdaptiveMaxPool3d", ((2, 3, 1),), {}, (1, 2, 5, 4, 3), "float"),
    ("InstanceNorm3d", (2,), {"affine": True}, (2, 2, 3, 3, 3), "float"),
    # single process: SyncBatchNorm computes what BatchNorm computes
    ("SyncBatchNorm", (3,), {}, (4, 3, 5), "float"),
    ("SyncBatchNorm", (3,), {"bias": False, "momentum": None}, (4, 3, 2, 2), "float"),
    ("SyncBatchNorm", (3,), {"affine": False, "track_running_stats": False}, (4, 3), "float"),
]
# Random masks in training (different random streams): compared in eval mode only (identity).
DROPOUTS = [
    ("Dropout", (0.3,), {}, (2, 4, 3, 6), "float"),
    ("Dropout1d", (0.3,), {}, (2, 4, 6), "float"),
    ("Dropout2d", (0.3,), {}, (2, 4, 3, 6), "float"),
    ("Dropout3d", (0.3,), {}, (2, 4, 3, 2, 2), "float"),
    ("AlphaDropout", (0.3,), {}, (2, 4, 3, 6), "float"),
    ("FeatureAlphaDropout", (0.3,), {}, (2, 4, 3, 6), "float"),
]
CASES += DROPOUTS

ACTIVATIONS = [
    ("ReLU", (), {}),
    ("ReLU6", (), {}),
    ("Threshold", (0.1, 20.0), {}),
    ("Hardtanh", (-0.5, 0.7), {}),
    ("Sigmoid", (), {}),
    ("Hardsigmoid", (), {}),
    ("Tanh", (), {}),
    ("SiLU", (), {}),
    ("Mish", (), {}),
    ("Hardswish", (), {}),
    ("ELU", (0.7,), {}),
    ("CELU", (1.3,), {}),
    ("SELU", (), {}),
    ("GLU", (), {}),
    ("GELU", (), {}),
    ("GELU", (), {"approximate": "tanh"}),
    ("Hardshrink", (0.3,), {}),
    ("LeakyReLU", (0.2,), {}),
    ("LogSigmoid", (), {}),
    ("Softplus", (2.0, 5.0), {}),
    ("Softshrink", (0.3,), {}),
    ("Softsign", (), {}),
    ("Tanhshrink", (), {}),
    ("Softmin", (1,), {}),
    ("Softmax", (-1,), {}),
    ("Softmax2d", (), {}),
    ("LogSoftmax", (1,), {}),
    ("RReLU", (), {}),  # eval mode: deterministic slope (lower + upper) / 2
]
CASES += [(name, args, kwargs, (2, 4, 3, 6), "float") for name, args, kwargs in ACTIVATIONS]


def _make_input(shape, kind, rng):
    if kind == "index10":
        return rng.integers(0, 10, size=shape).astype(np.int64)
    return rng.standard_normal(shape).astype(np.float32)


def _to_ember_state(torch_state):
    return {k: ember.from_numpy(v.detach().numpy().copy()) for k, v in torch_state.items()}


def _case_id(case):
    name, args, kwargs = case[:3]
    return f"{name}{args}{kwargs}"


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_layer_matches_torch(case, mode):
    name, args, kwargs, shapes, kind = case
    if name == "RReLU" and mode == "train":
        pytest.skip("random slopes in training (different random streams)")
    if name in {d[0] for d in DROPOUTS} and mode == "train":
        pytest.skip("random masks in training (different random streams)")
    torch.manual_seed(0)
    try:
        tm = getattr(torch.nn, name)(*args, **kwargs)
    except TypeError as exc:  # an option this PyTorch release does not have yet
        if IS_PINNED_TORCH:
            raise
        pytest.skip(f"torch {torch.__version__}: {exc} (the parity suite pins torch {PINNED_TORCH})")
    em = getattr(enn, name)(*args, **kwargs)
    # Non-trivial affine parameters for the norms (their defaults are ones/zeros).
    with torch.no_grad():
        for p in tm.parameters():
            p.add_(torch.rand_like(p) * 0.5)
    # state_dict: same keys, same order.
    assert list(em.state_dict().keys()) == list(tm.state_dict().keys())
    result = em.load_state_dict(_to_ember_state(tm.state_dict()))
    assert not result.missing_keys and not result.unexpected_keys
    tm.to(TORCH_DEVICE)
    em.to(EMBER_DEVICE)
    getattr(tm, mode)()
    getattr(em, mode)()

    rng = np.random.default_rng(1)
    shapes = shapes if isinstance(shapes, list) else [shapes]
    arrays = [_make_input(s, kind, rng) for s in shapes]
    floating = kind == "float"
    t_in = [torch.from_numpy(a.copy()).to(TORCH_DEVICE).requires_grad_(floating) for a in arrays]
    e_in = [ember.from_numpy(a.copy()).to(EMBER_DEVICE).requires_grad_(floating) for a in arrays]
    t_out = tm(*t_in)
    e_out = em(*e_in)
    assert e_out.device.type == EMBER_DEVICE
    np.testing.assert_allclose(host(e_out), torch_numpy(t_out), rtol=1e-4, atol=1e-5)

    # Gradients of a weighted sum of the output w.r.t. the parameters and float inputs.
    weights = rng.standard_normal(tuple(t_out.shape)).astype(np.float32)
    (t_out * torch.from_numpy(weights).to(TORCH_DEVICE)).sum().backward()
    (e_out * ember.from_numpy(weights).to(EMBER_DEVICE)).sum().backward()
    for (tn, tp), (en, ep) in zip(tm.named_parameters(), em.named_parameters()):
        assert tn == en
        np.testing.assert_allclose(host(ep.grad), torch_numpy(tp.grad), rtol=1e-4, atol=1e-4, err_msg=tn)
    if floating:
        for ti, ei in zip(t_in, e_in):
            np.testing.assert_allclose(host(ei.grad), torch_numpy(ti.grad), rtol=1e-4, atol=1e-4)

    # Buffers after the step (running statistics, num_batches_tracked).
    for (tn, tb), (en, eb) in zip(tm.named_buffers(), em.named_buffers()):
        assert tn == en
        np.testing.assert_allclose(host(eb), torch_numpy(tb), rtol=1e-5, atol=1e-6, err_msg=tn)


def test_repr_matches_torch():
    require_pinned_torch("the layers' repr")
    for name, args, kwargs, _, _ in CASES:
        tm = getattr(torch.nn, name)(*args, **kwargs)
        em = getattr(enn, name)(*args, **kwargs)
        assert repr(em) == repr(tm), name


def test_batchnorm_momentum_none_cumulative_average_matches_torch():
    tm = torch.nn.BatchNorm1d(3, momentum=None)
    em = enn.BatchNorm1d(3, momentum=None)
    rng = np.random.default_rng(0)
    for _ in range(4):
        x = rng.standard_normal((5, 3)).astype(np.float32) * 3 + 1
        tm(torch.from_numpy(x))
        em(ember.from_numpy(x))
    np.testing.assert_allclose(em.running_mean.numpy(), tm.running_mean.numpy(), rtol=1e-5)
    np.testing.assert_allclose(em.running_var.numpy(), tm.running_var.numpy(), rtol=1e-5)
    assert em.num_batches_tracked.item() == tm.num_batches_tracked.item() == 4


def test_conv_transpose_output_size_matches_torch():
    torch.manual_seed(0)
    tm = torch.nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)
    em = enn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)
    em.load_state_dict(_to_ember_state(tm.state_dict()))
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 4)).astype(np.float32)
    t_out = tm(torch.from_numpy(x), output_size=[8, 8])
    e_out = em(ember.from_numpy(x), output_size=[8, 8])
    assert tuple(e_out.shape) == tuple(t_out.shape) == (1, 3, 8, 8)
    np.testing.assert_allclose(e_out.detach().numpy(), t_out.detach().numpy(), rtol=1e-4, atol=1e-5)


LOSSES = [
    ("L1Loss", {}, "reg"),
    ("MSELoss", {}, "reg"),
    ("MSELoss", {"reduction": "sum"}, "reg"),
    ("SmoothL1Loss", {"beta": 0.5}, "reg"),
    ("HuberLoss", {"delta": 0.5, "reduction": "none"}, "reg"),
    ("CrossEntropyLoss", {}, "cls"),
    ("CrossEntropyLoss", {"label_smoothing": 0.1, "ignore_index": 1}, "cls"),
    ("CrossEntropyLoss", {"weight": [1.0, 2.0, 0.5, 1.0]}, "cls"),
    ("CrossEntropyLoss", {}, "prob"),
    ("NLLLoss", {}, "logp"),
    ("NLLLoss", {"weight": [1.0, 2.0, 0.5, 1.0], "reduction": "sum"}, "logp"),
    ("KLDivLoss", {"reduction": "batchmean"}, "kl"),
    ("BCELoss", {}, "bce"),
    ("BCELoss", {"weight": [1.0, 2.0, 0.5, 1.0]}, "bce"),
    ("BCEWithLogitsLoss", {}, "bcel"),
    ("BCEWithLogitsLoss", {"pos_weight": [1.0, 3.0, 0.5, 2.0]}, "bcel"),
    ("SoftMarginLoss", {}, "pm1"),
    ("HingeEmbeddingLoss", {"margin": 0.5}, "pm1"),
    ("MultiLabelSoftMarginLoss", {}, "bcel"),
    ("MultiMarginLoss", {"p": 2, "margin": 0.5}, "cls"),
    ("PoissonNLLLoss", {}, "poisson"),
]


def _loss_inputs(kind, rng):
    x = rng.standard_normal((6, 4)).astype(np.float32)
    if kind == "reg":
        return x, rng.standard_normal((6, 4)).astype(np.float32)
    if kind in ("cls", "logp"):
        if kind == "logp":
            x = x - np.log(np.exp(x).sum(1, keepdims=True))
        return x, rng.integers(0, 4, size=6).astype(np.int64)
    if kind == "prob":
        p = rng.random((6, 4)).astype(np.float32)
        return x, p / p.sum(1, keepdims=True)
    if kind == "kl":
        p = rng.random((6, 4)).astype(np.float32)
        return x - np.log(np.exp(x).sum(1, keepdims=True)), p / p.sum(1, keepdims=True)
    if kind == "bce":
        return 1 / (1 + np.exp(-x)), rng.random((6, 4)).astype(np.float32)
    if kind == "bcel":
        return x, (rng.random((6, 4)) > 0.5).astype(np.float32)
    if kind == "pm1":
        return x, np.where(rng.random((6, 4)) > 0.5, 1.0, -1.0).astype(np.float32)
    if kind == "poisson":
        return x, rng.poisson(2.0, size=(6, 4)).astype(np.float32)
    raise AssertionError(kind)


@pytest.mark.parametrize("case", LOSSES, ids=lambda c: f"{c[0]}{c[1]}{c[2]}")
def test_loss_matches_torch(case):
    name, kwargs, kind = case
    tk = {k: torch.tensor(v, device=TORCH_DEVICE) if isinstance(v, list) else v for k, v in kwargs.items()}
    ek = {k: ember.tensor(v, device=EMBER_DEVICE) if isinstance(v, list) else v for k, v in kwargs.items()}
    tl = getattr(torch.nn, name)(**tk)
    el = getattr(enn, name)(**ek)
    assert list(el.state_dict().keys()) == list(tl.state_dict().keys())
    assert repr(el) == repr(tl)
    x, y = _loss_inputs(kind, np.random.default_rng(0))
    tx = torch.from_numpy(x.copy()).to(TORCH_DEVICE).requires_grad_()
    ex = ember.from_numpy(x.copy()).to(EMBER_DEVICE).requires_grad_()
    t_out = tl(tx, torch.from_numpy(y).to(TORCH_DEVICE))
    e_out = el(ex, ember.from_numpy(y).to(EMBER_DEVICE))
    np.testing.assert_allclose(host(e_out), torch_numpy(t_out), rtol=1e-5, atol=1e-6)
    t_out.sum().backward()
    e_out.sum().backward()
    np.testing.assert_allclose(host(ex.grad), torch_numpy(tx.grad), rtol=1e-4, atol=1e-6)


def test_three_input_losses_match_torch():
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal((5, 4)).astype(np.float32) for _ in range(3))
    sign = np.where(rng.random(5) > 0.5, 1.0, -1.0).astype(np.float32)
    cases = [
        ("TripletMarginLoss", {"margin": 0.5, "swap": True}, (a, b, c)),
        ("TripletMarginWithDistanceLoss", {"margin": 0.7}, (a, b, c)),
        ("CosineEmbeddingLoss", {"margin": 0.1}, (a, b, sign)),
        ("MarginRankingLoss", {"margin": 0.2}, (a[:, 0], b[:, 0], sign)),
    ]
    for name, kwargs, arrays in cases:
        t = getattr(torch.nn, name)(**kwargs)(*(torch.from_numpy(x.copy()) for x in arrays))
        e = getattr(enn, name)(**kwargs)(*(ember.from_numpy(x.copy()) for x in arrays))
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


def test_more_losses_match_torch():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    y = rng.standard_normal((5, 4)).astype(np.float32)
    var = rng.random((5, 4)).astype(np.float32) + 0.1
    labels = np.array([[3, 0, -1, 1], [1, 2, 3, -1], [0, -1, 2, 2], [2, 1, 0, 3], [-1, 0, 1, 2]], np.int64)
    logits = rng.standard_normal((7, 2, 4)).astype(np.float32)
    targets = np.array([[1, 2, 2], [3, 1, 0]], np.int64)
    cases = [
        ("GaussianNLLLoss", {}, (x, y, var)),
        ("GaussianNLLLoss", {"full": True, "eps": 1e-3, "reduction": "sum"}, (x, y, var[:, :1])),
        ("MultiLabelMarginLoss", {}, (x, labels)),
        ("CTCLoss", {}, (logits, targets, np.array([7, 6]), np.array([3, 2]))),
        ("CTCLoss", {"blank": 3, "reduction": "sum", "zero_infinity": True},
         (logits, targets % 3, np.array([7, 5]), np.array([3, 1]))),
    ]
    for name, kwargs, arrays in cases:
        tin = [torch.from_numpy(a.copy()) for a in arrays]
        ein = [ember.from_numpy(a.copy()) for a in arrays]
        tin[0].requires_grad_()
        ein[0].requires_grad_()
        t_first, e_first = tin[0], ein[0]
        if name == "CTCLoss":
            # torch's CTC backward returns the gradient for logits behind a log_softmax (not the
            # partial derivative for free log-probabilities): compare through the log_softmax.
            t_first, e_first = t_first.log_softmax(-1), e_first.log_softmax(-1)
        t = getattr(torch.nn, name)(**kwargs)(t_first, *tin[1:])
        e = getattr(enn, name)(**kwargs)(e_first, *ein[1:])
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-5, err_msg=name)
        t.sum().backward()
        e.sum().backward()
        np.testing.assert_allclose(ein[0].grad.numpy(), tin[0].grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)


def test_triplet_margin_with_distance_loss_functional_matches_torch():
    rng = np.random.default_rng(1)
    a, p, n = (rng.standard_normal((6, 3)).astype(np.float32) for _ in range(3))
    cosine = (lambda x, y: 1 - torch.nn.functional.cosine_similarity(x, y),
              lambda x, y: 1 - ember.nn.functional.cosine_similarity(x, y))
    for kwargs in ({}, {"swap": True, "margin": 0.3}, {"reduction": "none"}, {"reduction": "sum", "swap": True}):
        for t_dist, e_dist in ((None, None), cosine):
            t = torch.nn.functional.triplet_margin_with_distance_loss(
                *(torch.from_numpy(v) for v in (a, p, n)), distance_function=t_dist, **kwargs)
            e = ember.nn.functional.triplet_margin_with_distance_loss(
                *(ember.from_numpy(v) for v in (a, p, n)), distance_function=e_dist, **kwargs)
            np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-5, atol=1e-6)
            tm = torch.nn.TripletMarginWithDistanceLoss(distance_function=t_dist, **kwargs)
            em = enn.TripletMarginWithDistanceLoss(distance_function=e_dist, **kwargs)
            np.testing.assert_allclose(em(*(ember.from_numpy(v) for v in (a, p, n))).numpy(),
                                       tm(*(torch.from_numpy(v) for v in (a, p, n))).numpy(), rtol=1e-5, atol=1e-6)
    for bad in ({"margin": 0.0}, {"reduction": "avg"}):
        with pytest.raises(ValueError) as te:
            torch.nn.functional.triplet_margin_with_distance_loss(*(torch.from_numpy(v) for v in (a, p, n)), **bad)
        with pytest.raises(ValueError) as ee:
            ember.nn.functional.triplet_margin_with_distance_loss(*(ember.from_numpy(v) for v in (a, p, n)), **bad)
        assert str(ee.value) == str(te.value)


@pytest.mark.parametrize("cutoffs, head_bias", [([3], False), ([3, 6], True)])
def test_adaptive_log_softmax_matches_torch(cutoffs, head_bias):
    torch.manual_seed(0)
    tm = torch.nn.AdaptiveLogSoftmaxWithLoss(16, 10, cutoffs, div_value=2.0, head_bias=head_bias)
    em = enn.AdaptiveLogSoftmaxWithLoss(16, 10, cutoffs, div_value=2.0, head_bias=head_bias)
    assert list(em.state_dict()) == list(tm.state_dict()) and repr(em) == repr(tm)
    em.load_state_dict(_to_ember_state(tm.state_dict()))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 16)).astype(np.float32)
    y = np.array([0, 2, 3, 5, 6, 9, 1])
    tx, ex = torch.from_numpy(x.copy()).requires_grad_(), ember.from_numpy(x.copy()).requires_grad_()
    t_out, e_out = tm(tx, torch.from_numpy(y)), em(ex, ember.from_numpy(y))
    np.testing.assert_allclose(e_out.output.detach().numpy(), t_out.output.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(e_out.loss), t_out.loss.item(), rtol=1e-6)
    t_out.loss.backward()
    e_out.loss.backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-6)
    for (tn, tp), (en, ep) in zip(tm.named_parameters(), em.named_parameters()):
        assert tn == en
        np.testing.assert_allclose(ep.grad.numpy(), tp.grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=tn)
    np.testing.assert_allclose(em.log_prob(ex).detach().numpy(), tm.log_prob(tx).detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_array_equal(em.predict(ex).numpy(), tm.predict(tx).numpy())


def test_nll_loss_2d_and_lazy_instance_norm_match_torch():
    with pytest.warns(FutureWarning):
        tl = torch.nn.NLLLoss2d(ignore_index=1)
    with pytest.warns(FutureWarning, match="NLLLoss2d"):
        el = enn.NLLLoss2d(ignore_index=1)
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 4)).astype(np.float32)
    y = np.random.default_rng(1).integers(0, 3, size=(2, 4, 4))
    np.testing.assert_allclose(el(ember.from_numpy(x), ember.from_numpy(y)).numpy(),
                               tl(torch.from_numpy(x), torch.from_numpy(y)).numpy(), rtol=1e-6)
    for n, shape in ((1, (2, 3, 5)), (2, (2, 3, 4, 4)), (3, (2, 3, 2, 3, 3))):
        tm = getattr(torch.nn, f"LazyInstanceNorm{n}d")()
        em = getattr(enn, f"LazyInstanceNorm{n}d")()
        a = np.random.default_rng(n).standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(em(ember.from_numpy(a)).detach().numpy(), tm(torch.from_numpy(a)).detach().numpy(),
                                   rtol=1e-5, atol=1e-5)
        assert type(em).__name__ == type(tm).__name__
        if IS_PINNED_TORCH:  # the repr names the options of the pinned release
            assert repr(em) == repr(tm)
        assert list(em.state_dict()) == list(tm.state_dict())
        np.testing.assert_allclose(em.running_var.numpy(), tm.running_var.numpy(), rtol=1e-5)


# Layers built large enough that each parameter has hundreds of values to compare.
INIT_CASES = [
    ("Linear", (40, 30), {}),
    ("Bilinear", (20, 15, 10), {}),
    ("Conv1d", (8, 16, 5), {}),
    ("Conv2d", (6, 12, 3), {"groups": 2}),
    ("Conv3d", (4, 8, 3), {}),
    ("ConvTranspose1d", (16, 8, 5), {}),
    ("ConvTranspose2d", (12, 6, 3), {"groups": 3}),
    ("ConvTranspose3d", (8, 4, 3), {}),
    ("Embedding", (100, 16), {}),
    ("EmbeddingBag", (100, 16), {}),
    ("PReLU", (300,), {}),
    ("BatchNorm2d", (300,), {}),
    ("LayerNorm", (300,), {}),
    ("GroupNorm", (3, 300), {}),
    ("RMSNorm", (300,), {}),
    ("InstanceNorm1d", (300,), {"affine": True, "track_running_stats": True}),
    ("RNN", (20, 30), {"num_layers": 2}),
    ("LSTM", (20, 30), {"proj_size": 10}),
    ("GRUCell", (20, 30), {}),
    ("MultiheadAttention", (32, 4), {"add_bias_kv": True, "kdim": 20, "vdim": 24}),
    ("TransformerEncoderLayer", (32, 4), {"dim_feedforward": 64}),
    ("AdaptiveLogSoftmaxWithLoss", (64, 40, [10, 20]), {}),
]


@pytest.mark.parametrize("case", INIT_CASES, ids=lambda c: c[0])
def test_default_initialisation_distribution_matches_torch(case):
    """Each parameter and buffer's default values come from the same distribution as torch's (two-sample
    Kolmogorov-Smirnov test); constants (ones, zeros) are equal."""
    from scipy import stats

    name, args, kwargs = case
    ember.manual_seed(0)
    torch.manual_seed(0)
    tm = getattr(torch.nn, name)(*args, **kwargs)
    em = getattr(enn, name)(*args, **kwargs)
    t_state, e_state = tm.state_dict(), em.state_dict()
    assert list(e_state) == list(t_state)
    for key, t_value in t_state.items():
        t = t_value.detach().double().numpy().ravel()
        e = e_state[key].detach().numpy().astype(np.float64).ravel()
        assert e.shape == t.shape, key
        if np.all(t == t[0]):  # a constant initialisation
            np.testing.assert_array_equal(e, t, err_msg=key)
            continue
        assert stats.ks_2samp(e, t).pvalue > 1e-3, key
