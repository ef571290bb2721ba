"""Finding CuPy and a GPU, once, without making ``import ember`` depend on either.

Everything in :mod:`ember.cuda` and the ``cuda`` backend reaches CuPy through
:func:`cupy_module`, which imports it on first use and raises one clear error
(naming ``pip install ember-core[cuda]``) when it is missing or sees no GPU.
"""

from __future__ import annotations

__all__ = ["cupy_module", "unavailable_reason", "is_available", "INSTALL_HINT"]

INSTALL_HINT = "pip install ember-core[cuda]"  # the cuda extra is cuda12's alias
INSTALL_HINT_CUDA13 = "pip install ember-core[cuda13]"

_state = {}  # "cupy": the module, or "reason": why there is none (filled once)


def _probe():
    try:
        import cupy
    except Exception as exc:  # ImportError, or a CuPy build that fails to load its CUDA libraries
        return None, (
            f"CUDA is not available: ember was not installed with CUDA support (CuPy failed to import: "
            f"{type(exc).__name__}: {exc}). "
            "Install it from a clone of the repository with `pip install \"./packages/tensor-core[cuda12]\"` "
            f"(`[cuda13]` for CUDA 13; from a package index, `{INSTALL_HINT}` or `{INSTALL_HINT_CUDA13}`) on a machine "
            "with an NVIDIA (or ROCm) GPU"
        )
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError when there is no driver
        return None, f"CUDA is not available: CuPy found no GPU driver ({exc})"
    if count < 1:
        return None, "CUDA is not available: CuPy sees no GPU"
    return cupy, None


def _load():
    if not _state:
        module, reason = _probe()
        _state["cupy"], _state["reason"] = module, reason
    return _state["cupy"]


def is_available():
    """Whether CuPy imports and sees at least one GPU."""
    return _load() is not None


def unavailable_reason():
    """Why CUDA can't be used here (None when it can)."""
    _load()
    return _state["reason"]


def cupy_module():
    """The ``cupy`` module.

    Raises:
        RuntimeError: naming ``pip install ember-core[cuda]`` when CuPy is missing or sees no GPU.
    """
    module = _state.get("cupy") if _state else _load()
    if module is None:
        raise RuntimeError(_state["reason"])
    return module
