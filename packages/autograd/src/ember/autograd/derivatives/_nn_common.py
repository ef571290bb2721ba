"""What the derivative modules of the ``nn.functional`` ops (``nn_activation``, ``nn_norm``, ...) share.

Every op of these families is a composite with a fused CPU kernel, so each
gets one of two treatments:

* a **formula**, where it beats recording the decomposition: the fused
  kernel keeps running forward (one pass instead of the decomposition's
  chain of ops), and backward is a few ops instead of the reverse of that
  chain. Formulas also fix the gradient at points where a decomposition
  built from ``clamp``/``abs`` would give another value than PyTorch
  (``logsigmoid``, ``hardsigmoid``, ``binary_cross_entropy_with_logits`` at
  0), or NaN where PyTorch gives a finite value (``cosine_similarity`` of a
  zero vector);
* **through the decomposition**, where PyTorch's own op is a composite of
  the same ops (``softsign``, ``l1_loss``, ``kl_div``, ``margin_ranking_loss``,
  ...), so recording it gives PyTorch's gradient by construction, and where
  the kernel draws random numbers it does not hand back (the dropout family,
  ``rrelu`` in training, ``gumbel_softmax``, attention with dropout): the
  decomposition draws the same numbers from the same generator, and its
  graph keeps the mask.

Normalization formulas recompute the statistics from the saved input (the
kernels return only the output); running statistics are never
differentiated. Hot formulas (``relu``, ``leaky_relu``, ``threshold``, the
hard gates) multiply by a boolean mask rather than calling ``where``: numpy's
``where`` mispredicts its branch on a mask of mixed signs and runs about 20
times slower than a multiplication.
"""

from __future__ import annotations

import numpy as np

from ember._ops._dispatch import PLAIN_TENSOR_TYPES, ops_intercepted
from ember._ops._dispatch import state as _dispatch_state


def _cuda_rows(*tensors):
    """ember.cuda.kernels.rows when the ``tensors`` are plain CUDA tensors and the backward pass records
    nothing (no ``create_graph``) and is seen by no dispatch mode: its fused backward kernels then
    replace the formulas' chains of ops. The kernels read the arrays directly, so a tensor subclass
    (vmap's batched tensors) or a mode (make_fx, the profiler) needs the formulas' ops."""
    if tensors[0].device.type != "cuda" or _dispatch_state.grad_enabled or ops_intercepted():
        return None
    if any(type(t) not in PLAIN_TENSOR_TYPES for t in tensors if t is not None):
        return None
    from ember.cuda.kernels import rows

    return rows


def _cpu_arrays(*tensors):
    """The numpy arrays of ``tensors`` (None stays None) when they are plain CPU tensors and the backward
    pass records nothing and is seen by no dispatch mode: ember._C's gradient kernels (csrc/nn_backward.cpp)
    may then replace a formula's chain of ops; None otherwise (the formula runs), for the reasons of
    :func:`_cuda_rows`."""
    if _dispatch_state.grad_enabled or ops_intercepted():
        return None
    arrays = []
    for t in tensors:
        if t is None:
            arrays.append(None)
        elif type(t) in PLAIN_TENSOR_TYPES and type(t._data) is np.ndarray:
            arrays.append(t._data)
        else:
            return None
    return arrays


_C_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _cpu_float_rows(kernel, *tensors):
    """``(ember._C, arrays)`` for the row kernels of csrc/nn_rows_backward.cpp: the tensors' arrays made
    C-contiguous, when :func:`_cpu_arrays` gives them, all of one dtype, float32 or float64 (None stays None),
    and ember._C has ``kernel``; None otherwise (the formula runs)."""
    arrays = _cpu_arrays(*tensors)
    if arrays is None:
        return None
    dtype = arrays[0].dtype
    if dtype not in _C_FLOATS or any(a is not None and a.dtype != dtype for a in arrays):
        return None
    from ember import _C

    if not hasattr(_C, kernel):  # an ember._C built before the kernel was added
        return None
    return _C, [None if a is None else np.ascontiguousarray(a) for a in arrays]
