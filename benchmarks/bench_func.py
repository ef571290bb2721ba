"""ember.func against torch.func: vectorised Jacobians, Hessians and per-sample gradients (issue 21).

* the Jacobian of an MLP 128 -> 256 (tanh) -> 128 at one input, computed three ways: all rows in one
  vmapped backward pass (``autograd.functional.jacobian(vectorize=True)``, and ``func.jacrev``), and
  one backward pass per row (``vectorize=False``, the loop the vectorised forms replace), and by
  forward mode (``func.jacfwd``: one pass on dual tensors with vmapped tangents);
* the Hessian of a scalar function of 256 inputs (``func.hessian``);
* per-sample gradients of the demo's CNN (``examples/digits_cnn.py``, in eval mode) over a batch of 64
  8x8 images: ``vmap(grad(loss))`` against a Python loop of ``grad(loss)`` per sample.

Each setup checks once that both libraries give the same values before anything is timed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from harness import Workload, import_torch

_IN, _HIDDEN, _OUT = 128, 256, 128


def _f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _mlp_arrays():
    rng = np.random.default_rng(0)
    return {
        "x": _f32(rng, _IN),
        "w1": _f32(rng, _HIDDEN, _IN, scale=_IN**-0.5),
        "b1": _f32(rng, _HIDDEN, scale=0.1),
        "w2": _f32(rng, _OUT, _HIDDEN, scale=_HIDDEN**-0.5),
        "b2": _f32(rng, _OUT, scale=0.1),
    }


def _mlp(lib, arrays):
    w1, b1, w2, b2 = (lib.from_numpy(arrays[k].copy()) for k in ("w1", "b1", "w2", "b2"))
    F = lib.nn.functional

    def f(x):
        return F.linear(F.linear(x, w1, b1).tanh(), w2, b2)

    return f, lib.from_numpy(arrays["x"].copy())


def _check(ours, theirs, rtol=2e-3, atol=2e-4):
    np.testing.assert_allclose(np.asarray(ours), theirs.detach().numpy(), rtol=rtol, atol=atol)


def _jacobian_setup(kind):
    def setup():
        import ember
        import ember.func

        arrays = _mlp_arrays()
        f, x = _mlp(ember, arrays)
        ember_fn = _jacobian_call(ember, ember.func, kind, f, x)
        torch = import_torch()
        torch_fn = None
        if torch is not None:
            import torch.func

            tf, tx = _mlp(torch, arrays)
            torch_fn = _jacobian_call(torch, torch.func, kind, tf, tx)
            _check(ember_fn(), torch_fn())
        return ember_fn, torch_fn

    return setup


def _jacobian_call(lib, func, kind, f, x):
    if kind == "jacrev":
        return lambda: func.jacrev(f)(x)
    if kind == "jacfwd":
        return lambda: func.jacfwd(f)(x)
    vectorize = kind == "vectorize"
    return lambda: lib.autograd.functional.jacobian(f, x, vectorize=vectorize)


def _hessian_setup():
    rng = np.random.default_rng(1)
    arrays = {"a": _f32(rng, 64, 256, scale=256**-0.5), "x": _f32(rng, 256)}

    def build(lib):
        a = lib.from_numpy(arrays["a"].copy())

        def f(x):
            return (a @ x).tanh().sum() + (x * x * x * x).sum() * 0.01

        return f, lib.from_numpy(arrays["x"].copy())

    def setup():
        import ember
        import ember.func

        f, x = build(ember)
        ember_fn = lambda: ember.func.hessian(f)(x)  # noqa: E731
        torch = import_torch()
        torch_fn = None
        if torch is not None:
            import torch.func

            tf, tx = build(torch)
            torch_fn = lambda: torch.func.hessian(tf)(tx)  # noqa: E731
            _check(ember_fn(), torch_fn())
        return ember_fn, torch_fn

    return setup


def _digits_cnn(lib):
    """The demo's model (examples/digits_cnn.py), built with ``lib``: ember's own class, or the same layers in torch."""
    if lib.__name__ == "ember":
        examples = Path(__file__).resolve().parent.parent / "examples"
        if str(examples) not in sys.path:
            sys.path.insert(0, str(examples))
        from digits_cnn import DigitsCNN

        return DigitsCNN()
    nn = lib.nn

    class DigitsCNN(nn.Module):  # the same layers and names as the demo's
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
                nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                nn.MaxPool2d(2),
            )
            self.classifier = nn.Sequential(
                nn.Flatten(), nn.Dropout(0.25), nn.Linear(64 * 4 * 4, 128), nn.ReLU(inplace=True),
                nn.Dropout(0.25), nn.Linear(128, 10),
            )

        def forward(self, x):
            return self.classifier(self.features(x))

    return DigitsCNN()


def _per_sample_setup(kind, batch=64):
    rng = np.random.default_rng(2)
    images = _f32(rng, batch, 1, 8, 8)
    labels = rng.integers(0, 10, batch).astype(np.int64)

    def build(lib, func, weights=None):
        model = _digits_cnn(lib).eval()  # eval: batch norm uses its running statistics, dropout is off
        if weights is not None:
            model.load_state_dict({k: lib.from_numpy(v.copy()) for k, v in weights.items()})
        params = {k: v.detach() for k, v in model.named_parameters()}
        buffers = {k: v.detach() for k, v in model.named_buffers()}
        x, y = lib.from_numpy(images.copy()), lib.from_numpy(labels.copy())

        def loss(p, xi, yi):
            out = func.functional_call(model, (p, buffers), (xi.unsqueeze(0),))
            return lib.nn.functional.cross_entropy(out, yi.unsqueeze(0))

        if kind == "vmap":
            batched = func.vmap(func.grad(loss), in_dims=(None, 0, 0))
            return (lambda: batched(params, x, y)), model
        single = func.grad(loss)
        return (lambda: [single(params, x[i], y[i]) for i in range(batch)]), model

    def setup():
        import ember
        import ember.func

        ember_fn, model = build(ember, ember.func)
        torch = import_torch()
        torch_fn = None
        if torch is not None:
            import torch.func

            weights = {k: v.detach().numpy() for k, v in model.state_dict().items()}
            torch_fn, _ = build(torch, torch.func, weights)
            ours, theirs = ember_fn(), torch_fn()
            if kind == "vmap":
                for name in ours:
                    _check(ours[name].numpy(), theirs[name])
        return ember_fn, torch_fn

    return setup


WORKLOADS = [
    Workload("func_jacobian_mlp_vectorize", _jacobian_setup("vectorize"), threads=2,
             description="autograd.functional.jacobian(vectorize=True) of an MLP 128->256 (tanh)->128 at one input"),
    Workload("func_jacobian_mlp_jacrev", _jacobian_setup("jacrev"), threads=2,
             description="func.jacrev of the MLP above"),
    Workload("func_jacobian_mlp_jacfwd", _jacobian_setup("jacfwd"), threads=2,
             description="func.jacfwd of the MLP above: forward-mode dual tensors, the tangents vmapped"),
    Workload("func_jacobian_mlp_rowloop", _jacobian_setup("loop"), threads=2,
             description="autograd.functional.jacobian(vectorize=False): one backward pass per row (128)"),
    Workload("func_hessian_256", _hessian_setup(), threads=2,
             description="func.hessian of tanh(A @ x).sum() + 0.01 * (x**4).sum(), x of 256, A 64x256"),
    Workload("func_per_sample_grads_cnn_vmap_b64", _per_sample_setup("vmap"), threads=2,
             description="vmap(grad(loss)) of the demo's DigitsCNN (eval mode) over 64 images of 1x8x8"),
    Workload("func_per_sample_grads_cnn_loop_b64", _per_sample_setup("loop"), threads=2,
             description="grad(loss) of the same CNN in a Python loop over the 64 images"),
]
