"""``spawn`` and ``start_processes``: run a function in several processes and join them."""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import signal
import time
import traceback

__all__ = ["ProcessContext", "ProcessException", "ProcessRaisedException", "ProcessExitedException",
           "spawn", "start_processes"]


class ProcessException(Exception):
    """A process of a :class:`ProcessContext` failed."""

    def __init__(self, msg, error_index, error_pid):
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.pid = error_pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """The function raised in process ``error_index``; the message holds its traceback."""


class ProcessExitedException(ProcessException):
    """Process ``error_index`` exited with ``exit_code`` (killed by ``signal_name`` when negative)."""

    def __init__(self, msg, error_index, error_pid, exit_code, signal_name=None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code, self.signal_name)


def _wrap(fn, i, args, error_queue):
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass
    except Exception:
        error_queue.put(traceback.format_exc())
        raise SystemExit(1) from None


class ProcessContext:
    """The processes :func:`start_processes` started, and their error queues."""

    def __init__(self, processes, error_queues):
        self.processes = processes
        self.error_queues = error_queues
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self):
        return [p.pid for p in self.processes]

    def join(self, timeout=None):
        """Wait for the processes; True once all have exited, False if ``timeout`` (seconds) passed.

        When one fails, the others are terminated and its error raised.

        Raises:
            ProcessRaisedException: a process's function raised (its traceback in the message).
            ProcessExitedException: a process exited with a non-zero code or was killed.
        """
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(list(self.sentinels), timeout=timeout)
        failed = None
        for sentinel in ready:
            index = self.sentinels.pop(sentinel)
            process = self.processes[index]
            process.join()
            if process.exitcode != 0 and failed is None:
                failed = index
        if failed is None:
            return not self.sentinels
        for process in self.processes:  # one failed: stop the rest
            if process.is_alive():
                process.terminate()
            process.join(timeout=30)
        self.sentinels.clear()
        process = self.processes[failed]
        if not self.error_queues[failed].empty():
            text = self.error_queues[failed].get()
            msg = f"\n\n-- Process {failed} terminated with the following error:\n{text}"
            raise ProcessRaisedException(msg, failed, process.pid)
        code = process.exitcode
        if code < 0:
            name = signal.Signals(-code).name
            raise ProcessExitedException(f"process {failed} terminated with signal {name}", failed, process.pid,
                                         code, name)
        raise ProcessExitedException(f"process {failed} terminated with exit code {code}", failed, process.pid, code)


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Run ``fn(i, *args)`` for ``i`` in ``range(nprocs)``, each in its own process.

    Args:
        fn (Callable): a function importable by the children (module level for 'spawn').
        args (tuple): arguments after the process index.
        nprocs (int): number of processes.
        join (bool): wait for all (raising the first failure) before returning.
        daemon (bool): daemonic processes.
        start_method (str): 'spawn', 'fork' or 'forkserver'.

    Returns:
        ProcessContext or None: the context when ``join`` is False.

    Raises:
        ValueError: for ``nprocs < 1`` or an unknown start method.
        ProcessRaisedException, ProcessExitedException: see :meth:`ProcessContext.join`.
    """
    if type(nprocs) is not int or nprocs < 1:
        raise ValueError(f"start_processes: nprocs must be an int >= 1, got {nprocs!r}")
    if start_method not in multiprocessing.get_all_start_methods():
        raise ValueError(f"start_processes: start_method must be one of {multiprocessing.get_all_start_methods()}, "
                         f"got {start_method!r}")
    from . import _shared

    _shared.init_reductions()
    context = multiprocessing.get_context(start_method)
    processes, error_queues = [], []
    for i in range(nprocs):
        error_queue = context.SimpleQueue()
        process = context.Process(target=_wrap, args=(fn, i, tuple(args), error_queue), daemon=daemon)
        process.start()
        processes.append(process)
        error_queues.append(error_queue)
    result = ProcessContext(processes, error_queues)
    if not join:
        return result
    while not result.join():
        time.sleep(0)
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """:func:`start_processes` with a start method ('spawn' by default), as ``torch.multiprocessing.spawn``."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)
