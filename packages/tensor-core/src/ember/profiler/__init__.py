"""``ember.profiler``: PyTorch's profiler (``torch.profiler``).

Ops are recorded by the dispatcher (a profiler that records sits on its mode stack; when none
records, the hot path checks nothing more, see docs/internals.rst), backward nodes by
ember-autograd's engine, user blocks by :class:`record_function`.
"""

from ._events import EventList, FunctionEvent, FunctionEventAvg
from ._recorder import record_function
from ._schedule import ProfilerAction, schedule
from .profiler import ProfilerActivity, profile, supported_activities, tensorboard_trace_handler

__all__ = [
    "profile", "ProfilerActivity", "ProfilerAction", "schedule", "tensorboard_trace_handler", "record_function",
    "supported_activities", "EventList", "FunctionEvent", "FunctionEventAvg",
]
