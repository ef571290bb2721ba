"""ember.utils.data DataLoader and default_collate: batching, ordering, reproducibility, workers and their errors."""

import collections
import os
import random
import signal

import numpy as np
import pytest

import ember
from ember.utils.data import (
    DataLoader,
    Dataset,
    IterableDataset,
    SequentialSampler,
    TensorDataset,
    _worker,
    default_collate,
    default_convert,
    get_worker_info,
)

Point = collections.namedtuple("Point", ["x", "y"])


# -- datasets used by the worker tests (module level, so that 'spawn' could import them) ----------


class _Squares(Dataset):
    def __init__(self, n=12):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"x": ember.tensor([float(i), float(i * i)]), "i": i, "p": Point(np.int64(i), f"s{i}")}


class _RaisesAt(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 5:
            raise ValueError(f"bad sample {i}")
        return i


class _DiesAt(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 4:
            os._exit(7)
        return i


class _KilledAt(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 4:
            os.kill(os.getpid(), signal.SIGKILL)
        return i


class _Sleeps(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        import time

        time.sleep(5)
        return i


class _WorkerInfoDataset(Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        info = get_worker_info()
        return (info.id, info.num_workers, info.seed, random.random(), float(ember.rand(()).item()), np.random.rand())


class _ShardedRange(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))


# -- default_collate / default_convert ----------------------------------------------------------------


def test_default_collate_tensors_stack():
    out = default_collate([ember.tensor([1.0, 2.0]), ember.tensor([3.0, 4.0]), ember.tensor([5.0, 6.0])])
    assert out.shape == (3, 2)
    np.testing.assert_array_equal(out.numpy(), np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=np.float32))


def test_default_collate_numbers_and_numpy():
    f = default_collate([1.5, 2.5])
    assert f.dtype is ember.float64 and f.tolist() == [1.5, 2.5]
    i = default_collate([1, 2, 3])
    assert i.dtype is ember.int64 and i.tolist() == [1, 2, 3]
    b = default_collate([True, False])
    assert b.dtype is ember.bool and b.tolist() == [True, False]
    a = default_collate([np.arange(3, dtype=np.int32), np.arange(3, 6, dtype=np.int32)])
    assert a.dtype is ember.int32 and a.tolist() == [[0, 1, 2], [3, 4, 5]]
    s = default_collate([np.float32(1.0), np.float32(2.0)])
    assert s.dtype is ember.float32 and s.tolist() == [1.0, 2.0]
    assert default_collate(["a", "b"]) == ["a", "b"]


def test_default_collate_nested_structures():
    batch = [{"img": ember.tensor([float(k), 0.0]), "meta": (k, f"n{k}"), "pt": Point(k, [k, k + 1])} for k in range(3)]
    out = default_collate(batch)
    assert set(out) == {"img", "meta", "pt"}
    assert out["img"].tolist() == [[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]]
    # A tuple becomes a list (PyTorch's behaviour); strings stay as the tuple of the batch's strings.
    assert isinstance(out["meta"], list)
    assert out["meta"][0].tolist() == [0, 1, 2] and out["meta"][1] == ("n0", "n1", "n2")
    assert isinstance(out["pt"], Point)
    assert out["pt"].x.tolist() == [0, 1, 2]
    assert isinstance(out["pt"].y, list) and [t.tolist() for t in out["pt"].y] == [[0, 1, 2], [1, 2, 3]]


def test_default_collate_keeps_mapping_type():
    od = default_collate([collections.OrderedDict(a=1, b=2.0), collections.OrderedDict(a=3, b=4.0)])
    assert isinstance(od, collections.OrderedDict) and list(od) == ["a", "b"]
    assert od["a"].tolist() == [1, 3] and od["b"].tolist() == [2.0, 4.0]


def test_default_collate_errors():
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
        default_collate([[1, 2], [1]])
    with pytest.raises(TypeError, match="default_collate: batch must contain tensors, numpy arrays, numbers"):
        default_collate([object(), object()])
    with pytest.raises(TypeError, match="found <U1"):
        default_collate([np.array(["a"]), np.array(["b"])])


def test_default_convert():
    out = default_convert({"a": np.arange(3), "b": (np.float32(2.0), "s"), "t": ember.tensor([1])})
    assert out["a"].tolist() == [0, 1, 2] and out["a"].dtype is ember.int64
    assert isinstance(out["b"], list) and out["b"][0].item() == 2.0 and out["b"][1] == "s"
    assert out["t"].tolist() == [1]
    p = default_convert(Point(np.array([1.0]), 3))
    assert isinstance(p, Point) and p.x.tolist() == [1.0] and p.y == 3


# -- single-process DataLoader -------------------------------------------------------------------------


def _dataset(n=10):
    return TensorDataset(ember.arange(float(2 * n)).reshape(n, 2), ember.arange(n))


@pytest.mark.parametrize("n, bs, drop_last", [(10, 4, False), (10, 4, True), (10, 5, False), (3, 5, False)])
def test_batches_in_order(n, bs, drop_last):
    loader = DataLoader(_dataset(n), batch_size=bs, drop_last=drop_last)
    batches = [y.tolist() for _, y in loader]
    expected = [list(range(i, min(i + bs, n))) for i in range(0, n, bs)]
    if drop_last:
        expected = [b for b in expected if len(b) == bs]
    assert batches == expected
    assert len(loader) == len(expected)
    x, _ = next(iter(loader))
    np.testing.assert_array_equal(x.numpy(), np.arange(2.0 * n, dtype=np.float32).reshape(n, 2)[: len(expected[0])])


def test_no_auto_batching_converts_numpy():
    class D(Dataset):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return np.full(2, i)

    out = list(DataLoader(D(), batch_size=None))
    assert [t.tolist() for t in out] == [[0, 0], [1, 1], [2, 2]]
    assert all(isinstance(t, ember.Tensor) for t in out)


def test_shuffle_reproducible_with_generator():
    def order(seed):
        loader = DataLoader(_dataset(20), batch_size=5, shuffle=True, generator=ember.Generator().manual_seed(seed))
        return [i for _, y in loader for i in y.tolist()]

    assert order(0) == order(0)
    assert order(0) != order(1)
    assert sorted(order(0)) == list(range(20))


def test_shuffle_reproducible_with_manual_seed():
    loader = DataLoader(_dataset(20), batch_size=4, shuffle=True)
    ember.manual_seed(42)
    a = [y.tolist() for _, y in loader]
    ember.manual_seed(42)
    b = [y.tolist() for _, y in loader]
    ember.manual_seed(43)
    c = [y.tolist() for _, y in loader]
    assert a == b and a != c


def test_batch_sampler_and_custom_collate():
    loader = DataLoader(list(range(10)), batch_sampler=[[3, 1], [0, 9, 8]], collate_fn=lambda b: sum(b))
    assert list(loader) == [4, 17]
    assert len(loader) == 2


def test_iterable_dataset_single_process():
    loader = DataLoader(_ShardedRange(7), batch_size=3)
    assert [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5], [6]]
    loader = DataLoader(_ShardedRange(7), batch_size=3, drop_last=True)
    assert [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5]]


def test_argument_errors():
    ds = _dataset(4)
    with pytest.raises(ValueError, match="num_workers option should be non-negative"):
        DataLoader(ds, num_workers=-1)
    with pytest.raises(ValueError, match="timeout option should be non-negative"):
        DataLoader(ds, timeout=-1)
    with pytest.raises(ValueError, match="prefetch_factor option could only be specified in multiprocessing"):
        DataLoader(ds, prefetch_factor=2)
    with pytest.raises(ValueError, match="persistent_workers option needs num_workers > 0"):
        DataLoader(ds, persistent_workers=True)
    with pytest.raises(ValueError, match="sampler option is mutually exclusive with shuffle"):
        DataLoader(ds, sampler=SequentialSampler(ds), shuffle=True)
    with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive"):
        DataLoader(ds, batch_sampler=[[0]], batch_size=2)
    with pytest.raises(ValueError, match="batch_size=None option disables auto-batching"):
        DataLoader(ds, batch_size=None, drop_last=True)
    with pytest.raises(ValueError, match="expected unspecified shuffle option, but got shuffle=True"):
        DataLoader(_ShardedRange(3), shuffle=True)
    loader = DataLoader(ds)
    with pytest.raises(ValueError, match="batch_size attribute should not be set after DataLoader is initialized"):
        loader.batch_size = 3
    assert loader.pin_memory is False and DataLoader(ds, pin_memory=True).pin_memory is True


# -- worker processes -------------------------------------------------------------------------------


def _flatten(batches):
    return [(b["x"].tolist(), b["i"].tolist(), b["p"].x.tolist(), b["p"].y) for b in batches]


@pytest.mark.parametrize("num_workers", [1, 3])
def test_workers_match_single_process(num_workers):
    single = list(DataLoader(_Squares(), batch_size=5))
    multi = list(DataLoader(_Squares(), batch_size=5, num_workers=num_workers))
    assert _flatten(multi) == _flatten(single)
    assert isinstance(multi[0]["p"], Point)
    assert multi[0]["x"].dtype is ember.float32 and multi[0]["i"].dtype is ember.int64


def test_workers_shuffled_same_as_single_process():
    def run(workers):
        loader = DataLoader(
            _dataset(13), batch_size=3, shuffle=True, num_workers=workers, generator=ember.Generator().manual_seed(9)
        )
        return [(x.tolist(), y.tolist()) for x, y in loader]

    assert run(2) == run(0)


def test_spawn_context_with_tensor_dataset():
    loader = DataLoader(_dataset(6), batch_size=4, num_workers=1, multiprocessing_context="spawn")
    assert [y.tolist() for _, y in loader] == [[0, 1, 2, 3], [4, 5]]


def test_worker_info_and_seeding():
    loader = DataLoader(
        _WorkerInfoDataset(),
        batch_size=None,
        num_workers=2,
        generator=ember.Generator().manual_seed(5),
    )
    base_seed = int(ember.empty((), dtype=ember.int64).random_(generator=ember.Generator().manual_seed(5)).item())
    rows = [tuple(t.item() if isinstance(t, ember.Tensor) else t for t in row) for row in loader]
    # Task k goes to worker k % 2; each worker is seeded with base_seed + id.
    assert [r[0] for r in rows] == [0, 1, 0, 1, 0, 1]
    assert all(r[1] == 2 for r in rows)
    assert [r[2] for r in rows[:2]] == [base_seed, base_seed + 1]
    for worker_id in (0, 1):
        seed = base_seed + worker_id
        py = random.Random(seed)
        g = ember.Generator().manual_seed(seed)
        npr = np.random.RandomState(_worker._generate_state(base_seed, worker_id))
        mine = rows[worker_id::2]
        assert [r[3] for r in mine] == [py.random() for _ in mine]
        assert [r[4] for r in mine] == [float(ember.rand((), generator=g).item()) for _ in mine]
        assert [r[5] for r in mine] == [npr.rand() for _ in mine]


def test_worker_init_fn_runs_in_each_worker():
    def init(worker_id):
        np.random.seed(1000 + worker_id)

    class D(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return (get_worker_info().id, np.random.randint(0, 10**6))

    rows = [(w, v) for w, v in DataLoader(D(), batch_size=None, num_workers=2, worker_init_fn=init)]
    for w in (0, 1):
        rs = np.random.RandomState(1000 + w)
        assert [v for wid, v in rows if wid == w] == [rs.randint(0, 10**6) for _ in range(2)]


def test_iterable_dataset_sharded_across_workers():
    loader = DataLoader(_ShardedRange(10), batch_size=2, num_workers=3)
    batches = [b.tolist() for b in loader]
    # Worker w yields w, w+3, ...; batches alternate between workers until they run out.
    assert batches == [[0, 3], [1, 4], [2, 5], [6, 9], [7], [8]]
    assert sorted(i for b in batches for i in b) == list(range(10))


def test_persistent_workers_two_epochs():
    loader = DataLoader(_dataset(9), batch_size=4, num_workers=2, persistent_workers=True)
    first = [y.tolist() for _, y in loader]
    workers = list(loader._iterator._workers)
    second = [y.tolist() for _, y in loader]
    assert first == second == [[0, 1, 2, 3], [4, 5, 6, 7], [8]]
    assert loader._iterator._workers == workers and all(w.is_alive() for w in workers)
    loader._iterator._shutdown_workers()


def test_worker_exception_reraised_with_worker_id_and_traceback():
    loader = DataLoader(_RaisesAt(), batch_size=2, num_workers=2)
    with pytest.raises(ValueError) as info:
        list(loader)
    msg = str(info.value)
    # Indices 4, 5 are batch 2, which goes to worker 0.
    assert msg.startswith("Caught ValueError in DataLoader worker process 0.")
    assert "Original Traceback (most recent call last):" in msg
    assert "ValueError: bad sample 5" in msg
    assert "__getitem__" in msg


class _TwoArgError(Exception):
    def __init__(self, a, b):
        super().__init__(a, b)


def test_worker_exception_of_unbuildable_type_becomes_runtime_error():
    class D(Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            raise _TwoArgError(1, 2)

    with pytest.raises(RuntimeError, match="Caught _TwoArgError in DataLoader worker process 0"):
        list(DataLoader(D(), num_workers=1))


def test_worker_exception_of_unpicklable_type_becomes_runtime_error():
    class LocalError(Exception):
        pass

    class D(Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            raise LocalError("local")

    with pytest.raises(RuntimeError, match="(?s)Caught LocalError in DataLoader worker process 0.*LocalError: local"):
        list(DataLoader(D(), num_workers=1))


def test_unpicklable_batch_reported():
    class D(Dataset):
        def __len__(self):
            return 1

        def __getitem__(self, i):
            return lambda: i

    with pytest.raises(Exception, match="in DataLoader worker process 0 while sending its batch to the main process"):
        list(DataLoader(D(), batch_size=None, num_workers=1))


def test_worker_exit_raises_instead_of_hanging():
    loader = DataLoader(_DiesAt(), batch_size=2, num_workers=2, timeout=20)
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid \d+\) exited unexpectedly with exit code 7"):
        list(loader)


def test_worker_killed_by_signal():
    with pytest.raises(
        RuntimeError, match=r"DataLoader worker \(pid \d+\) exited unexpectedly \(killed by signal: SIGKILL\)"
    ):
        list(DataLoader(_KilledAt(), batch_size=2, num_workers=1))


def test_timeout():
    loader = DataLoader(_Sleeps(), num_workers=1, timeout=0.3)
    with pytest.raises(RuntimeError, match=r"DataLoader timed out after 0.3 seconds"):
        next(iter(loader))


def test_transfer_format_round_trip():
    obj = {"t": ember.tensor([1.5, 2.5], dtype=ember.bfloat16), "p": Point(ember.tensor([True]), np.arange(2))}
    back = _worker.loads(_worker.dumps(obj))
    assert back["t"].dtype is ember.bfloat16 and back["t"].tolist() == [1.5, 2.5]
    assert isinstance(back["p"], Point) and back["p"].x.dtype is ember.bool and back["p"].x.tolist() == [True]
    assert isinstance(back["p"].y, np.ndarray)  # numpy arrays stay numpy arrays


@pytest.mark.parity
def test_generate_state_matches_pytorch():
    from torch.utils.data._utils.worker import _generate_state as torch_generate_state

    for base_seed, worker_id in [(0, 0), (12345, 3), (2**63 - 1, 7), (987654321987, 1)]:
        assert _worker._generate_state(base_seed, worker_id) == torch_generate_state(base_seed, worker_id)
