"""CUDA streams and events (``ember.cuda.Stream``, ``ember.cuda.Event``) over CuPy's.

Ember's CUDA kernels are queued on CuPy's current stream, so ``with
ember.cuda.stream(s):`` makes every op inside the block run on ``s``.
"""

from __future__ import annotations

from ._runtime import cupy_module
from ._sync import host_sync

__all__ = ["Stream", "Event", "StreamContext", "current_stream", "default_stream", "stream"]


class Stream:
    """A queue of GPU work; kernels on one stream run in order, streams run concurrently.

    Args:
        device (int, str or ember.device, optional): the GPU (the current one by default).
        priority (int): lower numbers run first when work waits (CUDA's convention: 0 is the
            default, negative is higher priority); clamped to what the GPU supports.

    Raises:
        RuntimeError: when CUDA is not available.
    """

    def __init__(self, device=None, priority=0, **kwargs):
        from . import _device_index

        cp = cupy_module()
        cupy_stream = kwargs.pop("_cupy_stream", None)
        if kwargs:
            raise TypeError(f"Stream(): unexpected keyword argument {next(iter(kwargs))!r}")
        self.device_index = _device_index(device)
        if cupy_stream is None:
            with cp.cuda.Device(self.device_index):
                cupy_stream = cp.cuda.Stream(non_blocking=True, priority=int(priority))
        self._cupy = cupy_stream

    @property
    def device(self):
        from .._device import device

        return device("cuda", self.device_index)

    @property
    def priority(self):
        """The stream's priority (as clamped by the driver)."""
        if self._cupy.ptr == 0:  # the legacy default stream
            return 0
        value = getattr(self._cupy, "priority", None)  # CuPy >= 13 records it
        if value is not None:
            return int(value)
        return _cudart_call("cudaStreamGetPriority", self._cupy.ptr)[0]

    @staticmethod
    def priority_range():
        """``(low, high)``: the priorities the GPU supports, lowest urgency first (e.g. ``(0, -5)``)."""
        least, greatest = _cudart_call("cudaDeviceGetStreamPriorityRange")
        return int(least), int(greatest)

    @property
    def cuda_stream(self):
        """The raw ``cudaStream_t`` as an int."""
        return self._cupy.ptr

    def query(self):
        """Whether all work queued on the stream has finished."""
        return self._cupy.done

    def synchronize(self):
        """Wait until all work queued on the stream has finished (a host synchronisation: see
        :func:`ember.cuda.set_sync_debug_mode`)."""
        host_sync("Stream.synchronize()", self._cupy.synchronize)

    def wait_event(self, event):
        """Make later work on this stream wait for ``event``."""
        self._cupy.wait_event(event._cupy)

    def wait_stream(self, stream):
        """Make later work on this stream wait for the work queued so far on ``stream``."""
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        """Record ``event`` (a new one when None) on this stream; returns it."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and self._cupy.ptr == other._cupy.ptr and (
            self.device_index == other.device_index
        )

    def __hash__(self):
        return hash((self._cupy.ptr, self.device_index))

    def __repr__(self):
        return f"<ember.cuda.Stream device=cuda:{self.device_index} cuda_stream={self.cuda_stream:#x}>"


def _cudart_call(name, *args):
    """Call a CUDA runtime function CuPy does not wrap, through NVIDIA's ``cuda-bindings``.

    Raises:
        RuntimeError: when ``cuda-bindings`` is missing or the call fails.
    """
    try:
        from cuda.bindings import runtime as cudart
    except ImportError as exc:
        raise RuntimeError(f"{name} needs NVIDIA's cuda-bindings package (pip install cuda-bindings)") from exc
    err, *values = getattr(cudart, name)(*args)
    if int(err) != 0:
        raise RuntimeError(f"{name} failed: {err}")
    return values


def current_stream(device=None):
    """The stream ops on ``device`` (default: current) are queued on now."""
    from . import _device_index

    cp = cupy_module()
    index = _device_index(device)
    with cp.cuda.Device(index):
        return Stream(index, _cupy_stream=cp.cuda.get_current_stream())


def default_stream(device=None):
    """The default (null) stream of ``device``."""
    from . import _device_index

    cp = cupy_module()
    return Stream(_device_index(device), _cupy_stream=cp.cuda.Stream.null)


class StreamContext:
    """Context manager that queues the block's GPU work on ``stream`` (does nothing for None)."""

    def __init__(self, stream):
        self.stream = stream
        self._device = None

    def __enter__(self):
        if self.stream is not None:
            from . import device

            self._device = device(self.stream.device_index)
            self._device.__enter__()
            self.stream._cupy.__enter__()
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            self.stream._cupy.__exit__(*exc)
            self._device.__exit__(*exc)
        return False


def stream(stream):
    """``with ember.cuda.stream(s):`` runs the block's GPU work on stream ``s``."""
    return StreamContext(stream)


class Event:
    """A marker in a stream, to wait on or to time GPU work between two of them.

    Args:
        enable_timing (bool): whether :meth:`elapsed_time` may be used with it.
        blocking (bool): whether :meth:`synchronize` blocks the thread rather than spins.
        interprocess (bool): whether it may be shared with other processes.
    """

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        cp = cupy_module()
        self.enable_timing = enable_timing
        self._cupy = cp.cuda.Event(block=blocking, disable_timing=not enable_timing, interprocess=interprocess)
        self._recorded = False

    def record(self, stream=None):
        """Record the event on ``stream`` (default: the current stream)."""
        self._cupy.record(None if stream is None else stream._cupy)
        self._recorded = True

    def wait(self, stream=None):
        """Make later work on ``stream`` (default: the current stream) wait for this event."""
        target = current_stream() if stream is None else stream
        target.wait_event(self)

    def query(self):
        """Whether the work before the event has finished."""
        return self._cupy.done

    def synchronize(self):
        """Wait until the work before the event has finished (a host synchronisation: see
        :func:`ember.cuda.set_sync_debug_mode`)."""
        host_sync("Event.synchronize()", self._cupy.synchronize)

    def elapsed_time(self, end_event):
        """Milliseconds between this event and ``end_event`` (both recorded, timing enabled).

        Raises:
            RuntimeError: if either event has timing disabled or was not recorded.
        """
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if not (self._recorded and end_event._recorded):
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return cupy_module().cuda.get_elapsed_time(self._cupy, end_event._cupy)

    def __repr__(self):
        return f"<ember.cuda.Event enable_timing={self.enable_timing} recorded={self._recorded}>"
