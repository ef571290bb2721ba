"""ember.multiprocessing: tensors shared between processes, spawn's errors, sharing strategies.

Every wait has a timeout, and a SIGALRM guard fails any test that runs past 60 s, so a broken
child can never hang the suite.
"""

import os
import signal

import numpy as np
import pytest

import ember
import ember.multiprocessing as mp

WAIT = 30  # seconds any single wait may take


@pytest.fixture(autouse=True)
def _hard_timeout():
    def expire(signum, frame):
        raise TimeoutError("multiprocessing test ran past its 60 s guard")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture(params=["file_descriptor", "file_system"])
def strategy(request):
    if request.param not in mp.get_all_sharing_strategies():
        pytest.skip(f"{request.param} is not supported on this platform")
    previous = mp.get_sharing_strategy()
    mp.set_sharing_strategy(request.param)
    yield request.param
    mp.set_sharing_strategy(previous)


def _run(ctx, target, args):
    process = ctx.Process(target=target, args=args)
    process.start()
    return process


def _finish(process):
    process.join(WAIT)
    if process.is_alive():
        process.terminate()
        process.join(WAIT)
        pytest.fail("child process did not finish in time")
    assert process.exitcode == 0


# children (module level: 'spawn' imports them)

def _fill(queue, done):
    t = queue.get(timeout=WAIT)
    t.fill_(7.0)
    done.set()


def _add_and_return(inbox, outbox, release):
    t = inbox.get(timeout=WAIT)
    t.add_(100)
    outbox.put(t[1:3])  # a view: only its handle, shape, strides and offset travel
    release.wait(WAIT)  # the receiver must take the handle before the sender exits


def _raise(index, message):
    if index == 1:
        raise ValueError(message)


def _exit(index, code):
    os._exit(code if index == 0 else 0)


def _write_rank(index, shared):
    shared[index] = index + 1


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_tensor_written_by_a_child_is_seen_by_the_parent(method, strategy):
    ctx = mp.get_context(method)
    queue, done = ctx.Queue(), ctx.Event()
    t = ember.zeros(5)
    process = _run(ctx, _fill, (queue, done))
    queue.put(t)
    assert done.wait(WAIT)
    _finish(process)
    assert t.is_shared()
    np.testing.assert_array_equal(t.numpy(), np.full(5, 7.0, np.float32))


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_queues_of_tensors_both_ways(method, strategy):
    ctx = mp.get_context(method)
    inbox, outbox, release = ctx.Queue(), ctx.Queue(), ctx.Event()
    t = ember.arange(12, dtype=ember.float64).reshape(3, 4)[:, 1]  # a strided view
    process = _run(ctx, _add_and_return, (inbox, outbox, release))
    inbox.put(t)
    back = outbox.get(timeout=WAIT)
    release.set()
    _finish(process)
    np.testing.assert_array_equal(t.numpy(), [101.0, 105.0, 109.0])
    assert back.dtype == ember.float64 and back.is_shared()
    np.testing.assert_array_equal(back.numpy(), [105.0, 109.0])
    back.add_(1)  # the same memory as t
    np.testing.assert_array_equal(t.numpy(), [101.0, 106.0, 110.0])


def test_share_memory_moves_the_data_in_place():
    t = ember.arange(6.0).reshape(2, 3)
    assert not t.is_shared()
    assert t.share_memory_() is t
    assert t.is_shared()
    np.testing.assert_array_equal(t.numpy(), np.arange(6.0).reshape(2, 3))
    t.share_memory_()  # again: a no-op
    assert t.is_shared()


def test_only_handles_are_pickled():
    from multiprocessing.reduction import ForkingPickler

    t = ember.zeros(1_000_000)  # 4 MB of data
    assert len(ForkingPickler.dumps(t)) < 2000


def test_non_leaf_tensors_that_require_grad_are_refused():
    from multiprocessing.reduction import ForkingPickler

    x = ember.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="non-leaf"):
        ForkingPickler.dumps(x * 2)


def test_spawn_joins_processes_writing_shared_memory():
    shared = ember.zeros(3, dtype=ember.int64).share_memory_()
    mp.spawn(_write_rank, args=(shared,), nprocs=3, start_method="fork")
    np.testing.assert_array_equal(shared.numpy(), [1, 2, 3])


def test_spawn_surfaces_an_exception():
    with pytest.raises(mp.ProcessRaisedException, match="ValueError: boom") as info:
        mp.spawn(_raise, args=("boom",), nprocs=2)
    assert info.value.error_index == 1


def test_spawn_surfaces_an_exit_code():
    context = mp.start_processes(_exit, args=(3,), nprocs=2, join=False, start_method="fork")
    with pytest.raises(mp.ProcessExitedException, match="exit code 3") as info:
        while not context.join(timeout=WAIT):
            pass
    assert info.value.exit_code == 3 and info.value.error_index == 0


def test_sharing_strategies_and_names():
    assert mp.get_sharing_strategy() in mp.get_all_sharing_strategies()
    with pytest.raises(ValueError, match="new_strategy"):
        mp.set_sharing_strategy("nope")
    for name in ("Process", "Queue", "SimpleQueue", "Pool", "get_context", "set_start_method", "cpu_count"):
        assert hasattr(mp, name)
    with pytest.raises(ValueError, match="nprocs"):
        mp.spawn(_raise, nprocs=0)


def test_dataloader_workers_send_batches_through_shared_memory():
    from ember.utils.data import DataLoader, TensorDataset

    data = TensorDataset(ember.arange(40.0).reshape(10, 4), ember.arange(10))
    loader = DataLoader(data, batch_size=4, num_workers=2, multiprocessing_context="fork", timeout=WAIT)
    batches = list(loader)
    assert [b[0].is_shared() for b in batches] == [True, True, True]
    np.testing.assert_array_equal(ember.cat([b[0] for b in batches]).numpy(), np.arange(40.0).reshape(10, 4))
    np.testing.assert_array_equal(ember.cat([b[1] for b in batches]).numpy(), np.arange(10))


def test_tensors_off_the_cpu_are_refused():
    from multiprocessing.reduction import ForkingPickler

    with pytest.raises(RuntimeError, match="CPU tensors only"):
        ForkingPickler.dumps(ember.ones(3, device="meta"))


def test_pool_results_come_back_shared():
    with mp.get_context("fork").Pool(2) as pool:
        results = pool.map(_arange, [2, 3], chunksize=1)
        # the workers are alive until the pool closes: their memory was handed over on receipt
        assert [r.tolist() for r in results] == [[0.0, 1.0], [0.0, 1.0, 2.0]]
        assert all(r.is_shared() for r in results)


def _arange(n):
    return ember.arange(float(n))
