"""Samplers: iterables of dataset indices (or of batches of indices) that a DataLoader draws from.

Random samplers draw from ember's generators (:class:`ember.Generator`), so
``ember.manual_seed(s)`` (or a seeded ``generator=``) makes their order
reproducible, as in PyTorch. Names, arguments and errors follow
``torch.utils.data.sampler`` and ``torch.utils.data.distributed``.
"""

from __future__ import annotations

import math

import ember

__all__ = [
    "Sampler",
    "SequentialSampler",
    "RandomSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
    "BatchSampler",
    "DistributedSampler",
]

# Indices drawn with replacement come in chunks of this many (PyTorch's chunk size).
_REPLACEMENT_CHUNK = 32


def _fresh_generator():
    """A new generator seeded from ``ember.default_generator`` (what PyTorch's samplers do without ``generator=``)."""
    seed = int(ember.empty((), dtype=ember.int64).random_().item())
    return ember.Generator().manual_seed(seed)


class Sampler:
    """Base class of samplers: subclasses define ``__iter__`` (the indices) and usually ``__len__``.

    Args:
        data_source: accepted for backward compatibility with PyTorch and ignored.

    Example:
        >>> from ember.utils.data import Sampler
        >>> class Evens(Sampler):
        ...     def __init__(self, n): self.n = n
        ...     def __iter__(self): return iter(range(0, self.n, 2))
        ...     def __len__(self): return (self.n + 1) // 2
        >>> list(Evens(5))
        [0, 2, 4]
    """

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """The indices ``0, 1, ..., len(data_source) - 1`` in order.

    Args:
        data_source (Sized): the dataset.

    Example:
        >>> from ember.utils.data import SequentialSampler
        >>> list(SequentialSampler(range(3)))
        [0, 1, 2]
    """

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """Indices in random order: a permutation, or ``num_samples`` draws with replacement.

    Without replacement, ``num_samples`` larger than the dataset concatenates
    fresh permutations. Without ``generator``, each ``iter()`` seeds a new
    generator from ``ember.default_generator`` (so ``ember.manual_seed``
    governs the order); with one, iterations continue its stream.

    Args:
        data_source (Sized): the dataset.
        replacement (bool): draw with replacement. Default: False.
        num_samples (int, optional): how many indices to yield (default ``len(data_source)``).
        generator (ember.Generator, optional): the generator to draw from.

    Raises:
        TypeError: if ``replacement`` is not a bool.
        ValueError: if ``num_samples`` is not a positive integer.

    Example:
        >>> import ember
        >>> from ember.utils.data import RandomSampler
        >>> s = RandomSampler(range(5), generator=ember.Generator().manual_seed(0))
        >>> sorted(s)
        [0, 1, 2, 3, 4]
    """

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={self.replacement}")
        if not isinstance(self.num_samples, int) or isinstance(self.num_samples, bool) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={self.num_samples}")

    @property
    def num_samples(self):
        """How many indices one iteration yields."""
        if self._num_samples is None:
            return len(self.data_source)
        return self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        generator = _fresh_generator() if self.generator is None else self.generator
        if self.replacement:
            for _ in range(self.num_samples // _REPLACEMENT_CHUNK):
                yield from ember.randint(0, n, (_REPLACEMENT_CHUNK,), dtype=ember.int64, generator=generator).tolist()
            rest = self.num_samples % _REPLACEMENT_CHUNK
            yield from ember.randint(0, n, (rest,), dtype=ember.int64, generator=generator).tolist()
        else:
            for _ in range(self.num_samples // n):
                yield from ember.randperm(n, generator=generator).tolist()
            yield from ember.randperm(n, generator=generator).tolist()[: self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order (a fresh permutation each iteration).

    Args:
        indices (sequence): the indices.
        generator (ember.Generator, optional): the generator (``ember.default_generator`` when omitted).

    Example:
        >>> import ember
        >>> from ember.utils.data import SubsetRandomSampler
        >>> sorted(SubsetRandomSampler([7, 3, 9], generator=ember.Generator().manual_seed(1)))
        [3, 7, 9]
    """

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in ember.randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """Indices ``0 .. len(weights) - 1`` drawn with probabilities proportional to ``weights``.

    The draw is ``ember.multinomial(weights, num_samples, replacement,
    generator=generator)``; the weights need not sum to one.

    Args:
        weights (sequence of float): the (non-negative) weights, one per index.
        num_samples (int): how many indices to draw.
        replacement (bool): draw with replacement (default True); without it,
            ``num_samples`` may not exceed the number of non-zero weights.
        generator (ember.Generator, optional): the generator to draw from.

    Attributes:
        weights (Tensor): the weights as a float64 tensor.

    Raises:
        ValueError: if ``num_samples`` is not a positive integer, ``replacement``
            is not a bool, or ``weights`` is not one-dimensional.

    Example:
        >>> import ember
        >>> from ember.utils.data import WeightedRandomSampler
        >>> s = WeightedRandomSampler([0.0, 1.0, 0.0], 4, generator=ember.Generator().manual_seed(0))
        >>> list(s)
        [1, 1, 1, 1]
    """

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        weights_tensor = ember.as_tensor(weights, dtype=ember.float64)
        if len(weights_tensor.shape) != 1:
            raise ValueError(
                f"weights should be a 1d sequence but given weights have shape {tuple(weights_tensor.shape)}"
            )
        self.weights = weights_tensor
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        rand_tensor = ember.multinomial(self.weights, self.num_samples, self.replacement, generator=self.generator)
        yield from iter(rand_tensor.tolist())

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups another sampler's indices into lists of ``batch_size``.

    Args:
        sampler (Sampler or Iterable): the index source.
        batch_size (int): the batch size.
        drop_last (bool): drop the last batch if it is smaller than ``batch_size``.

    Raises:
        ValueError: if ``batch_size`` is not a positive integer or ``drop_last`` not a bool.

    Example:
        >>> from ember.utils.data import BatchSampler, SequentialSampler
        >>> list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=False))
        [[0, 1], [2, 3], [4]]
        >>> list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=True))
        [[0, 1], [2, 3]]
    """

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size


class DistributedSampler(Sampler):
    """The share of a dataset's indices that one of ``num_replicas`` processes loads.

    Each epoch, the indices (a permutation seeded with ``seed + epoch`` when
    ``shuffle``, else ``0 .. n-1``) are padded by repeating from the start to a
    multiple of ``num_replicas`` (or truncated, with ``drop_last``), and rank
    ``r`` takes every ``num_replicas``-th one starting at ``r``, so the ranks'
    shares are disjoint (up to the padding) and equally long. Call
    :meth:`set_epoch` at the start of every epoch for a different shuffle.

    ``num_replicas`` and ``rank`` may be given explicitly, so the sampler works
    before ``ember.distributed`` exists; when omitted they are read from an
    initialised ``ember.distributed`` process group.

    Args:
        dataset (Sized): the dataset.
        num_replicas (int, optional): the number of processes (the world size).
        rank (int, optional): this process's rank, in ``[0, num_replicas - 1]``.
        shuffle (bool): shuffle the indices. Default: True.
        seed (int): the shuffle's seed; must be the same in every process. Default: 0.
        drop_last (bool): truncate instead of padding. Default: False.

    Raises:
        RuntimeError: if ``num_replicas``/``rank`` are omitted and no distributed package is available.
        ValueError: if ``rank`` is outside ``[0, num_replicas - 1]``.

    Example:
        >>> from ember.utils.data import DistributedSampler
        >>> [list(DistributedSampler(range(5), num_replicas=2, rank=r, shuffle=False)) for r in (0, 1)]
        [[0, 2, 4], [1, 3, 0]]
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        if num_replicas is None or rank is None:
            dist = _distributed_package()
            if num_replicas is None:
                num_replicas = dist.get_world_size()
            if rank is None:
                rank = dist.get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        if self.drop_last and len(self.dataset) % self.num_replicas != 0:
            # Drop the tail so that every rank gets the same amount of data.
            self.num_samples = math.ceil((len(self.dataset) - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(len(self.dataset) / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        if self.shuffle:
            g = ember.Generator().manual_seed(self.seed + self.epoch)
            indices = ember.randperm(len(self.dataset), generator=g).tolist()
        else:
            indices = list(range(len(self.dataset)))
        if not self.drop_last:
            padding_size = self.total_size - len(indices)
            if padding_size <= len(indices):
                indices += indices[:padding_size]
            else:
                indices += (indices * math.ceil(padding_size / len(indices)))[:padding_size]
        else:
            indices = indices[: self.total_size]
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """Set the epoch, which (with ``seed``) seeds the shuffle; call it before each epoch's iteration.

        Args:
            epoch (int): the epoch number.
        """
        self.epoch = epoch


def _distributed_package():
    """``ember.distributed`` if it is importable and initialised; else a RuntimeError."""
    try:
        import ember.distributed as dist
    except ImportError:
        dist = None
    if dist is None or not getattr(dist, "is_available", lambda: False)():
        raise RuntimeError(
            "Requires distributed package to be available (ember.distributed is not); "
            "pass num_replicas and rank explicitly"
        )
    return dist
