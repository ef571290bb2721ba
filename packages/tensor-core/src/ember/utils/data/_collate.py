"""``default_collate`` and ``default_convert``: turning fetched samples into batches.

:func:`default_collate` merges a list of samples into one batch, recursing
through the samples' structure (dicts, tuples, namedtuples, lists), as
``torch.utils.data.default_collate`` does; :func:`default_convert` converts
numpy arrays in one sample to tensors (what the DataLoader applies when
automatic batching is off, ``batch_size=None``).
"""

from __future__ import annotations

import collections.abc
import re

import numpy as np

import ember
from ember._tensor import Tensor

__all__ = ["default_collate", "default_convert"]

# numpy dtype kinds that have no tensor dtype: bytes, unicode, object (and the 'a' alias of bytes).
_NP_STR_OBJ_ARRAY_PATTERN = re.compile(r"[SaUO]")

_DEFAULT_COLLATE_ERR_MSG_FORMAT = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
)


def _is_namedtuple(obj):
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def default_convert(data):
    """Convert numpy arrays (and numpy scalars) inside one sample to tensors, keeping the structure.

    Tensors, strings and other objects are returned unchanged; mappings,
    namedtuples and sequences are rebuilt with converted elements (a plain
    tuple becomes a list, as in PyTorch).

    Args:
        data: a sample.

    Returns:
        The sample with every numeric numpy array replaced by ``ember.as_tensor(array)``.

    Example:
        >>> import numpy as np
        >>> from ember.utils.data import default_convert
        >>> default_convert({"x": np.arange(3), "name": "a"})
        {'x': tensor([0, 1, 2]), 'name': 'a'}
    """
    elem_type = type(data)
    if isinstance(data, Tensor):
        return data
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "string_", "bytes_"):
        if elem_type.__name__ in ("ndarray", "memmap") and _NP_STR_OBJ_ARRAY_PATTERN.search(data.dtype.str):
            return data
        return ember.as_tensor(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        try:
            if isinstance(data, collections.abc.MutableMapping):
                clone = _shallow_copy(data)
                clone.update({key: default_convert(data[key]) for key in data})
                return clone
            return elem_type({key: default_convert(data[key]) for key in data})
        except TypeError:
            # The mapping type may not support copy() or construction from a dict.
            return {key: default_convert(data[key]) for key in data}
    if _is_namedtuple(data):
        return elem_type(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]  # Backwards compatibility (PyTorch).
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            if isinstance(data, collections.abc.MutableSequence):
                clone = _shallow_copy(data)
                for i, d in enumerate(data):
                    clone[i] = default_convert(d)
                return clone
            return elem_type([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data


def _shallow_copy(obj):
    import copy

    return copy.copy(obj)


def _shared_batch(batch):
    """In a DataLoader worker that shares memory, an empty shared tensor the batch can be stacked into;
    None elsewhere, or for tensors of several dtypes, shapes or devices (stack then decides)."""
    from . import _worker

    if _worker._worker_info is None or not _worker.SHARE_MEMORY:
        return None
    first = batch[0]
    data = first._data
    for t in batch:
        if type(t) is not Tensor or t._device.type != "cpu" or t._data.dtype != data.dtype or \
                t._data.shape != data.shape or t.requires_grad:
            return None
    from ember.multiprocessing._shared import empty_shared

    return empty_shared((len(batch), *data.shape), data.dtype)


def default_collate(batch):
    """Merge a list of samples into a batch, recursing through their structure.

    The rules, by the type of the batch's first element:

    * ``Tensor``: ``ember.stack(batch, 0)`` (a new leading batch dimension).
    * numpy array: the arrays converted with ``ember.as_tensor`` and stacked;
      numpy scalar: ``ember.as_tensor(batch)``. String/object arrays raise.
    * ``float``: a float64 tensor; ``int``: an int64 tensor; ``bool``: a bool tensor.
    * ``str``/``bytes``: the batch unchanged.
    * mapping: a mapping of the same type with each key's values collated.
    * namedtuple: the same namedtuple type with each field collated.
    * tuple: a list (PyTorch's behaviour) with each position collated; other
      sequences: the same type if it can be built from a list, else a list.
      All sequences must have the same length.

    Args:
        batch (list): the samples, as the dataset returned them.

    Returns:
        The batch, with the samples' structure and a leading batch dimension on each tensor.

    Raises:
        TypeError: for elements of another type, or numpy arrays of strings/objects.
        RuntimeError: if the sequences in ``batch`` have different lengths.

    Example:
        >>> import ember
        >>> from ember.utils.data import default_collate
        >>> b = default_collate([{"x": ember.tensor([1.0, 2.0]), "y": 0}, {"x": ember.tensor([3.0, 4.0]), "y": 1}])
        >>> b["x"].shape, b["y"].tolist()
        (ember.Size([2, 2]), [0, 1])
        >>> default_collate([(1, "a"), (2, "b")])
        [tensor([1, 2]), ('a', 'b')]
    """
    elem = batch[0]
    elem_type = type(elem)
    if isinstance(elem, Tensor):
        out = _shared_batch(batch)
        if out is not None:  # in a worker: straight into shared memory, which the batch travels in
            return ember.stack(list(batch), 0, out=out)
        return ember.stack(list(batch), 0)
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "string_", "bytes_"):
        if elem_type.__name__ in ("ndarray", "memmap"):
            if _NP_STR_OBJ_ARRAY_PATTERN.search(elem.dtype.str) is not None:
                raise TypeError(_DEFAULT_COLLATE_ERR_MSG_FORMAT.format(elem.dtype))
            return default_collate([ember.as_tensor(np.asarray(b)) for b in batch])
        if elem.shape == ():  # a numpy scalar
            return ember.as_tensor(np.asarray(batch))
    if isinstance(elem, bool):
        return ember.tensor(list(batch), dtype=ember.bool)
    if isinstance(elem, float):
        return ember.tensor(list(batch), dtype=ember.float64)
    if isinstance(elem, int):
        return ember.tensor(list(batch), dtype=ember.int64)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        try:
            if isinstance(elem, collections.abc.MutableMapping):
                clone = _shallow_copy(elem)
                clone.update({key: default_collate([d[key] for d in batch]) for key in elem})
                return clone
            return elem_type({key: default_collate([d[key] for d in batch]) for key in elem})
        except TypeError:
            return {key: default_collate([d[key] for d in batch]) for key in elem}
    if _is_namedtuple(elem):
        return elem_type(*(default_collate(samples) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        it = iter(batch)
        elem_size = len(next(it))
        if not all(len(e) == elem_size for e in it):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = list(zip(*batch))
        if isinstance(elem, tuple):
            return [default_collate(samples) for samples in transposed]  # Backwards compatibility.
        try:
            if isinstance(elem, collections.abc.MutableSequence):
                clone = _shallow_copy(elem)
                for i, samples in enumerate(transposed):
                    clone[i] = default_collate(samples)
                return clone
            return elem_type([default_collate(samples) for samples in transposed])
        except TypeError:
            return [default_collate(samples) for samples in transposed]
    raise TypeError(_DEFAULT_COLLATE_ERR_MSG_FORMAT.format(elem_type))
