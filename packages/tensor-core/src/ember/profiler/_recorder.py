"""The recorder: the object that times op calls, backward nodes and ``record_function`` blocks.

While a profiler records, its :class:`Recorder` sits on the dispatcher's mode stack
(``ember._ops._dispatch.state.modes``), so every op call reaches :meth:`Recorder.__ember_record__`
through the check of ``state.modes`` that the dispatcher makes anyway; when no profiler records,
nothing else is checked (docs/internals.rst, "The profiler hook"). Backward nodes reach it through
ember-autograd's engine (``_engine.node_observer``) and user blocks through :class:`record_function`.

A span is kept as a small list while recording (cheap to make); :mod:`._events` turns the spans
into :class:`~ember.profiler.FunctionEvent` objects when the results are first asked for.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import traceback
from time import perf_counter_ns

from .._ops._dispatch import run_below_modes, state
from .._tensor import Tensor

__all__ = ["Recorder", "record_function", "active_recorder"]

# Span fields (a list per span: creating it is most of the cost of recording one call)
NAME, PARENT, START, END, SHAPES, OUT_BYTES, STACK, CUDA, CATEGORY, FLOPS, CHILD_OUTPUTS = range(11)

_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_names = {}  # op -> its name in the results

_active = None  # the recorder that records now (one at a time, as in PyTorch)


def active_recorder():
    """The recorder of the profiler that records now, or None."""
    return _active


class Recorder:
    """Collects spans on the thread that started it (see the module docstring)."""

    #: It watches calls and changes none: fused fast paths keep running while it records
    #: (:func:`ember._ops._dispatch.ops_intercepted`), so the profile shows the program's own kernels.
    observes_only = True

    def __init__(self, record_shapes=False, profile_memory=False, with_stack=False, with_flops=False, cuda=False):
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.cuda = cuda
        self.spans = []
        self.parent = -1  # index of the open span new spans nest in
        self.thread = threading.get_ident()
        self.start_ns = 0
        self.stop_ns = 0

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self):
        global _active
        if _active is not None:
            raise RuntimeError("Can't profile: another profiler is already recording")
        _active = self
        self.start_ns = perf_counter_ns()
        state.modes.append(self)
        engine = sys.modules.get("ember.autograd._engine")  # backward can only run once it is imported
        if engine is not None:
            engine.node_observer = self.observe_node

    def stop(self):
        global _active
        modes = state.modes
        if modes and modes[-1] is self:
            modes.pop()
        elif self in modes:  # a mode entered inside the profiler and never left
            modes.remove(self)
        engine = sys.modules.get("ember.autograd._engine")
        if engine is not None and engine.node_observer == self.observe_node:
            engine.node_observer = None
        if _active is self:
            _active = None
        if self.cuda:
            _synchronize_cuda()
        self.stop_ns = perf_counter_ns()

    # -- spans -------------------------------------------------------------------------------------

    def open(self, name, category):
        """Open a span (a backward node, a user block); returns its index for :meth:`close`."""
        spans = self.spans
        index = len(spans)
        span = [name, self.parent, 0, 0, None, 0, None, None, category, 0, None]
        if self.with_stack:
            span[STACK] = _user_stack()
        spans.append(span)
        self.parent = index
        span[START] = perf_counter_ns()
        return index

    def close(self, index):
        span = self.spans[index]
        span[END] = perf_counter_ns()
        self.parent = span[PARENT]

    @contextlib.contextmanager
    def fused_call(self, name, tensors):
        """Time a fused fast path that calls its kernels directly, not through the dispatcher (the
        ``_foreach_*`` list ops), as one op span named ``name``; ``tensors`` (a list) says the device."""
        if threading.get_ident() != self.thread:
            yield
            return
        index = self.open(name, "cpu_op")
        cuda = _cuda_start(tensors) if self.cuda else None
        try:
            yield
        finally:
            self.close(index)
            if cuda is not None:
                cuda[1].record()
                self.spans[index][CUDA] = cuda

    def observe_node(self, node):
        """The engine's hook: open the span of a backward node, return what closes it."""
        if threading.get_ident() != self.thread:
            return None
        index = self.open(f"autograd::engine::evaluate_function: {node.name()}", "cpu_op")
        return lambda: self.close(index)

    def __ember_record__(self, op, args, kwargs):
        """The dispatcher's hook: run ``op`` below the modes and time it (see ``_dispatch._run_mode``)."""
        spans = self.spans
        index = len(spans)
        parent = self.parent
        name = _names.get(op)
        if name is None:
            name = _names[op] = f"aten::{op.name}"  # PyTorch's names, which tools that read tables expect
        span = [name, parent, 0, 0, None, 0, None, None, "cpu_op", 0, None]
        if self.record_shapes:
            span[SHAPES] = _shapes(args, kwargs)
        if self.with_stack:
            span[STACK] = _user_stack()
        if self.with_flops:
            span[FLOPS] = _flops(op.name, args)
        spans.append(span)
        self.parent = index
        cuda = _cuda_start(args) if self.cuda else None
        modes = state.modes
        span[START] = perf_counter_ns()
        try:
            if len(modes) == 1:
                result = run_below_modes(op, args, kwargs or {})
            else:  # modes below the profiler: the next one handles the call, without the profiler
                from .._ops._dispatch import _run_mode

                modes.pop()
                try:
                    result = _run_mode(op, args, kwargs or {}, modes)
                finally:
                    modes.append(self)
        finally:
            span[END] = perf_counter_ns()
            self.parent = parent
        if cuda is not None:
            cuda[1].record()
            span[CUDA] = cuda
        if self.profile_memory and op.kind != "inplace":  # an in-place op returns memory it was given
            _count_outputs(span, result, spans[parent] if parent >= 0 else None, args)
        return result


def _shapes(args, kwargs):
    """Input shapes as PyTorch records them: a tensor's sizes, a list of them for a list of tensors, [] else."""
    shapes = []
    for a in args:
        if isinstance(a, Tensor):
            shapes.append(list(a.shape))
        elif type(a) in (list, tuple) and a and isinstance(a[0], Tensor):
            shapes.append([list(t.shape) if isinstance(t, Tensor) else [] for t in a])
        else:
            shapes.append([])
    return shapes


def _user_stack():
    """The caller's frames outside ember, innermost first, as ``file(line): function``."""
    frames = []
    for frame in reversed(traceback.extract_stack()):
        if frame.filename.startswith(_EMBER_DIR):
            continue
        frames.append(f"{frame.filename}({frame.lineno}): {frame.name}")
    return frames


def _flops(name, args):
    """Floating-point operations of the matrix products (2 per multiply-add); 0 for other ops."""
    try:
        if name in ("mm", "matmul", "bmm") and len(args) >= 2:
            a, b = args[0].shape, args[1].shape
            batch = 1
            for s in a[:-2]:
                batch *= s
            return 2 * batch * (a[-2] if len(a) > 1 else 1) * a[-1] * (b[-1] if len(b) > 1 else 1)
        if name == "addmm" and len(args) >= 3:
            a, b = args[1].shape, args[2].shape
            return 2 * a[0] * a[1] * b[1]
        if name == "linear" and len(args) >= 2:
            x, w = args[0].shape, args[1].shape
            rows = 1
            for s in x[:-1]:
                rows *= s
            return 2 * rows * w[0] * (w[1] if len(w) > 1 else 1)
    except (AttributeError, IndexError, TypeError):
        return 0
    return 0


def _root(array):
    """The array that owns ``array``'s memory (numpy and CuPy views keep it as ``base``)."""
    while getattr(array, "base", None) is not None:
        array = array.base
    return array


def _new_arrays(result, given):
    """The backend arrays of ``result`` (a tensor or a tuple of them) that are new memory: not an ember
    view, and not sharing the memory of an argument (``given``: ids of the arguments' owning arrays).
    A kernel may return a numpy view of a buffer it made itself (convolution does): that is new memory."""
    tensors = result if type(result) in (tuple, list) or isinstance(result, tuple) else (result,)
    arrays = []
    for t in tensors:
        if isinstance(t, Tensor) and t._base is None:
            data = t._data
            if hasattr(data, "nbytes") and id(_root(data)) not in given:
                arrays.append(data)
    return arrays


def _count_outputs(span, result, parent_span, args):
    """Bytes of the new arrays an op returns, counted once: by the innermost op that returned them
    (not an argument handed back, as ``F.relu(x, inplace=True)`` does)."""
    given = {id(_root(a._data)) for a in args if isinstance(a, Tensor)}
    outputs = {id(a): a.nbytes for a in _new_arrays(result, given)}
    inner = span[CHILD_OUTPUTS] or ()
    span[OUT_BYTES] = sum(n for i, n in outputs.items() if i not in inner)
    if parent_span is not None and outputs:
        if parent_span[CHILD_OUTPUTS] is None:
            parent_span[CHILD_OUTPUTS] = set()
        parent_span[CHILD_OUTPUTS].update(outputs)


def _cuda_start(args):
    """A started pair of CUDA events when a tensor argument lives on a cuda device, else None."""
    for a in args:
        if isinstance(a, Tensor) and a._device.type == "cuda":
            import cupy

            begin, end = cupy.cuda.Event(), cupy.cuda.Event()
            begin.record()
            return [begin, end]
    return None


def _synchronize_cuda():
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        cupy.cuda.Device().synchronize()


class record_function(contextlib.ContextDecorator):
    """Label a block of code (or every call of a function) in the profiler's results.

    Outside a profiler it costs one check. Use it as ``with record_function("name"):`` or as a
    decorator ``@record_function("name")``.

    Args:
        name (str): the label, shown as a row of the table and a span of the trace.
        args (str, optional): extra text (kept for PyTorch's signature; not shown).

    Raises:
        TypeError: if ``name`` is not a string.

    Example::

        >>> with ember.profiler.profile() as prof:
        ...     with record_function("my_block"):
        ...         y = ember.ones(3) * 2
    """

    def __init__(self, name, args=None):
        if not isinstance(name, str):
            raise TypeError(f"record_function: name must be a str, got {type(name).__name__}")
        self.name = name
        self.args = args
        self._spans = []  # (recorder, index) of the open spans (a decorator re-enters per call)

    def __enter__(self):
        recorder = _active
        if recorder is not None and threading.get_ident() == recorder.thread:
            self._spans.append((recorder, recorder.open(self.name, "user_annotation")))
        else:
            self._spans.append(None)
        return self

    def __exit__(self, exc_type, exc, tb):
        entry = self._spans.pop()
        if entry is not None:
            entry[0].close(entry[1])
        return False
