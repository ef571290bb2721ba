"""Compiling generated Triton source and launching its kernels on ember tensors.

* :func:`load_module` writes a module's source to the on-disk cache
  (``<cache_dir>/triton/<key>.py``, ``key`` the sha256 of the source and the Triton and ember-inductor
  versions; written atomically, as :mod:`~ember._inductor.codecache` does) and imports it. Triton
  compiles each kernel to device code on its first launch (and caches that itself).
* :class:`BufferArg` is what a kernel receives for an ember tensor: its data pointer and dtype. On cuda
  (CuPy memory) Triton needs only those; under Triton's interpreter (``TRITON_INTERPRET=1``, ember cpu
  tensors, numpy memory) the interpreter also asks for ``untyped_storage``, ``storage_offset``,
  ``size``, ``stride``, ``new_empty``, ``set_`` and ``copy_`` - the memory is already on the host, so
  the "copy to the host and back" it does is a no-op on the same numpy array.
* :func:`launch` runs one kernel with a config (``XBLOCK``/``RBLOCK``/``num_warps``) on ember's current
  cuda stream (:func:`use_ember_stream`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import sys
import threading
from pathlib import Path

from .. import config
from ..codecache import _write_atomic as write_atomic

__all__ = ["load_module", "module_path", "BufferArg", "launch", "use_ember_stream", "grid", "kernel_times",
           "kernel_times_table"]

_loaded = {}
_lock = threading.Lock()


@functools.cache
def _versions():
    import triton

    try:
        from importlib.metadata import version

        inductor = version("ember-inductor")
    except Exception:  # a source checkout without metadata
        inductor = "0+unknown"
    return f"triton {triton.__version__}; ember-inductor {inductor}"


def module_path(source: str) -> Path:
    """Where the module of ``source`` lives in the cache (content-hashed name)."""
    digest = hashlib.sha256()
    for part in (source, _versions()):
        digest.update(part.encode())
        digest.update(b"\x00\x01")
    key = digest.hexdigest()
    return config.resolved_cache_dir() / "triton" / key[:2] / f"k{key}.py"


def load_module(source: str):
    """Import the Triton module of ``source`` (written to the cache first when absent).

    Args:
        source (str): a module's text (see :func:`ember._inductor.codegen.triton.generate`).

    Returns:
        module: the imported module; its attribute ``__file__`` is the cached file.
    """
    path = module_path(source)
    with _lock:
        module = _loaded.get(path)
        if module is not None:
            return module
        if not path.exists() or path.read_text(encoding="utf-8") != source:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, source)
        name = f"ember_triton_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # Triton's jit reads the kernels' source through the module
        spec.loader.exec_module(module)
        _loaded[path] = module
        return module


def _host_address(array):
    """The address of a numpy array's first element (``ctypes`` refuses bfloat16's dtype; this does not)."""
    return array.__array_interface__["data"][0]


class _HostStorage:
    """The interpreter's view of a numpy array's memory (already on the host: ``cpu()`` is itself)."""

    def __init__(self, array):
        self.array = array

    def data_ptr(self):
        return _host_address(self.array)

    def cpu(self):
        return self

    def copy_(self, other):
        return self


class _DtypeName:
    """A dtype Triton can name (it reads the text after the last dot: ``float32`` -> ``fp32``).

    One object per name, kept for the process (:func:`_dtype_name`): Triton's argument specialisation
    caches what it learnt of a dtype object by its identity, so a short-lived object whose address is
    reused by another dtype's would be taken for that one.
    """

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"ember.{self.name}"


_DTYPE_NAMES = {}


def _dtype_name(name):
    found = _DTYPE_NAMES.get(name)
    if found is None:
        found = _DTYPE_NAMES.setdefault(name, _DtypeName(name))
    return found


class BufferArg:
    """A kernel argument for an ember tensor's memory: ``data_ptr()`` and ``dtype``, plus what Triton's
    interpreter asks of a tensor.

    Args:
        tensor (Tensor): an ember tensor (cpu: numpy memory; cuda: CuPy memory).
    """

    __slots__ = ("array", "dtype", "_ptr", "_offset", "_base")

    def __init__(self, tensor=None, *, array=None, dtype_name=None):
        if tensor is not None:
            array = tensor._data
            dtype_name = str(tensor.dtype).replace("ember.", "")
        self.array = array
        self.dtype = _dtype_name(dtype_name)
        self._offset = 0
        self._base = array
        if hasattr(array, "__cuda_array_interface__"):  # CuPy
            self._ptr = array.__cuda_array_interface__["data"][0]
        else:
            self._ptr = _host_address(array)

    def data_ptr(self):
        """The address of the first element."""
        return self._ptr + self._offset * self.array.itemsize

    # the interpreter's protocol (see the module docstring)
    def untyped_storage(self):
        return _HostStorage(self._base)

    def storage_offset(self):
        return self._offset

    def size(self):
        return tuple(self.array.shape)

    def stride(self):
        return tuple(s // self.array.itemsize for s in self.array.strides)

    def new_empty(self, *args, **kwargs):
        return BufferArg(array=self.array, dtype_name=self.dtype.name)

    def set_(self, storage, offset, size, stride):
        self._base = storage.array
        self._ptr = _host_address(storage.array)
        self._offset = offset
        return self

    def copy_(self, other):
        return self


def grid(kernel, cfg, xnumel):
    """The launch grid of ``kernel`` (a :class:`~ember._inductor.codegen.triton.TritonKernelSource`)."""
    from ..codegen.triton import SPLIT

    blocks = max(1, -(-int(xnumel) // cfg["XBLOCK"]))
    return (blocks, SPLIT, 1) if kernel.kind == "split" else (blocks, 1, 1)


_stream_patched = False


def use_ember_stream():
    """Make Triton launch on ember's (CuPy's) current stream and device instead of device 0's default stream.

    Triton without PyTorch asks its driver for the "current stream" and "current device"; this points
    those questions at CuPy's, which are ember's (``ember.cuda.stream``, ``ember.cuda.device``). Done once
    per process; it changes what Triton's driver object answers for every Triton user of the process.
    """
    global _stream_patched
    if _stream_patched:
        return
    import cupy
    from triton.runtime import driver

    active = driver.active
    active.get_current_stream = lambda device=None: cupy.cuda.get_current_stream().ptr
    active.get_current_device = lambda: cupy.cuda.Device().id  # ember's current device is CuPy's
    _stream_patched = True


def launch(fn, kernel, args, cfg, xnumel):
    """Launch compiled kernel ``fn`` with ``args`` (pointers, then sizes) and config ``cfg``.

    Args:
        fn: the ``@triton.jit`` function.
        kernel (TritonKernelSource): its description (kind, for the grid).
        args (list): :class:`BufferArg` s then ints, in the kernel's argument order.
        cfg (dict): ``XBLOCK``, ``RBLOCK`` (reductions), ``num_warps``.
        xnumel (int): the rows / outputs the grid covers.
    """
    meta = {"XBLOCK": cfg["XBLOCK"]}
    if kernel.kind != "pointwise":
        meta["RBLOCK"] = cfg["RBLOCK"]
    if _interpreting():
        import numpy as np

        # the interpreter computes with numpy: log(0) = -inf, 0/0 = nan are values here, not warnings
        # (masked-out lanes compute on padding too)
        with np.errstate(all="ignore"):
            fn[grid(kernel, cfg, xnumel)](*args, **meta)
        return
    key = (Path(fn.fn.__code__.co_filename).name, kernel.name, f"{kernel.kind} x={int(xnumel)} {cfg}") \
        if _timing_kernels() else None
    with timer(key):
        fn[grid(kernel, cfg, xnumel)](*args, **meta, num_warps=cfg.get("num_warps", 4))


#: ``(module file, kernel name, details) -> [launches, total ms]`` while ``EMBER_TRITON_KERNEL_TIMES=1``
#: (Triton kernels and extern calls of compiled cuda graphs).
kernel_times: dict = {}


@functools.cache
def _timing_kernels() -> bool:
    """Whether each launch is timed (``EMBER_TRITON_KERNEL_TIMES=1``, read once): a diagnostic that
    synchronises after every kernel, so it shows where a compiled step's GPU time goes, not its speed."""
    import os

    if os.environ.get("EMBER_TRITON_KERNEL_TIMES") != "1":
        return False
    import atexit

    atexit.register(lambda: print(kernel_times_table(), file=sys.stderr))
    return True


def timer(key):
    """A context that adds the GPU milliseconds of the work queued inside it to ``kernel_times[key]``
    (two CUDA events, then a synchronisation), or does nothing when ``key`` is None (timing off)."""
    return _timed(key) if key is not None else contextlib.nullcontext()


@contextlib.contextmanager
def _timed(key):  # pragma: no cover - needs a GPU
    import cupy

    stream = cupy.cuda.get_current_stream()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record(stream)
    yield
    end.record(stream)
    end.synchronize()
    entry = kernel_times.setdefault(key, [0, 0.0])
    entry[0] += 1
    entry[1] += cupy.cuda.get_elapsed_time(start, end)


def kernel_times_table(top: int = 40) -> str:
    """The kernels of :data:`kernel_times` by total time: launches, total and mean milliseconds."""
    rows = sorted(kernel_times.items(), key=lambda item: -item[1][1])[:top]
    lines = ["triton kernel times (synchronised launches): total ms, launches, mean us, kernel"]
    for (module, name, details), (count, total) in rows:
        lines.append(f"{total:9.3f} {count:6d} {1e3 * total / count:9.1f}  {module}:{name} {details}")
    return "\n".join(lines)


def _interpreting():
    from .triton_helpers import interpreting

    return interpreting()
