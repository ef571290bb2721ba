"""Autograd against PyTorch: the workloads issue 4 names.

* a chain of 100 small pointwise ops on a 16-element tensor, forward and
  backward: almost all framework overhead (recording nodes, saving inputs,
  running the engine), which the issue budgets at 2x PyTorch;
* an MLP 784-512-512-10 on a batch of 128 (relu, cross_entropy), backward
  alone and forward plus backward: mostly matmuls, budgeted at 1.2x;
* a small CNN (two 3x3 convs with relu and 2x2 max pooling, a linear layer,
  cross_entropy) on a batch of 64 MNIST-sized images, backward alone and
  forward plus backward.

"Backward alone" keeps one graph (``retain_graph=True``) and runs
``loss.backward`` on it again at each call. Every call sets the parameters'
``.grad`` to None first, as ``optimizer.zero_grad()`` does, so each backward
allocates fresh gradients in both libraries. Each setup checks once that both
libraries compute the same loss and gradients before anything is timed.
"""

from __future__ import annotations

import numpy as np
from harness import Workload, import_torch

_RTOL = 2e-3
_ATOL = 2e-4


def _f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _leaf(lib, array):
    """A leaf tensor of ``lib`` (ember or torch) on a copy of ``array`` that requires grad."""
    return lib.from_numpy(array.copy()).requires_grad_(True)


def _pair(build):
    """A setup from ``build(lib, F, arrays) -> (step, params)`` run once for ember and once for torch.

    ``step()`` does the timed work and returns the loss; ``params`` are the
    leaves whose gradients the check compares.
    """

    def setup():
        import ember
        import ember.nn.functional as ember_F

        arrays = build.arrays(np.random.default_rng(0))
        ember_step, _ = build(ember, ember_F, arrays)
        torch = import_torch()
        torch_step = None
        if torch is not None:
            torch_step, _ = build(torch, torch.nn.functional, arrays)
            # The check runs in float64: in float32 a max-pool window whose two largest inputs lie
            # within rounding of each other may pick either one, and the gradients before the pool
            # then differ by a whole entry while both libraries are right.
            wide = {name: a.astype(np.float64) if a.dtype == np.float32 else a for name, a in arrays.items()}
            _check(*build(ember, ember_F, wide), *build(torch, torch.nn.functional, wide))
        return ember_step, torch_step

    return setup


def _check(ember_step, ember_params, torch_step, torch_params):
    """Same loss, same gradients (after one call of each step)."""
    ours, theirs = ember_step(), torch_step()
    np.testing.assert_allclose(float(ours.item()), float(theirs.item()), rtol=_RTOL, atol=_ATOL)
    for i, (p, q) in enumerate(zip(ember_params, torch_params)):
        if p.grad is None or q.grad is None:
            raise AssertionError(f"parameter {i}: ember grad {p.grad is not None}, torch grad {q.grad is not None}")
        np.testing.assert_allclose(
            np.asarray(p.grad), q.grad.numpy(), rtol=_RTOL, atol=_ATOL, err_msg=f"gradient of parameter {i}"
        )


def _clear(params):
    for p in params:
        p.grad = None


# --------------------------------------------------------------------------- (a) a chain of small ops


class _Chain:
    """``y = tanh(exp(sin(y * c + x)))``-style chain: ``length`` ops on a (size,) tensor, then ``sum``."""

    def __init__(self, length, size):
        self.length = length
        self.size = size

    def arrays(self, rng):
        return {"x": _f32(rng, self.size), "c": _f32(rng, self.size, scale=0.5)}

    def __call__(self, lib, F, arrays):
        x = _leaf(lib, arrays["x"])
        c = lib.from_numpy(arrays["c"].copy())  # a constant: its gradient is not needed
        # mul (by a constant), add (of the leaf), sin, exp, tanh: each output stays in
        # (-1, 1) or (1/e, e), so any length keeps finite values.
        steps = [
            lambda y: y * c,
            lambda y: y + x,
            lambda y: y.sin(),
            lambda y: y.exp(),
            lambda y: y.tanh(),
        ]
        ops = [steps[i % len(steps)] for i in range(self.length - 1)]  # the final sum is op number `length`

        def step():
            x.grad = None
            y = x
            for op in ops:
                y = op(y)
            loss = y.sum()
            loss.backward()
            return loss

        return step, [x]


# --------------------------------------------------------------------------- (b) an MLP


class _MLP:
    """``linear -> relu -> linear -> relu -> linear -> cross_entropy`` on a batch of flattened images."""

    def __init__(self, sizes, batch, backward_only):
        self.sizes = sizes
        self.batch = batch
        self.backward_only = backward_only

    def arrays(self, rng):
        arrays = {
            "x": _f32(rng, self.batch, self.sizes[0]),
            "target": rng.integers(0, self.sizes[-1], self.batch).astype(np.int64),
        }
        for i, (fan_in, fan_out) in enumerate(zip(self.sizes, self.sizes[1:])):
            arrays[f"w{i}"] = _f32(rng, fan_out, fan_in, scale=fan_in**-0.5)
            arrays[f"b{i}"] = _f32(rng, fan_out, scale=0.1)
        return arrays

    def __call__(self, lib, F, arrays):
        x = lib.from_numpy(arrays["x"].copy())
        target = lib.from_numpy(arrays["target"].copy())
        layers = [(_leaf(lib, arrays[f"w{i}"]), _leaf(lib, arrays[f"b{i}"])) for i in range(len(self.sizes) - 1)]
        params = [t for layer in layers for t in layer]

        def forward():
            h = x
            for i, (w, b) in enumerate(layers):
                h = F.linear(h, w, b)
                if i < len(layers) - 1:
                    h = F.relu(h)
            return F.cross_entropy(h, target)

        return _steps(forward, params, self.backward_only)


def _steps(forward, params, backward_only):
    """The timed step: forward and backward, or backward alone over one retained graph."""
    if not backward_only:

        def step():
            _clear(params)
            loss = forward()
            loss.backward()
            return loss

        return step, params

    loss = forward()

    def backward_step():
        _clear(params)
        loss.backward(retain_graph=True)
        return loss

    return backward_step, params


# --------------------------------------------------------------------------- (c) a small CNN


class _CNN:
    """``conv 1->16 3x3, relu, max_pool 2, conv 16->32 3x3, relu, max_pool 2, linear -> 10, cross_entropy``."""

    def __init__(self, batch, backward_only, size=28, classes=10):
        self.batch = batch
        self.backward_only = backward_only
        self.size = size
        self.classes = classes
        side = ((size - 2) // 2 - 2) // 2  # two unpadded 3x3 convs, each followed by a 2x2 pool
        self.features = 32 * side * side

    def arrays(self, rng):
        return {
            "x": _f32(rng, self.batch, 1, self.size, self.size),
            "target": rng.integers(0, self.classes, self.batch).astype(np.int64),
            "w1": _f32(rng, 16, 1, 3, 3, scale=(1 * 9) ** -0.5),
            "b1": _f32(rng, 16, scale=0.1),
            "w2": _f32(rng, 32, 16, 3, 3, scale=(16 * 9) ** -0.5),
            "b2": _f32(rng, 32, scale=0.1),
            "w3": _f32(rng, self.classes, self.features, scale=self.features**-0.5),
            "b3": _f32(rng, self.classes, scale=0.1),
        }

    def __call__(self, lib, F, arrays):
        x = lib.from_numpy(arrays["x"].copy())
        target = lib.from_numpy(arrays["target"].copy())
        w1, b1, w2, b2, w3, b3 = (_leaf(lib, arrays[n]) for n in ("w1", "b1", "w2", "b2", "w3", "b3"))
        params = [w1, b1, w2, b2, w3, b3]

        def forward():
            h = F.max_pool2d(F.relu(F.conv2d(x, w1, b1)), 2)
            h = F.max_pool2d(F.relu(F.conv2d(h, w2, b2)), 2)
            logits = F.linear(h.reshape(h.shape[0], -1), w3, b3)
            return F.cross_entropy(logits, target)

        return _steps(forward, params, self.backward_only)


# --------------------------------------------------------------------------- the table


def _w(name, build, description, threads):
    return Workload(name, _pair(build), threads=threads, description=description)


_MLP_SIZES = (784, 512, 512, 10)

WORKLOADS = [
    _w(
        "autograd_chain100_16_f32",
        _Chain(100, 16),
        "forward + backward of 100 ops (mul, add, sin, exp, tanh, ..., sum) on a (16,) float32 leaf",
        threads=1,
    ),
    _w(
        "autograd_mlp_bwd_b128",
        _MLP(_MLP_SIZES, 128, backward_only=True),
        "backward only: MLP 784-512-512-10 (relu), cross_entropy, batch 128, float32",
        threads=2,
    ),
    _w(
        "autograd_mlp_fwd_bwd_b128",
        _MLP(_MLP_SIZES, 128, backward_only=False),
        "forward + backward: MLP 784-512-512-10 (relu), cross_entropy, batch 128, float32",
        threads=2,
    ),
    _w(
        "autograd_cnn_bwd_b64",
        _CNN(64, backward_only=True),
        "backward only: conv 1->16 3x3, relu, max_pool 2, conv 16->32 3x3, relu, max_pool 2, linear -> 10, "
        "cross_entropy; batch 64 of 1x28x28 float32",
        threads=2,
    ),
    _w(
        "autograd_cnn_fwd_bwd_b64",
        _CNN(64, backward_only=False),
        "forward + backward of the CNN above, batch 64 of 1x28x28 float32",
        threads=2,
    ),
]
