"""CUDA graphs around compiled graphs: ``ember.compile(..., mode="reduce-overhead")``.

A compiled graph on cuda launches one Triton kernel (or extern call) after another from Python; for small
inputs that launch cost, not the GPU, sets the speed. A CUDA graph records the launches once and replays
them with one call. :func:`cudagraphify` wraps a compiled graph (a forward, a backward or an inference graph
of ``compile_fx``) in a :class:`CudaGraphRunner` that does that, with the rules PyTorch's cudagraph trees
follow:

* **Warm-up.** The first ``config.cudagraph_warmup_runs`` calls of each input signature run the compiled
  graph normally (Triton compiles and autotunes its kernels then, and constants move to the device).
* **Recording.** The next call records: every tensor input is copied into a *static input buffer* owned by
  the recording, except those whose address is stable - parameters (``nn.Parameter``) and outputs of a live
  recording (the saved activations a backward graph reads) - which the graph reads in place. The graph
  runs once under stream capture (CuPy's ``Stream.begin_capture``/``end_capture``, on a side stream of the
  device, relaxed capture mode), then is launched to compute the call's result.
* **Memory.** Everything allocated during the capture (outputs, intermediates, Triton scratch) comes from a
  *private* CuPy memory pool of the recording (``cupy.cuda.using_allocator``), never handed to other code:
  intermediates freed after the capture go back to that pool, so later allocations elsewhere cannot take
  memory a replay writes. The pool lives as long as the recording (memory that ``ember.cuda.memory_allocated``,
  which reads the default pool, does not count).
* **Replay.** A later call with the same signature copies the inputs into the static buffers and launches the
  graph on ember's current stream. The outputs are the recording's static output buffers, handed out as new
  tensor objects each call.
* **Overwritten outputs.** The next replay of a recording overwrites its outputs. Outputs of the previous
  replay that are still alive then are *invalidated*: touching one raises PyTorch's error, which tells the
  user to clone it or to call :func:`ember.compiler.cudagraph_mark_step_begin`. Gradients (the outputs of a
  backward graph, which autograd keeps as ``.grad``) are copied out instead. A forward replayed while the
  backward of its previous replay is still to run (``loss1 = f(x1); loss2 = f(x2); (loss1 + loss2).backward()``)
  would overwrite the activations that backward reads: that call runs without CUDA graphs instead.
  ``cudagraph_mark_step_begin`` declares a new iteration: backwards of earlier forwards will not run.
* **Signatures.** Input shapes, strides, dtypes and devices, and the addresses of the in-place inputs, select
  the recording; a new signature is a new recording (``counters["recordings"]``), up to
  ``config.cudagraph_max_recordings`` per compiled graph, after which new signatures run without graphs.
* **Never a wrong answer.** A graph with random ops (a replay would draw the recorded numbers again), with
  in-place ops on its inputs, or with checks that read a device value on the host (integer division), a graph
  whose inputs are cpu tensors, and a graph whose capture fails run without CUDA graphs; each reason is logged
  once (logger ``ember._inductor.cudagraphs``) and listed in the runner's ``skips``. Index bounds checks of
  extern calls (``index``, ``index_add``, ...), which read a flag on the host in eager mode, are recorded
  instead: each replay ORs its result into a device word that the next synchronizing call reads, raising
  ``IndexError`` there (:func:`ember.cuda._async_errors.record_check`), as a device-side assert would.

What is not checked (PyTorch checks it through its storages): a *view* or ``detach()`` of an output made
before the next replay is not invalidated with it, and sees the new values; clone what you keep.

The capture mechanism is pluggable (``capture_backend``): the default is :class:`CuPyGraphs`; the CPU tests
set a fake one that "replays" by running the graph again into the same buffers.
"""

from __future__ import annotations

import logging
import weakref
from collections import Counter

import ember

__all__ = [
    "cudagraphify",
    "CudaGraphRunner",
    "CudaGraphGroup",
    "CuPyGraphs",
    "mark_step_begin",
    "counters",
    "skip_reasons",
    "capture_backend",
    "OVERWRITTEN_MESSAGE",
]

log = logging.getLogger("ember._inductor.cudagraphs")

#: Totals over the process: ``recordings``, ``replays``, ``warmups``, ``skipped`` (calls run without graphs),
#: ``invalidated`` and ``copied_out`` (outputs of a previous replay).
counters: Counter = Counter()

#: reason -> calls run without CUDA graphs for it, over the process (each runner also keeps its own ``skips``).
skip_reasons: Counter = Counter()

#: The capture mechanism (an object with ``supports(device)``, ``capture(fn, device) -> (graph, outputs)``
#: and ``replay(graph, device)``); ``None``: :class:`CuPyGraphs`. Tests set a fake one.
capture_backend = None

OVERWRITTEN_MESSAGE = (
    "Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run "
    "(compiled graph {name!r}). To prevent overwriting, clone the tensor outside of ember.compile() "
    "or call ember.compiler.cudagraph_mark_step_begin() before each model invocation."
)

_generation = 0


def mark_step_begin():
    """Start a new iteration (``ember.compiler.cudagraph_mark_step_begin``).

    Backwards of the forwards run so far will not run: the next replay of a forward may overwrite
    their outputs (outputs still alive are invalidated, as on every replay).
    """
    global _generation
    _generation += 1


class CudaGraphGroup:
    """The graphs of one ``compile_fx`` call (its forward and backward): whether a backward is pending."""

    def __init__(self, name="graph"):
        self.name = name
        self.has_backward = False  # a backward runner joined the group
        self._forward_generation = None  # the generation of a forward whose backward has not run

    def forward_ran(self):
        """Record that the group's forward replayed in the current generation (its backward is now due)."""
        self._forward_generation = _generation

    def backward_ran(self):
        """Record that the backward of the last forward ran (no backward is pending)."""
        self._forward_generation = None

    def backward_pending(self) -> bool:
        """Whether a forward ran (in this iteration) whose backward has not. Never when the backward is not
        a runner (it ran eagerly after a compile error): nothing would say that it ran."""
        return self.has_backward and self._forward_generation is not None and self._forward_generation == _generation


class _OverwrittenData:
    """What an invalidated output's tensor holds instead of its memory: any use raises."""

    __slots__ = ("_message",)

    def __init__(self, message):
        object.__setattr__(self, "_message", message)

    def _fail(self, *args, **kwargs):
        raise RuntimeError(self._message)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # protocols probed by hasattr (copy, pickle) are absent, not errors
        raise RuntimeError(object.__getattribute__(self, "_message"))

    __len__ = __getitem__ = __setitem__ = __iter__ = __array__ = __float__ = __int__ = __bool__ = _fail


# --- the capture mechanism -----------------------------------------------------------------------


class _CuPyRecording:
    """A captured CUDA graph, the private memory pool its allocations came from, and the checks its kernels
    record (index bounds: :class:`ember.cuda._async_errors.RecordedCheck`), read after each replay."""

    __slots__ = ("graph", "pool", "checks")

    def __init__(self, graph, pool, checks):
        self.graph = graph
        self.pool = pool
        self.checks = checks


class CuPyGraphs:
    """Stream capture through CuPy (``Stream.begin_capture`` / ``end_capture`` -> ``Graph.launch``)."""

    def __init__(self):
        self._streams = {}

    def supports(self, device) -> bool:
        """Whether graphs on ``device`` (an ember.device) can be captured: cuda only."""
        return device.type == "cuda"

    def _side_stream(self, cp, index):
        # capture cannot run on the legacy default stream, ember's usual current stream
        stream = self._streams.get(index)
        if stream is None:
            with cp.cuda.Device(index):
                stream = self._streams[index] = cp.cuda.Stream(non_blocking=True)
        return stream

    def capture(self, fn, device):
        """Run ``fn()`` under stream capture; return ``(recording, fn's outputs)`` (their values are not
        computed yet: :meth:`replay` computes them)."""
        import cupy as cp

        from ember.cuda import _async_errors

        from .triton_launch import use_ember_stream

        use_ember_stream()  # Triton launches on CuPy's current stream: the capturing one
        index = device.index if device.index is not None else cp.cuda.runtime.getDevice()
        pool = cp.cuda.MemoryPool()
        with cp.cuda.Device(index):
            current = cp.cuda.get_current_stream()
            side = self._side_stream(cp, index)
            side.wait_event(current.record())
            with side, cp.cuda.using_allocator(pool.malloc), _async_errors.recording_checks() as checks:
                side.begin_capture()  # relaxed mode (CuPy's default): the pool may cudaMalloc meanwhile
                try:
                    outputs = fn()
                except BaseException:
                    try:
                        side.end_capture()  # leave the stream usable; the partial graph is dropped
                    except Exception:  # noqa: BLE001 - the capture was invalidated; its error is the one raised
                        pass
                    raise
                graph = side.end_capture()
            for check in checks:  # its word is uninitialised memory of the pool until zeroed here, uncaptured
                check.clear()
        return _CuPyRecording(graph, pool, checks), outputs

    def replay(self, recording, device):
        """Launch the recorded graph on ember's (CuPy's) current stream; its recorded checks raise at the next
        synchronizing call if this replay failed one."""
        import cupy as cp

        recording.graph.launch(stream=cp.cuda.get_current_stream())
        for check in recording.checks:
            check.arm()


def _backend():
    global capture_backend
    if capture_backend is None:
        capture_backend = CuPyGraphs()
    return capture_backend


# --- reasons a graph never runs under CUDA graphs ------------------------------------------------


def _kernels(compiled):
    """The Triton kernels of a compiled graph (none for other callables)."""
    for step in getattr(compiled, "steps", ()) or ():
        if isinstance(step, (list, tuple)):
            yield from step


def static_reasons(compiled, gm) -> list[str]:
    """Why ``compiled`` (the compiled ``gm``) can never be replayed as a CUDA graph (empty: it can)."""
    from ..aot.rng import random_nodes

    reasons = []
    if gm is not None:
        found = random_nodes(gm)
        if found:
            reasons.append(f"random ops ({', '.join(sorted({str(n.target) for n in found}))}) would draw the "
                           "recorded numbers again on every replay")
        mutating = [n for n in gm.graph.nodes
                    if n.op == "call_function" and getattr(n.target, "kind", None) == "inplace"]
        if mutating:
            reasons.append(f"mutated inputs (in-place ops {sorted({str(n.target) for n in mutating})})")
    if any(getattr(k, "error_flag", False) for k in _kernels(compiled)):
        reasons.append("integer division checks read a device flag on the host after each call")
    return reasons


# --- the runner ----------------------------------------------------------------------------------


class _Recording:
    """One captured graph: its static inputs, its outputs and the tensors its last replay handed out."""

    def __init__(self, key):
        self.key = key
        self.graph = None
        self.copies = []  # (argument position, static buffer's array)
        self.outputs = None  # the outputs' structure: ("tensor", array index, device) or ("value", v)
        self.arrays = []  # static output arrays (distinct)
        self.is_sequence = False
        self.last = []  # weakrefs to the tensors the last replay returned


class CudaGraphRunner:
    """Runs a compiled graph under CUDA graphs (see the module docstring).

    Args:
        compiled (callable): the compiled graph, ``f(*inputs) -> tuple or tensor``.
        role (str): ``"forward"``, ``"backward"``, ``"inference"`` (or another name for a lone graph).
        group (CudaGraphGroup or None): shared by a forward and its backward.
        name (str): used in messages.

    Attributes:
        skips (Counter): reason -> number of calls that ran without CUDA graphs for it.
        recordings (dict): signature -> recording.
    """

    def __init__(self, compiled, *, role="inference", group=None, name="graph", reasons=()):
        from .. import config

        self.compiled = compiled
        self.role = role
        self.group = group if group is not None else CudaGraphGroup(name)
        if role == "backward":
            self.group.has_backward = True
        self.name = name
        self.warmup_runs = int(config.cudagraph_warmup_runs)
        self.max_recordings = int(config.cudagraph_max_recordings)
        self.recordings = {}
        self.skips = Counter()
        self._warmups = Counter()
        self._last_parts = []  # per argument position: (array, its part of the key, device) of the last call
        self._disabled = None
        for reason in reasons:
            self._disable(reason)
        self.__wrapped__ = compiled

    # bookkeeping -----------------------------------------------------------------------------

    def _skip(self, reason, level=logging.INFO):
        if reason not in self.skips:
            log.log(level, "cudagraphs: %s graph %r runs without CUDA graphs: %s", self.role, self.name, reason)
        self.skips[reason] += 1
        skip_reasons[reason] += 1
        counters["skipped"] += 1

    def _disable(self, reason, level=logging.INFO):
        self._disabled = reason
        self._skip(reason, level)

    def _signature(self, args):
        """``(key, reason, device)``: the recording's key for these arguments (None and why when they cannot
        be replayed), and their device.

        This runs on every call, so a tensor's part of the key is kept with its backing array and reused while
        the next call passes the same array object (parameters, saved activations): an array's shape, strides,
        dtype and address never change. Reading an input in place is always correct for the call at hand (its
        address is in the key); copying is for inputs whose address changes per call, so only parameters and
        outputs of other recordings are read in place.
        """
        from ember.nn import Parameter

        last = self._last_parts
        if len(last) != len(args):
            last = self._last_parts = [None] * len(args)
        parts = []
        device = None
        for i, a in enumerate(args):
            if isinstance(a, ember.Tensor):
                data = a._data
                hit = last[i]
                if hit is not None and hit[0] is data:
                    part, dev = hit[1], hit[2]
                else:
                    dev = a._device
                    if not _backend().supports(dev):
                        return None, f"an input is on {dev.type}", None
                    in_place = isinstance(a, Parameter) or _is_static_output(a, self)
                    part = (data.shape, data.strides, data.dtype, a.data_ptr() if in_place else None)
                    last[i] = (data, part, dev)  # (keeps the array alive until the next call)
                if device is None:
                    device = dev
                elif dev is not device and dev != device:
                    return None, "inputs on several devices", None
                parts.append(part)
            else:
                try:
                    hash(a)
                    parts.append(("value", type(a), a))
                except TypeError:
                    parts.append(("object", id(a)))
        if device is None:
            return None, "no tensor inputs", None
        return tuple(parts), None, device

    def __call__(self, *args):
        if self.role == "backward":
            self.group.backward_ran()
        elif self.role == "forward":
            result = self._call(args)
            self.group.forward_ran()
            return result
        return self._call(args)

    def _call(self, args):
        if self._disabled is not None:
            self._skip(self._disabled)
            return self.compiled(*args)
        key, reason, device = self._signature(args)
        if key is None:
            if reason.startswith("an input is on"):
                self._disable(reason)  # a cpu graph stays one: later calls skip the signature walk
            else:
                self._skip(reason)
            return self.compiled(*args)
        rec = self.recordings.get(key)
        if rec is None:
            # warmed up per signature without addresses: a backward's first call reads a warm-up forward's
            # fresh outputs, its second the recorded forward's static ones, and needs no second warm-up
            warm_key = tuple(part[:3] if len(part) == 4 else part for part in key)
            if self._warmups[warm_key] < self.warmup_runs:
                self._warmups[warm_key] += 1
                counters["warmups"] += 1
                return self.compiled(*args)
            if len(self.recordings) >= self.max_recordings:
                self._skip(f"more than config.cudagraph_max_recordings={self.max_recordings} input signatures "
                           "(dynamic shapes or moving parameters)")
                return self.compiled(*args)
            return self._record(key, args, device)
        if self.role == "forward" and self.group.backward_pending() and _alive(rec.last):
            self._skip("the outputs of the previous replay are still needed by a backward that has not run")
            return self.compiled(*args)
        return self._replay(rec, args, device)

    # recording ---------------------------------------------------------------------------------

    def _record(self, key, args, device):
        rec = _Recording(key)
        static_args = list(args)
        with ember.no_grad():
            for i, (a, part) in enumerate(zip(args, key)):
                if not isinstance(a, ember.Tensor):
                    continue
                if part[3] is not None:  # (shape, strides, dtype, address when read in place)
                    # read in place: the graph needs the memory, not the caller's tensor object (which may be
                    # an output of another recording, invalidated later)
                    static_args[i] = ember.Tensor._make(a._data, a.device)
                    continue
                buf = ember.empty_strided(tuple(a.shape), tuple(a.stride()), dtype=a.dtype, device=a.device)
                buf.copy_(a)
                static_args[i] = buf
                rec.copies.append((i, buf._data))
        try:
            rec.graph, outputs = _backend().capture(lambda: self.compiled(*static_args), device)
        except Exception as exc:  # noqa: BLE001 - whatever the capture refuses runs without graphs, logged
            where = "".join(f" ({note})" for note in getattr(exc, "__notes__", ()))  # the step that refused
            self._disable(f"capture failed: {type(exc).__name__}: {exc}{where}", logging.WARNING)
            return self.compiled(*args)
        rec.static_args = static_args  # keeps in-place inputs' buffers (and copies) alive with the graph
        rec.is_sequence = isinstance(outputs, (tuple, list))
        rec.outputs = []
        index = {}
        for value in (outputs if rec.is_sequence else (outputs,)):
            if isinstance(value, ember.Tensor):
                k = index.get(id(value._data))
                if k is None:
                    k = index[id(value._data)] = len(rec.arrays)
                    rec.arrays.append(value._data)
                    _static_outputs[value.data_ptr()] = (weakref.ref(rec), weakref.ref(self))
                rec.outputs.append(("tensor", k, value.device))
            else:
                rec.outputs.append(("value", value))
        rec.devices = [None] * len(rec.arrays)
        for o in rec.outputs:
            if o[0] == "tensor":
                rec.devices[o[1]] = o[2]
        self.recordings[key] = rec
        counters["recordings"] += 1
        log.info("cudagraphs: recorded %s graph %r (%d recording(s))", self.role, self.name, len(self.recordings))
        return self._launch(rec, device)

    # replay ------------------------------------------------------------------------------------

    def _replay(self, rec, args, device):
        for i, dst in rec.copies:  # first: an input may be an output of the previous replay (h = f(h))
            _copy_into(dst, args[i]._data)
        self._retire(rec)
        return self._launch(rec, device)

    def _launch(self, rec, device):
        _backend().replay(rec.graph, device)
        counters["replays"] += 1
        fresh = [ember.Tensor._make(a, dev) for a, dev in zip(rec.arrays, rec.devices)]
        rec.last = [weakref.ref(t) for t in fresh]
        outs = [fresh[o[1]] if o[0] == "tensor" else o[1] for o in rec.outputs]
        return tuple(outs) if rec.is_sequence else outs[0]


    def _retire(self, rec):
        """The tensors the last replay of ``rec`` returned, before the next overwrites their memory:
        gradients are copied out, others invalidated (an access raises)."""
        alive = [t for t in (r() for r in rec.last) if t is not None]
        if not alive:
            return
        if self.role == "backward":
            for t in alive:
                if not isinstance(t._data, _OverwrittenData):
                    t._set_data(t._data.copy(order="K"))
                    counters["copied_out"] += 1
        else:
            stale = _OverwrittenData(OVERWRITTEN_MESSAGE.format(name=self.name))
            for t in alive:
                t._set_data(stale)
                counters["invalidated"] += 1
        rec.last = []


#: data pointer of a static output -> weakrefs to its recording and runner (inputs there are used in place)
_static_outputs = {}


def _is_static_output(t, runner) -> bool:
    """Whether ``t`` is an output of a live recording of another runner (read in place: its address is
    stable). Outputs of ``runner``'s own recordings are copied: a replay would overwrite what it reads."""
    refs = _static_outputs.get(t.data_ptr())
    if refs is None:
        return False
    rec, owner = refs[0](), refs[1]()
    if rec is None or owner is None:
        del _static_outputs[t.data_ptr()]
        return False
    return owner is not runner


def _alive(refs) -> bool:
    return any(r() is not None for r in refs)


_SAME_SIZE_INTS = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}


def _copy_into(dst, src):
    """Copy array ``src`` into the static buffer ``dst`` (same shape and dtype; numpy or CuPy, on the current
    stream), as raw bits: an integer view of the same item size copies any dtype (bfloat16 too)."""
    bits = _SAME_SIZE_INTS.get(dst.dtype.itemsize)
    if bits is not None and src.dtype == dst.dtype:
        dst.view(bits)[...] = src.view(bits)
    else:
        dst[...] = src


def cudagraphify(compiled, gm=None, *, role="inference", group=None, name="graph"):
    """Wrap a compiled graph so that its calls replay CUDA graphs (see the module docstring).

    Args:
        compiled (callable): the compiled graph, ``f(*inputs)``.
        gm (ember.fx.GraphModule or None): its FX graph, checked for what CUDA graphs cannot replay
            (random ops, in-place ops).
        role (str): ``"forward"``, ``"backward"`` or ``"inference"``.
        group (CudaGraphGroup or None): shared by the forward and backward of one compile.
        name (str): the graph's name, for messages.

    Returns:
        CudaGraphRunner: callable like ``compiled``; graphs that can never be replayed run ``compiled``
        (the runner logs why once and counts the calls in ``skips``).
    """
    return CudaGraphRunner(compiled, role=role, group=group, name=name,
                           reasons=static_reasons(compiled, gm))
