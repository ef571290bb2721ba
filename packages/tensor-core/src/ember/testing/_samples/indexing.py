"""OpInfos of the advanced-indexing prims."""

from __future__ import annotations

import numpy as np

from ... import _dtype as D
from .._opinfo import ALL_TYPES_AND_COMPLEX, ErrorInput, OpInfo, SampleInput, register_opinfo
from ._common import maker


def _index_key(indices):
    return tuple(slice(None) if i is None else i for i in indices)


def _index_samples(opinfo, device, dtype, requires_grad):
    import ember

    make = maker(device, dtype, requires_grad)
    idx = ember.tensor([2, 0, 2], device=device)
    yield SampleInput(make((4, 3)), ([idx],), name="rows")
    yield SampleInput(make((4, 3)), ([None, ember.tensor([1, 1], device=device)],), name="columns")
    yield SampleInput(make((4, 3, 2)), ([ember.tensor([[0], [3]], device=device), ember.tensor([0, 2], device=device)],),
                      name="broadcast indices")
    yield SampleInput(make((4, 3, 2)), ([ember.tensor([0, 1], device=device), None, ember.tensor([1, 0], device=device)],),
                      name="separated indices")
    yield SampleInput(make((4, 3)), ([ember.tensor([True, False, True, True], device=device)],), name="mask",
                      data_dependent=True)


def _index_errors(opinfo, device):
    import ember

    x = ember.zeros(4, 3, device=device)
    yield ErrorInput(SampleInput(x, ([ember.tensor([0.5], device=device)],)), IndexError, "tensors used as indices must be long")
    yield ErrorInput(SampleInput(x, ([ember.tensor([4], device=device)],)), IndexError, "index 4 is out of bounds")
    yield ErrorInput(SampleInput(x, ([ember.tensor([True, False], device=device)],)), IndexError, "The shape of the mask")


def _index_put_samples(opinfo, device, dtype, requires_grad):
    import ember

    make = maker(device, dtype, requires_grad, seed=3)
    idx = ember.tensor([2, 0, 2], device=device)
    yield SampleInput(make((4, 3)), ([idx], make((3, 3))), name="rows, last write wins")
    yield SampleInput(make((4, 3)), ([idx], make((3,)), True), name="accumulate repeated rows")
    yield SampleInput(make((4, 3)), ([None, ember.tensor([1], device=device)], make(())), name="broadcast value")


def _index_put_ref(a, indices, values, accumulate=False):
    out = np.array(a, copy=True)
    key = _index_key(indices)
    if accumulate:
        np.add.at(out, key, np.broadcast_to(values, out[key].shape).astype(out.dtype))
    else:
        out[key] = values
    return out


register_opinfo(OpInfo("index", _index_samples, ref=lambda a, indices: a[_index_key(indices)],
                       error_inputs=_index_errors, torch_fn=lambda a, indices: a[_index_key(indices)]))
def _torch_index_put(a, indices, values, accumulate=False):
    """PyTorch's index_put takes no None entries: spell them as broadcast aranges."""
    import torch

    full = []
    for dim, idx in enumerate(indices):
        if idx is None:
            shape = [1] * len(indices)
            shape[dim] = a.shape[dim]
            idx = torch.arange(a.shape[dim]).view(shape)
        full.append(idx)
    return torch.index_put(a, tuple(full), values, accumulate)


register_opinfo(OpInfo("index_put", _index_put_samples, ref=_index_put_ref, torch_fn=_torch_index_put,
                       dtypes=tuple(d for d in ALL_TYPES_AND_COMPLEX if d is not D.bool)))
