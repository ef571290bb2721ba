"""One small instance of (almost) every ``ember.nn`` layer with inputs to call it on.

Shared by the tracing and shape-propagation tests. Each case is
``name -> (constructor, input specs)``; a spec is a shape (standard normal floats),
``("long", shape, high)`` (integers in [0, high)), ``("unit", shape)`` (uniform in
(0, 1)) or ``("logp", shape)`` (log-probabilities over the last dimension).
"""

from __future__ import annotations

import ember
import ember.nn as nn


def _activations():
    names = [
        "ReLU", "ReLU6", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Sigmoid", "Tanh", "Hardtanh",
        "Hardsigmoid", "Hardswish", "LeakyReLU", "LogSigmoid", "Softplus", "Softshrink", "Hardshrink",
        "Tanhshrink", "Softsign",
    ]  # fmt: skip
    return {name: ((lambda name=name: getattr(nn, name)()), [(2, 4)]) for name in names}


CASES = {
    "Linear": (lambda: nn.Linear(4, 3), [(2, 4)]),
    "Bilinear": (lambda: nn.Bilinear(4, 3, 2), [(2, 4), (2, 3)]),
    "Conv1d": (lambda: nn.Conv1d(2, 3, 3), [(2, 2, 8)]),
    "Conv2d": (lambda: nn.Conv2d(2, 3, 3, padding=1), [(2, 2, 6, 6)]),
    "Conv3d": (lambda: nn.Conv3d(2, 3, 3), [(1, 2, 5, 5, 5)]),
    "ConvTranspose1d": (lambda: nn.ConvTranspose1d(2, 3, 3), [(2, 2, 5)]),
    "ConvTranspose2d": (lambda: nn.ConvTranspose2d(2, 3, 3, stride=2), [(2, 2, 4, 4)]),
    "BatchNorm1d": (lambda: nn.BatchNorm1d(3).eval(), [(4, 3)]),
    "BatchNorm2d": (lambda: nn.BatchNorm2d(3).eval(), [(2, 3, 4, 4)]),
    "LayerNorm": (lambda: nn.LayerNorm(4), [(2, 3, 4)]),
    "GroupNorm": (lambda: nn.GroupNorm(2, 4), [(2, 4, 3, 3)]),
    "InstanceNorm2d": (lambda: nn.InstanceNorm2d(3), [(2, 3, 4, 4)]),
    "RMSNorm": (lambda: nn.RMSNorm(4), [(2, 4)]),
    "LocalResponseNorm": (lambda: nn.LocalResponseNorm(2), [(2, 4, 3, 3)]),
    "Embedding": (lambda: nn.Embedding(10, 3), [("long", (2, 5), 10)]),
    "EmbeddingBag": (lambda: nn.EmbeddingBag(10, 3), [("long", (2, 5), 10)]),
    "MaxPool1d": (lambda: nn.MaxPool1d(2), [(2, 3, 8)]),
    "MaxPool2d": (lambda: nn.MaxPool2d(2), [(2, 3, 8, 8)]),
    "MaxPool3d": (lambda: nn.MaxPool3d(2), [(1, 2, 4, 4, 4)]),
    "AvgPool1d": (lambda: nn.AvgPool1d(2), [(2, 3, 8)]),
    "AvgPool2d": (lambda: nn.AvgPool2d(2), [(2, 3, 8, 8)]),
    "AvgPool3d": (lambda: nn.AvgPool3d(2), [(1, 2, 4, 4, 4)]),
    "AdaptiveAvgPool1d": (lambda: nn.AdaptiveAvgPool1d(3), [(2, 3, 8)]),
    "AdaptiveAvgPool2d": (lambda: nn.AdaptiveAvgPool2d((2, 3)), [(2, 3, 8, 8)]),
    "AdaptiveMaxPool2d": (lambda: nn.AdaptiveMaxPool2d(2), [(2, 3, 8, 8)]),
    "LPPool2d": (lambda: nn.LPPool2d(2, 2), [(2, 3, 8, 8)]),
    "Dropout": (lambda: nn.Dropout(0.5).eval(), [(2, 4)]),
    "Flatten": (lambda: nn.Flatten(), [(2, 3, 4)]),
    "Unflatten": (lambda: nn.Unflatten(1, (2, 2)), [(2, 4)]),
    "Identity": (lambda: nn.Identity(), [(2, 4)]),
    "PixelShuffle": (lambda: nn.PixelShuffle(2), [(1, 8, 3, 3)]),
    "PixelUnshuffle": (lambda: nn.PixelUnshuffle(2), [(1, 2, 4, 4)]),
    "ChannelShuffle": (lambda: nn.ChannelShuffle(2), [(1, 4, 3, 3)]),
    "Upsample": (lambda: nn.Upsample(scale_factor=2), [(1, 2, 3, 3)]),
    "UpsamplingBilinear2d": (lambda: nn.UpsamplingBilinear2d(scale_factor=2), [(1, 2, 3, 3)]),
    "ZeroPad2d": (lambda: nn.ZeroPad2d(1), [(1, 2, 3, 3)]),
    "ConstantPad1d": (lambda: nn.ConstantPad1d(2, 0.5), [(1, 2, 3)]),
    "ReflectionPad2d": (lambda: nn.ReflectionPad2d(1), [(1, 2, 3, 3)]),
    "ReplicationPad1d": (lambda: nn.ReplicationPad1d(1), [(1, 2, 3)]),
    "CircularPad2d": (lambda: nn.CircularPad2d(1), [(1, 2, 3, 3)]),
    "Fold": (lambda: nn.Fold((4, 4), 2), [(1, 8, 9)]),
    "Unfold": (lambda: nn.Unfold(2), [(1, 2, 4, 4)]),
    "CosineSimilarity": (lambda: nn.CosineSimilarity(), [(3, 4), (3, 4)]),
    "PairwiseDistance": (lambda: nn.PairwiseDistance(), [(3, 4), (3, 4)]),
    "MultiheadAttention": (lambda: nn.MultiheadAttention(8, 2, batch_first=True), [(2, 3, 8)] * 3),
    "TransformerEncoderLayer": (
        lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
        [(2, 3, 8)],
    ),
    "TransformerDecoderLayer": (
        lambda: nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
        [(2, 3, 8), (2, 4, 8)],
    ),
    "RNN": (lambda: nn.RNN(4, 3, batch_first=True), [(2, 5, 4)]),
    "LSTM": (lambda: nn.LSTM(4, 3, batch_first=True), [(2, 5, 4)]),
    "GRU": (lambda: nn.GRU(4, 3, batch_first=True), [(2, 5, 4)]),
    "RNNCell": (lambda: nn.RNNCell(4, 3), [(2, 4)]),
    "LSTMCell": (lambda: nn.LSTMCell(4, 3), [(2, 4)]),
    "GRUCell": (lambda: nn.GRUCell(4, 3), [(2, 4)]),
    "PReLU": (lambda: nn.PReLU(), [(2, 4)]),
    "Softmax": (lambda: nn.Softmax(dim=1), [(2, 4)]),
    "LogSoftmax": (lambda: nn.LogSoftmax(dim=1), [(2, 4)]),
    "Softmin": (lambda: nn.Softmin(dim=1), [(2, 4)]),
    "Softmax2d": (lambda: nn.Softmax2d(), [(1, 2, 3, 3)]),
    "GLU": (lambda: nn.GLU(), [(2, 4)]),
    "Threshold": (lambda: nn.Threshold(0.1, 20.0), [(2, 4)]),
    "MSELoss": (lambda: nn.MSELoss(), [(2, 4), (2, 4)]),
    "L1Loss": (lambda: nn.L1Loss(), [(2, 4), (2, 4)]),
    "SmoothL1Loss": (lambda: nn.SmoothL1Loss(), [(2, 4), (2, 4)]),
    "HuberLoss": (lambda: nn.HuberLoss(), [(2, 4), (2, 4)]),
    "CrossEntropyLoss": (lambda: nn.CrossEntropyLoss(), [(3, 5), ("long", (3,), 5)]),
    "NLLLoss": (lambda: nn.NLLLoss(), [("logp", (3, 5)), ("long", (3,), 5)]),
    "KLDivLoss": (lambda: nn.KLDivLoss(reduction="batchmean"), [("logp", (3, 5)), ("unit", (3, 5))]),
    "BCEWithLogitsLoss": (lambda: nn.BCEWithLogitsLoss(), [(3, 5), ("unit", (3, 5))]),
    "BCELoss": (lambda: nn.BCELoss(), [("unit", (3, 5)), ("unit", (3, 5))]),
    **_activations(),
}


def make_input(spec):
    """A random input for one spec (see the module documentation)."""
    if isinstance(spec, tuple) and spec and isinstance(spec[0], str):
        kind, shape, *rest = spec
        if kind == "long":
            return ember.randint(0, rest[0], shape)
        if kind == "unit":
            return ember.rand(*shape) * 0.98 + 0.01
        if kind == "logp":
            return ember.log_softmax(ember.randn(*shape), dim=-1)
        raise ValueError(f"unknown input kind {kind!r}")
    return ember.randn(*spec)


def build(name, seed=0):
    """``(module, inputs)`` for case ``name``, seeded."""
    ember.manual_seed(seed)
    ctor, specs = CASES[name]
    module = ctor()
    return module, [make_input(s) for s in specs]


def flatten(out):
    """The tensors of a (nested) output, in order."""
    if isinstance(out, ember.Tensor):
        return [out]
    if out is None:
        return []
    return [t for item in out for t in flatten(item)]
