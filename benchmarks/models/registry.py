"""The registry of the ember.compile model suite (issue 28): one :class:`ModelSpec` per model.

Each model module of this folder (``vision.py``, ``sequence.py``, ...) writes its models once against a
``lib`` argument (``ember`` or ``torch``, as ``benchmarks/gpt_model.py`` does, so both libraries run the same
program with the same parameter names) and calls :func:`register` at import. :func:`load_all` imports the
modules named in :data:`MODULES`. The modules import this one as a top-level module
(``from registry import ModelSpec, register``): the runner (``run.py``) and the tests put this folder on
``sys.path``.

Calls: the runner computes ``output = model(*inputs)`` (``inputs`` the tuple that ``spec.inputs`` returns) and,
for training, ``spec.loss(lib, output, inputs)``. A loss that needs labels derives them deterministically from
``inputs`` (next-token targets from the token ids, a reconstruction target, class labels such as
``lib.arange(n, device=...) % classes``), so every tensor of ``inputs`` is a model argument.

Sizes: a spec's ``build`` and ``inputs`` give the CPU-sized model and batch by default (a step of ~100 ms
eager on 2 cores). ``cpu_scale`` and ``cuda_scale`` hold keyword overrides that the runner passes to both
``build(lib, **sizes)`` and ``inputs(lib, rng, device, **sizes)`` (so each takes, and ignores, the other's
keywords: ``**_``): ``cpu_scale`` on the CPU (usually empty), ``cuda_scale`` on CUDA, sizes realistic for a GPU
(published widths and depths, GPU batch sizes) that still keep the whole suite within a few minutes on one
GPU. :func:`sizes` picks one (``run.py --scale`` overrides the device's choice, for a dry run of the CUDA
sizes on the CPU).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable

import numpy as np

__all__ = ["ModelSpec", "MODELS", "MODULES", "SCALES", "register", "load_all", "sizes", "copy_weights"]


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """One model of the suite.

    Attributes:
        name: unique name, e.g. ``"resnet18"``.
        domain: ``"vision"``, ``"sequence"``, ``"generative"``, ``"graph"``, ``"recsys"`` or ``"rl"``.
        build: ``build(lib) -> lib.nn.Module`` (the runner seeds ``lib``'s generator before the call).
        inputs: ``inputs(lib, rng, device) -> tuple`` of ``lib`` tensors, the batch of one step
            (``rng`` a ``numpy.random.Generator``; the runner gives both libraries the same seed).
        loss: ``loss(lib, output, inputs) -> scalar lib tensor`` for training (``output = model(*inputs)``).
        cpu_scale: optional keyword overrides for ``build`` and ``inputs`` on the CPU (see the module docstring).
        cuda_scale: keyword overrides for ``build`` and ``inputs`` on CUDA: the GPU sizes.
        notes: what is shrunk relative to the original model, and why; known failures.
    """

    name: str
    domain: str
    build: Callable
    inputs: Callable
    loss: Callable
    cpu_scale: dict = dataclasses.field(default_factory=dict)
    notes: str = ""
    cuda_scale: dict = dataclasses.field(default_factory=dict)


#: Registered models by name, in registration order.
MODELS: dict[str, ModelSpec] = {}

#: The model modules of this folder that :func:`load_all` imports (each registers its models at import).
MODULES: tuple[str, ...] = ("vision", "generative", "sequence", "other")


def register(spec):
    """Add ``spec`` to :data:`MODELS`; returns it.

    Raises:
        TypeError: ``spec`` is not a :class:`ModelSpec`.
        ValueError: a model of that name is already registered.
    """
    if not isinstance(spec, ModelSpec):
        raise TypeError(f"register() takes a ModelSpec, got {type(spec).__name__}")
    if spec.name in MODELS:
        raise ValueError(f"a model named {spec.name!r} is already registered")
    MODELS[spec.name] = spec
    return spec


#: The size sets a spec has (``ModelSpec.cpu_scale``, ``ModelSpec.cuda_scale``).
SCALES: tuple[str, ...] = ("cpu", "cuda")


def sizes(spec, scale):
    """The keyword overrides of ``spec`` for ``scale`` (``"cpu"`` or ``"cuda"``), a new dict.

    Raises:
        ValueError: ``scale`` is not one of :data:`SCALES`.
    """
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    return dict(spec.cuda_scale if scale == "cuda" else spec.cpu_scale)


def load_all(modules=MODULES):
    """Import the model modules (those not written yet are skipped) and return :data:`MODELS`."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:  # a module that exists but fails to import is an error, not a skip
                raise
    return MODELS


def copy_weights(ember_model, torch_model):
    """Copy every entry of ``ember_model``'s state_dict (parameters and buffers) into ``torch_model``'s
    entry of the same name, through numpy, so the two models compute the same function.

    Raises:
        KeyError: the two state_dicts have different names.
        ValueError: an entry's shapes differ.
    """
    import torch

    ours = ember_model.state_dict()
    theirs = torch_model.state_dict()
    if set(ours) != set(theirs):
        missing, extra = sorted(set(ours) - set(theirs)), sorted(set(theirs) - set(ours))
        raise KeyError(f"state_dict names differ: only in ember {missing}, only in torch {extra}")
    with torch.no_grad():
        for name, value in ours.items():
            # np.array, not np.ascontiguousarray: that one turns a 0-d buffer (num_batches_tracked) into shape (1,)
            array = np.array(value.detach().cpu().numpy(), order="C")
            target = theirs[name]
            if tuple(array.shape) != tuple(target.shape):
                raise ValueError(f"{name}: ember shape {tuple(array.shape)}, torch shape {tuple(target.shape)}")
            target.copy_(torch.from_numpy(array))
