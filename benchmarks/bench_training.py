"""Training steps against PyTorch: the workloads issue 5 names.

One timed call is a whole training step, as a training loop runs it::

    optimizer.zero_grad()
    loss = loss_fn(model(x), target)
    loss.backward()
    optimizer.step()

with ``ember.nn`` modules and ``ember.optim.Adam`` on one side and the same
``torch.nn`` modules and ``torch.optim.Adam`` on the other, both starting from
the same weights and fed the same batch:

* an MLP 784-512-512-10 (``Linear``, ``ReLU``) on a batch of 128, budgeted at
  1.2x PyTorch;
* a small CNN (``Conv2d(1, 32, 3, padding=1)``, ``ReLU``,
  ``Conv2d(32, 64, 3, padding=1)``, ``ReLU``, ``Flatten``, ``Linear(4096, 10)``)
  on a batch of 64 1x8x8 images, budgeted at 1.5x.

Each setup checks once, before anything is timed, that both libraries compute
the same loss on the first two steps (the second loss comes after one Adam
update, so it also checks the optimizer) and end up with the same weights.
Every timed step keeps training the same model: the loss changes from call to
call in both libraries alike, the work does not.
"""

from __future__ import annotations

import numpy as np
from harness import Workload, import_torch

_RTOL = 2e-3
_ATOL = 2e-4
_LR = 1e-3


def _f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


class _Model:
    """A ``Sequential`` model spec, built the same way in ember and in torch.

    ``layers(nn)`` returns the modules for ``nn`` (``ember.nn`` or ``torch.nn``);
    ``input_shape`` is one sample's shape and ``classes`` the number of targets.
    """

    def __init__(self, layers, input_shape, batch, classes=10):
        self.layers = layers
        self.input_shape = input_shape
        self.batch = batch
        self.classes = classes

    def arrays(self, rng, shapes):
        """The batch, the targets and one initial value per parameter (``shapes`` in order)."""
        weights = []
        for shape in shapes:  # weights scaled by fan_in ** -0.5, biases small
            scale = float(np.prod(shape[1:])) ** -0.5 if len(shape) > 1 else 0.1
            weights.append(_f32(rng, *shape, scale=scale))
        return {
            "x": _f32(rng, self.batch, *self.input_shape),
            "target": rng.integers(0, self.classes, self.batch).astype(np.int64),
            "weights": weights,
        }

    def build(self, lib, arrays):
        """``(step, model)`` for ``lib``: the model loaded with ``arrays``' weights, and its training step."""
        model = lib.nn.Sequential(*self.layers(lib.nn))
        params = list(model.parameters())
        with lib.no_grad():
            for p, w in zip(params, arrays["weights"], strict=True):
                p.copy_(lib.from_numpy(w.copy()))
        optimizer = lib.optim.Adam(params, lr=_LR)
        loss_fn = lib.nn.CrossEntropyLoss()
        x = lib.from_numpy(arrays["x"].copy())
        target = lib.from_numpy(arrays["target"].copy())

        def step():
            optimizer.zero_grad()
            loss = loss_fn(model(x), target)
            loss.backward()
            optimizer.step()
            return loss

        return step, model


def _setup(spec):
    """A workload setup: both libraries' training steps on the same weights and batch, checked once."""

    def setup():
        import ember
        import ember.optim  # noqa: F401  (``ember.optim`` is a subpackage: import it before ``lib.optim``)

        shapes = [tuple(p.shape) for p in ember.nn.Sequential(*spec.layers(ember.nn)).parameters()]
        arrays = spec.arrays(np.random.default_rng(0), shapes)
        ember_step, ember_model = spec.build(ember, arrays)
        torch = import_torch()
        torch_step = None
        if torch is not None:
            torch_step, torch_model = spec.build(torch, arrays)
            _check(ember_step, ember_model, torch_step, torch_model)
        return ember_step, torch_step

    return setup


def _check(ember_step, ember_model, torch_step, torch_model):
    """Same loss on the first two steps, same weights after them."""
    for i in range(2):
        ours, theirs = ember_step(), torch_step()
        np.testing.assert_allclose(
            float(ours.item()), float(theirs.item()), rtol=_RTOL, atol=_ATOL, err_msg=f"loss of step {i + 1}"
        )
    for (name, p), (_, q) in zip(ember_model.named_parameters(), torch_model.named_parameters(), strict=True):
        np.testing.assert_allclose(
            np.asarray(p.detach()), q.detach().numpy(), rtol=_RTOL, atol=_ATOL, err_msg=f"{name} after two steps"
        )


def _mlp_layers(nn):
    return [nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)]


def _cnn_layers(nn):
    return [
        nn.Conv2d(1, 32, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(64 * 8 * 8, 10),
    ]


_MLP = _Model(_mlp_layers, (784,), batch=128)
_CNN = _Model(_cnn_layers, (1, 8, 8), batch=64)
_MLP_TEXT = "Sequential MLP 784-512-512-10 (ReLU), batch 128, float32"
_CNN_TEXT = (
    "Sequential Conv2d(1, 32, 3, padding=1), ReLU, Conv2d(32, 64, 3, padding=1), ReLU, Flatten, Linear(4096, 10); "
    "batch 64 of 1x8x8 float32"
)

WORKLOADS = [
    Workload(
        "training_mlp_adam_b128",
        _setup(_MLP),
        threads=2,
        description=f"one Adam training step (zero_grad, forward, cross_entropy, backward, step): {_MLP_TEXT}",
    ),
    Workload(
        "training_cnn_adam_b64",
        _setup(_CNN),
        threads=2,
        description=f"one Adam training step: {_CNN_TEXT}",
    ),
    # The same steps on one thread: free of the two libraries' thread pools waiting on each other
    # (and on other processes of a shared machine), so the ratio isolates ember's own cost.
    Workload(
        "training_mlp_adam_b128_1thread",
        _setup(_MLP),
        threads=1,
        description="the MLP training step above, on one thread",
    ),
    Workload(
        "training_cnn_adam_b64_1thread",
        _setup(_CNN),
        threads=1,
        description="the CNN training step above, on one thread",
    ),
]
