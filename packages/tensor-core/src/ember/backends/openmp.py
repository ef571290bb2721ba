"""OpenMP (``torch.backends.openmp``): whether ember's C++ kernels were compiled with it."""

__all__ = ["is_available"]


def is_available():
    """Whether ember's C++ extension was built with OpenMP (multi-threaded kernels)."""
    from .. import _C

    return bool(_C.has_openmp)
