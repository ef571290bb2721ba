"""What runs inside DataLoader worker processes, and the format their results travel in.

A worker process runs :func:`_worker_loop`: it seeds its random number
generators, sets up :func:`get_worker_info`, then takes ``(task_idx, index)``
pairs from its own index queue, fetches and collates the batch, and puts
``(task_idx, payload)`` on the shared result queue. ``None`` on the index
queue means "shut down"; a :class:`_ResumeIteration` means "a new epoch
starts" (persistent workers).

Transfer format
---------------
Ember tensors are deliberately not picklable (``pickle.dumps(tensor)`` raises;
``ember.save`` is the way to persist them). Results crossing the process
boundary therefore go through :func:`dumps`/:func:`loads`: a pickler whose
``reducer_override`` sends each tensor as ``(numpy array, dtype name, device,
requires_grad)`` and rebuilds it in the receiving process with
``ember.from_numpy``. Everything else (dicts, tuples, namedtuples, lists,
custom objects holding tensors) pickles as usual, so the batch's structure
arrives intact. The same format carries the dataset, ``collate_fn`` and
``worker_init_fn`` to workers started with 'spawn'/'forkserver'.

CPU tensors (not part of a graph) go through shared memory instead
(:func:`ember.multiprocessing._shared.reduce_tensor`): the tensor moves into a
shared mapping and only its handle, dtype, shape and strides are pickled; the
main process maps the same memory. Workers stay alive until every result they
sent has been decoded (the main process decodes each result as it takes it).
"""

from __future__ import annotations

import io
import os
import pickle
import queue
import random
import sys
import traceback

import numpy as np

import ember
from ember._tensor import Tensor

__all__ = ["WorkerInfo", "get_worker_info"]

# How often (seconds) a blocked worker or main process wakes up to check on the other side.
MP_STATUS_CHECK_INTERVAL = 0.1

_worker_info = None


class WorkerInfo:
    """What a DataLoader worker process knows about itself (see :func:`get_worker_info`).

    Attributes:
        id (int): this worker's id, in ``[0, num_workers - 1]``.
        num_workers (int): the number of workers.
        seed (int): the seed of this worker's ``ember`` and ``random`` generators (``base_seed + id``).
        dataset: this process's copy of the dataset.

    Raises:
        RuntimeError: on assignment to an attribute (the object is read-only).
    """

    __initialized = False

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)
        self.__keys = tuple(kwargs.keys())
        self.__initialized = True

    def __setattr__(self, key, val):
        if self.__initialized:
            raise RuntimeError(f"Cannot assign attributes to {self.__class__.__name__} objects")
        return super().__setattr__(key, val)

    def __repr__(self):
        items = [f"{k}={getattr(self, k)}" for k in self.__keys]
        return f"{self.__class__.__name__}({', '.join(items)})"


def get_worker_info():
    """Who am I? A worker process gets its id, the worker count, its seed and its dataset copy; the
    main process gets ``None``.

    Use it in a dataset's ``__iter__`` (to shard an :class:`IterableDataset`
    across workers) or in ``worker_init_fn``.

    Returns:
        WorkerInfo or None: ``id``, ``num_workers``, ``seed`` and ``dataset`` of this worker.

    Example:
        >>> from ember.utils.data import get_worker_info
        >>> get_worker_info() is None  # the main process
        True
    """
    return _worker_info


# -- transfer format ---------------------------------------------------------------


def _rebuild_tensor(array, dtype_name, device, requires_grad):
    tensor = ember.from_numpy(array)
    dtype = getattr(ember, dtype_name)
    if tensor.dtype is not dtype:
        tensor = tensor.to(dtype)
    if device != "cpu":
        tensor = tensor.to(device)
    if requires_grad:
        tensor.requires_grad_(True)
    return tensor


def _dtype_name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


class _TransferPickler(pickle.Pickler):
    """A pickler that sends ember tensors as numpy arrays or shared memory (see the module docstring)."""

    share_memory = True

    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            if self.share_memory and SHARE_MEMORY and obj._device.type == "cpu" and obj._grad_fn is None:
                from ember.multiprocessing._shared import reduce_tensor

                return reduce_tensor(obj)  # only a handle travels; the receiver maps the same memory
            array = np.ascontiguousarray(obj.detach().cpu().numpy())
            return _rebuild_tensor, (array, _dtype_name(obj.dtype), str(obj.device), bool(obj.requires_grad))
        return NotImplemented


#: CPU tensors travel through shared memory (ember.multiprocessing) rather than as pickled copies.
SHARE_MEMORY = True


def dumps(obj, share_memory=True):
    """``obj`` as bytes in the transfer format. With ``share_memory`` (for bytes one process decodes
    once: a file descriptor is handed over once), CPU tensors travel in shared memory; else as copies."""
    buffer = io.BytesIO()
    pickler = _TransferPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.share_memory = share_memory
    pickler.dump(obj)
    return buffer.getvalue()


def loads(data):
    """The object :func:`dumps` encoded, with its tensors rebuilt as ember tensors."""
    return pickle.loads(data)


# -- errors ------------------------------------------------------------------------


class KeyErrorMessage(str):
    """A string whose repr is itself, so that a KeyError's multi-line message prints readably."""

    def __repr__(self):
        return self


class ExceptionWrapper:
    """An exception caught in a worker, carried to the main process with its traceback as text.

    Args:
        exc_info (tuple): ``sys.exc_info()`` of the exception.
        where (str): where it happened, e.g. ``"in DataLoader worker process 0"``.
    """

    def __init__(self, exc_info=None, where="in background"):
        if exc_info is None:
            exc_info = sys.exc_info()
        self.exc_type = exc_info[0]
        self.exc_type_name = exc_info[0].__name__
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self):
        """Raise the exception again, as ``exc_type`` (or RuntimeError if it can't be built from a message)."""
        msg = f"Caught {self.exc_type_name} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            msg = KeyErrorMessage(msg)
        elif getattr(self.exc_type, "message", None):
            raise self.exc_type(message=msg)
        try:
            exception = self.exc_type(msg)
        except Exception:
            raise RuntimeError(msg) from None
        raise exception


# -- markers exchanged between the main process and workers ------------------------


class _IterableDatasetStopIteration:
    """Sent by a worker whose IterableDataset is exhausted."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


class _ResumeIteration:
    """Sent to persistent workers at the start of a new epoch; echoed back once received."""

    def __init__(self, seed=None):
        self.seed = seed


# -- fetchers ----------------------------------------------------------------------


class _MapDatasetFetcher:
    """Looks samples up by index: one index, or a list of them (a batch) when auto-collating."""

    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last  # the batch sampler already dropped the short batch

    def _samples(self, indices):
        # A dataset may fetch a whole batch at once (``__getitems__``), e.g. with one vectorised read.
        fetch_many = getattr(self.dataset, "__getitems__", None)
        if callable(fetch_many):
            return fetch_many(indices)
        return [self.dataset[i] for i in indices]

    def fetch(self, possibly_batched_index):
        if self.auto_collation:
            return self.collate_fn(self._samples(possibly_batched_index))
        return self.collate_fn(self.dataset[possibly_batched_index])


class _IterableDatasetFetcher:
    """Draws the next samples from the dataset's iterator; the 'indices' only say how many."""

    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.dataset_iter = iter(dataset)
        self.ended = False

    def _next_batch(self, size):
        """Up to ``size`` samples; fewer (and ``ended`` set) when the iterator runs out."""
        batch = []
        while len(batch) < size:
            try:
                batch.append(next(self.dataset_iter))
            except StopIteration:
                self.ended = True
                break
        return batch

    def fetch(self, possibly_batched_index):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.dataset_iter))
        wanted = len(possibly_batched_index)
        batch = self._next_batch(wanted)
        if not batch or (self.drop_last and len(batch) < wanted):
            raise StopIteration
        return self.collate_fn(batch)


def create_fetcher(is_iterable, dataset, auto_collation, collate_fn, drop_last):
    """The fetcher that turns an index (or batch of indices) into a collated batch."""
    cls = _IterableDatasetFetcher if is_iterable else _MapDatasetFetcher
    return cls(dataset, auto_collation, collate_fn, drop_last)


# -- seeding -----------------------------------------------------------------------


def _generate_state(base_seed, worker_id):
    """A 4-word numpy seed for worker ``worker_id``, mixed from ``base_seed`` (PyTorch's algorithm).

    This is the entropy-pool mixing of numpy's ``SeedSequence`` (after
    M. E. O'Neill's ``seed_seq_fe``), applied to ``[worker_id, base_seed low
    32 bits, base_seed high 32 bits, 0]``, as ``torch.utils.data._utils.worker``
    does, so workers' numpy streams are uncorrelated even for adjacent seeds.
    """
    init_a, mult_a = 0x43B0D7E5, 0x931E8875
    init_b, mult_b = 0x8B51F9DD, 0x58F38DED
    mix_mult_l, mix_mult_r = 0xCA01F9DD, 0x4973F715
    xshift = 4 * 8 // 2
    mask32 = 0xFFFFFFFF

    entropy = [worker_id, base_seed & mask32, base_seed >> 32, 0]
    pool = [0] * 4
    hash_const_a = init_a

    def hash_(value):
        nonlocal hash_const_a
        value = (value ^ hash_const_a) & mask32
        hash_const_a = (hash_const_a * mult_a) & mask32
        value = (value * hash_const_a) & mask32
        value = (value ^ (value >> xshift)) & mask32
        return value

    def mix(x, y):
        result = ((mix_mult_l * x) & mask32) - ((mix_mult_r * y) & mask32)
        result &= mask32
        return (result ^ (result >> xshift)) & mask32

    for i in range(len(pool)):
        pool[i] = hash_(entropy[i])
    for i_src in range(len(pool)):
        for i_dst in range(len(pool)):
            if i_src != i_dst:
                pool[i_dst] = mix(pool[i_dst], hash_(pool[i_src]))

    hash_const_b = init_b
    state = []
    for i_dst in range(4):
        value = (pool[i_dst] ^ hash_const_b) & mask32
        hash_const_b = (hash_const_b * mult_b) & mask32
        value = (value * hash_const_b) & mask32
        value = (value ^ (value >> xshift)) & mask32
        state.append(value)
    return state


def _seed_worker(base_seed, worker_id):
    """Seed ``random`` and ember's default generator with ``base_seed + worker_id``, numpy's with a mixed state."""
    seed = base_seed + worker_id
    random.seed(seed)
    ember.manual_seed(seed)
    np.random.seed(_generate_state(base_seed, worker_id))
    return seed


# -- the worker loop ---------------------------------------------------------------


def _worker_loop(
    is_iterable,
    payload,
    index_queue,
    data_queue,
    done_event,
    auto_collation,
    drop_last,
    base_seed,
    worker_id,
    num_workers,
    parent_pid,
):
    """The body of a worker process (see the module docstring).

    ``payload`` is ``(dataset, collate_fn, worker_init_fn)``, either as the
    objects themselves ('fork') or as transfer-format bytes ('spawn').
    """
    global _worker_info
    try:
        if isinstance(payload, bytes):
            payload = loads(payload)
        dataset, collate_fn, init_fn = payload
        seed = _seed_worker(base_seed, worker_id)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)

        where = f"in DataLoader worker process {worker_id}"
        init_exception = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = create_fetcher(is_iterable, dataset, auto_collation, collate_fn, drop_last)
        except Exception:
            init_exception = ExceptionWrapper(where=where)

        iteration_end = False
        while True:
            if os.getppid() != parent_pid:  # the main process is gone: nobody will read our results
                break
            try:
                r = index_queue.get(timeout=MP_STATUS_CHECK_INTERVAL)
            except queue.Empty:
                continue
            if isinstance(r, _ResumeIteration):
                data_queue.put((r, None))
                iteration_end = False
                if r.seed is not None:
                    seed = _seed_worker(r.seed, worker_id)
                if init_exception is None:
                    fetcher = create_fetcher(is_iterable, dataset, auto_collation, collate_fn, drop_last)
                continue
            if r is None or done_event.is_set():
                break
            if iteration_end:
                continue
            idx, index = r
            if init_exception is not None:
                data, init_exception = init_exception, None
            else:
                try:
                    data = fetcher.fetch(index)
                except Exception as e:
                    if isinstance(e, StopIteration) and is_iterable:
                        data = _IterableDatasetStopIteration(worker_id)
                        iteration_end = True
                    else:
                        data = ExceptionWrapper(where=where)
            try:
                encoded = dumps(data)
            except Exception:
                if isinstance(data, ExceptionWrapper):
                    # The exception's class can't be pickled (e.g. defined in a function): send it as a
                    # RuntimeError whose message still names the original type and carries its traceback.
                    data.exc_type = RuntimeError
                else:
                    data = ExceptionWrapper(where=f"{where} while sending its batch to the main process")
                encoded = dumps(data)
            data_queue.put((idx, encoded))
            del data, r
    except KeyboardInterrupt:
        pass
    if done_event.is_set():
        data_queue.cancel_join_thread()
        data_queue.close()
