"""``ember.autograd.profiler``: the older profiler names (``torch.autograd.profiler``) for old code.

They are thin layers over :mod:`ember.profiler`, which records the same things.
"""

from __future__ import annotations

import contextlib

from ember.profiler import EventList, FunctionEvent, FunctionEventAvg, ProfilerActivity, record_function
from ember.profiler import profile as _profile

__all__ = ["profile", "record_function", "emit_nvtx", "EventList", "FunctionEvent", "FunctionEventAvg"]


class profile:
    """The older profiler: a context manager whose results are read after the block.

    Args:
        enabled (bool): when False, nothing is recorded and the block runs as is.
        use_cuda (bool): time cuda ops with CUDA events too (as ``use_device="cuda"``).
        record_shapes, profile_memory, with_stack, with_flops, with_modules: as in
            :class:`ember.profiler.profile`.
        use_device (str, optional): ``"cuda"`` to time cuda ops.

    Example::

        >>> with ember.autograd.profiler.profile() as prof:
        ...     ember.ones(3).sum()
        >>> print(prof.key_averages().table(sort_by="self_cpu_time_total"))
    """

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False, with_flops=False,
                 profile_memory=False, with_stack=False, with_modules=False, use_kineto=False, use_cpu=True,
                 experimental_config=None, acc_events=False, custom_trace_id_callback=None):
        if use_device is not None and use_device != "cuda":
            raise ValueError(f"profile: use_device must be None or 'cuda', got {use_device!r}")
        self.enabled = enabled
        activities = {ProfilerActivity.CPU}
        if use_cuda or use_device == "cuda":
            activities.add(ProfilerActivity.CUDA)
        self._profiler = _profile(activities=activities, record_shapes=record_shapes, profile_memory=profile_memory,
                                  with_stack=with_stack, with_flops=with_flops, with_modules=with_modules)

    def __enter__(self):
        if self.enabled:
            self._profiler.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.enabled:
            self._profiler.stop()
        return False

    @property
    def function_events(self):
        """The recorded events (:class:`EventList`)."""
        return self._profiler.events()

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        return self._profiler.key_averages(group_by_input_shape, group_by_stack_n)

    def table(self, sort_by=None, row_limit=100, **kwargs):
        return self.key_averages().table(sort_by=sort_by, row_limit=row_limit, **kwargs)

    def export_chrome_trace(self, path):
        self._profiler.export_chrome_trace(path)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        self._profiler.export_stacks(path, metric)

    def total_average(self):
        return self.function_events.total_average()

    @property
    def self_cpu_time_total(self):
        return self.function_events.self_cpu_time_total

    def __str__(self):
        return self.table()


@contextlib.contextmanager
def emit_nvtx(enabled=True, record_shapes=False):
    """Accepted for old code; a no-op: ember emits no NVTX ranges (use :class:`ember.profiler.profile`
    with ``ProfilerActivity.CUDA`` for cuda times)."""
    yield
