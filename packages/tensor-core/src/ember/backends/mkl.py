"""Intel MKL (``torch.backends.mkl``): ember's CPU linear algebra is numpy's, so MKL is used
exactly when numpy was built against it."""

__all__ = ["is_available"]


def is_available():
    """Whether numpy (ember's CPU BLAS/LAPACK) is linked against Intel MKL."""
    import numpy as np

    try:
        blas = np.__config__.CONFIG["Build Dependencies"]["blas"]["name"]
    except (AttributeError, KeyError, TypeError):
        return False
    return "mkl" in str(blas).lower()
