"""``ember.linalg``: PyTorch's ``torch.linalg`` (factorizations, solvers, norms, spectral functions).

Every function here is a registry op (``ember._ops.registry["linalg_<name>"]``), so it dispatches
like any other op (CPU through numpy/scipy LAPACK, CUDA through CuPy's cuSOLVER/cuBLAS, meta
tensors, FX tracing) and its derivative lives in ember-autograd's table. Matrices are the last
two dims; any leading dims are a batch. Factorizations take float32, float64, complex64 and
complex128. The ``*_ex`` functions return LAPACK's ``info`` where the others raise
:class:`LinAlgError` naming the failing matrix of the batch.
"""

from __future__ import annotations

from ._ops import registry as _registry
from ._ops._linalg_common import LinAlgError

_PREFIX = "linalg_"

#: ``ember.linalg.<name>``: the registry ops tagged "linalg", without their ``linalg_`` prefix.
_FUNCTIONS = {
    op.name[len(_PREFIX):]: op for op in _registry.values() if "linalg" in op.tags and op.name.startswith(_PREFIX)
}
globals().update(_FUNCTIONS)
matmul = _registry["matmul"]

__all__ = ["LinAlgError", "matmul", *sorted(_FUNCTIONS)]
