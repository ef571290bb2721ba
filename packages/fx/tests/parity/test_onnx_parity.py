"""ember.onnx.export against torch.onnx.export (the TorchScript exporter, dynamo=False).

The same model is built in both libraries with the same weights (copied through
numpy), exported by each with the same names and dynamic axes, and both files are run
in onnxruntime at other sizes than the example's: ember's file must give what
PyTorch's file and PyTorch eager give, and declare the same inputs and outputs.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
import torch

import ember

onnx = pytest.importorskip("onnx", reason="ember.onnx.export needs the onnx package")
ort = pytest.importorskip("onnxruntime", reason="the exported files are compared by running them in onnxruntime")


def _copy_weights(torch_model, ember_model):
    state = {k: ember.from_numpy(v.detach().numpy().copy()) for k, v in torch_model.state_dict().items()}
    ember_model.load_state_dict(state)


def _torch_export(model, args, **kwargs):
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(model, args, buffer, dynamo=False, **kwargs)
    return onnx.load_from_string(buffer.getvalue())


def _run(proto, names, arrays):
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, dict(zip(names, arrays)))


def _signature(values):
    return [(v.name, [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]) for v in values]


def mlp(lib, nn):
    return nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4), nn.Softmax(dim=-1))


def cnn(lib, nn):
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1, bias=False),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Dropout(0.25),
        nn.Linear(8 * 4 * 4, 10),
    )


def encoder(lib, nn):
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, activation="gelu", batch_first=True, norm_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)


def lstm(lib, nn):
    return nn.LSTM(4, 8, num_layers=2, batch_first=True, bidirectional=True)


def gru(lib, nn):
    return nn.GRU(4, 8, num_layers=2)


def embedding(lib, nn):
    return nn.Sequential(nn.Embedding(20, 8), nn.Tanh())


# name: (builder, example shape maker, input axes, output names with their axes, integer inputs?)
CASES = {
    "mlp": (mlp, lambda b, s: (b, 6), {0: "batch"}, {"y": {0: "batch"}}, False),
    "cnn": (cnn, lambda b, s: (b, 1, 8, 8), {0: "batch"}, {"y": {0: "batch"}}, False),
    "encoder": (encoder, lambda b, s: (b, s, 16), {0: "batch", 1: "seq"}, {"y": {0: "batch", 1: "seq"}}, False),
    "lstm": (
        lstm,
        lambda b, s: (b, 5, 4),
        {0: "batch"},
        {"y": {0: "batch"}, "h": {1: "batch"}, "c": {1: "batch"}},
        False,
    ),
    "gru": (gru, lambda b, s: (5, b, 4), {1: "batch"}, {"y": {1: "batch"}, "h": {1: "batch"}}, False),
    "embedding": (embedding, lambda b, s: (b, s), {0: "batch", 1: "seq"}, {"y": {0: "batch", 1: "seq"}}, True),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_onnx_export_matches_torch(name):
    build, shape, axes, outputs, integer = CASES[name]
    torch.manual_seed(0)
    torch_model = build(torch, torch.nn).eval()
    ember_model = build(ember, ember.nn).eval()
    _copy_weights(torch_model, ember_model)
    rng = np.random.default_rng(0)

    def example(b, s):
        if integer:
            return rng.integers(0, 20, size=shape(b, s)).astype(np.int64)
        return rng.standard_normal(shape(b, s)).astype(np.float32)

    x = example(2, 4)
    options = {
        "input_names": ["x"],
        "output_names": list(outputs),
        "dynamic_axes": {"x": axes, **outputs},
        "opset_version": 17,
    }
    theirs = _torch_export(torch_model, (torch.from_numpy(x),), **options)
    ours = ember.onnx.export(ember_model, (ember.from_numpy(x),), None, **options)
    onnx.checker.check_model(ours, full_check=True)
    assert _signature(ours.graph.input) == _signature(theirs.graph.input)
    assert _signature(ours.graph.output) == _signature(theirs.graph.output)

    for b, s in [(2, 4), (3, 4), (3, 7), (1, 2)]:
        x = example(b, s)
        got = _run(ours, ["x"], [x])
        with torch.no_grad():
            eager = torch_model(torch.from_numpy(x))
        eager = (
            [eager] if isinstance(eager, torch.Tensor) else [eager[0], *eager[1][:]] if name == "lstm" else list(eager)
        )
        assert len(got) == len(eager)
        for g, e in zip(got, eager):
            np.testing.assert_allclose(g, e.numpy(), rtol=1e-4, atol=1e-5)
        if name == "encoder" and s != 4:
            # PyTorch's TorchScript export bakes the example's sequence length into the
            # attention's reshapes, so its file only runs at that length; ember's runs at any
            continue
        for g, w in zip(got, _run(theirs, ["x"], [x])):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
