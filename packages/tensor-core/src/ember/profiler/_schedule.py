"""Which steps a profiler records: :class:`ProfilerAction` and :func:`schedule`."""

from __future__ import annotations

import enum

__all__ = ["ProfilerAction", "schedule"]


class ProfilerAction(enum.Enum):
    """What the profiler does during one step (the value a schedule returns for the step)."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def _check_count(name, value, minimum):
    if type(value) is not int or value < minimum:
        raise ValueError(f"schedule: {name} must be an int >= {minimum}, got {value!r}")


def schedule(*, wait, warmup, active, repeat=0, skip_first=0):
    """A schedule: after ``skip_first`` steps, cycles of ``wait`` idle steps, ``warmup`` steps and
    ``active`` recorded steps, ``repeat`` times (0: forever).

    The last active step of each cycle is ``RECORD_AND_SAVE``: the profiler hands the cycle's trace
    to ``on_trace_ready`` when it leaves that step.

    Args:
        wait (int): idle steps at the start of each cycle (>= 0).
        warmup (int): steps that are neither idle nor recorded (>= 0).
        active (int): recorded steps (>= 1).
        repeat (int): number of cycles, 0 for no limit.
        skip_first (int): idle steps before the first cycle.

    Returns:
        Callable[[int], ProfilerAction]: the action for a step number.

    Raises:
        ValueError: for a negative count or ``active < 1``.

    Example::

        >>> s = schedule(wait=1, warmup=1, active=2)
        >>> [s(i).name for i in range(4)]
        ['NONE', 'WARMUP', 'RECORD', 'RECORD_AND_SAVE']
    """
    _check_count("wait", wait, 0)
    _check_count("warmup", warmup, 0)
    _check_count("active", active, 1)
    _check_count("repeat", repeat, 0)
    _check_count("skip_first", skip_first, 0)
    cycle = wait + warmup + active

    def action(step):
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        position = step % cycle
        if position < wait:
            return ProfilerAction.NONE
        if position < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if position < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return action


def _always_record(step):
    """The schedule of a profiler given none: every step is recorded, saved when the profiler stops."""
    return ProfilerAction.RECORD
