"""``DataLoader``: iterate a dataset in (optionally shuffled, batched, parallel-loaded) batches.

Follows ``torch.utils.data.DataLoader``: the same arguments, defaults,
attribute names and errors. With ``num_workers=0`` batches are fetched in the
main process; with ``num_workers > 0`` by that many worker processes (see
:mod:`ember.utils.data._worker`), delivered in sampler order.
"""

from __future__ import annotations

import itertools
import os
import queue
import signal
import sys
import time
import warnings
from collections.abc import Mapping

import ember

from . import _worker
from ._collate import default_collate, default_convert
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader"]


def _pin_memory(data):
    """``data`` with every tensor in it copied to page-locked (pinned) host memory.

    Walks what :func:`default_collate` builds: tensors, mappings, named tuples, tuples and lists
    (other values are returned as they are). Any other object with a ``pin_memory()`` method (a
    custom batch type, a ``PackedSequence``) is replaced by what that method returns, as in PyTorch.
    """
    if isinstance(data, ember.Tensor):
        return data.pin_memory()
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, Mapping):
        pinned = {key: _pin_memory(value) for key, value in data.items()}
        try:
            return type(data)(pinned)
        except TypeError:  # a mapping type that cannot be built from a dict
            return pinned
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # a named tuple
        return type(data)(*(_pin_memory(item) for item in data))
    if isinstance(data, tuple):
        return tuple(_pin_memory(item) for item in data)
    if isinstance(data, list):
        return [_pin_memory(item) for item in data]
    if hasattr(data, "pin_memory"):
        return data.pin_memory()
    return data


def _pinning_available():
    """Whether ``pin_memory=True`` can pin: a GPU is present (pinned memory speeds up copies to it
    and needs its driver) and tensors have ``pin_memory()``."""
    return hasattr(ember.Tensor, "pin_memory") and ember.cuda.is_available()


class _InfiniteConstantSampler(Sampler):
    """Yields ``None`` forever: the 'indices' an IterableDataset's fetcher ignores."""

    def __iter__(self):
        while True:
            yield None


def _default_context():
    """Fork on Linux (PyTorch's behaviour there); the platform's default start method elsewhere."""
    import multiprocessing  # here, not at the top: ~5 ms of `import ember`, needed only with worker processes

    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


# Attributes that decide which batches an iterator produces: fixed once the loader exists, since
# persistent workers and live iterators were set up with them.
_FIXED_AFTER_INIT = frozenset(("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers"))


def _checked_worker_options(num_workers, timeout, prefetch_factor, persistent_workers):
    """Validate the multiprocessing options; returns ``prefetch_factor`` with its default filled in."""
    if num_workers < 0:
        raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
    if timeout < 0:
        raise ValueError("timeout option should be non-negative")
    if prefetch_factor is None:
        prefetch_factor = 2 if num_workers > 0 else None
    elif num_workers == 0:
        raise ValueError(
            "prefetch_factor option could only be specified in multiprocessing."
            "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None."
        )
    elif prefetch_factor < 0:
        raise ValueError("prefetch_factor option should be non-negative")
    if persistent_workers and num_workers == 0:
        raise ValueError("persistent_workers option needs num_workers > 0")
    return prefetch_factor


def _check_iterable_dataset_options(shuffle, sampler, batch_sampler):
    """An IterableDataset yields its own samples in its own order: no sampler and no shuffling."""
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


def _context_from(multiprocessing_context):
    """A start-method name resolved to its context; a context object checked and returned."""
    import multiprocessing  # (imported on first use, as in _default_context)

    if isinstance(multiprocessing_context, str):
        valid = multiprocessing.get_all_start_methods()
        if multiprocessing_context not in valid:
            raise ValueError(
                "multiprocessing_context option should specify a valid start method in "
                f"{valid!r}, but got multiprocessing_context={multiprocessing_context!r}"
            )
        return multiprocessing.get_context(multiprocessing_context)
    if not isinstance(multiprocessing_context, multiprocessing.context.BaseContext):
        raise TypeError(
            "multiprocessing_context option should be a valid context object or a string specifying the "
            f"start method, but got multiprocessing_context={multiprocessing_context}"
        )
    return multiprocessing_context


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
        pin_memory (bool): copy each batch's tensors to pinned (page-locked) host memory before
            handing it out, so ``.to("cuda", non_blocking=True)`` can copy asynchronously. Only
            where a GPU is available; elsewhere it has no effect.
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
        pin_memory_device (str): accepted for compatibility; memory is pinned for the CUDA device.
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
        prefetch_factor = _checked_worker_options(num_workers, timeout, prefetch_factor, persistent_workers)
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
            _check_iterable_dataset_options(shuffle, sampler, batch_sampler)
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"
                )
            batch_size, drop_last = None, False  # the batch sampler decides both
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")

        if sampler is None:
            sampler = self._default_sampler(shuffle, generator)
        if batch_sampler is None and batch_size is not None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            # Batches are collated; single samples (batch_size=None) are only converted.
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self.multiprocessing_context = multiprocessing_context
        self._iterator = None
        self.__initialized = True

    def _default_sampler(self, shuffle, generator):
        if self._is_iterable:
            return _InfiniteConstantSampler()  # an iterable dataset chooses its own order
        if shuffle:
            return RandomSampler(self.dataset, generator=generator)
        return SequentialSampler(self.dataset)

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
            multiprocessing_context = _context_from(multiprocessing_context)
        self.__multiprocessing_context = multiprocessing_context

    def __setattr__(self, attr, val):
        if self.__initialized and attr in _FIXED_AFTER_INIT:
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
        if not (self.persistent_workers and self.num_workers > 0):
            return self._get_iterator()
        if self._iterator is None:
            self._iterator = self._get_iterator()
        else:
            self._iterator._reset(self)  # keep the worker processes, start a new epoch
        return self._iterator

    def __len__(self):
        """The number of batches (for an IterableDataset: from ``len(dataset)``, if it has one).

        Raises:
            TypeError: if the dataset or sampler has no length.
        """
        if not self._is_iterable:
            return len(self._index_sampler)
        samples = len(self.dataset)
        if self.batch_size is None:
            return samples
        full_batches, remainder = divmod(samples, self.batch_size)
        return full_batches + (1 if remainder and not self.drop_last else 0)

    def _get_shared_seed(self):
        # The workers' base seed: one int64 draw from the loader's generator (or the default one).
        return int(ember.empty((), dtype=ember.int64).random_(generator=self.generator).item())

    def check_worker_number_rationality(self):
        """Accepted for PyTorch compatibility; ember does not warn about the worker count."""


class _BaseDataLoaderIter:
    """What both iterators share: the loader's configuration, the sampler iterator, and the count
    of batches handed out (to warn when an IterableDataset yields more than its ``len``)."""

    # Loader settings copied at creation (as ``_<name>``): changing them on the loader later does not
    # affect an iterator that is already running.
    _SNAPSHOT = (
        "dataset",
        "_is_iterable",
        "_auto_collation",
        "drop_last",
        "_index_sampler",
        "num_workers",
        "prefetch_factor",
        "timeout",
        "collate_fn",
        "persistent_workers",
    )

    def __init__(self, loader):
        for name in self._SNAPSHOT:
            setattr(self, "_" + name.lstrip("_"), getattr(loader, name))
        # Pinning happens in the main process, as each batch is handed out.
        self._pin_memory = bool(loader.pin_memory) and _pinning_available()
        self._base_seed = loader._get_shared_seed()
        self._indices = iter(self._index_sampler)
        self._yielded = 0

    def __iter__(self):
        return self

    def _reset(self, loader, first_iter=False):
        self._indices = iter(self._index_sampler)
        self._yielded = 0

    def _next_index(self):
        return next(self._indices)

    def _next_data(self):
        raise NotImplementedError

    def __next__(self):
        data = self._next_data()
        if self._pin_memory:
            data = _pin_memory(data)
        self._yielded += 1
        if self._is_iterable:
            self._warn_if_past_reported_length()
        return data

    def _warn_if_past_reported_length(self):
        # A common mistake with workers: each replica yields the whole dataset.
        try:
            length = len(self._dataset)
        except TypeError:  # no __len__, or one that refuses
            return
        if self._yielded > length:
            warnings.warn(
                f"Length of IterableDataset {self._dataset} was reported to be {length} (when accessing "
                f"len(dataloader)), but {self._yielded} samples have been fetched. For multiprocessing "
                "data-loading, this could be caused by not properly configuring the IterableDataset replica "
                "at each worker.",
                stacklevel=3,
            )

    def __len__(self):
        return len(self._index_sampler)


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._fetcher = _worker.create_fetcher(
            self._is_iterable, self._dataset, self._auto_collation, self._collate_fn, self._drop_last
        )

    def _next_data(self):
        # Both lines may raise StopIteration: the sampler is exhausted, or the IterableDataset is.
        return self._fetcher.fetch(self._next_index())


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

    Every batch is a numbered task. Each worker has its own index queue; all share one result
    queue. Up to ``prefetch_factor * num_workers`` tasks are in flight, each sent to the next
    worker that is still active, round-robin. A result that arrives before its turn waits in
    ``_early``. While waiting, the main process polls the workers' liveness, so a dead worker
    raises instead of hanging.
    """

    def __init__(self, loader):
        super().__init__(loader)
        context = loader.multiprocessing_context or _default_context()
        payload = (self._dataset, self._collate_fn, loader.worker_init_fn)
        if context.get_start_method() != "fork":
            # Tensors (e.g. a TensorDataset's) are not picklable: send the payload in the transfer format.
            payload = _worker.dumps(payload, share_memory=False)  # the same bytes go to every worker
        self._results = context.Queue()
        self._done_event = context.Event()
        self._shutdown = False
        self._index_queues = [context.Queue() for _ in range(self._num_workers)]
        self._workers = [
            self._start_worker(context, worker_id, payload, index_queue)
            for worker_id, index_queue in enumerate(self._index_queues)
        ]
        self._reset(loader, first_iter=True)

    def _start_worker(self, context, worker_id, payload, index_queue):
        # Our process may exit while the queue still holds indices: do not block on its feeder thread.
        index_queue.cancel_join_thread()
        worker = context.Process(
            target=_worker._worker_loop,
            args=(
                self._is_iterable,
                payload,
                index_queue,
                self._results,
                self._done_event,
                self._auto_collation,
                self._drop_last,
                self._base_seed,
                worker_id,
                self._num_workers,
                os.getpid(),
            ),
        )
        worker.daemon = True
        worker.start()
        return worker

    @property
    def _max_in_flight(self):
        return self._prefetch_factor * self._num_workers

    def _reset(self, loader, first_iter=False):
        super()._reset(loader, first_iter)
        self._next_task = 0  # number of the next task to send
        self._next_to_yield = 0  # number of the next task to hand to the user
        self._assigned = {}  # task -> worker, for tasks sent and not yet received
        self._early = {}  # task -> data, received before its turn
        self._in_flight = 0
        self._active = [True] * self._num_workers  # False once a worker's IterableDataset ran out
        self._worker_cycle = itertools.cycle(range(self._num_workers))
        if not first_iter:
            self._start_new_epoch(loader._get_shared_seed())
        for _ in range(self._max_in_flight):
            self._send_next_task()

    def _start_new_epoch(self, seed):
        """Persistent workers: tell each worker to start over, and drop what the last epoch left in
        the result queue until every worker has acknowledged."""
        for index_queue in self._index_queues:
            index_queue.put(_worker._ResumeIteration(seed))
        acknowledged = 0
        while acknowledged < self._num_workers:
            task, _ = self._get_data()
            if isinstance(task, _worker._ResumeIteration):
                acknowledged += 1

    def _check_workers(self):
        """Raise if a worker exited while we wait for it (the 'no hang' guarantee)."""
        for worker in self._workers:
            if not worker.is_alive() and not self._shutdown:
                description = _describe_exit(worker)
                self._shutdown_workers()
                raise RuntimeError(f"DataLoader worker (pid {worker.pid}) exited unexpectedly {description}.")

    def _get_data(self):
        """The next ``(task, data)`` from the result queue, decoded; raises on timeout or a dead worker."""
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        while True:
            wait = _worker.MP_STATUS_CHECK_INTERVAL
            if deadline is not None:
                wait = min(wait, max(deadline - time.monotonic(), 0.0))
            try:
                task, data = self._results.get(timeout=wait)
            except queue.Empty:
                self._check_workers()
                if deadline is not None and time.monotonic() >= deadline:
                    self._shutdown_workers()
                    raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds") from None
                continue
            if isinstance(data, bytes):
                try:
                    data = _worker.loads(data)
                except (OSError, EOFError) as exc:  # shared memory of a worker that died before handing it over
                    self._explain_lost_batch(task, exc)
            return task, data

    def _explain_lost_batch(self, task, exc):
        """Raise the error of a batch whose shared memory could not be attached: the sending worker's
        exit (it may take a moment to be seen, so wait for it) or, if it lives on, the attach error."""
        worker = self._workers[self._assigned[task]] if task in self._assigned else None
        if worker is not None:
            worker.join(timeout=10)
        self._check_workers()
        raise RuntimeError(f"DataLoader could not receive batch {task} from its worker: {exc}") from exc

    def _skip_tasks_of_ended_workers(self):
        """Advance past tasks sent to workers whose IterableDataset has ended: no result will come."""
        while self._next_to_yield < self._next_task:
            task = self._next_to_yield
            if task in self._early or self._active[self._assigned[task]]:
                return
            del self._assigned[task]
            self._next_to_yield += 1

    def _next_data(self):
        while True:
            self._skip_tasks_of_ended_workers()
            if self._next_to_yield == self._next_task:  # nothing left in flight
                if not self._persistent_workers:
                    self._shutdown_workers()
                raise StopIteration
            if self._next_to_yield in self._early:
                return self._hand_out(self._early.pop(self._next_to_yield))

            task, data = self._get_data()
            self._in_flight -= 1
            if self._is_iterable and isinstance(data, _worker._IterableDatasetStopIteration):
                self._active[data.worker_id] = False
                self._send_next_task()
                continue
            del self._assigned[task]
            if task == self._next_to_yield:
                return self._hand_out(data)
            self._early[task] = data

    def _next_active_worker(self):
        """The next worker in round-robin order that is still active, or None if none is."""
        for _ in range(self._num_workers):
            worker_id = next(self._worker_cycle)
            if self._active[worker_id]:
                return worker_id
        return None

    def _send_next_task(self):
        if self._in_flight >= self._max_in_flight:
            return
        try:
            indices = self._next_index()
        except StopIteration:
            return
        worker_id = self._next_active_worker()
        if worker_id is None:  # every worker's IterableDataset has ended
            return
        self._index_queues[worker_id].put((self._next_task, indices))
        self._assigned[self._next_task] = worker_id
        self._in_flight += 1
        self._next_task += 1

    def _hand_out(self, data):
        """Deliver the current task's result: refill the pipeline, re-raise a worker's error."""
        self._next_to_yield += 1
        self._send_next_task()
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
            self._done_event.set()
            for index_queue, worker in zip(self._index_queues, self._workers):
                if worker.is_alive():
                    index_queue.put(None)  # the "exit" message
            for worker in self._workers:
                worker.join(timeout=_worker.MP_STATUS_CHECK_INTERVAL * 10)
                if worker.is_alive():
                    worker.terminate()
                    worker.join(timeout=1.0)
            for q in (*self._index_queues, self._results):
                q.cancel_join_thread()
                q.close()
        except Exception:  # interpreter shutdown: queues/processes may already be torn down
            pass

    def __del__(self):
        self._shutdown_workers()
