"""Datasets: the map-style :class:`Dataset`, :class:`IterableDataset`, and their combinators.

A map-style dataset maps keys (usually the integers ``0 .. len - 1``) to samples
through ``__getitem__``; an iterable-style dataset yields samples from
``__iter__``. Both are what :class:`ember.utils.data.DataLoader` draws from.
Names, arguments and errors follow ``torch.utils.data.dataset``.
"""

from __future__ import annotations

import bisect
import itertools
import math
import warnings
from collections.abc import Iterable

import ember

__all__ = [
    "Dataset",
    "IterableDataset",
    "TensorDataset",
    "StackDataset",
    "ConcatDataset",
    "ChainDataset",
    "Subset",
    "random_split",
]


class Dataset:
    """An abstract map-style dataset: ``dataset[key]`` is one sample.

    Subclasses override ``__getitem__`` (and usually ``__len__``, which the
    default samplers need). They may also define ``__getitems__(indices)`` to
    fetch a whole batch at once; the DataLoader then calls it instead of
    ``__getitem__`` once per index. ``a + b`` is ``ConcatDataset([a, b])``.

    Example:
        >>> from ember.utils.data import Dataset
        >>> class Squares(Dataset):
        ...     def __getitem__(self, i):
        ...         return i * i
        ...     def __len__(self):
        ...         return 4
        >>> [x for x in Squares() + Squares()][:6]
        [0, 1, 4, 9, 0, 1]
    """

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset, Iterable):
    """An abstract iterable-style dataset: ``iter(dataset)`` yields the samples.

    With ``num_workers > 0`` each worker process holds its own copy of the
    dataset and iterates it fully, so a dataset that should not be duplicated
    must split its stream itself using :func:`ember.utils.data.get_worker_info`
    (its ``id`` and ``num_workers``). ``a + b`` is ``ChainDataset([a, b])``.

    Example:
        >>> from ember.utils.data import IterableDataset, get_worker_info
        >>> class Range(IterableDataset):
        ...     def __init__(self, n):
        ...         self.n = n
        ...     def __iter__(self):
        ...         info = get_worker_info()
        ...         if info is None:  # single-process loading: everything
        ...             return iter(range(self.n))
        ...         return iter(range(info.id, self.n, info.num_workers))
        >>> list(Range(3))
        [0, 1, 2]
    """

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """A dataset of tensors that share their first dimension: sample ``i`` is ``tuple(t[i] for t in tensors)``.

    Args:
        *tensors (Tensor): tensors with the same size of dimension 0.

    Raises:
        ValueError: if the tensors' first dimensions differ.

    Example:
        >>> import ember
        >>> from ember.utils.data import TensorDataset
        >>> ds = TensorDataset(ember.arange(6).reshape(3, 2), ember.tensor([0, 1, 0]))
        >>> len(ds), ds[1][0].tolist(), ds[1][1].item()
        (3, [2, 3], 1)
    """

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        sizes = [t.size(0) for t in tensors]
        if any(s != sizes[0] for s in sizes):
            raise ValueError(f"Size mismatch between tensors: first dimensions are {sizes}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(tensor[index] for tensor in self.tensors)

    def __len__(self):
        return self.tensors[0].size(0)


class StackDataset(Dataset):
    """Zip datasets of equal length: sample ``i`` is a tuple (``*args``) or dict (``**kwargs``) of their samples.

    Args:
        *args (Dataset): datasets whose samples form a tuple.
        **kwargs (Dataset): datasets whose samples form a dict under these keys.

    Raises:
        ValueError: if both or neither of ``args``/``kwargs`` are given, or the lengths differ.

    Example:
        >>> from ember.utils.data import StackDataset
        >>> StackDataset(x=[1, 2], y=["a", "b"])[1]
        {'x': 2, 'y': 'b'}
    """

    def __init__(self, *args, **kwargs):
        if args:
            if kwargs:
                raise ValueError(
                    "Supported either ``tuple``- (via ``args``) or``dict``- (via ``kwargs``) like input/output, "
                    "but both types are given."
                )
            self._length = len(args[0])
            if any(self._length != len(dataset) for dataset in args):
                raise ValueError("Size mismatch between datasets")
            self.datasets = args
        elif kwargs:
            tmp = list(kwargs.values())
            self._length = len(tmp[0])
            if any(self._length != len(dataset) for dataset in tmp):
                raise ValueError("Size mismatch between datasets")
            self.datasets = kwargs
        else:
            raise ValueError("At least one dataset should be passed")

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: dataset[index] for k, dataset in self.datasets.items()}
        return tuple(dataset[index] for dataset in self.datasets)

    def __len__(self):
        return self._length


class ConcatDataset(Dataset):
    """The concatenation of map-style datasets: indices run through each dataset in turn.

    Args:
        datasets (iterable of Dataset): the datasets (not iterable-style ones).

    Attributes:
        cumulative_sizes (list of int): running totals of the datasets' lengths.

    Raises:
        ValueError: if ``datasets`` is empty, or an index's absolute value exceeds the length.
        TypeError: if a dataset is an :class:`IterableDataset`.

    Example:
        >>> from ember.utils.data import ConcatDataset
        >>> ds = ConcatDataset([[1, 2], [3, 4, 5]])
        >>> len(ds), ds[2], ds[-1], ds.cumulative_sizes
        (5, 3, 5, [2, 5])
    """

    @staticmethod
    def cumsum(sequence):
        """Running totals of the lengths: ``[len(d0), len(d0) + len(d1), ...]``."""
        return list(itertools.accumulate(len(d) for d in sequence))

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if len(self.datasets) == 0:
            raise ValueError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        # The first dataset whose running total exceeds idx holds it.
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which > 0 else 0
        return self.datasets[which][idx - start]


class ChainDataset(IterableDataset):
    """The chaining of iterable datasets: iterates each in turn (built lazily, on iteration).

    Args:
        datasets (iterable of IterableDataset): the datasets.

    Raises:
        TypeError: on iteration or ``len``, if a dataset is not an :class:`IterableDataset`.

    Example:
        >>> from ember.utils.data import ChainDataset, IterableDataset
        >>> class R(IterableDataset):
        ...     def __init__(self, n): self.n = n
        ...     def __iter__(self): return iter(range(self.n))
        ...     def __len__(self): return self.n
        >>> list(ChainDataset([R(2), R(3)])), len(R(2) + R(3))
        ([0, 1, 0, 1, 2], 5)
    """

    def __init__(self, datasets):
        super().__init__()
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self):
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError("ChainDataset only supports IterableDataset")
            total += len(d)
        return total


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order.

    Args:
        dataset (Dataset): the whole dataset.
        indices (sequence of int): the indices to keep.

    Example:
        >>> from ember.utils.data import Subset
        >>> s = Subset([10, 11, 12, 13], [3, 0])
        >>> len(s), s[0], s[[0, 1]]
        (2, 13, [13, 10])
    """

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            if hasattr(self.dataset, "__getitems__") and self.dataset.__getitems__:
                return self.dataset.__getitems__([self.indices[i] for i in idx])
            return [self.dataset[self.indices[i]] for i in idx]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        # Batched fetch for the DataLoader; delegate when the underlying dataset can fetch batches itself.
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__([self.indices[idx] for idx in indices])
        return [self.dataset[self.indices[idx]] for idx in indices]

    def __len__(self):
        return len(self.indices)


def _counts_from_fractions(fractions, total):
    """Split ``total`` by ``fractions``: floors first, then the leftover items one each to the
    splits in order (PyTorch's rule, so both libraries give the same sizes)."""
    for i, fraction in enumerate(fractions):
        if not 0 <= fraction <= 1:
            raise ValueError(f"Fraction at index {i} is not between 0 and 1")
    counts = [int(math.floor(total * fraction)) for fraction in fractions]
    for i in range(total - sum(counts)):
        counts[i % len(counts)] += 1
    for i, count in enumerate(counts):
        if count == 0:
            warnings.warn(f"Length of split at index {i} is 0. This might result in an empty dataset.", stacklevel=3)
    return counts


def random_split(dataset, lengths, generator=None):
    """Split ``dataset`` at random into non-overlapping :class:`Subset` s of the given lengths.

    ``lengths`` are either integers summing to ``len(dataset)``, or fractions
    summing to 1: then each split gets ``floor(frac * len(dataset))`` samples
    and the remainder is dealt out one at a time, round-robin, from the first
    split on (as PyTorch does). The permutation is ``ember.randperm(n,
    generator=generator)``, so a seeded generator (or ``ember.manual_seed``)
    makes the split reproducible.

    Args:
        dataset (Dataset): the dataset to split.
        lengths (sequence of int or float): the split lengths or fractions.
        generator (ember.Generator, optional): the generator for the permutation
            (``ember.default_generator`` when omitted).

    Returns:
        list of Subset: one per length.

    Raises:
        ValueError: if a fraction is outside [0, 1], or the lengths don't sum to ``len(dataset)``.

    Example:
        >>> import ember
        >>> from ember.utils.data import random_split
        >>> a, b = random_split(range(10), [0.7, 0.3], generator=ember.Generator().manual_seed(0))
        >>> len(a), len(b), sorted(list(a) + list(b)) == list(range(10))
        (7, 3, True)
    """
    if generator is None:
        generator = ember.default_generator
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:  # fractions, not counts
        lengths = _counts_from_fractions(lengths, len(dataset))
    if sum(lengths) != len(dataset):
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    indices = ember.randperm(sum(lengths), generator=generator).tolist()
    return [
        Subset(dataset, indices[offset - length : offset])
        for offset, length in zip(itertools.accumulate(lengths), lengths)
    ]
