"""OpInfos of ember._ops.nn_unpooling: max_unpool{1,2,3}d.

The references are written from the ops' definitions with plain numpy
loops over output positions or kernel offsets (the samples are tiny), in
float64/complex128/int64, independent of the fast kernels they check.
"""

from __future__ import annotations

import math

import numpy as np

from ... import _dtype as D
from .._opinfo import OpInfo, SampleInput, register_opinfo
from ._common import maker
from ._spatial import _FLOATS, _args, _errors, _tup, _z


def _ref_max_unpool(n):
    def ref(x, indices, kernel_size, stride=None, padding=0, output_size=None):
        k = _tup(kernel_size, n)
        s = k if stride is None else _tup(stride, n)
        p = _tup(padding, n)
        spatial = x.shape[x.ndim - n:]
        if output_size is None:
            out = tuple((spatial[i] - 1) * s[i] + k[i] - 2 * p[i] for i in range(n))
        else:
            out = tuple(output_size)[-n:]
        lead = x.shape[:x.ndim - n]
        result = np.zeros(lead + (math.prod(out),), x.dtype)
        flat_x = x.reshape(lead + (math.prod(spatial),))
        flat_i = indices.reshape(lead + (math.prod(spatial),))
        for lead_index in np.ndindex(*lead):
            result[lead_index][flat_i[lead_index]] = flat_x[lead_index]
        return result.reshape(lead + out)

    return ref


def _max_unpool_samples(n):
    def gen(opinfo, device, dtype, requires_grad):
        import ember

        make = maker(device, dtype, requires_grad)
        spatial = (6, 4, 4)[:n]
        pool = getattr(ember.nn.functional, f"max_pool{n}d")
        values, indices = pool(make((2, 3, *spatial)), 2, return_indices=True)
        yield SampleInput(values, (indices, 2), name="2")
        values, indices = pool(make((3, *(s + 1 for s in spatial))), 3, 2, 1, return_indices=True)
        yield SampleInput(values, (indices, 3, 2, 1), {"output_size": tuple(s + 1 for s in spatial)},
                          name="unbatched, output_size")

    return gen


def _max_unpool_errors(n):
    def values(e, d):
        return e.zeros(2, 3, *(3,) * n, device=d)

    return _errors(
        (_args(values, _z(2, 3, *(3,) * n, dtype=D.int32), 2), {}, RuntimeError, "should be type int64 but got: Int"),
        (_args(values, _z(2, 3, *(2,) * n, dtype=D.int64), 2), {}, RuntimeError, "Expected shape of indices"),
        (_args(values, lambda e, d: e.full((2, 3, *(3,) * n), 999, dtype=D.int64, device=d), 2), {}, RuntimeError,
         "Found an invalid max index: 999"),
        (_args(values, _z(2, 3, *(3,) * n, dtype=D.int64), 2), {"output_size": (9,) * n}, ValueError,
         "invalid output_size"),
        (_args(_z(3, *(3,) * n, dtype=D.int64), _z(3, *(3,) * n, dtype=D.int64), 2), {}, NotImplementedError,
         "not implemented for 'Long'"),
    )


# -- registration -------------------------------------------------------------------------------------

_INFOS = []

for _n in (1, 2, 3):
    _INFOS += [
        OpInfo(f"max_unpool{_n}d", _max_unpool_samples(_n), dtypes=_FLOATS, ref=_ref_max_unpool(_n),
               error_inputs=_max_unpool_errors(_n), torch_name=f"nn.functional.max_unpool{_n}d"),
    ]

for _info in _INFOS:
    register_opinfo(_info)
del _info, _n
