"""``DataLoader``: iterate a dataset in (optionally shuffled, batched, parallel-loaded) batches.

Follows ``torch.utils.data.DataLoader``: the same arguments, defaults,
attribute names and errors. With ``num_workers=0`` batches are fetched in the
main process; with ``num_workers > 0`` by that many worker processes (see
:mod:`ember.utils.data._worker`), delivered in sampler order.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import queue
import signal
import sys
import time
import warnings

import ember

from . import _worker
from ._collate import default_collate, default_convert
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader"]


class _InfiniteConstantSampler(Sampler):
    """Yields ``None`` forever: the 'indices' an IterableDataset's fetcher ignores."""

    def __iter__(self):
        while True:
            yield None


def _default_context():
    """Fork on Linux (PyTorch's behaviour there); the platform's default start method elsewhere."""
    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


class DataLoader:
    """Iterate over a dataset in batches.

    Each iteration draws indices from the sampler (``SequentialSampler``, or
    ``RandomSampler`` with ``shuffle=True``), groups them with a
    ``BatchSampler`` of ``batch_size``, fetches the samples and merges them with
    ``collate_fn`` (:func:`default_collate`). With ``batch_size=None`` there is
    no automatic batching: each sample is passed through ``collate_fn``
    (default :func:`default_convert`).

    Shuffling draws from ``generator`` or, without one, from
    ``ember.default_generator``, so ``ember.manual_seed(s)`` before iterating
    reproduces the order.

    Args:
        dataset (Dataset or IterableDataset): where samples come from.
        batch_size (int, optional): samples per batch (default 1); ``None`` disables batching.
        shuffle (bool, optional): reshuffle every epoch (default False).
        sampler (Sampler or Iterable, optional): the indices to draw; exclusive with ``shuffle``.
        batch_sampler (Sampler or Iterable, optional): lists of indices, one per batch;
            exclusive with ``batch_size``, ``shuffle``, ``sampler`` and ``drop_last``.
        num_workers (int): worker processes to load with; 0 loads in the main process.
        collate_fn (callable, optional): merges a list of samples into a batch.
        pin_memory (bool): accepted for compatibility; ember has no pinned host memory, so it has no effect.
        drop_last (bool): drop the last incomplete batch (default False).
        timeout (float): seconds to wait for a batch from the workers before raising; 0 waits
            as long as the workers are alive.
        worker_init_fn (callable, optional): called as ``worker_init_fn(worker_id)`` in each
            worker after seeding, before loading.
        multiprocessing_context (str or context, optional): 'fork', 'spawn' or 'forkserver'
            (default: 'fork' on Linux, else the platform default).
        generator (ember.Generator, optional): for the RandomSampler and the workers' base seed.
        prefetch_factor (int, optional): batches in flight per worker (default 2 with workers;
            must be None without).
        persistent_workers (bool): keep the workers alive between epochs.
        pin_memory_device (str): accepted for compatibility, unused.
        in_order (bool): accepted for compatibility; batches are always delivered in order.

    Raises:
        ValueError: for negative ``num_workers``/``timeout``/``prefetch_factor``, or
            mutually exclusive options (messages as in PyTorch).

    Example:
        >>> import ember
        >>> from ember.utils.data import DataLoader, TensorDataset
        >>> ds = TensorDataset(ember.arange(10.0), ember.arange(10))
        >>> [y.tolist() for _, y in DataLoader(ds, batch_size=4)]
        [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
        >>> len(DataLoader(ds, batch_size=4, drop_last=True))
        2
    """

    _DataLoader__initialized = False

    def __init__(
        self,
        dataset,
        batch_size=1,
        shuffle=None,
        sampler=None,
        batch_sampler=None,
        num_workers=0,
        collate_fn=None,
        pin_memory=False,
        drop_last=False,
        timeout=0,
        worker_init_fn=None,
        multiprocessing_context=None,
        generator=None,
        *,
        prefetch_factor=None,
        persistent_workers=False,
        pin_memory_device="",
        in_order=True,
    ):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "prefetch_factor option could only be specified in multiprocessing."
                "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None."
            )
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")

        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.in_order = in_order
        self._is_iterable = isinstance(dataset, IterableDataset)

        if self._is_iterable:
            if isinstance(shuffle, bool) and shuffle:  # PyTorch accepts shuffle=False/None here
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified shuffle option, but got shuffle={shuffle}"
                )
            if sampler is not None:
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified sampler option, but got sampler={sampler}"
                )
            if batch_sampler is not None:
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified batch_sampler option, but got "
                    f"batch_sampler={batch_sampler}"
                )
        else:
            shuffle = bool(shuffle)

        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")

        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"
                )
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")

        if sampler is None:
            if self._is_iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)

        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator

        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self.multiprocessing_context = multiprocessing_context
        self._iterator = None
        self.__initialized = True

    # -- attributes ----------------------------------------------------------------

    @property
    def multiprocessing_context(self):
        """The multiprocessing context workers are started with (None: the default, see the class docstring)."""
        return self.__multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, multiprocessing_context):
        if multiprocessing_context is not None:
            if self.num_workers <= 0:
                raise ValueError(
                    "multiprocessing_context can only be used with multi-process loading (num_workers > 0), but "
                    f"got num_workers={self.num_workers}"
                )
            if isinstance(multiprocessing_context, str):
                valid = multiprocessing.get_all_start_methods()
                if multiprocessing_context not in valid:
                    raise ValueError(
                        "multiprocessing_context option should specify a valid start method in "
                        f"{valid!r}, but got multiprocessing_context={multiprocessing_context!r}"
                    )
                multiprocessing_context = multiprocessing.get_context(multiprocessing_context)
            elif not isinstance(multiprocessing_context, multiprocessing.context.BaseContext):
                raise TypeError(
                    "multiprocessing_context option should be a valid context object or a string specifying the "
                    f"start method, but got multiprocessing_context={multiprocessing_context}"
                )
        self.__multiprocessing_context = multiprocessing_context

    def __setattr__(self, attr, val):
        if self.__initialized and attr in (
            "batch_size",
            "batch_sampler",
            "sampler",
            "drop_last",
            "dataset",
            "persistent_workers",
        ):
            raise ValueError(f"{attr} attribute should not be set after {self.__class__.__name__} is initialized")
        super().__setattr__(attr, val)

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        # What the iterator draws from: batches of indices with auto-collation, single indices without.
        return self.batch_sampler if self._auto_collation else self.sampler

    # -- iteration -----------------------------------------------------------------

    def _get_iterator(self):
        if self.num_workers == 0:
            return _SingleProcessDataLoaderIter(self)
        return _MultiProcessingDataLoaderIter(self)

    def __iter__(self):
        """A fresh iterator over the batches (the same one, reset, with persistent workers)."""
        if self.persistent_workers and self.num_workers > 0:
            if self._iterator is None:
                self._iterator = self._get_iterator()
            else:
                self._iterator._reset(self)
            return self._iterator
        return self._get_iterator()

    def __len__(self):
        """The number of batches (for an IterableDataset: from ``len(dataset)``, if it has one).

        Raises:
            TypeError: if the dataset or sampler has no length.
        """
        if self._is_iterable:
            length = len(self.dataset)
            if self.batch_size is not None:
                if self.drop_last:
                    length = length // self.batch_size
                else:
                    length = -(-length // self.batch_size)
            return length
        return len(self._index_sampler)

    def _get_shared_seed(self):
        # The workers' base seed: one int64 draw from the loader's generator (or the default one).
        return int(ember.empty((), dtype=ember.int64).random_(generator=self.generator).item())

    def check_worker_number_rationality(self):
        """Accepted for PyTorch compatibility; ember does not warn about the worker count."""


class _BaseDataLoaderIter:
    def __init__(self, loader):
        self._dataset = loader.dataset
        self._is_iterable = loader._is_iterable
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        self._prefetch_factor = loader.prefetch_factor
        self._timeout = loader.timeout
        self._collate_fn = loader.collate_fn
        self._sampler_iter = iter(self._index_sampler)
        self._base_seed = loader._get_shared_seed()
        self._persistent_workers = loader.persistent_workers
        self._num_yielded = 0
        self._profile_name = f"enumerate(DataLoader)#{self.__class__.__name__}.__next__"

    def __iter__(self):
        return self

    def _reset(self, loader, first_iter=False):
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0

    def _next_index(self):
        return next(self._sampler_iter)

    def _next_data(self):
        raise NotImplementedError

    def __next__(self):
        if self._sampler_iter is None:
            self._reset(None)
        data = self._next_data()
        self._num_yielded += 1
        if self._is_iterable and hasattr(self._dataset, "__len__"):
            try:
                length = len(self._dataset)
            except TypeError:
                length = None
            if length is not None and self._num_yielded > length:
                warnings.warn(
                    f"Length of IterableDataset {self._dataset} was reported to be {length} (when accessing "
                    f"len(dataloader)), but {self._num_yielded} samples have been fetched. For multiprocessing "
                    "data-loading, this could be caused by not properly configuring the IterableDataset replica "
                    "at each worker.",
                    stacklevel=2,
                )
        return data

    def __len__(self):
        return len(self._index_sampler)


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._dataset_fetcher = _worker.create_fetcher(
            self._is_iterable, self._dataset, self._auto_collation, self._collate_fn, self._drop_last
        )

    def _next_data(self):
        index = self._next_index()  # may raise StopIteration
        return self._dataset_fetcher.fetch(index)  # may raise StopIteration (IterableDataset)


def _describe_exit(process):
    """``'with exit code N'`` or ``'(killed by signal: NAME)'`` for a dead worker process."""
    code = process.exitcode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        return f"(killed by signal: {name})"
    return f"with exit code {code}"


class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    """Loads batches in worker processes and hands them out in sampler order.

    Each worker has its own index queue; all share one result queue. Up to
    ``prefetch_factor * num_workers`` tasks are in flight; task ``i`` goes to
    the next worker that is still active, round-robin. Results that arrive
    early are held until their turn. While waiting, the main process polls the
    workers' liveness, so a dead worker raises instead of hanging.
    """

    def __init__(self, loader):
        super().__init__(loader)
        context = loader.multiprocessing_context or _default_context()
        self._worker_init_fn = loader.worker_init_fn
        payload = (self._dataset, self._collate_fn, self._worker_init_fn)
        if context.get_start_method() != "fork":
            # Tensors (e.g. a TensorDataset's) are not picklable: send the payload in the transfer format.
            payload = _worker.dumps(payload)
        self._worker_result_queue = context.Queue()
        self._workers_done_event = context.Event()
        self._index_queues = []
        self._workers = []
        self._shutdown = False
        for i in range(self._num_workers):
            index_queue = context.Queue()
            index_queue.cancel_join_thread()
            w = context.Process(
                target=_worker._worker_loop,
                args=(
                    self._is_iterable,
                    payload,
                    index_queue,
                    self._worker_result_queue,
                    self._workers_done_event,
                    self._auto_collation,
                    self._drop_last,
                    self._base_seed,
                    i,
                    self._num_workers,
                    os.getpid(),
                ),
            )
            w.daemon = True
            w.start()
            self._index_queues.append(index_queue)
            self._workers.append(w)
        self._reset(loader, first_iter=True)

    def _reset(self, loader, first_iter=False):
        super()._reset(loader, first_iter)
        self._send_idx = 0  # the index of the next task to send to a worker
        self._rcvd_idx = 0  # the index of the next task to hand to the user
        # task index -> (worker_id,) while pending, (worker_id, data) once received out of order.
        self._task_info = {}
        self._tasks_outstanding = 0
        self._workers_status = [True] * self._num_workers
        self._worker_queue_idx_cycle = itertools.cycle(range(self._num_workers))
        if not first_iter:
            # Persistent workers: start a new epoch, and drain everything from the previous one.
            seed = loader._get_shared_seed()
            for index_queue in self._index_queues:
                index_queue.put(_worker._ResumeIteration(seed))
            resume_count = 0
            while resume_count < self._num_workers:
                idx, _ = self._get_data()
                if isinstance(idx, _worker._ResumeIteration):
                    resume_count += 1
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _check_workers(self):
        """Raise if a worker exited while we wait for it (the 'no hang' guarantee)."""
        for w in self._workers:
            if not w.is_alive() and not self._shutdown:
                description = _describe_exit(w)
                self._shutdown_workers()
                raise RuntimeError(f"DataLoader worker (pid {w.pid}) exited unexpectedly {description}.")

    def _get_data(self):
        """The next ``(task_idx, data)`` from the result queue, decoded; raises on timeout or a dead worker."""
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        while True:
            wait = _worker.MP_STATUS_CHECK_INTERVAL
            if deadline is not None:
                wait = min(wait, max(deadline - time.monotonic(), 0.0))
            try:
                idx, data = self._worker_result_queue.get(timeout=wait)
            except queue.Empty:
                self._check_workers()
                if deadline is not None and time.monotonic() >= deadline:
                    self._shutdown_workers()
                    raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds") from None
                continue
            if isinstance(data, bytes):
                data = _worker.loads(data)
            return idx, data

    def _next_data(self):
        while True:
            # Skip tasks of workers whose IterableDataset has ended: they will never come.
            while self._rcvd_idx < self._send_idx:
                info = self._task_info[self._rcvd_idx]
                worker_id = info[0]
                if len(info) == 2 or self._workers_status[worker_id]:
                    break
                del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
            else:
                if not self._persistent_workers:
                    self._shutdown_workers()
                raise StopIteration

            if len(self._task_info[self._rcvd_idx]) == 2:
                data = self._task_info.pop(self._rcvd_idx)[1]
                return self._process_data(data)

            idx, data = self._get_data()
            self._tasks_outstanding -= 1
            if self._is_iterable and isinstance(data, _worker._IterableDatasetStopIteration):
                self._workers_status[data.worker_id] = False
                self._try_put_index()
                continue
            if idx != self._rcvd_idx:
                self._task_info[idx] += (data,)
            else:
                del self._task_info[idx]
                return self._process_data(data)

    def _try_put_index(self):
        if self._tasks_outstanding >= self._prefetch_factor * self._num_workers:
            return
        try:
            index = self._next_index()
        except StopIteration:
            return
        for _ in range(self._num_workers):  # find the next active worker, if any
            worker_queue_idx = next(self._worker_queue_idx_cycle)
            if self._workers_status[worker_queue_idx]:
                break
        else:
            return  # every worker has ended (IterableDataset)
        self._index_queues[worker_queue_idx].put((self._send_idx, index))
        self._task_info[self._send_idx] = (worker_queue_idx,)
        self._tasks_outstanding += 1
        self._send_idx += 1

    def _process_data(self, data):
        self._rcvd_idx += 1
        self._try_put_index()
        if isinstance(data, _worker.ExceptionWrapper):
            self._shutdown_workers()
            data.reraise()
        return data

    def _shutdown_workers(self):
        """Stop the workers: ask politely, wait briefly, then terminate. Safe to call twice."""
        if getattr(self, "_shutdown", True):
            return
        self._shutdown = True
        try:
            self._workers_done_event.set()
            for index_queue, w in zip(self._index_queues, self._workers):
                if w.is_alive():
                    index_queue.put(None)
            for w in self._workers:
                w.join(timeout=_worker.MP_STATUS_CHECK_INTERVAL * 10)
                if w.is_alive():
                    w.terminate()
                    w.join(timeout=1.0)
            for index_queue in self._index_queues:
                index_queue.cancel_join_thread()
                index_queue.close()
            self._worker_result_queue.cancel_join_thread()
            self._worker_result_queue.close()
        except Exception:  # interpreter shutdown: queues/processes may already be torn down
            pass

    def __del__(self):
        self._shutdown_workers()
