"""``ember.profiler.profile``: PyTorch's profiler API over :mod:`._recorder`."""

from __future__ import annotations

import enum
import os
import socket
import time

from ._events import EventList, build_events
from ._export import export_chrome_trace, export_stacks
from ._recorder import Recorder
from ._schedule import ProfilerAction, _always_record

__all__ = ["ProfilerActivity", "profile", "tensorboard_trace_handler", "supported_activities"]


class ProfilerActivity(enum.Enum):
    """What to profile: calls on the CPU, and the time of cuda ops measured with CUDA events."""

    CPU = 0
    CUDA = 1
    XPU = 2
    MTIA = 3


def _cuda_available():
    try:
        from .. import cuda

        return cuda.is_available()
    except Exception:  # a broken cuda install must not break CPU profiling
        return False


def supported_activities():
    """The activities this build can profile."""
    return {ProfilerActivity.CPU} | ({ProfilerActivity.CUDA} if _cuda_available() else set())


_RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


class profile:
    """Record the ops, backward nodes and :class:`record_function` blocks run inside it.

    A context manager (or :meth:`start`/:meth:`stop`). With a ``schedule``, call :meth:`step` at the
    end of each training step; the steps the schedule marks as recorded are recorded, and
    ``on_trace_ready(prof)`` is called at the end of each recorded cycle (without a schedule: once,
    when the profiler stops). Only the thread that starts the profiler is recorded.

    Args:
        activities (Iterable[ProfilerActivity], optional): CPU, CUDA; default: CPU, and CUDA when a
            cuda device is available. With CUDA, cuda ops are timed with CUDA events.
        schedule (Callable[[int], ProfilerAction], optional): see :func:`ember.profiler.schedule`.
        on_trace_ready (Callable[[profile], None], optional): called with the profiler when a
            recorded cycle ends (see :func:`tensorboard_trace_handler`).
        record_shapes (bool): record the shapes of ops' tensor arguments.
        profile_memory (bool): record the bytes of the new tensors each op returns (allocations
            only: frees are not tracked).
        with_stack (bool): record the Python frames (outside ember) of each call.
        with_flops (bool): count the floating-point operations of the matrix products.
        with_modules (bool): accepted for PyTorch's signature; module hierarchy is not recorded.

    Raises:
        TypeError: for an activity that is not a :class:`ProfilerActivity`.
        ValueError: for an activity this build cannot profile.

    Example::

        >>> with ember.profiler.profile(record_shapes=True) as prof:
        ...     y = ember.ones(4, 4) @ ember.ones(4, 4)
        >>> print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=5))
    """

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, execution_trace_observer=None, acc_events=False,
                 custom_trace_id_callback=None):
        if activities is None:
            activities = supported_activities()
        activities = set(activities)
        for activity in activities:
            if not isinstance(activity, ProfilerActivity):
                raise TypeError(f"profile: activities must be ProfilerActivity values, got {activity!r}")
            if activity not in (ProfilerActivity.CPU, ProfilerActivity.CUDA):
                raise ValueError(f"profile: activity {activity} is not supported by ember")
        if schedule is not None and not callable(schedule):
            raise TypeError(f"profile: schedule must be callable, got {type(schedule).__name__}")
        if on_trace_ready is not None and not callable(on_trace_ready):
            raise TypeError(f"profile: on_trace_ready must be callable, got {type(on_trace_ready).__name__}")
        self.activities = activities
        self.schedule = schedule if schedule is not None else _always_record
        self.on_trace_ready = on_trace_ready
        self.record_shapes = bool(record_shapes)
        self.profile_memory = bool(profile_memory)
        self.with_stack = bool(with_stack)
        self.with_flops = bool(with_flops)
        self.with_modules = bool(with_modules)
        self.step_num = 0
        self.current_action = None
        self._recorder = None
        self._step_span = None
        self._events = None
        self._finished = None  # the recorder of the last finished recording, until its events are built
        self._origin_us = 0.0

    # -- lifecycle -----------------------------------------------------------------------------------

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        self.stop()
        return False

    def start(self):
        """Start profiling at step 0 of the schedule."""
        self.step_num = 0
        self.current_action = self.schedule(self.step_num)
        self._enter(self.current_action)

    def stop(self):
        """Stop profiling; a recording in progress ends and is handed to ``on_trace_ready``."""
        if self._recorder is not None:
            self._save()
        self.current_action = None

    def step(self):
        """Mark the end of a step: the schedule's action for the next step takes effect."""
        previous = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        if previous == ProfilerAction.RECORD_AND_SAVE or (
                previous in _RECORDING and self.current_action not in _RECORDING):
            self._save()
        elif self._recorder is not None:
            if self._step_span is not None:
                self._recorder.close(self._step_span)
            self._step_span = self._recorder.open(f"ProfilerStep#{self.step_num}", "user_annotation")
        self._enter(self.current_action, stepped=True)

    def _enter(self, action, stepped=False):
        if action in _RECORDING and self._recorder is None:
            recorder = Recorder(self.record_shapes, self.profile_memory, self.with_stack, self.with_flops,
                                ProfilerActivity.CUDA in self.activities)
            self._origin_us = time.time_ns() / 1000.0
            recorder.start()
            self._recorder = recorder
            # a span per step, as PyTorch's "ProfilerStep#N", once steps are in use
            stepping = stepped or self.schedule is not _always_record
            self._step_span = recorder.open(f"ProfilerStep#{self.step_num}", "user_annotation") if stepping else None

    def _save(self):
        recorder = self._recorder
        if self._step_span is not None:
            recorder.close(self._step_span)
            self._step_span = None
        recorder.stop()
        self._recorder = None
        self._finished = recorder  # its events are built when first asked for (most runs never ask)
        self._events = None
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    # -- results -------------------------------------------------------------------------------------

    def events(self):
        """The events of the last finished recording (:class:`EventList` of :class:`FunctionEvent`).

        Raises:
            RuntimeError: before any recording has finished.
        """
        if self._events is None:
            if self._finished is None:
                raise RuntimeError("Profiler didn't finish running: no events yet (leave the profile block first)")
            self._events = build_events(self._finished)
            self._finished = None
        return self._events

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        """The events summed by name (see :meth:`EventList.key_averages`); ``.table()`` prints them."""
        if group_by_input_shape and not self.record_shapes:
            raise ValueError("key_averages: group_by_input_shape=True needs profile(record_shapes=True)")
        if group_by_stack_n and not self.with_stack:
            raise ValueError("key_averages: group_by_stack_n needs profile(with_stack=True)")
        return self.events().key_averages(group_by_input_shape, group_by_stack_n)

    def export_chrome_trace(self, path):
        """Write the events to ``path`` as Chrome trace JSON (chrome://tracing, Perfetto), atomically."""
        export_chrome_trace(self.events(), path, self._origin_us)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        """Write the recorded stacks to ``path`` for flame graphs (needs ``with_stack=True``)."""
        if not self.with_stack:
            raise RuntimeError("export_stacks needs profile(with_stack=True)")
        export_stacks(self.events(), path, metric)

    def table(self, *args, **kwargs):
        """The text table of :meth:`key_averages` (arguments as :meth:`EventList.table`: ``sort_by``,
        ``row_limit``, ...)."""
        return self.key_averages().table(*args, **kwargs)


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False):
    """An ``on_trace_ready`` that writes each trace into ``dir_name`` as
    ``<worker_name>.<time in ms>.pt.trace.json`` (TensorBoard's profiler plugin reads that folder).

    Args:
        dir_name (str): the folder, created if missing.
        worker_name (str, optional): default ``<host>_<pid>``.
        use_gzip (bool): write ``.pt.trace.json.gz`` files.
    """
    if not isinstance(dir_name, (str, os.PathLike)):
        raise TypeError(f"tensorboard_trace_handler: dir_name must be a path, got {type(dir_name).__name__}")

    def handler(prof):
        os.makedirs(dir_name, exist_ok=True)
        name = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        path = os.path.join(dir_name, f"{name}.{time.time_ns() // 1_000_000}.pt.trace.json")
        if not use_gzip:
            prof.export_chrome_trace(path)
            return
        import gzip
        import json

        from ._export import chrome_trace

        with gzip.open(path + ".gz", "wt", encoding="utf-8") as f:
            json.dump(chrome_trace(prof.events(), prof._origin_us), f)

    return handler


# keep EventList importable from here (ember.autograd.profiler_util names it)
EventList = EventList
