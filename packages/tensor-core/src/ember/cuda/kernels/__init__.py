"""Fast CUDA kernels for ops on the ``cuda`` device, installed when the backend initialises.

* :mod:`.pointwise`: fused, vectorised kernels of the common pointwise ops
  (arithmetic, activations and their backward helpers, comparisons, ``where``);
* :mod:`.copies`: same-dtype ``clone``/``_to_copy`` as one device-to-device memcpy;
* :mod:`.rows`: fused row kernels (softmax, log_softmax, softmin, layer_norm,
  cross_entropy, nll_loss), registered by its ``register()``;
* :mod:`.optim_kernels`: the fused Adam/AdamW step, which ``ember.optim.Adam``
  calls for CUDA parameters (no registration).

Every fast kernel takes only the calls it computes exactly as the generic path
(the CPU kernel on CuPy arrays) does and hands the others to the kernel the op
had before, so installing them changes speed, not results.
"""

from __future__ import annotations

__all__ = ["register"]

_done = []


def register():
    """Install every fast CUDA kernel (once). Needs CuPy and a GPU (``ember.cuda.is_available()``)."""
    if _done:
        return
    from . import copies, pointwise, rows

    pointwise.register()
    copies.register()
    rows.register()
    _done.append(True)
