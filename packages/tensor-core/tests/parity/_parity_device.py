"""What the parity tests share: the device each library runs on, and the pinned PyTorch version.

* Device: with ``EMBER_TEST_BACKEND=cuda`` (or ``rocm``) and a GPU, ember runs on ``"cuda"``, and
  PyTorch runs on its CUDA device too when it has one (``torch.cuda.is_available()``), so the
  comparison is GPU against GPU; otherwise both run on the CPU. Where PyTorch's CUDA build has
  no kernel for a case (some integer or half-precision ops), :func:`torch_call` falls back to
  PyTorch on the CPU, whose answer is the same reference; it also runs every call on the CPU
  first, so inputs PyTorch rejects never reach a CUDA kernel.
* Version: the parity suite is written against :data:`PINNED_TORCH` (``noxfile.py``'s
  ``TORCH_SPEC``). Checks of API surface (signatures, reprs, which names exist, error types
  and messages) and the few values that changed between PyTorch releases hold for that version
  only: :func:`require_pinned_torch` skips them, with the reason, under another version (the
  GPU machine has its own PyTorch build).

Imported by the test modules of ``tests/parity/`` (pytest puts this folder on ``sys.path``);
the autograd package's parity tests add this folder to ``sys.path`` themselves.
"""

from __future__ import annotations

import os

import pytest
import torch

import ember
from ember.testing._torch_oracle import to_torch as _to_cpu_torch

#: The PyTorch version the parity tests are written against (``noxfile.py``: ``TORCH_SPEC``).
PINNED_TORCH = "2.13.0"
#: This process's PyTorch version, without the local build tag (``2.11.0+cu130`` -> ``2.11.0``).
TORCH_VERSION = torch.__version__.split("+")[0]
IS_PINNED_TORCH = TORCH_VERSION == PINNED_TORCH


def _ember_device() -> str:
    backend = os.environ.get("EMBER_TEST_BACKEND", "cpu").strip().lower() or "cpu"
    if backend in ("cuda", "rocm") and ember.cuda.is_available():
        return "cuda"
    return "cpu"


#: The device ember's side of a comparison runs on: ``"cuda"`` under a GPU backend, else ``"cpu"``.
EMBER_DEVICE = _ember_device()
#: The device PyTorch's side runs on: CUDA when ember's does and this PyTorch has CUDA, else CPU.
TORCH_DEVICE = "cuda" if EMBER_DEVICE == "cuda" and torch.cuda.is_available() else "cpu"
ON_GPU = EMBER_DEVICE != "cpu"

if TORCH_DEVICE == "cuda":
    # Full float32 precision on PyTorch's side: cuDNN's convolutions default to TF32 (10-bit
    # mantissas), which ember's float32 results are not meant to match.
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    # and half-precision matrix products accumulate in float32 throughout: the reference as exact as it gets
    for flag in ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        if hasattr(torch.backends.cuda.matmul, flag):
            setattr(torch.backends.cuda.matmul, flag, False)


def require_pinned_torch(what: str) -> None:
    """Skip the calling test unless PyTorch is :data:`PINNED_TORCH` (``what``: the version-specific check)."""
    if not IS_PINNED_TORCH:
        pytest.skip(f"{what} is checked against torch {PINNED_TORCH}; this is torch {torch.__version__}")


#: A marker form of :func:`require_pinned_torch` for a whole test.
pinned_torch_only = pytest.mark.skipif(
    not IS_PINNED_TORCH,
    reason=f"checks API details of torch {PINNED_TORCH}; this is torch {torch.__version__}",
)


def _move(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, torch.device):
        return torch.device(device)
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_move(v, device) for v in value)
    if isinstance(value, list):
        return [_move(v, device) for v in value]
    if isinstance(value, dict):
        return {k: (device if k == "device" else _move(v, device)) for k, v in value.items()}
    return value


def to_torch(value, device=None):
    """``value`` (ember tensors, dtypes, devices, nested in tuples/lists/dicts) as PyTorch's, on
    ``device`` (default :data:`TORCH_DEVICE`); tensors are copies."""
    return _move(_to_cpu_torch(value), device or TORCH_DEVICE)


def torch_call(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` on PyTorch's side, arguments converted with :func:`to_torch`.

    The call runs on the CPU first: an error there is PyTorch's answer (raised here). Only inputs the
    CPU accepts go to :data:`TORCH_DEVICE`, so an invalid index never reaches a CUDA kernel, where
    it would be a device-side assert that ends the process's CUDA context. The device's result is
    returned, or the CPU's where PyTorch's CUDA build raises (no kernel for that dtype)."""
    on_cpu = fn(*to_torch(args, "cpu"), **to_torch(kwargs, "cpu"))
    if TORCH_DEVICE == "cpu":
        return on_cpu
    try:
        return fn(*to_torch(args), **to_torch(kwargs))
    except Exception:  # noqa: BLE001 - no CUDA kernel for this case: the CPU's answer stands
        return on_cpu


def torch_numpy(t):
    """A PyTorch tensor's values as numpy, from any device (bfloat16 through float32)."""
    t = t.detach().cpu().resolve_conj()  # (linalg.solve(left=False) returns a conjugate view)
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.numpy()


def host(t):
    """An ember tensor's values as numpy, from any device."""
    return t.detach().cpu().numpy()


def ember_from_torch(t, device=None):
    """A copy of PyTorch tensor ``t`` as an ember tensor on ``device`` (default :data:`EMBER_DEVICE`)."""
    return ember.from_numpy(torch_numpy(t).copy()).to(device or EMBER_DEVICE)


def device_holds(dtype) -> bool:
    """Whether ember's device can hold ``dtype`` (CuPy has no bfloat16: the cuda device refuses it)."""
    if EMBER_DEVICE == "cpu":
        return True
    try:
        ember.zeros(1, dtype=dtype, device=EMBER_DEVICE)
    except TypeError:
        return False
    return True
