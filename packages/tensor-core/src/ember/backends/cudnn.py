"""cuDNN flags (``torch.backends.cudnn``): accepted and stored, with no effect in ember.

Ember has no cuDNN: convolutions, pooling and normalisation on CUDA run as CuPy/cuBLAS and
Triton kernels. So :func:`is_available` is False, :func:`version` is None, and the flags
below are stored (and checked to be bools) only so that programs written for PyTorch run:

* ``enabled`` (default True): whether PyTorch may use cuDNN;
* ``benchmark`` (default False): PyTorch's per-shape algorithm search; ember picks its
  convolution kernels by shape without timing, so results never depend on this flag;
* ``benchmark_limit`` (default 10): how many algorithms PyTorch's search may try;
* ``deterministic`` (default False): PyTorch's "only deterministic cuDNN algorithms";
* ``allow_tf32`` (default True): PyTorch's TF32 for cuDNN convolutions; ember's CUDA
  convolutions compute float32 in float32.

Example:
    >>> import ember
    >>> ember.backends.cudnn.benchmark = True
    >>> ember.backends.cudnn.benchmark
    True
    >>> with ember.backends.cudnn.flags(enabled=True, deterministic=True):
    ...     ember.backends.cudnn.deterministic
    True
    >>> ember.backends.cudnn.deterministic
    False
    >>> ember.backends.cudnn.benchmark = False
"""

from __future__ import annotations

from . import _flags

__all__ = ["is_available", "version", "is_acceptable", "flags"]


def _check_limit(name, value):
    if type(value) is not int or value < 0:
        raise RuntimeError(f"{name} expects a non-negative int, but got {value!r}")
    return value


_flags.install(
    __name__,
    {
        "enabled": (True, _flags.check_bool),
        "benchmark": (False, _flags.check_bool),
        "benchmark_limit": (10, _check_limit),
        "deterministic": (False, _flags.check_bool),
        "allow_tf32": (True, _flags.check_bool),
    },
)


def is_available():
    """Whether cuDNN can be used: always False (ember's CUDA path does not use cuDNN)."""
    return False


def version():
    """cuDNN's version: None, since ember does not use cuDNN."""
    return None


def is_acceptable(tensor):
    """Whether cuDNN would accept ``tensor``: always False in ember (there is no cuDNN)."""
    return False


def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False, allow_tf32=True):
    """Context manager that sets every cuDNN flag inside the block and restores them afterwards.

    As in PyTorch, each flag not passed is set to this function's default for the block
    (``enabled=False``).
    """
    import sys

    return _flags.temporarily(
        sys.modules[__name__],
        enabled=enabled,
        benchmark=benchmark,
        benchmark_limit=benchmark_limit,
        deterministic=deterministic,
        allow_tf32=allow_tf32,
    )
