"""ember.onnx.export: the exported files pass onnx's checker and compute in onnxruntime what ember computes.

Each model is exported with example inputs, checked, run in onnxruntime (CPU) and
compared with ember's eager output, at the example sizes and, where axes are declared
dynamic, at other sizes.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember
import ember.onnx
from ember import nn
from ember.onnx import CaptureError, TrainingMode, UnsupportedOperatorError

onnx = pytest.importorskip("onnx", reason="ember.onnx.export needs the onnx package")
ort = pytest.importorskip("onnxruntime", reason="the exported files are checked by running them in onnxruntime")

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))


def _run(proto, feeds):
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {k: np.asarray(v) for k, v in feeds.items()})


def _flat(out):
    from ember.utils._pytree import tree_leaves

    return [t for t in tree_leaves(out) if t is not None]


def _as_tuple(args):
    return args if isinstance(args, tuple) else (args,)


def check_export(model, args, names, dynamic_axes=None, others=(), tol=1e-5, **kwargs):
    """Export, check, and compare onnxruntime with ember at ``args`` and at each of ``others``; returns the proto."""
    model.eval()
    proto = ember.onnx.export(model, args, io.BytesIO(), input_names=names, dynamic_axes=dynamic_axes, **kwargs)
    onnx.checker.check_model(proto, full_check=True)
    for example in (args, *others):
        example = _as_tuple(example)
        got = _run(proto, {n: t.numpy() for n, t in zip(names, _flat(example))})
        with ember.no_grad():
            expected = _flat(model(*example))
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert g.shape == tuple(e.shape)
            np.testing.assert_allclose(g, e.numpy(), rtol=tol, atol=tol)
    return proto


def _dims(value_info):
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


# -- the models in examples/ ------------------------------------------------------------------------


@pytest.mark.parametrize("opset", [17, 18, 20])
def test_digits_cnn_dynamic_batch(opset):
    digits_cnn = pytest.importorskip("digits_cnn", reason="examples/ is not in this checkout")
    ember.manual_seed(0)
    model = digits_cnn.DigitsCNN()
    # train a step's worth of statistics so batch norm's running stats are not the defaults
    model.train()
    model(ember.randn(16, 1, 8, 8) * 3 + 1)
    proto = check_export(
        model,
        ember.randn(2, 1, 8, 8),
        ["images"],
        {"images": {0: "batch"}, "logits": {0: "batch"}},
        others=[ember.randn(5, 1, 8, 8), ember.randn(1, 1, 8, 8)],
        output_names=["logits"],
        opset_version=opset,
    )
    assert proto.opset_import[0].version == opset
    assert _dims(proto.graph.input[0]) == ["batch", 1, 8, 8]
    assert _dims(proto.graph.output[0]) == ["batch", 10]
    ops = {n.op_type for n in proto.graph.node}
    assert {"Conv", "BatchNormalization", "MaxPool", "Gemm"} <= ops
    assert "Dropout" not in ops  # eval mode
    assert model.training is False  # export put it in eval mode ...


def test_export_restores_training_mode_and_removes_its_hooks():
    digits_cnn = pytest.importorskip("digits_cnn", reason="examples/ is not in this checkout")
    model = digits_cnn.DigitsCNN().train()
    ember.onnx.export(model, ember.randn(2, 1, 8, 8), None, input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    assert model.training is True
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_non_tensor_arguments_are_fixed():
    class Model(nn.Module):
        def forward(self, x, scale, mode="add"):
            return x + scale if mode == "add" else x * scale

    proto = check_export(Model(), (ember.randn(2, 3), 2.5, "mul"), ["x"])
    assert [i.name for i in proto.graph.input] == ["x"]


@pytest.mark.parametrize("opset", [17, 18, 20])
def test_char_transformer_dynamic_batch_and_length(opset):
    char_transformer = pytest.importorskip("char_transformer", reason="examples/ is not in this checkout")
    ember.manual_seed(0)
    model = char_transformer.CharTransformer(40, 16, d_model=32, nhead=4, num_layers=2, dim_feedforward=64)
    ids = ember.randint(0, 40, (2, 16))
    proto = check_export(
        model,
        ids,
        ["ids"],
        {"ids": {0: "batch", 1: "seq"}},
        others=[ember.randint(0, 40, (3, 9)), ember.randint(0, 40, (1, 16)), ember.randint(0, 40, (4, 2))],
        opset_version=opset,
        tol=2e-5,
    )
    assert _dims(proto.graph.input[0]) == ["batch", "seq"]
    # the output's axes were found to follow the inputs' without being declared
    assert _dims(proto.graph.output[0]) == ["batch", "seq", 40]
    assert ("Gelu" in {n.op_type for n in proto.graph.node}) == (opset >= 20)


# -- transformer and recurrent layers -------------------------------------------------------------


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_layer(batch_first, norm_first):
    ember.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=batch_first, norm_first=norm_first)
    axes = {0: "batch", 1: "seq"} if batch_first else {0: "seq", 1: "batch"}
    shape = (lambda b, s: (b, s, 16)) if batch_first else (lambda b, s: (s, b, 16))
    check_export(layer, ember.randn(*shape(2, 5)), ["src"], {"src": axes}, others=[ember.randn(*shape(3, 7))])


def test_transformer_encoder_with_causal_mask_input():
    ember.manual_seed(0)
    encoder = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, activation="gelu"), 2, enable_nested_tensor=False
    )

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = encoder

        def forward(self, x, mask):
            return self.encoder(x, mask=mask)

    def mask(n):
        return nn.Transformer.generate_square_subsequent_mask(n)

    check_export(
        Model(),
        (ember.randn(2, 5, 16), mask(5)),
        ["x", "mask"],
        {"x": {0: "batch", 1: "seq"}, "mask": {0: "seq", 1: "seq"}},
        others=[(ember.randn(3, 4, 16), mask(4))],
    )


def test_multihead_attention_with_padding_mask():
    ember.manual_seed(0)
    mha = nn.MultiheadAttention(16, 4, batch_first=True)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = mha

        def forward(self, q, kv, pad):
            return self.mha(q, kv, kv, key_padding_mask=pad)

    def pad(b, s):
        m = np.zeros((b, s), dtype=bool)
        m[:, -1] = True
        return ember.from_numpy(m)

    proto = check_export(
        Model(),
        (ember.randn(2, 3, 16), ember.randn(2, 5, 16), pad(2, 5)),
        ["q", "kv", "pad"],
        {"q": {0: "batch", 1: "L"}, "kv": {0: "batch", 1: "S"}, "pad": {0: "batch", 1: "S"}},
        others=[(ember.randn(4, 2, 16), ember.randn(4, 6, 16), pad(4, 6))],
    )
    # the averaged attention weights: (batch, L, S)
    assert _dims(proto.graph.output[1]) == ["batch", "L", "S"]


@pytest.mark.parametrize(
    ("cls", "layers", "batch_first", "bidirectional"),
    [
        (nn.LSTM, 1, False, False),
        (nn.LSTM, 2, True, False),
        (nn.LSTM, 2, True, True),
        (nn.GRU, 1, False, False),
        (nn.GRU, 2, False, True),
        (nn.RNN, 2, True, False),
    ],
)
def test_recurrent_layers_dynamic_batch(cls, layers, batch_first, bidirectional):
    ember.manual_seed(0)
    rnn = cls(4, 6, num_layers=layers, batch_first=batch_first, bidirectional=bidirectional)
    batch_axis = 0 if batch_first else 1

    def x(b):
        return ember.randn(b, 5, 4) if batch_first else ember.randn(5, b, 4)

    check_export(rnn, x(2), ["x"], {"x": {batch_axis: "batch"}}, others=[x(3), x(7)])


def test_lstm_with_initial_state():
    ember.manual_seed(0)
    lstm = nn.LSTM(3, 5, num_layers=2)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = lstm

        def forward(self, x, state):
            out, (h, c) = self.lstm(x, state)
            return out, h, c

    def inputs(b):
        return (ember.randn(4, b, 3), (ember.randn(2, b, 5), ember.randn(2, b, 5)))

    proto = check_export(
        Model(),
        inputs(2),
        ["x", "h0", "c0"],
        {"x": {1: "batch"}, "h0": {1: "batch"}, "c0": {1: "batch"}},
        others=[inputs(5)],
    )
    assert [i.name for i in proto.graph.input] == ["x", "h0", "c0"]


def test_unrolled_lstm_rejects_dynamic_sequence_length():
    lstm = nn.LSTM(3, 5).eval()
    with pytest.raises(CaptureError, match="dynamic axes"):
        ember.onnx.export(lstm, ember.randn(4, 2, 3), None, input_names=["x"], dynamic_axes={"x": {0: "seq"}})


# -- small layers and ops ------------------------------------------------------------------------


LAYERS = {
    "mlp": lambda: nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)),
    "layer_norm_gelu_softmax": lambda: nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.GELU(), nn.Softmax(dim=-1)),
    "gelu_tanh_log_softmax": lambda: nn.Sequential(nn.GELU(approximate="tanh"), nn.LogSoftmax(dim=1)),
    "activations": lambda: nn.Sequential(
        nn.SiLU(), nn.Tanh(), nn.ELU(), nn.LeakyReLU(0.2), nn.Hardtanh(), nn.Sigmoid(), nn.Hardswish(), nn.Softplus()
    ),
    "more_activations": lambda: nn.Sequential(nn.ReLU6(), nn.Hardsigmoid(), nn.SELU(), nn.Mish()),
    "layer_norm_no_affine": lambda: nn.LayerNorm(6, elementwise_affine=False),
    "batch_norm_1d": lambda: nn.BatchNorm1d(6),
    "prelu_softsign": lambda: nn.Sequential(nn.PReLU(), nn.Softsign(), nn.Unflatten(1, (2, 3)), nn.PReLU(2)),
    "group_norm": lambda: nn.Sequential(nn.Unflatten(1, (6, 1)), nn.GroupNorm(3, 6), nn.Flatten()),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layers_dynamic_batch(name):
    ember.manual_seed(0)
    check_export(LAYERS[name](), ember.randn(3, 6), ["x"], {"x": {0: "batch"}}, others=[ember.randn(8, 6)])


def test_embedding():
    ember.manual_seed(0)
    model = nn.Sequential(nn.Embedding(10, 4), nn.Flatten())
    ids = ember.tensor([[1, 2, 3], [9, 0, 4]])
    check_export(model, ids, ["ids"], {"ids": {0: "batch"}}, others=[ember.tensor([[5, 5, 5]])])


class _Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


OPS = {
    "arith": lambda x: (x * 2 + 1 - x / 3) ** 2,
    "rsub_scalar_left": lambda x: 1 - x,
    "compare_where": lambda x: ember.where(x > 0, x, x * 0.1),
    "masked_fill": lambda x: x.masked_fill(x < 0, -1.0),
    "clamp": lambda x: x.clamp(-0.5, 0.5) + x.clamp(min=0),
    "math": lambda x: ember.exp(x).log() + ember.sqrt(x.abs() + 1) + ember.rsqrt(x.abs() + 1) + x.sin() * x.cos(),
    "rounding": lambda x: ember.floor(x) + ember.ceil(x) + x.sign() + ember.div(x, 0.3, rounding_mode="floor"),
    "reductions": lambda x: x.sum(-1) + x.mean(-1) + x.amax(-1) + x.amin(-1) + x.var(-1) + x.std(-1, correction=0),
    "reduce_keepdim": lambda x: x - x.mean(dim=-1, keepdim=True),
    "reduce_all": lambda x: x.sum() + x.mean() + x.max() + x.logsumexp(dim=0).sum(),
    "max_dim": lambda x: x.max(dim=1),
    "argmax": lambda x: x.argmax(dim=-1),
    "cumsum": lambda x: ember.cumsum(x, dim=1),
    "shape_ops": lambda x: x.unsqueeze(1).transpose(1, 2).squeeze(2).permute(1, 0).t().flatten(),
    "view_sizes": lambda x: x.view(x.shape[0], 2, -1).reshape(-1, x.shape[1]).contiguous(),
    "expand_repeat": lambda x: x[:, :1].expand(-1, 3) + x.repeat(1, 2)[:, ::2][:, :3],
    "cat_stack_chunk": lambda x: ember.cat(list(x.chunk(3, dim=1))[::-1], dim=1) + ember.stack([x, x], 0).sum(0),
    "split_unbind": lambda x: x.split([2, 4], dim=1)[1].sum(1) + sum(x.unbind(1)),
    "select_slice_narrow": lambda x: x[:, 2] + x[1:, 1].sum() + x.narrow(1, 1, 2).sum(1),
    "creation": lambda x: x + ember.zeros(x.shape) + ember.ones(x.shape[0], 1) + ember.full((1, x.shape[1]), 2.0),
    "like": lambda x: ember.zeros_like(x) + ember.ones_like(x) * 2 + ember.full_like(x, 3.0) + x,
    "arange": lambda x: x + ember.arange(x.shape[1]) + ember.arange(x.shape[0]).float().unsqueeze(1),
    "tril_triu": lambda x: ember.tril(x) - ember.triu(x, 1),
    "matmul": lambda x: x @ x.t() + ember.bmm(x.unsqueeze(0), x.t().unsqueeze(0)).squeeze(0),
    "cast_cmp": lambda x: (x > 0).to(ember.float32) + (x.long() == 0).float() + ember.logical_and(x > 0, x < 1).float(),
    "pad": lambda x: ember.nn.functional.pad(x, (1, 2)),
    "index_select": lambda x: ember.index_select(x, 1, ember.tensor([0, 2, 2])),
    "more_math": lambda x: ember.log1p(x.abs()) + ember.expm1(x) + x.sinh() + x.cosh() + x.atan() + ember.tan(x),
    "inverse_trig_isnan": lambda x: (x / 5).asin() + (x / 5).acos() + ember.isnan(x).float() + ember.isinf(x).float(),
    "all_any_xor": lambda x: ember.stack([(x > -5).all(1), (x > 1).any(1), ember.logical_xor(x > 0, x > 1).any(1)]),
    "flip_gather": lambda x: ember.flip(x, [0, 1]) + ember.gather(x, 1, ember.zeros(x.shape, dtype=ember.int64)),
    "products": lambda x: (
        ember.baddbmm(x.unsqueeze(0), x.unsqueeze(0), ember.ones(1, 6, 6), beta=0.5, alpha=2)[0]
        + ember.outer(x[:, 0], x[0])
        + ember.mv(x, x[0]).unsqueeze(1)
        + ember.dot(x[0], x[1])
    ),
    "addc_threshold": lambda x: (
        ember.addcmul(x, x, x, value=0.5)
        + ember.addcdiv(x, x, x.abs() + 1)
        + ember.nn.functional.threshold(x, 0.1, -2.0)
    ),
    "inplace": lambda x: (x * 1).relu_().mul_(2).add_(x),
    # composites without rules of their own export through their decompositions
    "aliases": lambda x: ember.subtract(x, 1).swapaxes(0, 1).movedim(0, 1) + ember.concat([x], 0).clip(-1, 1),
    "normalize_cosine": lambda x: (
        ember.nn.functional.normalize(x, dim=1) + ember.nn.functional.cosine_similarity(x, x.flip(1)).unsqueeze(1)
    ),
    "glu_softmin_shrink": lambda x: (
        ember.nn.functional.glu(x, dim=1).repeat(1, 2)
        + ember.nn.functional.softmin(x, dim=1)
        + ember.nn.functional.hardshrink(x)
        + ember.nn.functional.celu(x)
    ),
    "rms_norm": lambda x: ember.nn.functional.rms_norm(x, (6,), eps=1e-6),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_ops_dynamic_batch(name):
    ember.manual_seed(0)
    check_export(
        _Fn(OPS[name]), ember.randn(4, 6), ["x"], {"x": {0: "batch"}}, others=[ember.randn(3, 6), ember.randn(7, 6)]
    )


@pytest.mark.parametrize("opset", [17, 18])
@pytest.mark.parametrize("ord", [2, 1, 0, 3, 0.5, float("inf"), float("-inf")])
def test_vector_norm_orders_dims_and_keepdim(ord, opset):
    """linalg.vector_norm's rule: each order (ReduceL2, ReduceL1, max/min of Abs, nonzero count, Pow-ReduceSum-Pow)
    over one dim, several dims with keepdim, all dims, and a 0-d tensor's dim 0."""

    def fn(x):
        x = x.masked_fill(x.abs() < 0.3, 0.0)  # some zeros for ord 0
        norm = ember.linalg.vector_norm
        return (norm(x, ord, 1), norm(x, ord, (0, 2), keepdim=True), norm(x, ord), norm(x[0, 0, 0], ord, 0))

    ember.manual_seed(0)
    check_export(_Fn(fn), ember.randn(4, 5, 3), ["x"], {"x": {0: "batch"}}, others=[ember.randn(2, 5, 3)],
                 opset_version=opset)


@pytest.mark.parametrize("name", ["reductions", "reduce_all", "reduce_keepdim", "max_dim", "all_any_xor", "rms_norm"])
@pytest.mark.parametrize("opset", [18, 21])
def test_reductions_with_axes_as_inputs(name, opset):
    """From opset 18 every Reduce* op takes its axes as an input rather than an attribute."""
    ember.manual_seed(0)
    check_export(
        _Fn(OPS[name]), ember.randn(4, 6), ["x"], {"x": {0: "batch"}}, others=[ember.randn(3, 6)], opset_version=opset
    )


def test_conv_pool_variants():
    ember.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, stride=2, padding=1),
        nn.AvgPool2d(2, ceil_mode=True),
        nn.Conv2d(4, 4, 3, padding="same", dilation=2, groups=2),
        nn.MaxPool2d(3, stride=1, padding=1),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
    )
    check_export(model, ember.randn(2, 3, 9, 9), ["x"], {"x": {0: "batch"}}, others=[ember.randn(3, 3, 9, 9)])
    conv1d = nn.Sequential(nn.Conv1d(2, 3, 3, padding=1), nn.MaxPool1d(2), nn.AvgPool1d(2))
    check_export(conv1d, ember.randn(2, 2, 8), ["x"], {"x": {0: "batch"}}, others=[ember.randn(4, 2, 8)])


def test_reshape_with_batch_times_length():
    """A size that is a product of two dynamic axes (batch * seq) is computed at run time."""

    def fn(x):
        b, s, d = x.shape
        flat = x.reshape(b * s, d)
        return flat.view(b, s, 2, d // 2).permute(0, 2, 1, 3).reshape(b * 2, s, d // 2)

    check_export(_Fn(fn), ember.randn(2, 3, 4), ["x"], {"x": {0: "batch", 1: "seq"}}, others=[ember.randn(5, 7, 4)])


def test_scalars_from_dynamic_sizes():
    """``x / x.shape[1]`` divides by the runtime length, not the example's."""

    def fn(x):
        return x / x.shape[1] + x.shape[0] * (x > x.shape[1])

    check_export(_Fn(fn), ember.randn(2, 3), ["x"], {"x": {0: "b", 1: "n"}}, others=[ember.randn(4, 7)])


def test_size_argument_a_rule_needs_constant_is_an_error():
    model = _Fn(lambda x: ember.nn.functional.max_pool1d(x, x.shape[-1]))
    with pytest.raises(UnsupportedOperatorError, match="'max_pool1d'.*dynamic axes.*declare those axes static"):
        ember.onnx.export(model, ember.randn(1, 2, 6), None, input_names=["x"], dynamic_axes={"x": {2: "n"}})


def test_squeezing_a_dynamic_axis_of_example_size_one_is_an_error():
    model = _Fn(lambda x: x.squeeze() * 2)
    with pytest.raises(UnsupportedOperatorError, match="'squeeze'.*axis 0 is squeezed"):
        ember.onnx.export(model, ember.randn(1, 3), None, input_names=["x"], dynamic_axes={"x": {0: "batch"}})


def test_keyword_inputs_and_default_names():
    class Model(nn.Module):
        def forward(self, x, *, scale):
            return x * scale

    proto = ember.onnx.export(Model(), (ember.randn(2, 3),), None, kwargs={"scale": ember.randn(3)})
    assert [i.name for i in proto.graph.input] == ["x", "scale"]
    assert [o.name for o in proto.graph.output] == ["output"]


# -- arguments ------------------------------------------------------------------------------------


def test_writes_path_atomically_and_file_object(tmp_path):
    model = nn.Linear(3, 2)
    path = tmp_path / "model.onnx"
    proto = ember.onnx.export(model, ember.randn(1, 3), path)
    assert onnx.load(str(path)) == proto
    assert os.listdir(tmp_path) == ["model.onnx"]  # no temporary file left behind
    ember.onnx.export(model, ember.randn(1, 3), str(path), output_names=["y"])  # replaces it
    assert [o.name for o in onnx.load(str(path)).graph.output] == ["y"]
    buffer = io.BytesIO()
    written = ember.onnx.export(model, ember.randn(1, 3), buffer)
    assert onnx.load_from_string(buffer.getvalue()) == written


def test_parameters_are_named_initializers_or_inputs():
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).eval()
    x = ember.randn(2, 3)
    proto = ember.onnx.export(model, x, None, input_names=["x"])
    names = {i.name for i in proto.graph.initializer}
    assert {"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var"} <= names
    assert [i.name for i in proto.graph.input] == ["x"]

    without = ember.onnx.export(model, x, None, input_names=["x"], export_params=False)
    inputs = [i.name for i in without.graph.input]
    assert inputs[0] == "x" and "0.weight" in inputs
    assert "0.weight" not in {i.name for i in without.graph.initializer}
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    feeds = {"x": x.numpy(), **{k: state[k] for k in inputs[1:]}}
    np.testing.assert_allclose(_run(without, feeds)[0], model(x).detach().numpy(), rtol=1e-5, atol=1e-6)

    kept = ember.onnx.export(model, x, None, input_names=["x"], keep_initializers_as_inputs=True)
    assert {i.name for i in kept.graph.initializer} <= {i.name for i in kept.graph.input}


def test_training_mode_keeps_dropout():
    model = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5))
    proto = ember.onnx.export(model, ember.randn(2, 3), None, training=TrainingMode.TRAINING)
    assert "Dropout" in {n.op_type for n in proto.graph.node}
    assert model.training is True  # modules start in training mode; restored
    model.eval()
    proto = ember.onnx.export(model, ember.randn(2, 3), None, training=TrainingMode.PRESERVE)
    assert "Dropout" not in {n.op_type for n in proto.graph.node}


def test_unsupported_op_names_op_node_and_line():
    model = _Fn(lambda x: ember.cumprod(x, dim=0) + 1)
    with pytest.raises(UnsupportedOperatorError, match="'cumprod'") as info:
        ember.onnx.export(model, ember.randn(3), None)
    assert info.value.op == "cumprod"
    assert info.value.node == "cumprod"
    assert "test_onnx_export.py" in str(info.value)
    assert "test_onnx_export.py" in info.value.location


def test_unsupported_arguments_are_named():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Embedding(4, 2, max_norm=1.0), nn.ReLU())

        def forward(self, ids):
            return self.body(ids)

    with pytest.raises(UnsupportedOperatorError, match="'embedding'.*in module 'body.0' \\(Embedding\\).*max_norm"):
        ember.onnx.export(Model(), ember.tensor([1, 2]), None)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"opset_version": 16}, ValueError, "opset_version must be between 17"),
        ({"opset_version": "17"}, TypeError, "opset_version"),
        ({"dynamo": True}, ValueError, "dynamo=True"),
        ({"input_names": ["a", "b"]}, ValueError, "input_names has 2 names"),
        ({"input_names": ["a", "a"]}, ValueError, "repeated"),
        ({"output_names": ["a", "b"]}, ValueError, "output_names has 2 names"),
        ({"dynamic_axes": {"nope": {0: "b"}}}, ValueError, "'nope'"),
        ({"input_names": ["x"], "dynamic_axes": {"x": {2: "b"}}}, ValueError, "axis 2 is out of range"),
        ({"input_names": ["x"], "dynamic_axes": {"x": 0}}, TypeError, "dynamic_axes\\['x'\\]"),
        ({"training": "eval"}, TypeError, "TrainingMode"),
        ({"output_names": ["y"], "dynamic_axes": {"y": {2: "b"}}}, ValueError, "output of rank 2"),
        ({"dynamic_shapes": {"x": {0: "b"}}}, ValueError, "use dynamic_axes"),
        ({"report": True}, TypeError, "\\['report'\\]"),
        ({"export_modules_as_functions": True}, ValueError, "export_modules_as_functions"),
    ],
)
def test_argument_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        ember.onnx.export(nn.Linear(3, 2), ember.randn(2, 3), None, **kwargs)


def test_output_names_may_match_internal_values_but_not_inputs():
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    proto = check_export(model, ember.randn(2, 3), ["x"], output_names=["linear"])
    assert [o.name for o in proto.graph.output] == ["linear"]
    with pytest.raises(ValueError, match="'x' is given to two graph inputs or outputs"):
        ember.onnx.export(model, ember.randn(2, 3), None, input_names=["x"], output_names=["x"])


def test_dynamic_axes_list_form_names_axes():
    proto = ember.onnx.export(nn.Linear(3, 2), ember.randn(2, 3), None, input_names=["x"], dynamic_axes={"x": [0]})
    assert _dims(proto.graph.input[0]) == ["x_dynamic_axes_1", 3]
    assert _dims(proto.graph.output[0]) == ["x_dynamic_axes_1", 2]


def test_size_that_is_not_a_product_of_axes_is_an_error():
    # x.shape[0] ** 2 + 1 is neither a product of axes nor affine in one
    model = _Fn(lambda x: ember.zeros(x.shape[0] ** 2 + 1) + 1)
    with pytest.raises(CaptureError, match="neither a product"):
        ember.onnx.export(model, ember.randn(3), None, input_names=["x"], dynamic_axes={"x": {0: "n"}})


def test_affine_size_of_one_axis():
    model = _Fn(lambda x: ember.nn.functional.pad(x, (0, 1))[:, : x.shape[1] + 1] + ember.ones(x.shape[1] + 1))
    check_export(model, ember.randn(2, 5), ["x"], {"x": {1: "n"}}, others=[ember.randn(2, 3), ember.randn(2, 9)])


def test_import_without_onnx_package():
    """ember.onnx imports without onnx; export then says to install it."""
    code = (
        "import sys; sys.modules['onnx'] = None\n"
        "import ember, ember.onnx\n"
        "try:\n"
        "    ember.onnx.export(ember.nn.Linear(2, 2), ember.randn(1, 2), None)\n"
        "except ImportError as e:\n"
        "    print('ERR', e)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "ERR" in result.stdout and "pip install onnx" in result.stdout


def test_supported_ops_lists_registry_ops():
    names = ember.onnx.supported_ops()
    assert names == sorted(names)
    assert {"linear", "conv2d", "scaled_dot_product_attention", "layer_norm", "embedding", "reshape"} <= set(names)
    assert "cumprod" not in names


def test_verbose_prints_graph(capsys):
    ember.onnx.export(nn.Linear(2, 2), ember.randn(1, 2), None, verbose=True)
    assert "Gemm" in capsys.readouterr().out


def test_plain_function_and_identity_outputs():
    weight = ember.randn(3, 3)

    def fn(x, y):
        return x @ weight, y, x  # an input returned as is, twice-named outputs

    proto = check_export(_Fn(fn), (ember.randn(2, 3), ember.randn(4)), ["x", "y"], {"x": {0: "batch"}})
    assert [o.name for o in proto.graph.output] == ["output_0", "output_1", "output_2"]
    # a function (not a Module) exports too; its constants keep generated names
    ember.onnx.export(fn, (ember.randn(2, 3), ember.randn(4)), None)


def test_is_in_onnx_export():
    seen = []

    def fn(x):
        seen.append(ember.onnx.is_in_onnx_export())
        return x * 2

    assert not ember.onnx.is_in_onnx_export()
    ember.onnx.export(_Fn(fn), ember.randn(2), None)
    assert seen == [True]
    assert not ember.onnx.is_in_onnx_export()
