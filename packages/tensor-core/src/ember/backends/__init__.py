"""Switches and facts about the libraries behind ember's kernels: PyTorch's ``torch.backends``.

Programs written for PyTorch set these at start-up (``torch.backends.cudnn.benchmark = True``,
``torch.backends.cuda.matmul.allow_tf32 = True``) and query them (``torch.backends.mps.is_available()``).
With ``import ember as torch`` these lines run unchanged: every flag is stored, type-checked
and reads back what was set, and each flag's documentation says whether ember's kernels
consult it. Ember's CUDA path uses CuPy (cuBLAS, cuFFT, cuSOLVER) and Triton, not cuDNN, so
the cuDNN flags change nothing.

Submodules: :mod:`~ember.backends.cudnn`, :mod:`~ember.backends.cuda`,
:mod:`~ember.backends.mps`, :mod:`~ember.backends.opt_einsum`, :mod:`~ember.backends.mkldnn`,
:mod:`~ember.backends.mkl`, :mod:`~ember.backends.openmp`.
"""

from . import cuda, cudnn, mkl, mkldnn, mps, openmp, opt_einsum  # noqa: F401

__all__ = [
    "cuda",
    "cudnn",
    "mkl",
    "mkldnn",
    "mps",
    "openmp",
    "opt_einsum",
    "set_float32_matmul_precision",
    "get_float32_matmul_precision",
]

_PRECISIONS = ("highest", "high", "medium")
_precision = ["highest"]


def set_float32_matmul_precision(precision):
    """Set PyTorch's float32 matrix-product precision (``ember.set_float32_matmul_precision``).

    ``"highest"`` (the default) asks for full float32; ``"high"`` and ``"medium"`` let
    PyTorch use TF32 or bfloat16 internally, and set ``ember.backends.cuda.matmul.allow_tf32``
    as PyTorch does. Ember's float32 matrix products compute in float32 whatever the
    setting, so it changes no result; it is stored so that programs that set it run.

    Args:
        precision (str): ``"highest"``, ``"high"`` or ``"medium"``.

    Raises:
        RuntimeError: if ``precision`` is not a string (as in PyTorch).
        ValueError: for another string.

    Example:
        >>> import ember
        >>> ember.set_float32_matmul_precision("high")
        >>> ember.get_float32_matmul_precision(), ember.backends.cuda.matmul.allow_tf32
        ('high', True)
        >>> ember.set_float32_matmul_precision("highest")
    """
    if not isinstance(precision, str):
        raise RuntimeError(f"set_float32_matmul_precision expects a str, but got {type(precision).__name__}")
    if precision not in _PRECISIONS:
        raise ValueError(f"set_float32_matmul_precision: precision must be one of {_PRECISIONS}, got {precision!r}")
    _precision[0] = precision
    cuda.matmul.allow_tf32 = precision != "highest"


def get_float32_matmul_precision():
    """The precision last set by :func:`set_float32_matmul_precision` (``"highest"`` by default)."""
    return _precision[0]
