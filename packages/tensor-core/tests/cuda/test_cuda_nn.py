"""``ember.nn`` on the cuda device, with CPU as the oracle.

Every layer class with a sample construction is built once on CPU, copied to the GPU
(``copy.deepcopy(module).to("cuda")``) and run forward and backward on both devices, in
training and in evaluation mode: outputs, parameter gradients, input gradients and buffers
(BatchNorm's running statistics) must agree within float32 tolerance, and everything the GPU
run produces must live on the GPU. Further tests: moving modules between devices keeps the
Parameter objects; ``state_dict`` across devices; ``ember.save``/``ember.load`` of a cuda model
with ``map_location``; ``nn.init`` and ``nn.utils`` on cuda tensors; a few training steps; the
DataLoader's ``pin_memory``.

All tests are marked ``cuda``: they run with ``EMBER_TEST_BACKEND=cuda`` on a machine with a GPU
and skip elsewhere.
"""

from __future__ import annotations

import copy
import io

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F

pytestmark = pytest.mark.cuda

#: The device under test (module level so the same checks can be pointed elsewhere by hand).
DEVICE = "cuda"

RTOL, ATOL = 1e-4, 1e-5  # float32 values; reductions may sum in another order on the GPU
GRAD_RTOL, GRAD_ATOL = 1e-4, 1e-4


# --------------------------------------------------------------------------- sample layers


class _PoolUnpool(nn.Module):
    """MaxPool with indices followed by MaxUnpool (the unpool layers need the pool's indices)."""

    def __init__(self, dims):
        super().__init__()
        self.pool = getattr(nn, f"MaxPool{dims}d")(2, return_indices=True)
        self.unpool = getattr(nn, f"MaxUnpool{dims}d")(2)

    def forward(self, x):
        out, indices = self.pool(x)
        return self.unpool(out, indices)


def _activations():
    names = [
        "ReLU",
        "ReLU6",
        "ELU",
        "SELU",
        "CELU",
        "GELU",
        "SiLU",
        "Mish",
        "Sigmoid",
        "Tanh",
        "Hardtanh",
        "Hardsigmoid",
        "Hardswish",
        "LeakyReLU",
        "LogSigmoid",
        "Softplus",
        "Softshrink",
        "Hardshrink",
        "Tanhshrink",
        "Softsign",
        "Identity",
    ]
    return [(name, (lambda name=name: getattr(nn, name)()), [(2, 4, 3)]) for name in names]


# (id, constructor, input specs). A spec is a shape (standard normal float32, requires grad),
# ("long", shape, high): int64 in [0, high); ("unit", shape): uniform in (0.01, 0.99);
# ("logp", shape): log-probabilities over the last dim; ("sign", shape): +-1.0;
# ("pos", shape): positive floats; ("const", values, dtype): a fixed tensor.
# Only plain-shape specs, and the first input of kind unit/logp/pos, require grad.
CASES = [
    *_activations(),
    ("GELU-tanh", lambda: nn.GELU(approximate="tanh"), [(2, 4, 3)]),
    ("Threshold", lambda: nn.Threshold(0.1, 20.0), [(2, 4)]),
    ("PReLU", lambda: nn.PReLU(), [(2, 4)]),
    ("PReLU-channels", lambda: nn.PReLU(4, init=0.1), [(3, 4, 5)]),
    ("GLU", lambda: nn.GLU(), [(2, 4)]),
    ("Softmax", lambda: nn.Softmax(dim=1), [(2, 4)]),
    ("LogSoftmax", lambda: nn.LogSoftmax(dim=1), [(2, 4)]),
    ("Softmin", lambda: nn.Softmin(dim=1), [(2, 4)]),
    ("Softmax2d", lambda: nn.Softmax2d(), [(1, 2, 3, 3)]),
    ("RReLU", lambda: nn.RReLU(), [(2, 4)]),
    ("Linear", lambda: nn.Linear(4, 3), [(2, 4)]),
    ("Linear-nobias-3d", lambda: nn.Linear(5, 3, bias=False), [(2, 4, 5)]),
    ("Bilinear", lambda: nn.Bilinear(4, 3, 2), [(2, 4), (2, 3)]),
    ("LazyLinear", lambda: nn.LazyLinear(3), [(2, 4)]),
    ("Conv1d", lambda: nn.Conv1d(2, 4, 3, stride=2, padding=1), [(2, 2, 9)]),
    ("Conv1d-circular", lambda: nn.Conv1d(2, 4, 3, padding="same", padding_mode="circular"), [(2, 2, 9)]),
    ("Conv2d", lambda: nn.Conv2d(2, 3, 3, padding=1), [(2, 2, 6, 6)]),
    (
        "Conv2d-groups",
        lambda: nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=1, dilation=(1, 2), groups=2),
        [(2, 4, 9, 8)],
    ),
    ("Conv2d-reflect", lambda: nn.Conv2d(3, 4, 3, padding="same", padding_mode="reflect"), [(2, 3, 6, 6)]),
    ("Conv3d", lambda: nn.Conv3d(2, 3, 3), [(1, 2, 5, 5, 5)]),
    ("ConvTranspose1d", lambda: nn.ConvTranspose1d(2, 3, 3, stride=2, output_padding=1), [(2, 2, 5)]),
    ("ConvTranspose2d", lambda: nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, groups=2), [(2, 4, 4, 4)]),
    ("ConvTranspose3d", lambda: nn.ConvTranspose3d(2, 2, 2, stride=2), [(1, 2, 3, 3, 3)]),
    ("LazyConv2d", lambda: nn.LazyConv2d(3, 3), [(2, 2, 5, 5)]),
    ("BatchNorm1d", lambda: nn.BatchNorm1d(3), [(4, 3)]),
    ("BatchNorm1d-3d-noaffine", lambda: nn.BatchNorm1d(3, affine=False), [(4, 3, 5)]),
    ("BatchNorm2d", lambda: nn.BatchNorm2d(3), [(4, 3, 5, 5)]),
    ("BatchNorm2d-cumulative", lambda: nn.BatchNorm2d(3, momentum=None), [(4, 3, 5, 5)]),
    ("BatchNorm2d-nostats", lambda: nn.BatchNorm2d(3, track_running_stats=False), [(4, 3, 5, 5)]),
    ("BatchNorm3d", lambda: nn.BatchNorm3d(2), [(2, 2, 3, 3, 3)]),
    ("SyncBatchNorm", lambda: nn.SyncBatchNorm(3), [(4, 3, 5)]),
    ("LazyBatchNorm2d", lambda: nn.LazyBatchNorm2d(), [(4, 3, 5, 5)]),
    ("LayerNorm", lambda: nn.LayerNorm(5), [(3, 4, 5)]),
    ("LayerNorm-2d-noaffine", lambda: nn.LayerNorm((4, 5), elementwise_affine=False), [(3, 4, 5)]),
    ("GroupNorm", lambda: nn.GroupNorm(2, 4), [(3, 4, 5, 5)]),
    ("RMSNorm", lambda: nn.RMSNorm(5), [(3, 4, 5)]),
    ("InstanceNorm1d", lambda: nn.InstanceNorm1d(3), [(2, 3, 6)]),
    ("InstanceNorm2d-stats", lambda: nn.InstanceNorm2d(3, affine=True, track_running_stats=True), [(2, 3, 5, 5)]),
    ("InstanceNorm3d", lambda: nn.InstanceNorm3d(2, affine=True), [(2, 2, 3, 3, 3)]),
    ("LocalResponseNorm", lambda: nn.LocalResponseNorm(3), [(2, 5, 4, 4)]),
    ("Embedding", lambda: nn.Embedding(10, 4), [("long", (3, 5), 10)]),
    ("Embedding-padding", lambda: nn.Embedding(10, 4, padding_idx=2), [("long", (3, 5), 10)]),
    ("Embedding-maxnorm", lambda: nn.Embedding(10, 4, max_norm=1.0), [("long", (3, 5), 10)]),
    ("EmbeddingBag-sum", lambda: nn.EmbeddingBag(10, 4, mode="sum"), [("long", (3, 5), 10)]),
    ("EmbeddingBag-mean", lambda: nn.EmbeddingBag(10, 3), [("long", (2, 5), 10)]),
    ("MaxPool1d", lambda: nn.MaxPool1d(3, stride=2), [(2, 3, 10)]),
    ("MaxPool2d", lambda: nn.MaxPool2d(2), [(2, 3, 6, 6)]),
    ("MaxPool2d-ceil", lambda: nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True), [(2, 3, 7, 7)]),
    ("MaxPool3d", lambda: nn.MaxPool3d(2), [(1, 2, 4, 4, 4)]),
    ("AvgPool1d", lambda: nn.AvgPool1d(3, stride=2, padding=1), [(2, 3, 10)]),
    ("AvgPool2d", lambda: nn.AvgPool2d(2), [(2, 3, 6, 6)]),
    ("AvgPool2d-nopad", lambda: nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), [(2, 3, 7, 7)]),
    ("AvgPool3d", lambda: nn.AvgPool3d(2), [(1, 2, 4, 4, 4)]),
    ("AdaptiveAvgPool1d", lambda: nn.AdaptiveAvgPool1d(4), [(2, 3, 10)]),
    ("AdaptiveAvgPool2d", lambda: nn.AdaptiveAvgPool2d((3, 2)), [(2, 3, 7, 5)]),
    ("AdaptiveAvgPool3d", lambda: nn.AdaptiveAvgPool3d(2), [(1, 2, 5, 4, 3)]),
    ("AdaptiveMaxPool1d", lambda: nn.AdaptiveMaxPool1d(4), [(2, 3, 10)]),
    ("AdaptiveMaxPool2d", lambda: nn.AdaptiveMaxPool2d((3, 2)), [(2, 3, 7, 5)]),
    ("AdaptiveMaxPool3d", lambda: nn.AdaptiveMaxPool3d((2, 3, 1)), [(1, 2, 5, 4, 3)]),
    ("LPPool1d", lambda: nn.LPPool1d(2, 3, stride=2), [(2, 3, 9)]),
    ("LPPool2d", lambda: nn.LPPool2d(2, 2), [(2, 3, 8, 8)]),
    ("MaxUnpool1d", lambda: _PoolUnpool(1), [(2, 3, 8)]),
    ("MaxUnpool2d", lambda: _PoolUnpool(2), [(2, 3, 6, 6)]),
    ("MaxUnpool3d", lambda: _PoolUnpool(3), [(1, 2, 4, 4, 4)]),
    ("Dropout", lambda: nn.Dropout(0.3), [(2, 4, 3, 6)]),
    ("Dropout1d", lambda: nn.Dropout1d(0.3), [(2, 4, 6)]),
    ("Dropout2d", lambda: nn.Dropout2d(0.3), [(2, 4, 3, 6)]),
    ("Dropout3d", lambda: nn.Dropout3d(0.3), [(2, 4, 3, 2, 2)]),
    ("AlphaDropout", lambda: nn.AlphaDropout(0.3), [(2, 4, 3, 6)]),
    ("FeatureAlphaDropout", lambda: nn.FeatureAlphaDropout(0.3), [(2, 4, 3, 6)]),
    ("Flatten", lambda: nn.Flatten(), [(2, 3, 4)]),
    ("Unflatten", lambda: nn.Unflatten(1, (2, 2)), [(2, 4)]),
    ("PixelShuffle", lambda: nn.PixelShuffle(2), [(1, 8, 3, 3)]),
    ("PixelUnshuffle", lambda: nn.PixelUnshuffle(2), [(1, 2, 4, 4)]),
    ("ChannelShuffle", lambda: nn.ChannelShuffle(2), [(1, 4, 3, 3)]),
    ("Upsample-nearest", lambda: nn.Upsample(scale_factor=2), [(1, 2, 3, 3)]),
    ("Upsample-bilinear", lambda: nn.Upsample(scale_factor=2, mode="bilinear"), [(1, 2, 3, 3)]),
    ("UpsamplingNearest2d", lambda: nn.UpsamplingNearest2d(size=(5, 4)), [(1, 2, 3, 3)]),
    ("UpsamplingBilinear2d", lambda: nn.UpsamplingBilinear2d(scale_factor=2), [(1, 2, 3, 3)]),
    ("ZeroPad2d", lambda: nn.ZeroPad2d(1), [(1, 2, 3, 3)]),
    ("ConstantPad1d", lambda: nn.ConstantPad1d(2, 0.5), [(1, 2, 3)]),
    ("ConstantPad3d", lambda: nn.ConstantPad3d(1, -1.0), [(1, 1, 2, 2, 2)]),
    ("ReflectionPad1d", lambda: nn.ReflectionPad1d(2), [(1, 2, 4)]),
    ("ReflectionPad2d", lambda: nn.ReflectionPad2d(1), [(1, 2, 3, 3)]),
    ("ReplicationPad1d", lambda: nn.ReplicationPad1d(1), [(1, 2, 3)]),
    ("ReplicationPad3d", lambda: nn.ReplicationPad3d(1), [(1, 1, 2, 2, 2)]),
    ("CircularPad2d", lambda: nn.CircularPad2d(1), [(1, 2, 3, 3)]),
    ("Fold", lambda: nn.Fold((4, 4), 2), [(1, 8, 9)]),
    ("Unfold", lambda: nn.Unfold(2), [(1, 2, 4, 4)]),
    ("CosineSimilarity", lambda: nn.CosineSimilarity(), [(3, 4), (3, 4)]),
    ("PairwiseDistance", lambda: nn.PairwiseDistance(), [(3, 4), (3, 4)]),
    ("MultiheadAttention", lambda: nn.MultiheadAttention(8, 2, batch_first=True), [(2, 3, 8)] * 3),
    (
        "MultiheadAttention-kdim",
        lambda: nn.MultiheadAttention(8, 2, kdim=6, vdim=5, add_bias_kv=True),
        [(3, 2, 8), (4, 2, 6), (4, 2, 5)],
    ),
    (
        "TransformerEncoderLayer",
        lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
        [(2, 3, 8)],
    ),
    (
        "TransformerEncoderLayer-normfirst-gelu",
        lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu", norm_first=True),
        [(3, 2, 8)],
    ),
    (
        "TransformerDecoderLayer",
        lambda: nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
        [(2, 3, 8), (2, 4, 8)],
    ),
    (
        "TransformerEncoder",
        lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 2, enable_nested_tensor=False),
        [(3, 2, 8)],
    ),
    (
        "Transformer",
        lambda: nn.Transformer(8, 2, 1, 1, 16, dropout=0.0, batch_first=True),
        [(2, 3, 8), (2, 4, 8)],
    ),
    ("RNN", lambda: nn.RNN(4, 3, batch_first=True), [(2, 5, 4)]),
    ("RNN-relu-2layers-bidir", lambda: nn.RNN(4, 3, 2, nonlinearity="relu", bidirectional=True), [(5, 2, 4)]),
    ("LSTM", lambda: nn.LSTM(4, 3, batch_first=True), [(2, 5, 4)]),
    ("LSTM-proj-2layers", lambda: nn.LSTM(4, 5, 2, proj_size=3), [(5, 2, 4)]),
    ("GRU", lambda: nn.GRU(4, 3, batch_first=True), [(2, 5, 4)]),
    ("GRU-bidir", lambda: nn.GRU(4, 3, bidirectional=True), [(5, 2, 4)]),
    ("RNNCell", lambda: nn.RNNCell(4, 3), [(2, 4)]),
    ("LSTMCell", lambda: nn.LSTMCell(4, 3), [(2, 4)]),
    ("GRUCell", lambda: nn.GRUCell(4, 3), [(2, 4)]),
    (
        "AdaptiveLogSoftmaxWithLoss",
        lambda: nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[4, 7], div_value=2.0),
        [(6, 8), ("long", (6,), 10)],
    ),
    (
        "Sequential-cnn",
        lambda: nn.Sequential(
            nn.Conv2d(1, 4, 3, padding=1, bias=False),
            nn.BatchNorm2d(4),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(16, 3),
        ),
        [(3, 1, 4, 4)],
    ),
    # losses
    ("MSELoss", lambda: nn.MSELoss(), [(2, 4), (2, 4)]),
    ("L1Loss", lambda: nn.L1Loss(reduction="sum"), [(2, 4), (2, 4)]),
    ("SmoothL1Loss", lambda: nn.SmoothL1Loss(beta=0.5), [(2, 4), (2, 4)]),
    ("HuberLoss", lambda: nn.HuberLoss(reduction="none"), [(2, 4), (2, 4)]),
    ("CrossEntropyLoss", lambda: nn.CrossEntropyLoss(), [(3, 5), ("long", (3,), 5)]),
    (
        "CrossEntropyLoss-smoothing-weight",
        lambda: nn.CrossEntropyLoss(weight=ember.tensor([1.0, 2.0, 0.5, 1.0, 3.0]), label_smoothing=0.1),
        [(3, 5), ("long", (3,), 5)],
    ),
    ("CrossEntropyLoss-ignore-2d", lambda: nn.CrossEntropyLoss(ignore_index=1), [(2, 4, 3, 3), ("long", (2, 3, 3), 4)]),
    ("CrossEntropyLoss-probs", lambda: nn.CrossEntropyLoss(), [(3, 5), ("unit", (3, 5))]),
    ("NLLLoss", lambda: nn.NLLLoss(), [("logp", (3, 5)), ("long", (3,), 5)]),
    ("KLDivLoss", lambda: nn.KLDivLoss(reduction="batchmean"), [("logp", (3, 5)), ("unit", (3, 5))]),
    ("BCEWithLogitsLoss", lambda: nn.BCEWithLogitsLoss(pos_weight=ember.tensor([2.0])), [(3, 5), ("unit", (3, 5))]),
    ("BCELoss", lambda: nn.BCELoss(), [("unit", (3, 5)), ("unit", (3, 5))]),
    ("PoissonNLLLoss", lambda: nn.PoissonNLLLoss(), [(3, 4), ("pos", (3, 4))]),
    ("GaussianNLLLoss", lambda: nn.GaussianNLLLoss(), [(3, 4), (3, 4), ("pos", (3, 4))]),
    ("HingeEmbeddingLoss", lambda: nn.HingeEmbeddingLoss(), [(3, 4), ("sign", (3, 4))]),
    ("SoftMarginLoss", lambda: nn.SoftMarginLoss(), [(3, 4), ("sign", (3, 4))]),
    ("MultiLabelSoftMarginLoss", lambda: nn.MultiLabelSoftMarginLoss(), [(3, 4), ("unit", (3, 4))]),
    ("MultiMarginLoss", lambda: nn.MultiMarginLoss(), [(3, 5), ("long", (3,), 5)]),
    (
        "MultiLabelMarginLoss",
        lambda: nn.MultiLabelMarginLoss(),
        [(2, 4), ("const", [[3, 0, -1, 1], [1, 2, 3, -1]], ember.int64)],
    ),
    ("MarginRankingLoss", lambda: nn.MarginRankingLoss(0.1), [(4,), (4,), ("sign", (4,))]),
    ("CosineEmbeddingLoss", lambda: nn.CosineEmbeddingLoss(0.2), [(3, 4), (3, 4), ("sign", (3,))]),
    ("TripletMarginLoss", lambda: nn.TripletMarginLoss(), [(3, 4), (3, 4), (3, 4)]),
    (
        "TripletMarginWithDistanceLoss",
        lambda: nn.TripletMarginWithDistanceLoss(swap=True),
        [(3, 4), (3, 4), (3, 4)],
    ),
    (
        "CTCLoss",
        lambda: nn.CTCLoss(),
        [
            ("logp", (6, 2, 4)),
            ("const", [[1, 2, 2], [3, 1, 0]], ember.int64),
            ("const", [6, 5], ember.int64),
            ("const", [3, 2], ember.int64),
        ],
    ),
]
CASE_IDS = [case[0] for case in CASES]

#: Layers whose training-mode forward draws random numbers. The CPU and the GPU generators are
#: separate streams, so these are compared in eval mode only (and checked for the device in training).
RANDOM_IN_TRAINING = {"RReLU", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"}

#: Lazy layers: one CPU forward materialises the parameters before the copy, so both start equal.
LAZY = {"LazyLinear", "LazyConv2d", "LazyBatchNorm2d"}


def _make_inputs(specs, seed=1):
    """CPU inputs for ``specs`` (see :data:`CASES`) and which of them require grad."""
    rng = np.random.default_rng(seed)
    arrays, grads = [], []
    for position, spec in enumerate(specs):
        if isinstance(spec, tuple) and spec and isinstance(spec[0], str):
            kind = spec[0]
            if kind == "long":
                arrays.append(ember.from_numpy(rng.integers(0, spec[2], size=spec[1]).astype(np.int64)))
                grads.append(False)
                continue
            if kind == "const":
                arrays.append(ember.tensor(spec[1], dtype=spec[2]))
                grads.append(False)
                continue
            shape = spec[1]
            if kind == "unit":
                values = rng.uniform(0.01, 0.99, size=shape)
            elif kind == "pos":
                values = rng.uniform(0.2, 2.0, size=shape)
            elif kind == "sign":
                values = np.where(rng.standard_normal(shape) > 0, 1.0, -1.0)
            elif kind == "logp":
                z = rng.standard_normal(shape)
                values = z - np.log(np.exp(z).sum(-1, keepdims=True))
            else:
                raise ValueError(f"unknown input kind {kind!r}")
            arrays.append(ember.from_numpy(np.ascontiguousarray(values, dtype=np.float32)))
            grads.append(position == 0 and kind != "sign")
            continue
        arrays.append(ember.from_numpy(rng.standard_normal(spec).astype(np.float32)))
        grads.append(True)
    return arrays, grads


def _flatten(out):
    """The tensors of a (nested) output, in order."""
    if isinstance(out, ember.Tensor):
        return [out]
    if out is None:
        return []
    if isinstance(out, nn.utils.rnn.PackedSequence):
        return [out.data]
    return [t for item in out for t in _flatten(item)]


def _host(t):
    return t.detach().cpu().numpy()


def _run(module, inputs, grads, device):
    """Forward and backward of ``module`` on ``inputs`` moved to ``device``.

    Returns ``(outputs, input leaves)``; the backward pass is of a fixed weighted sum of the
    floating outputs, so every output element gets its own gradient."""
    leaves = [x.detach().clone().to(device).requires_grad_(g) for x, g in zip(inputs, grads)]
    outputs = _flatten(module(*leaves))
    total = None
    for index, out in enumerate(outputs):
        if not (out.is_floating_point() and out.requires_grad):
            continue
        weights = np.random.default_rng(100 + index).standard_normal(tuple(out.shape)).astype(np.float32)
        term = (out * ember.from_numpy(weights).to(device)).sum()
        total = term if total is None else total + term
    if total is not None:
        total.backward()
    return outputs, leaves


def _assert_close(actual, expected, rtol, atol, what):
    np.testing.assert_allclose(_host(actual), _host(expected), rtol=rtol, atol=atol, err_msg=what)


def _on(t):
    """Whether ``t`` lives on the device under test."""
    return t.device.type == ember.device(DEVICE).type


def _assert_on_device(t, what):
    assert t.device.type == ember.device(DEVICE).type, f"{what} is on {t.device}, expected {DEVICE}"


def _cpu_and_device_copies(name, ctor, inputs):
    ember.manual_seed(0)
    cpu_module = ctor()
    if name in LAZY:
        with ember.no_grad():
            cpu_module(*inputs)
    # non-trivial affine parameters for the norms (their defaults are ones and zeros)
    with ember.no_grad():
        for index, p in enumerate(cpu_module.parameters()):
            if p.is_floating_point():
                bump = np.random.default_rng(50 + index).uniform(0, 0.5, size=tuple(p.shape)).astype(np.float32)
                p.add_(ember.from_numpy(bump).to(p.dtype))
    device_module = copy.deepcopy(cpu_module).to(DEVICE)
    return cpu_module, device_module


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize(("name", "ctor", "specs"), CASES, ids=CASE_IDS)
def test_layer_matches_cpu(name, ctor, specs, mode):
    inputs, grads = _make_inputs(specs)
    cpu_module, device_module = _cpu_and_device_copies(name, ctor, inputs)
    for pname, p in device_module.named_parameters():
        _assert_on_device(p, f"parameter {pname}")
    for bname, b in device_module.named_buffers():
        _assert_on_device(b, f"buffer {bname}")
    getattr(cpu_module, mode)()
    getattr(device_module, mode)()

    if mode == "train" and name in RANDOM_IN_TRAINING:
        outputs, _ = _run(device_module, inputs, grads, DEVICE)
        for out in outputs:
            _assert_on_device(out, "output")
        assert all(out.shape == ref.shape for out, ref in zip(outputs, _flatten(cpu_module(*inputs))))
        return

    expected, cpu_leaves = _run(cpu_module, inputs, grads, "cpu")
    actual, device_leaves = _run(device_module, inputs, grads, DEVICE)
    assert len(actual) == len(expected)
    for index, (out, ref) in enumerate(zip(actual, expected)):
        _assert_on_device(out, f"output {index}")
        assert out.dtype == ref.dtype and out.shape == ref.shape, f"output {index}"
        _assert_close(out, ref, RTOL, ATOL, f"{name}: output {index}")
    for (pname, p), (_, ref) in zip(device_module.named_parameters(), cpu_module.named_parameters()):
        if ref.grad is None:
            assert p.grad is None, pname
            continue
        assert p.grad is not None, f"{name}: no gradient for {pname} on {DEVICE}"
        _assert_on_device(p.grad, f"gradient of {pname}")
        _assert_close(p.grad, ref.grad, GRAD_RTOL, GRAD_ATOL, f"{name}: gradient of {pname}")
    for index, (leaf, ref) in enumerate(zip(device_leaves, cpu_leaves)):
        if ref.grad is not None:
            _assert_on_device(leaf.grad, f"input {index}'s gradient")
            _assert_close(leaf.grad, ref.grad, GRAD_RTOL, GRAD_ATOL, f"{name}: gradient of input {index}")
    for (bname, b), (_, ref) in zip(device_module.named_buffers(), cpu_module.named_buffers()):
        _assert_on_device(b, f"buffer {bname}")
        assert b.dtype == ref.dtype, bname
        _assert_close(b, ref, 1e-5, 1e-6, f"{name}: buffer {bname}")


DTYPE_CASES = [
    "Linear", "Conv2d", "ConvTranspose2d", "BatchNorm2d", "LayerNorm", "GroupNorm", "Embedding", "LSTM", "GRU",
    "MultiheadAttention", "TransformerEncoderLayer", "CrossEntropyLoss", "Sequential-cnn", "MaxPool2d", "AvgPool2d",
    "Softmax", "GELU",
]  # fmt: skip
HALF_CASES = ["Linear", "Conv2d", "BatchNorm2d", "LayerNorm", "Embedding", "MultiheadAttention", "Softmax", "GELU"]


def _case(name):
    return next(case for case in CASES if case[0] == name)


def _as_dtype(tensors, dtype):
    return [t.to(dtype) if t.is_floating_point() else t for t in tensors]


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("name", DTYPE_CASES)
def test_float64_layers_match_cpu(name, mode):
    """In float64 the GPU's results agree with the CPU's to rounding (outputs, parameter gradients)."""
    _, ctor, specs = _case(name)
    inputs, grads = _make_inputs(specs)
    inputs = _as_dtype(inputs, ember.float64)
    cpu_module, device_module = _cpu_and_device_copies(name, ctor, inputs)
    cpu_module.double()
    device_module.double()
    getattr(cpu_module, mode)()
    getattr(device_module, mode)()
    expected, _ = _run(cpu_module, inputs, grads, "cpu")
    actual, _ = _run(device_module, inputs, grads, DEVICE)
    for index, (out, ref) in enumerate(zip(actual, expected)):
        assert out.dtype == ref.dtype, f"output {index}"
        _assert_close(out, ref, 1e-10, 1e-12, f"{name}: float64 output {index}")
    for (pname, p), (_, ref) in zip(device_module.named_parameters(), cpu_module.named_parameters()):
        if ref.grad is not None:
            assert p.grad.dtype == ember.float64, pname
            _assert_close(p.grad, ref.grad, 1e-9, 1e-11, f"{name}: float64 gradient of {pname}")


@pytest.mark.parametrize("name", HALF_CASES)
def test_float16_layers_forward_close_to_float32(name):
    """In float16 (eval mode) the GPU's outputs stay within half precision of the CPU's float32 outputs."""
    _, ctor, specs = _case(name)
    inputs, _ = _make_inputs(specs)
    cpu_module, device_module = _cpu_and_device_copies(name, ctor, inputs)
    cpu_module.eval()
    device_module.half().eval()
    with ember.no_grad():
        expected = _flatten(cpu_module(*inputs))
        actual = _flatten(device_module(*(x.to(DEVICE) for x in _as_dtype(inputs, ember.float16))))
    for index, (out, ref) in enumerate(zip(actual, expected)):
        _assert_on_device(out, f"output {index}")
        if ref.is_floating_point():
            assert out.dtype == ember.float16, f"output {index}"
            _assert_close(out.float(), ref, 1e-2, 1e-2, f"{name}: float16 output {index}")


# --------------------------------------------------------------------------- moving modules


def _small_net():
    return nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2))


def test_to_moves_parameters_gradients_and_buffers_keeping_the_objects():
    ember.manual_seed(0)
    net = _small_net()
    net(ember.randn(5, 4)).sum().backward()
    params = list(net.parameters())
    values = [p.detach().clone() for p in params]
    grads = [p.grad.clone() for p in params]
    assert net.to(DEVICE) is net
    for p, p_after, value, grad in zip(params, net.parameters(), values, grads):
        assert p is p_after  # an optimizer built before the move keeps working
        _assert_on_device(p, "parameter")
        _assert_on_device(p.grad, "gradient")
        np.testing.assert_array_equal(_host(p), value.numpy())
        np.testing.assert_array_equal(_host(p.grad), grad.numpy())
    bn = net[1]
    for b in (bn.running_mean, bn.running_var, bn.num_batches_tracked):
        _assert_on_device(b, "buffer")
    assert bn.num_batches_tracked.dtype == ember.int64
    net.cpu()
    assert all(p.device.type == "cpu" for p in net.parameters())
    assert bn.running_mean.device.type == "cpu"
    for p, value in zip(net.parameters(), values):
        np.testing.assert_array_equal(p.detach().numpy(), value.numpy())
    net.cuda()
    assert all(p.device == ember.device("cuda", 0) for p in net.parameters())


def test_to_with_dtype_and_device_keeps_integer_buffers():
    net = _small_net().to(DEVICE, ember.float64)
    assert net[0].weight.dtype == ember.float64 and _on(net[0].weight)
    assert net[1].num_batches_tracked.dtype == ember.int64 and _on(net[1].num_batches_tracked)
    out = net(ember.randn(3, 4, dtype=ember.float64, device=DEVICE))
    assert out.dtype == ember.float64 and _on(out)


def test_module_built_with_device_factory_kwarg():
    ember.manual_seed(3)
    on_cpu = nn.Linear(4, 3)
    ember.manual_seed(3)
    on_gpu = nn.Linear(4, 3, device=DEVICE)
    assert _on(on_gpu.weight) and _on(on_gpu.bias)
    # parameters are initialised by the same seeded stream on both devices
    np.testing.assert_allclose(_host(on_gpu.weight), on_cpu.weight.detach().numpy(), rtol=1e-6, atol=1e-7)
    bn = nn.BatchNorm2d(3, device=DEVICE)
    assert _on(bn.running_var) and _on(bn.num_batches_tracked)


def test_lazy_module_materialises_on_the_device_it_was_moved_to():
    lazy = nn.LazyLinear(3).to(DEVICE)
    out = lazy(ember.randn(2, 5, device=DEVICE))
    assert _on(out) and _on(lazy.weight) and tuple(lazy.weight.shape) == (3, 5)


def test_cross_device_input_raises():
    net = nn.Linear(4, 2).to(DEVICE)
    with pytest.raises(RuntimeError, match="same device"):
        net(ember.randn(3, 4))


def test_state_dict_across_devices():
    ember.manual_seed(0)
    cpu_net = _small_net()
    cpu_net(ember.randn(8, 4))  # running statistics away from their initial values
    gpu_net = copy.deepcopy(cpu_net).to(DEVICE)
    state = gpu_net.state_dict()
    for key, value in state.items():
        _assert_on_device(value, key)
    # a cuda state dict into a CPU model: values copied, the model stays on CPU
    ember.manual_seed(1)
    fresh_cpu = _small_net()
    result = fresh_cpu.load_state_dict(state)
    assert not result.missing_keys and not result.unexpected_keys
    for (key, value), (_, ref) in zip(fresh_cpu.state_dict().items(), cpu_net.state_dict().items()):
        assert value.device.type == "cpu", key
        np.testing.assert_array_equal(value.numpy(), ref.numpy())
    # a CPU state dict into a cuda model: the model stays on cuda
    ember.manual_seed(2)
    fresh_gpu = _small_net().to(DEVICE)
    weight = fresh_gpu[0].weight
    fresh_gpu.load_state_dict(cpu_net.state_dict())
    assert fresh_gpu[0].weight is weight
    for (key, value), (_, ref) in zip(fresh_gpu.state_dict().items(), cpu_net.state_dict().items()):
        _assert_on_device(value, key)
        np.testing.assert_array_equal(_host(value), ref.numpy())


def test_save_and_load_a_cuda_model_with_map_location():
    ember.manual_seed(0)
    net = _small_net().to(DEVICE)
    net(ember.randn(8, 4, device=DEVICE))
    state = net.state_dict()
    buffer = io.BytesIO()
    ember.save({"model": state, "step": 3}, buffer)

    def load(**kwargs):
        buffer.seek(0)
        return ember.load(buffer, **kwargs)["model"]

    same = load()
    for key, value in same.items():
        _assert_on_device(value, key)
        np.testing.assert_array_equal(_host(value), _host(state[key]))
    for map_location in ("cpu", ember.device("cpu"), {"cuda:0": "cpu"}, lambda saved: "cpu"):
        on_cpu = load(map_location=map_location)
        for key, value in on_cpu.items():
            assert value.device.type == "cpu", (map_location, key)
            assert value.dtype == state[key].dtype, key
            np.testing.assert_array_equal(value.numpy(), _host(state[key]))
    # and back: a CPU checkpoint mapped onto the GPU
    cpu_buffer = io.BytesIO()
    ember.save(_small_net().state_dict(), cpu_buffer)
    cpu_buffer.seek(0)
    mapped = ember.load(cpu_buffer, map_location=DEVICE)
    assert all(_on(v) for v in mapped.values())
    model = _small_net()
    model.load_state_dict(load(map_location="cpu"))
    x = ember.randn(4, 4)
    model.eval()
    net.eval()
    np.testing.assert_allclose(model(x).detach().numpy(), _host(net(x.to(DEVICE))), rtol=RTOL, atol=ATOL)


# --------------------------------------------------------------------------- BatchNorm statistics


@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("cls, shape", [(nn.BatchNorm1d, (6, 3)), (nn.BatchNorm2d, (4, 3, 3, 3))])
def test_batchnorm_running_statistics_over_several_batches(cls, shape, momentum):
    cpu_bn = cls(3, momentum=momentum)
    gpu_bn = copy.deepcopy(cpu_bn).to(DEVICE)
    rng = np.random.default_rng(0)
    for _ in range(4):
        x = ember.from_numpy((rng.standard_normal(shape) * 2 + 1).astype(np.float32))
        cpu_bn(x)
        gpu_bn(x.to(DEVICE))
    assert _on(gpu_bn.num_batches_tracked) and int(gpu_bn.num_batches_tracked.item()) == 4
    _assert_close(gpu_bn.running_mean, cpu_bn.running_mean, 1e-5, 1e-6, "running_mean")
    _assert_close(gpu_bn.running_var, cpu_bn.running_var, 1e-5, 1e-6, "running_var")
    cpu_bn.eval()
    gpu_bn.eval()
    x = ember.randn(*shape)
    _assert_close(gpu_bn(x.to(DEVICE)), cpu_bn(x), RTOL, ATOL, "eval output")


# --------------------------------------------------------------------------- functional


FUNCTIONAL = [
    ("relu", lambda x: F.relu(x), [(3, 4)]),
    ("gelu", lambda x: F.gelu(x, approximate="tanh"), [(3, 4)]),
    ("softmax", lambda x: F.softmax(x, dim=-1), [(3, 4)]),
    ("log_softmax", lambda x: F.log_softmax(x, dim=0), [(3, 4)]),
    ("layer_norm", lambda x, w: F.layer_norm(x, (4,), w), [(3, 4), (4,)]),
    ("normalize", lambda x: F.normalize(x, dim=1), [(3, 4)]),
    ("linear", lambda x, w, b: F.linear(x, w, b), [(3, 4), (2, 4), (2,)]),
    ("conv2d", lambda x, w: F.conv2d(x, w, padding=1, stride=2), [(2, 3, 6, 6), (4, 3, 3, 3)]),
    ("conv_transpose2d", lambda x, w: F.conv_transpose2d(x, w, stride=2), [(2, 3, 3, 3), (3, 2, 2, 2)]),
    ("max_pool2d", lambda x: F.max_pool2d(x, 2), [(2, 3, 4, 4)]),
    ("avg_pool2d", lambda x: F.avg_pool2d(x, 3, stride=1, padding=1), [(2, 3, 4, 4)]),
    ("interpolate-bilinear", lambda x: F.interpolate(x, size=(5, 7), mode="bilinear"), [(1, 2, 3, 4)]),
    ("interpolate-bicubic", lambda x: F.interpolate(x, scale_factor=2, mode="bicubic"), [(1, 2, 3, 4)]),
    ("interpolate-trilinear", lambda x: F.interpolate(x, scale_factor=2, mode="trilinear"), [(1, 1, 2, 3, 2)]),
    ("pad-reflect", lambda x: F.pad(x, (1, 2, 2, 1), mode="reflect"), [(1, 2, 4, 4)]),
    ("grid_sample", lambda x, g: F.grid_sample(x, g.tanh(), align_corners=False), [(1, 2, 4, 4), (1, 3, 3, 2)]),
    ("affine_grid", lambda t: F.affine_grid(t, (1, 1, 3, 4), align_corners=False), [(1, 2, 3)]),
    ("embedding", lambda w: F.embedding(ember.tensor([[0, 2], [3, 1]], device=w.device), w), [(4, 3)]),
    (
        "one_hot",
        lambda x: F.one_hot((x.detach() * 0 + ember.arange(4, device=x.device)).long(), 5).float() * x[:, None],
        [(4,)],
    ),
    (
        "cross_entropy",
        lambda x: F.cross_entropy(x, ember.tensor([1, 0, 3], device=x.device), label_smoothing=0.2),
        [(3, 4)],
    ),
    (
        "binary_cross_entropy_with_logits",
        lambda x, y: F.binary_cross_entropy_with_logits(x, y.sigmoid()),
        [(3, 4), (3, 4)],
    ),
    (
        "scaled_dot_product_attention",
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        [(2, 2, 4, 8), (2, 2, 4, 8), (2, 2, 4, 8)],
    ),
    (
        "scaled_dot_product_attention-mask",
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        [(2, 3, 8), (2, 5, 8), (2, 5, 8), (3, 5)],
    ),
    ("pixel_shuffle", lambda x: F.pixel_shuffle(x, 2), [(1, 4, 2, 3)]),
    ("unfold", lambda x: F.unfold(x, 2, stride=1), [(1, 2, 3, 3)]),
    ("cosine_similarity", lambda x, y: F.cosine_similarity(x, y, dim=-1), [(3, 4), (3, 4)]),
    ("pdist", lambda x: F.pdist(x), [(4, 3)]),
    ("glu", lambda x: F.glu(x, dim=0), [(4, 3)]),
    ("hardtanh", lambda x: F.hardtanh(x, -0.5, 0.5), [(3, 4)]),
    ("local_response_norm", lambda x: F.local_response_norm(x, 2), [(1, 4, 3, 3)]),
    ("group_norm", lambda x: F.group_norm(x, 2), [(2, 4, 3)]),
    ("instance_norm", lambda x: F.instance_norm(x), [(2, 3, 5)]),
    ("batch_norm-training", lambda x: F.batch_norm(x, None, None, training=True), [(4, 3)]),
]


@pytest.mark.parametrize(("name", "fn", "shapes"), FUNCTIONAL, ids=[f[0] for f in FUNCTIONAL])
def test_functional_matches_cpu(name, fn, shapes):
    inputs, grads = _make_inputs(shapes, seed=7)
    expected, cpu_leaves = _run(_Lambda(fn), inputs, grads, "cpu")
    actual, device_leaves = _run(_Lambda(fn), inputs, grads, DEVICE)
    for index, (out, ref) in enumerate(zip(actual, expected)):
        _assert_on_device(out, f"output {index}")
        _assert_close(out, ref, RTOL, ATOL, f"{name}: output {index}")
    for index, (leaf, ref) in enumerate(zip(device_leaves, cpu_leaves)):
        if ref.grad is not None:
            _assert_on_device(leaf.grad, f"input {index}'s gradient")
            _assert_close(leaf.grad, ref.grad, GRAD_RTOL, GRAD_ATOL, f"{name}: gradient of input {index}")


class _Lambda(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def test_dropout_on_cuda_zeroes_and_scales_like_cpu():
    x = ember.ones(2000, device=DEVICE)
    y = F.dropout(x, 0.25, training=True)
    assert _on(y)
    values = _host(y)
    kept = values != 0
    np.testing.assert_allclose(values[kept], 1 / 0.75, rtol=1e-6)
    assert 0.65 < kept.mean() < 0.85
    # the GPU generator is reproducible under ember.manual_seed
    ember.manual_seed(5)
    a = _host(F.dropout(x, 0.5))
    ember.manual_seed(5)
    b = _host(F.dropout(x, 0.5))
    np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------------------- nn.init and nn.utils


INITS = [
    ("uniform_", lambda t: nn.init.uniform_(t, -0.5, 0.5)),
    ("normal_", lambda t: nn.init.normal_(t, 0.0, 0.1)),
    ("trunc_normal_", lambda t: nn.init.trunc_normal_(t, std=0.5)),
    ("constant_", lambda t: nn.init.constant_(t, 0.3)),
    ("ones_", nn.init.ones_),
    ("zeros_", nn.init.zeros_),
    ("eye_", nn.init.eye_),
    ("xavier_uniform_", nn.init.xavier_uniform_),
    ("xavier_normal_", lambda t: nn.init.xavier_normal_(t, gain=2.0)),
    ("kaiming_uniform_", lambda t: nn.init.kaiming_uniform_(t, a=0.1)),
    ("kaiming_normal_", lambda t: nn.init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu")),
    ("orthogonal_", lambda t: nn.init.orthogonal_(t, gain=1.5)),
    ("sparse_", lambda t: nn.init.sparse_(t, 0.5)),
]


@pytest.mark.parametrize(("name", "init"), INITS, ids=[i[0] for i in INITS])
def test_init_fills_cuda_tensors_like_cpu(name, init):
    cpu = ember.empty(6, 4)
    gpu = ember.empty(6, 4, device=DEVICE)
    ember.manual_seed(11)
    result = init(gpu)
    assert result is gpu and _on(gpu)
    ember.manual_seed(11)
    init(cpu)
    # the GPU generator draws the CPU generator's stream after the same seed
    np.testing.assert_allclose(_host(gpu), cpu.numpy(), rtol=1e-5, atol=1e-6)
    if name == "orthogonal_":
        q = _host(gpu).astype(np.float64)
        np.testing.assert_allclose(q.T @ q, 1.5**2 * np.eye(4), atol=1e-4)


def test_init_dirac_on_cuda():
    w = ember.empty(4, 2, 3, 3, device=DEVICE)
    nn.init.dirac_(w, groups=2)
    ref = nn.init.dirac_(ember.empty(4, 2, 3, 3), groups=2)
    np.testing.assert_array_equal(_host(w), ref.numpy())


def test_clip_grad_norm_and_value_on_cuda():
    ember.manual_seed(0)
    base = _small_net()
    x = ember.randn(8, 4)

    def with_grads(device):
        net = copy.deepcopy(base).to(device)
        net(x.to(device)).pow(2).sum().backward()
        return net

    for norm_type in (2.0, 1.0, float("inf")):
        cpu_net, gpu_net = with_grads("cpu"), with_grads(DEVICE)
        total_cpu = nn.utils.clip_grad_norm_(cpu_net.parameters(), 0.5, norm_type=norm_type)
        total_gpu = nn.utils.clip_grad_norm_(gpu_net.parameters(), 0.5, norm_type=norm_type)
        _assert_on_device(total_gpu, "total norm")
        _assert_close(total_gpu, total_cpu, 1e-5, 1e-6, f"total norm ({norm_type})")
        for p, ref in zip(gpu_net.parameters(), cpu_net.parameters()):
            _assert_on_device(p.grad, "clipped gradient")
            _assert_close(p.grad, ref.grad, 1e-5, 1e-6, f"clipped gradient ({norm_type})")
    cpu_net, gpu_net = with_grads("cpu"), with_grads(DEVICE)
    for foreach in (False, True):
        nn.utils.clip_grad_value_(cpu_net.parameters(), 0.05, foreach=foreach)
        nn.utils.clip_grad_value_(gpu_net.parameters(), 0.05, foreach=foreach)
        for p, ref in zip(gpu_net.parameters(), cpu_net.parameters()):
            # the clipped entries are exact; the others are the devices' gradients (float32 GEMM rounding,
            # as for the norms above: 3.7e-7 was seen on an entry of 0.0097)
            _assert_close(p.grad, ref.grad, 1e-5, 1e-6, "clip_grad_value_")
            assert float(p.grad.abs().max()) <= np.float32(0.05)  # the clip value, rounded to the grads' float32
    norm = nn.utils.get_total_norm([p.grad for p in gpu_net.parameters()])
    _assert_on_device(norm, "get_total_norm")
    _assert_close(norm, nn.utils.get_total_norm([p.grad for p in cpu_net.parameters()]), 1e-5, 1e-6, "norm")


def test_parameters_to_vector_and_back_on_cuda():
    net = _small_net().to(DEVICE)
    vector = nn.utils.parameters_to_vector(net.parameters())
    _assert_on_device(vector, "vector")
    assert vector.numel() == sum(p.numel() for p in net.parameters())
    nn.utils.vector_to_parameters(vector * 2, net.parameters())
    np.testing.assert_allclose(_host(nn.utils.parameters_to_vector(net.parameters())), _host(vector) * 2)


def test_weight_norm_and_spectral_norm_parametrizations_on_cuda():
    ember.manual_seed(0)
    base = nn.Linear(5, 4)
    x = ember.randn(3, 5)
    for wrap in (nn.utils.parametrizations.weight_norm, nn.utils.parametrizations.orthogonal):
        cpu_m = wrap(copy.deepcopy(base))
        gpu_m = copy.deepcopy(cpu_m).to(DEVICE)
        out_cpu, out_gpu = cpu_m(x), gpu_m(x.to(DEVICE))
        _assert_close(out_gpu, out_cpu, RTOL, ATOL, wrap.__name__)
        out_cpu.sum().backward()
        out_gpu.sum().backward()
        for (pname, p), (_, ref) in zip(gpu_m.named_parameters(), cpu_m.named_parameters()):
            _assert_close(p.grad, ref.grad, GRAD_RTOL, GRAD_ATOL, f"{wrap.__name__}: {pname}")
    gpu_sn = nn.utils.parametrizations.spectral_norm(copy.deepcopy(base).to(DEVICE))
    out = gpu_sn(x.to(DEVICE))
    assert _on(out)
    sigma = np.linalg.svd(_host(gpu_sn.weight).astype(np.float64), compute_uv=False)[0]
    assert abs(sigma - 1.0) < 0.2  # one power iteration per call: close to 1, not exact


def test_pack_padded_sequence_through_lstm_on_cuda():
    ember.manual_seed(0)
    cpu_lstm = nn.LSTM(3, 4, batch_first=True)
    gpu_lstm = copy.deepcopy(cpu_lstm).to(DEVICE)
    x = ember.randn(3, 5, 3)
    lengths = ember.tensor([5, 2, 4])  # lengths stay on the CPU, as in PyTorch
    results = []
    for lstm, device in ((cpu_lstm, "cpu"), (gpu_lstm, DEVICE)):
        packed = nn.utils.rnn.pack_padded_sequence(x.to(device), lengths, batch_first=True, enforce_sorted=False)
        assert packed.batch_sizes.device.type == "cpu"
        out, (h, c) = lstm(packed)
        padded, out_lengths = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        assert out_lengths.tolist() == [5, 2, 4]
        results.append((padded, h, c))
    for gpu_t, cpu_t in zip(results[1], results[0]):
        _assert_on_device(gpu_t, "LSTM output")
        _assert_close(gpu_t, cpu_t, RTOL, ATOL, "packed LSTM")


# --------------------------------------------------------------------------- training steps


def test_a_few_sgd_training_steps_follow_the_cpu_trajectory():
    ember.manual_seed(0)
    cpu_net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(64, 3))
    gpu_net = copy.deepcopy(cpu_net).to(DEVICE)
    rng = np.random.default_rng(0)
    opts = [ember.optim.SGD(net.parameters(), lr=0.05, momentum=0.9) for net in (cpu_net, gpu_net)]
    criterion = nn.CrossEntropyLoss()
    for _ in range(5):
        x = ember.from_numpy(rng.standard_normal((6, 1, 4, 4)).astype(np.float32))
        y = ember.from_numpy(rng.integers(0, 3, size=6).astype(np.int64))
        losses = []
        for net, opt, device in ((cpu_net, opts[0], "cpu"), (gpu_net, opts[1], DEVICE)):
            opt.zero_grad()
            loss = criterion(net(x.to(device)), y.to(device))
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[1] == pytest.approx(losses[0], rel=1e-4, abs=1e-5)
    for (name, p), (_, ref) in zip(gpu_net.state_dict().items(), cpu_net.state_dict().items()):
        _assert_close(p, ref, 1e-4, 1e-5, name)


# --------------------------------------------------------------------------- DataLoader pin_memory


def test_dataloader_pin_memory_gives_pinned_cpu_batches_that_move_to_cuda():
    from ember.utils.data import DataLoader, TensorDataset

    xs = ember.arange(40.0).reshape(10, 4)
    ys = ember.arange(10)
    loader = DataLoader(TensorDataset(xs, ys), batch_size=4, pin_memory=True)
    seen = []
    for x, y in loader:
        assert x.device.type == "cpu" and y.device.type == "cpu"
        assert x.is_pinned() and y.is_pinned()
        seen.append((x.to(DEVICE, non_blocking=True), y.to(DEVICE, non_blocking=True)))
    ember.cuda.synchronize()
    np.testing.assert_array_equal(np.concatenate([_host(x) for x, _ in seen]), xs.numpy())
    np.testing.assert_array_equal(np.concatenate([_host(y) for _, y in seen]), ys.numpy())


def test_dataloader_pin_memory_keeps_the_batch_structure():
    from ember.utils.data import DataLoader

    samples = [
        {"x": ember.full((2,), float(i)), "label": i, "name": f"s{i}", "pair": (ember.tensor(i), i)} for i in range(5)
    ]
    batches = list(DataLoader(samples, batch_size=2, pin_memory=True))
    assert len(batches) == 3
    first = batches[0]
    assert set(first) == {"x", "label", "name", "pair"}
    assert first["x"].is_pinned() and first["label"].is_pinned() and first["pair"][0].is_pinned()
    assert first["name"] == ["s0", "s1"]
    assert first["x"].tolist() == [[0.0, 0.0], [1.0, 1.0]] and first["label"].tolist() == [0, 1]


def test_dataloader_pin_memory_with_workers():
    from ember.utils.data import DataLoader, TensorDataset

    ds = TensorDataset(ember.arange(12.0).reshape(6, 2))
    batches = list(DataLoader(ds, batch_size=2, num_workers=2, pin_memory=True))
    assert all(b[0].is_pinned() for b in batches)
    np.testing.assert_array_equal(np.concatenate([b[0].numpy() for b in batches]), ds.tensors[0].numpy())


def test_dataloader_without_pin_memory_leaves_batches_unpinned():
    from ember.utils.data import DataLoader, TensorDataset

    batch = next(iter(DataLoader(TensorDataset(ember.ones(4, 2)), batch_size=2)))
    assert not batch[0].is_pinned()
