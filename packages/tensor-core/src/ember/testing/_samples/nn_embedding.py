"""OpInfos of ``embedding``, ``embedding_bag`` and ``one_hot``.

References are written directly from the definitions (in float64, loops where that
is clearer), independently of the kernels; see :mod:`ember.testing._samples._nn_common`.
"""

from __future__ import annotations

import numpy as np

from ... import _dtype as D
from .._opinfo import (
    ALL_TYPES_AND_COMPLEX,
    SampleInput,
)
from ._common import maker
from ._nn_common import (
    _FLOATS,
    _args,
    _errors,
    _f64,
    _nn,
    _t,
    _z,
)


def _embedding_samples(opinfo, device, dtype, requires_grad):
    import ember

    make = maker(device, dtype, requires_grad)
    weight = make((5, 3))
    yield SampleInput(_t(device, [0, 4, 2, 2]), (weight,), name="1-d indices")
    yield SampleInput(_t(device, [[0, 1], [3, 4]]), (weight,), name="2-d indices")
    yield SampleInput(_t(device, 3), (weight,), name="0-dim index")
    yield SampleInput(_t(device, [1, 0], ember.int32), (weight,), {"padding_idx": -1}, name="int32, padding_idx")
    yield SampleInput(_t(device, [], ember.int64), (weight,), name="empty")
    yield SampleInput(_t(device, [[0, 1, 2, 3]])[:, ::2], (make((5, 6), noncontiguous=True),), name="noncontiguous")


def _embedding_ref(indices, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                   sparse=False):
    return np.asarray(weight)[np.asarray(indices)]


_nn("embedding", _embedding_samples, ALL_TYPES_AND_COMPLEX, _embedding_ref,
    _errors((_args(lambda device: _t(device, [0, 5]), _z(4, 3)), {}, IndexError, "index out of range in self"),
            (_args(lambda device: _t(device, [0.0, 1.0]), _z(4, 3)), {}, RuntimeError, "'indices' to have one of"),
            (_args(lambda device: _t(device, [0, 1]), _z(4)), {}, RuntimeError, "'weight' must be 2-D"),
            (_args(lambda device: _t(device, [0, 1]), _z(4, 3)), {"padding_idx": 4}, AssertionError,
             "Padding_idx must be within num_embeddings")))


def _embedding_bag_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    weight = make((6, 3))
    yield SampleInput(_t(device, [0, 1, 2, 3, 5]), (weight, _t(device, [0, 2])), name="mean")
    yield SampleInput(_t(device, [0, 1, 2, 3, 5]), (weight, _t(device, [0, 2, 2])), {"mode": "sum"},
                      name="sum, empty bag")
    yield SampleInput(_t(device, [4, 1, 2, 3, 5]), (weight, _t(device, [0, 1, 3])), {"mode": "max"}, name="max")
    yield SampleInput(_t(device, [[0, 1], [2, 3], [5, 5]]), (weight,), {"mode": "max"}, name="2-d, max")
    yield SampleInput(_t(device, [[0, 1, 4], [2, 3, 0]]), (weight,), {"mode": "mean", "padding_idx": 0},
                      name="2-d, padding_idx")
    yield SampleInput(_t(device, [1, 1, 2, 3]), (weight, _t(device, [0, 2, 4])),
                      {"mode": "sum", "include_last_offset": True, "per_sample_weights": make((4,))},
                      name="per_sample_weights, include_last_offset")
    yield SampleInput(_t(device, [1, 1, 2]), (weight, _t(device, [0, 2])), {"mode": "max", "padding_idx": 1},
                      name="max, a bag of padding")
    yield SampleInput(_t(device, [1, 1, 2]), (make((6, 4), noncontiguous=True), _t(device, [0, 2], D.int32)),
                      {"mode": "sum"}, name="noncontiguous weight, int32 offsets")


def _embedding_bag_ref(indices, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                       mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                       padding_idx=None):
    indices, weight = np.asarray(indices), _f64(weight)
    if indices.ndim == 2:
        bags = [list(row) for row in indices]
        psw = None if per_sample_weights is None else [list(row) for row in _f64(per_sample_weights)]
    else:
        offs = list(np.asarray(offsets)) + ([] if include_last_offset else [len(indices)])
        bags = [list(indices[offs[i]:offs[i + 1]]) for i in range(len(offs) - 1)]
        psw = None if per_sample_weights is None else [
            list(_f64(per_sample_weights)[offs[i]:offs[i + 1]]) for i in range(len(offs) - 1)]
    if padding_idx is not None and padding_idx < 0:
        padding_idx += weight.shape[0]
    out = np.zeros((len(bags), weight.shape[1]))
    for b, bag in enumerate(bags):
        rows = [weight[i] * (psw[b][k] if psw else 1) for k, i in enumerate(bag) if i != padding_idx]
        if rows:
            out[b] = {"sum": np.sum, "mean": np.mean, "max": np.max}[mode](rows, axis=0)
    return out


_nn("embedding_bag", _embedding_bag_samples, _FLOATS, _embedding_bag_ref,
    _errors((_args(lambda device: _t(device, [0, 1, 2]), _z(4, 3)), {}, ValueError, "offsets has to be a 1D Tensor"),
            (_args(lambda device: _t(device, [0, 1, 2]), _z(4, 3), lambda device: _t(device, [0, 2])),
             {"mode": "foo"}, ValueError, "mode has to be one of sum, mean or max"),
            (_args(lambda device: _t(device, [0, 1, 2]), _z(4, 3), lambda device: _t(device, [0, 2])),
             {"per_sample_weights": _z(3)}, NotImplementedError,
             "per_sample_weights is only supported for mode='sum'"),
            (_args(lambda device: _t(device, [[0, 1]]), _z(4, 3), lambda device: _t(device, [0])), {}, ValueError,
             "if input is 2D, then offsets has to be None"),
            (_args(lambda device: _t(device, [0, 1, 2]), _z(4, 3), lambda device: _t(device, [1, 2])), {},
             RuntimeError, "offsets\\[0\\] has to be 0"),
            (_args(lambda device: _t(device, [0, 1]), lambda device: _t(device, [[1, 2]])), {"offsets": None},
             ValueError, "offsets has to be a 1D Tensor but got None")),
    tolerances={D.float16: (2e-3, 2e-3)})


def _one_hot_samples(opinfo, device, dtype, requires_grad):
    yield SampleInput(_t(device, [0, 2, 1]), name="inferred classes", data_dependent=True)
    yield SampleInput(_t(device, [[0, 2], [3, 1]]), (5,), name="2-d")
    yield SampleInput(_t(device, 2), (3,), name="zero-dim")
    yield SampleInput(_t(device, [], D.int64), (4,), name="empty")
    yield SampleInput(_t(device, [0, 1, 2, 3])[::2], (3,), name="noncontiguous")


def _one_hot_ref(x, num_classes=-1):
    x = np.asarray(x)
    if num_classes == -1:
        num_classes = int(x.max()) + 1
    return (x[..., None] == np.arange(num_classes)).astype(np.int64)


_nn("one_hot", _one_hot_samples, (D.int64,), _one_hot_ref,
    _errors((lambda device: (_t(device, [0, 2]), 2), {}, RuntimeError, "Class values must be smaller than"),
            (lambda device: (_t(device, [0, -1]), 3), {}, RuntimeError, "Class values must be non-negative"),
            (lambda device: (_t(device, [], D.int64),), {}, RuntimeError, "Can not infer total number of classes"),
            (lambda device: (_t(device, [0, 1], D.int32), 3), {}, RuntimeError, "index tensor of type LongTensor")),
    supports_autograd=False)
