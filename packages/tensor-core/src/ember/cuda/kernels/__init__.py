"""Fast CUDA kernels for ops on the ``cuda`` device, installed when the backend initialises.

* :mod:`.pointwise`: fused, vectorised kernels of the common pointwise ops
  (arithmetic, activations and their backward helpers, comparisons, ``where``);
* :mod:`.copies`: same-dtype ``clone``/``_to_copy`` as one device-to-device memcpy;
* :mod:`.rows`: fused row kernels (softmax, log_softmax, softmin, layer_norm,
  cross_entropy, nll_loss), registered by its ``register()``;
* :mod:`.products`: ``matmul`` and ``linear`` of float matrices straight to cuBLAS (checked cuda kernels);
* :mod:`.reductions`: ``sum`` of float tensors without the generic layers (a checked cuda kernel);
* :mod:`.columns`: a bias added to rows, and column sums (used by the two above);
* :mod:`.conv`, :mod:`.conv_fast`: convolution, im2col and fold on CuPy arrays (the fast float path:
  NVRTC kernels around one cuBLAS GEMM, and a fused backward);
* :mod:`.pooling`, :mod:`.grid_sample`: the CuPy side of the pooling ops' and ``grid_sample``'s kernels;
* :mod:`.embedding`: ``embedding`` forward and its weight's gradient, index range checked on the GPU
  (reported at the next synchronising call, no host read);
* :mod:`.attention`: ``scaled_dot_product_attention`` without a mask or dropout, forward and gradient, on the
  arrays (its steps' kernels without dispatching each step);
* :mod:`.foreach_kernels`: ``_foreach_add_``/``_foreach_sub_`` of tensor lists in one launch;
* :mod:`.optim_kernels`: the fused Adam/AdamW step, which ``ember.optim.Adam``
  calls for CUDA parameters (no registration).

Every fast kernel takes only the calls it computes exactly as the generic path
(the CPU kernel on CuPy arrays) does and hands the others to the kernel the op
had before, so installing them changes speed, not results. The exception is
``sum`` over leading dims (:mod:`.columns`), which accumulates in float64 in its
own fixed order, so its last bits may differ from CuPy's reduction.
"""

from __future__ import annotations

__all__ = ["register"]

_done = []


def register():
    """Install every fast CUDA kernel (once). Needs CuPy and a GPU (``ember.cuda.is_available()``)."""
    if _done:
        return
    from . import attention, conv, copies, embedding, grid_sample, pointwise, pooling, products, reductions, rows

    pointwise.register()
    copies.register()
    rows.register()
    products.register()
    reductions.register()
    conv.register()
    pooling.register()
    grid_sample.register()
    embedding.register()
    attention.register()
    _done.append(True)
