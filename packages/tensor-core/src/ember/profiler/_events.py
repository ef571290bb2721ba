"""Profiling results: events, their averages by name, and the table PyTorch prints."""

from __future__ import annotations

from ._recorder import CATEGORY, CUDA, END, FLOPS, NAME, OUT_BYTES, PARENT, SHAPES, STACK, START

__all__ = ["Interval", "FunctionEvent", "FunctionEventAvg", "EventList", "build_events"]


class Interval:
    """A span of time in microseconds since the profiler started."""

    __slots__ = ("start", "end")

    def __init__(self, start, end):
        self.start = start
        self.end = end

    def elapsed_us(self):
        return self.end - self.start


class FunctionEvent:
    """One recorded call: an op, a backward node or a :class:`~ember.profiler.record_function` block.

    Times are in microseconds, memory in bytes. ``cpu_children`` are the calls made inside this one;
    ``self_cpu_time_total`` is its time less theirs.
    """

    def __init__(self, id, name, thread, start_us, end_us, input_shapes=None, stack=None, cpu_memory_usage=0,
                 device_time=0.0, flops=0, is_user_annotation=False):
        self.id = id
        self.name = name
        self.key = name
        self.thread = thread
        self.time_range = Interval(start_us, end_us)
        self.input_shapes = input_shapes if input_shapes is not None else []
        self.stack = stack if stack is not None else []
        self.self_cpu_memory_usage = cpu_memory_usage
        self.device_time = device_time
        self.flops = flops
        self.is_user_annotation = is_user_annotation
        self.cpu_children = []
        self.cpu_parent = None
        self.count = 1
        self.device_type = "CPU"

    @property
    def cpu_time_total(self):
        return self.time_range.elapsed_us()

    @property
    def cpu_time(self):
        return self.cpu_time_total

    @property
    def self_cpu_time_total(self):
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def cpu_memory_usage(self):
        return self.self_cpu_memory_usage + sum(c.cpu_memory_usage for c in self.cpu_children)

    # An op's device time is the stream's time between CUDA events recorded when the op began and when it
    # returned: it already holds the kernels of the ops it called. So it is the op's total, and its self
    # time is what its timed children leave; a span without events (a backward node, a user block) only
    # sums its children.
    @property
    def self_device_time_total(self):
        if self.device_type != "CUDA":
            return 0.0
        return max(self.device_time - sum(c.device_time_total for c in self.cpu_children), 0.0)

    @property
    def device_time_total(self):
        if self.device_type == "CUDA":
            return self.device_time
        return sum(c.device_time_total for c in self.cpu_children)

    # PyTorch's older names
    self_cuda_time_total = self_device_time_total
    cuda_time_total = device_time_total

    def __repr__(self):
        return (f"<FunctionEvent id={self.id} name={self.name} cpu_time={self.cpu_time_total:.3f}us "
                f"self_cpu_time={self.self_cpu_time_total:.3f}us input_shapes={self.input_shapes}>")


class FunctionEventAvg:
    """The events of one key (a name; with the input shapes or stack when grouped by them), summed."""

    def __init__(self, key, input_shapes=None, stack=None):
        self.key = key
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.device_time_total = 0.0
        self.self_device_time_total = 0.0
        self.cpu_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.flops = 0
        self.input_shapes = input_shapes
        self.stack = stack
        self.is_user_annotation = False

    def add(self, event):
        self.count += event.count
        self.cpu_time_total += event.cpu_time_total
        self.self_cpu_time_total += event.self_cpu_time_total
        self.device_time_total += event.device_time_total
        self.self_device_time_total += event.self_device_time_total
        self.cpu_memory_usage += event.cpu_memory_usage
        self.self_cpu_memory_usage += event.self_cpu_memory_usage
        self.flops += event.flops
        self.is_user_annotation = event.is_user_annotation
        return self

    @property
    def cpu_time(self):
        """Average CPU time per call (us)."""
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def device_time(self):
        return self.device_time_total / self.count if self.count else 0.0

    cuda_time_total = property(lambda self: self.device_time_total)
    self_cuda_time_total = property(lambda self: self.self_device_time_total)
    cuda_time = property(lambda self: self.device_time)

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total:.3f}us "
                f"cpu_time={self.cpu_time_total:.3f}us count={self.count}>")


_SORT_KEYS = {
    "cpu_time", "cuda_time", "device_time", "cpu_time_total", "cuda_time_total", "device_time_total",
    "self_cpu_time_total", "self_cuda_time_total", "self_device_time_total", "cpu_memory_usage",
    "self_cpu_memory_usage", "count", "flops",
}


class EventList(list):
    """A list of :class:`FunctionEvent` (or of :class:`FunctionEventAvg` from :meth:`key_averages`)."""

    def __init__(self, events=(), use_device=None, profile_memory=False, with_flops=False):
        super().__init__(events)
        self._use_device = use_device
        self._profile_memory = profile_memory
        self._with_flops = with_flops

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        """Sum the events by name (and input shapes, and the innermost ``group_by_stack_n`` frames).

        Returns:
            EventList: one :class:`FunctionEventAvg` per key, in order of first appearance.
        """
        if type(group_by_stack_n) is not int or group_by_stack_n < 0:
            raise ValueError(f"key_averages: group_by_stack_n must be an int >= 0, got {group_by_stack_n!r}")
        groups = {}
        for event in self:
            key = [event.key]
            shapes = stack = None
            if group_by_input_shape:
                shapes = event.input_shapes
                key.append(str(shapes))
            if group_by_stack_n:
                stack = event.stack[:group_by_stack_n]
                key.append(tuple(stack))
            key = tuple(key)
            average = groups.get(key)
            if average is None:
                average = groups[key] = FunctionEventAvg(event.key, shapes, stack)
            average.add(event)
        return EventList(groups.values(), self._use_device, self._profile_memory, self._with_flops)

    def total_average(self):
        """All events summed into one :class:`FunctionEventAvg` keyed "Total"."""
        total = FunctionEventAvg("Total")
        for event in self:
            total.add(event)
        return total

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75, max_name_column_width=55,
              max_shapes_column_width=80, header=None, top_level_events_only=False):
        """The events as PyTorch's text table (see :func:`format_table`)."""
        return format_table(self, sort_by, row_limit, max_name_column_width, max_shapes_column_width,
                            max_src_column_width, header, top_level_events_only)

    def export_chrome_trace(self, path):
        """Write the events to ``path`` as a Chrome trace (JSON; chrome://tracing, Perfetto)."""
        from ._export import export_chrome_trace

        export_chrome_trace(self, path)


def build_events(recorder):
    """The :class:`FunctionEvent` objects of a recorder's spans, parents linked, in order of start."""
    origin = recorder.start_ns
    thread = recorder.thread
    events = []
    for index, span in enumerate(recorder.spans):
        end = span[END] or recorder.stop_ns  # a span still open when recording stopped ends there
        device_time = 0.0
        if span[CUDA] is not None:
            import cupy

            begin, stop = span[CUDA]
            stop.synchronize()
            device_time = cupy.cuda.get_elapsed_time(begin, stop) * 1000.0
        event = FunctionEvent(
            index, span[NAME], thread, (span[START] - origin) / 1000.0, (end - origin) / 1000.0,
            input_shapes=span[SHAPES], stack=span[STACK], cpu_memory_usage=span[OUT_BYTES],
            device_time=device_time, flops=span[FLOPS], is_user_annotation=span[CATEGORY] == "user_annotation",
        )
        if span[CUDA] is not None:
            event.device_type = "CUDA"
        parent = span[PARENT]
        if parent >= 0:
            event.cpu_parent = events[parent]
            events[parent].cpu_children.append(event)
        events.append(event)
    return EventList(events, "cuda" if recorder.cuda else None, recorder.profile_memory, recorder.with_flops)


def _format_time(us):
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _format_memory(nbytes):
    for unit, size in (("Gb", 1024 ** 3), ("Mb", 1024 ** 2), ("Kb", 1024)):
        if abs(nbytes) >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes} b"


def _format_percent(part, whole):
    return f"{part / whole * 100:.2f}%" if whole else "0.00%"


def _cut(text, width):
    return text if len(text) <= width else text[: width - 3] + "..."


def format_table(events, sort_by=None, row_limit=100, max_name_column_width=55, max_shapes_column_width=80,
                 max_src_column_width=75, header=None, top_level_events_only=False):
    """PyTorch's profiler table of ``events`` (events or averages).

    Columns: Name, Self CPU %, Self CPU, CPU total %, CPU total, CPU time avg, then Self CUDA,
    Self CUDA %, CUDA total, CUDA time avg when CUDA was profiled, CPU Mem and Self CPU Mem with
    ``profile_memory``, # of Calls, Input Shapes when shapes were recorded, Source Location when
    grouped by stack, Total MFLOPs with ``with_flops``. Percentages are of the events' total self time.

    Args:
        sort_by (str, optional): an attribute to sort by, largest first (``"cpu_time_total"``,
            ``"self_cpu_time_total"``, ``"count"``, ``"cpu_memory_usage"``, ``"cuda_time_total"``, ...).
        row_limit (int): the most rows shown (-1: all).

    Raises:
        ValueError: for an unknown ``sort_by``.
    """
    if sort_by is not None and sort_by not in _SORT_KEYS:
        raise ValueError(f"table: unknown sort_by {sort_by!r}; expected one of {sorted(_SORT_KEYS)}")
    rows = list(events)
    if top_level_events_only:
        rows = [e for e in rows if getattr(e, "cpu_parent", None) is None]
    if sort_by is not None:
        rows.sort(key=lambda e: getattr(e, sort_by.replace("cuda", "device")), reverse=True)
    if row_limit is not None and row_limit >= 0:
        rows = rows[:row_limit]
    use_device = getattr(events, "_use_device", None)
    profile_memory = getattr(events, "_profile_memory", False)
    with_flops = getattr(events, "_with_flops", False)
    self_total = sum(e.self_cpu_time_total for e in events)
    device_total = sum(e.self_device_time_total for e in events)
    has_shapes = any(e.input_shapes for e in rows)
    has_stack = any(e.stack for e in rows) and all(type(e) is FunctionEventAvg for e in rows)

    name_width = max([len(e.key) for e in rows] + [4]) + 4
    name_width = min(name_width, max_name_column_width)
    columns = [("Name", name_width, lambda e: _cut(e.key, name_width - 2), "<"),
               ("Self CPU %", 12, lambda e: _format_percent(e.self_cpu_time_total, self_total), ">"),
               ("Self CPU", 12, lambda e: _format_time(e.self_cpu_time_total), ">"),
               ("CPU total %", 12, lambda e: _format_percent(e.cpu_time_total, self_total), ">"),
               ("CPU total", 12, lambda e: _format_time(e.cpu_time_total), ">"),
               ("CPU time avg", 12, lambda e: _format_time(e.cpu_time_total / max(e.count, 1)), ">")]
    if use_device:
        columns += [("Self CUDA", 12, lambda e: _format_time(e.self_device_time_total), ">"),
                    ("Self CUDA %", 12, lambda e: _format_percent(e.self_device_time_total, device_total), ">"),
                    ("CUDA total", 12, lambda e: _format_time(e.device_time_total), ">"),
                    ("CUDA time avg", 13, lambda e: _format_time(e.device_time_total / max(e.count, 1)), ">")]
    if profile_memory:
        columns += [("CPU Mem", 12, lambda e: _format_memory(e.cpu_memory_usage), ">"),
                    ("Self CPU Mem", 13, lambda e: _format_memory(e.self_cpu_memory_usage), ">")]
    columns.append(("# of Calls", 12, lambda e: str(e.count), ">"))
    if has_shapes:
        columns.append(("Input Shapes", max_shapes_column_width,
                        lambda e: "  " + _cut(str(e.input_shapes), max_shapes_column_width - 2), "<"))
    if has_stack:
        columns.append(("Source Location", max_src_column_width,
                        lambda e: "  " + _cut(e.stack[0] if e.stack else "", max_src_column_width - 2), "<"))
    if with_flops:
        columns.append(("Total MFLOPs", 14, lambda e: f"{e.flops / 1e6:.3f}" if e.flops else "--", ">"))

    def line(cells):
        out = []
        for (_title, width, _, align), cell in zip(columns, cells):
            out.append(cell.ljust(width) if align == "<" else cell.rjust(width))
        return "  ".join(out).rstrip()

    rule = "  ".join("-" * width for _, width, _, _ in columns)
    result = []
    if header is not None:
        result += ["=" * len(rule), header]
    result += [rule, line(["  " + t if a == "<" and i else t for i, (t, _, _, a) in enumerate(columns)]), rule]
    result += [line([render(e) for _, _, render, _ in columns]) for e in rows]
    result.append(rule)
    result.append(f"Self CPU time total: {_format_time(self_total)}")
    if use_device:
        result.append(f"Self CUDA time total: {_format_time(device_total)}")
    return "\n".join(result) + "\n"
