"""The op library against PyTorch: the workloads issue 3 names.

conv2d forward and backward-shaped work (im2col-sized and depthwise), matmul,
softmax, layer_norm, a pointwise chain, a reduction, scatter_add and an
embedding lookup. Target: at most 1.5x PyTorch's time on the 2-core machine;
matmul and large pointwise ops at parity. Each setup checks once that both
libraries compute the same values before anything is timed.
"""

from __future__ import annotations

import numpy as np
from harness import Workload, import_torch


def _pair(build):
    """A setup from ``build(lib, F, arrays) -> fn`` run once for ember and once for torch on the same arrays."""

    def setup():
        import ember
        import ember.nn.functional as ember_F

        rng = np.random.default_rng(0)
        arrays = {}
        ember_fn = build("ember", ember, ember_F, rng, arrays)
        torch = import_torch()
        torch_fn = None
        if torch is not None:
            torch_fn = build("torch", torch, torch.nn.functional, None, arrays)
            ours, theirs = np.asarray(ember_fn()), torch_fn().numpy()
            np.testing.assert_allclose(ours, theirs, rtol=2e-3, atol=2e-3)
        return ember_fn, torch_fn

    return setup


def _arrays(arrays, rng, name, make):
    if name not in arrays:
        arrays[name] = make(rng)
    return arrays[name]


def _f32(shape):
    return lambda rng: rng.standard_normal(shape).astype(np.float32)


def conv2d(groups, cin, cout, size, batch):
    def build(name, lib, F, rng, arrays):
        x = lib.from_numpy(_arrays(arrays, rng, "x", _f32((batch, cin, size, size))))
        w = lib.from_numpy(_arrays(arrays, rng, "w", _f32((cout, cin // groups, 3, 3))))
        return lambda: F.conv2d(x, w, padding=1, groups=groups)

    return build


def conv2d_input_grad(cin, cout, size, batch):
    """The input gradient of a 3x3 conv: a transposed convolution of the output gradient."""

    def build(name, lib, F, rng, arrays):
        gy = lib.from_numpy(_arrays(arrays, rng, "gy", _f32((batch, cout, size, size))))
        w = lib.from_numpy(_arrays(arrays, rng, "w", _f32((cout, cin, 3, 3))))
        return lambda: F.conv_transpose2d(gy, w, padding=1)

    return build


def conv2d_weight_grad(cin, cout, size, batch):
    """The weight gradient of a 3x3 conv: input and output gradient correlated over the batch."""

    def build(name, lib, F, rng, arrays):
        x = lib.from_numpy(_arrays(arrays, rng, "x", _f32((batch, cin, size, size))))
        gy = lib.from_numpy(_arrays(arrays, rng, "gy", _f32((batch, cout, size, size))))
        return lambda: F.conv2d(x.transpose(0, 1), gy.transpose(0, 1), padding=1).transpose(0, 1)

    return build


def matmul(n):
    def build(name, lib, F, rng, arrays):
        a = lib.from_numpy(_arrays(arrays, rng, "a", _f32((n, n))))
        b = lib.from_numpy(_arrays(arrays, rng, "b", _f32((n, n))))
        return lambda: lib.matmul(a, b)

    return build


def softmax(rows, cols):
    def build(name, lib, F, rng, arrays):
        x = lib.from_numpy(_arrays(arrays, rng, "x", _f32((rows, cols))))
        return lambda: F.softmax(x, dim=-1)

    return build


def layer_norm(rows, cols):
    def build(name, lib, F, rng, arrays):
        x = lib.from_numpy(_arrays(arrays, rng, "x", _f32((rows, cols))))
        w = lib.from_numpy(_arrays(arrays, rng, "w", _f32((cols,))))
        b = lib.from_numpy(_arrays(arrays, rng, "b", _f32((cols,))))
        return lambda: F.layer_norm(x, (cols,), w, b)

    return build


def pointwise_chain(n):
    def build(name, lib, F, rng, arrays):
        x = lib.from_numpy(_arrays(arrays, rng, "x", _f32((n,))))
        return lambda: (x * 0.5 + 1.0).tanh() * x

    return build


def reduction(rows, cols):
    def build(name, lib, F, rng, arrays):
        x = lib.from_numpy(_arrays(arrays, rng, "x", _f32((rows, cols))))
        return lambda: x.sum(dim=1)

    return build


def scatter_add(n, bins):
    def build(name, lib, F, rng, arrays):
        src = lib.from_numpy(_arrays(arrays, rng, "src", _f32((n,))))
        index = lib.from_numpy(_arrays(arrays, rng, "index", lambda r: r.integers(0, bins, n).astype(np.int64)))
        zeros = lib.zeros(bins)
        return lambda: zeros.scatter_add(0, index, src)

    return build


def embedding(vocab, dim, count):
    def build(name, lib, F, rng, arrays):
        weight = lib.from_numpy(_arrays(arrays, rng, "weight", _f32((vocab, dim))))
        index = lib.from_numpy(_arrays(arrays, rng, "index", lambda r: r.integers(0, vocab, count).astype(np.int64)))
        return lambda: F.embedding(index, weight)

    return build


def _w(name, build, description, threads=2):
    return Workload(name, _pair(build), threads=threads, description=description)


WORKLOADS = [
    _w("conv2d_3x3_32to64_32px_b8", conv2d(1, 32, 64, 32, 8), "F.conv2d, 8x32x32x32 input, 64 3x3 filters, padding 1"),
    _w("conv2d_depthwise_3x3_64ch_32px_b8", conv2d(64, 64, 64, 32, 8), "F.conv2d, depthwise (groups=64), 8x64x32x32"),
    _w(
        "conv2d_input_grad_3x3_b8",
        conv2d_input_grad(32, 64, 32, 8),
        "input-gradient shape of the conv above: F.conv_transpose2d of 8x64x32x32 with 64x32x3x3",
    ),
    _w(
        "conv2d_weight_grad_3x3_b8",
        conv2d_weight_grad(32, 64, 32, 8),
        "weight-gradient shape of the conv above: input correlated with the output gradient over the batch",
    ),
    # the second layer of the training-step CNN (bench_training.py): small images, where the kernels' tiles differ
    _w("conv2d_3x3_32to64_8px_b64", conv2d(1, 32, 64, 8, 64), "F.conv2d, 64x32x8x8 input, 64 3x3 filters, padding 1"),
    _w(
        "conv2d_weight_grad_3x3_8px_b64",
        conv2d_weight_grad(32, 64, 8, 64),
        "weight-gradient shape of the 8x8 conv above: input correlated with the output gradient over the batch",
    ),
    _w("matmul_512_f32", matmul(512), "matmul of two 512x512 float32 matrices"),
    _w("matmul_1024_f32", matmul(1024), "matmul of two 1024x1024 float32 matrices"),
    _w("softmax_256x1000", softmax(256, 1000), "F.softmax over the last dim of a 256x1000 float32 tensor"),
    _w("layer_norm_256x768", layer_norm(256, 768), "F.layer_norm over 768 features with weight and bias, 256 rows"),
    _w("pointwise_chain_1M", pointwise_chain(1_000_000), "(x * 0.5 + 1).tanh() * x over 1M float32 elements"),
    _w("sum_dim1_1000x1000", reduction(1000, 1000), "x.sum(dim=1) over a 1000x1000 float32 tensor"),
    _w(
        "scatter_add_1M_into_1000",
        scatter_add(1_000_000, 1000),
        "zeros(1000).scatter_add(0, index, src), 1M float32 values",
    ),
    _w("embedding_10k_x128_4096", embedding(10_000, 128, 4096), "F.embedding: 4096 lookups in a 10000x128 table"),
]
