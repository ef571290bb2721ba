"""Thread control for a measurement: ember's intra-op threads and numpy's BLAS/OpenMP pools.

Ember runs on two thread pools: the OpenMP pool of its C++ kernels
(``ember.set_num_threads``) and the pools of the BLAS and OpenMP libraries numpy
and scipy load (OpenBLAS, MKL, ...), which only ``threadpoolctl`` can resize
from Python. A benchmark that asks for one thread must get one thread in both,
or a matrix multiply silently uses every core.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def set_ember_threads(n: int) -> Iterator[None]:
    """Run the body with ``n`` intra-op threads in ember's kernels and in numpy's BLAS/OpenMP.

    Both settings are restored on exit, also when the body raises.

    Raises:
        ValueError: if ``n`` is not a positive integer.
    """
    import ember  # at call time: this module is imported while ember itself is being imported

    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"num_threads must be a positive integer, got {n!r}")
    with contextlib.ExitStack() as stack:
        previous = ember.get_num_threads()
        ember.set_num_threads(int(n))
        stack.callback(ember.set_num_threads, previous)
        stack.enter_context(_blas_threads(int(n)))
        yield


def _blas_threads(n: int) -> contextlib.AbstractContextManager:
    """``threadpoolctl``'s limit of every loaded BLAS/OpenMP pool to ``n`` (restored on exit)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=n)
