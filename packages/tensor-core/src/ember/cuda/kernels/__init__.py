"""Fast CUDA kernels for ops on the ``cuda`` device, installed when the backend initialises.

* :mod:`.pointwise`: fused, vectorised kernels of the common pointwise ops
  (arithmetic, activations and their backward helpers, comparisons, ``where``);
* :mod:`.copies`: same-dtype ``clone``/``_to_copy`` as one device-to-device memcpy;
* ``rows`` and ``optim_kernels`` (when present): fused row kernels and optimizer
  steps; each may define a ``register()`` of its own, which :func:`register` calls.

Every fast kernel takes only the calls it computes exactly as the generic path
(the CPU kernel on CuPy arrays) does and hands the others to the kernel the op
had before, so installing them changes speed, not results.
"""

from __future__ import annotations

import importlib

__all__ = ["register"]

_done = []


def register():
    """Install every fast CUDA kernel (once). Needs CuPy and a GPU (``ember.cuda.is_available()``)."""
    if _done:
        return
    from . import copies, pointwise

    pointwise.register()
    copies.register()
    for name in ("rows", "optim_kernels"):
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            continue
        hook = getattr(module, "register", None)
        if hook is not None:
            hook()
    _done.append(True)
