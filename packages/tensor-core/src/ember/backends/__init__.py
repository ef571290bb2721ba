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

__all__ = ["cuda", "cudnn", "mkl", "mkldnn", "mps", "openmp", "opt_einsum"]
