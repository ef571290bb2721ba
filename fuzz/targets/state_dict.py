"""Fuzz target: ``ember.load`` of state dicts and the other plain objects ``ember.save`` writes.

Seeds cover every node kind of the file format (tensors of each dtype, views sharing a
storage, meta tensors, containers, scalars, numpy values, bytes, dtypes, devices, sparse
tensors) and a plain safetensors file without ember metadata.
"""

from __future__ import annotations

import io
import math
from collections import Counter, OrderedDict

import numpy as np

import ember

NAME = "state_dict"

# Tensors with more elements than this are not read back in full after loading (a
# zero-stride view of one element may legally describe billions of them).
_MAX_TOUCHED_ELEMENTS = 100_000


def _save(obj) -> bytes:
    buffer = io.BytesIO()
    ember.save(obj, buffer)
    return buffer.getvalue()


def _plain_safetensors() -> bytes:
    """A safetensors file as another program writes it (no ember metadata)."""
    import json

    data = np.arange(6, dtype=np.float32).tobytes() + np.arange(4, dtype=np.int64).tobytes()
    header = {
        "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
        "b": {"dtype": "I64", "shape": [4], "data_offsets": [24, 56]},
        "__metadata__": {"format": "pt"},
    }
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + data


def seeds() -> list[bytes]:
    weight = ember.arange(12, dtype=ember.float32).reshape(3, 4)
    weight.requires_grad_(True)
    base = ember.arange(10, dtype=ember.float64)
    objects = [
        ember.ones(3),
        {"weight": weight, "weight_t": weight.detach().t(), "bias": ember.zeros(4), "step": 3},
        {"view": base[2:7:2], "base": base, "empty": base[3:3], "scalar": ember.tensor(2.5)},
        {name: ember.ones(2, dtype=getattr(ember, name)) for name in ("int8", "uint8", "int16", "int32", "int64")},
        {name: ember.ones(2, dtype=getattr(ember, name)) for name in ("float16", "bfloat16", "bool", "complex64")},
        [ember.tensor([1 + 2j, 3 - 1j], dtype=ember.complex128), ember.empty(2, 3, device="meta")],
        OrderedDict([("a", 1), ("b", (1.5, None, True, "text"))]),
        {1: "int key", (2, "x"): [math.nan, math.inf, -math.inf, 1e300, -0.0], None: False, 2.5: 7},
        Counter("mississippi"),
        {"set": {1, 2, "three"}, "frozen": frozenset({(1, 2)}), "size": ember.Size([2, 3])},
        {"complex": 3 - 4j, "bytes": b"\x00\x01binary", "dtype": ember.float16, "device": ember.device("cpu")},
        {"array": np.arange(6, dtype=np.uint16).reshape(2, 3), "f32": np.ones((2, 2), np.float32)},
        {"npscalars": [np.float32(1.5), np.int64(-3), np.uint64(2**64 - 1), np.complex64(1j), np.bool_(True)]},
        _optimizer_state(),
        ember.arange(6).reshape(2, 3).to_sparse(),
        {},
        [],
    ]
    return [_save(obj) for obj in objects] + [_plain_safetensors()]


def _optimizer_state():
    model = ember.nn.Linear(3, 2)
    state = {"model": model.state_dict(), "epoch": 4}
    try:
        optimizer = ember.optim.Adam(model.parameters(), lr=0.01)
    except ImportError:  # ember-autograd absent: the model alone
        return state
    model(ember.ones(1, 3)).sum().backward()
    optimizer.step()
    state["optimizer"] = optimizer.state_dict()
    return state


def load(data: bytes) -> None:
    """Load ``data`` and read every loaded tensor's values (small ones), which must not fail."""
    _touch(ember.load(io.BytesIO(data)))


def _touch(obj, depth=0):
    """Read the values of the tensors in ``obj``: a loaded view must stay inside its storage."""
    if depth > 50:  # a deep structure that loaded; its leaves were checked by load already
        return
    if isinstance(obj, ember.Tensor):
        if obj.device.type != "meta" and obj.numel() <= _MAX_TOUCHED_ELEMENTS and obj.layout == ember.strided:
            np.asarray(obj.detach().contiguous().numpy())
    elif isinstance(obj, dict):
        for key, value in obj.items():
            _touch(key, depth + 1)
            _touch(value, depth + 1)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for value in obj:
            _touch(value, depth + 1)
