"""Which arrays the checked cuda kernels of :mod:`.products` and :mod:`.reductions` take.

They take ``cupy.ndarray`` data on the current GPU (kernels launch there); :func:`bind` records CuPy's array
type and whether the machine has one GPU, where every array is on the current one and the check is free.
"""

from __future__ import annotations

__all__ = ["bind", "array_type", "on_current_gpu"]

_state = {"ndarray": None, "one_gpu": True, "device": None}


def bind(cp):
    """Record CuPy's array type and device count (called by the modules' ``register()``)."""
    _state.update(ndarray=cp.ndarray, device=cp.cuda.runtime.getDevice,
                  one_gpu=cp.cuda.runtime.getDeviceCount() == 1)


def array_type():
    """``cupy.ndarray`` once bound, else None (no tensor's data is then of that type)."""
    return _state["ndarray"]


def on_current_gpu(*arrays):
    """Whether every CuPy array of ``arrays`` lives on the current GPU."""
    if _state["one_gpu"]:
        return True
    device = _state["device"]()
    return all(a.data.device_id == device for a in arrays)
