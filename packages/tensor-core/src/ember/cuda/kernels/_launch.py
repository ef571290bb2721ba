"""Kernel launches with ember's own parameter packing: ``cuLaunchKernel`` through CuPy's driver binding.

A CuPy ``RawKernel`` call builds one Python object per argument (a ``CArray`` with the shape and strides
of every array argument, a ``CScalar`` per number), looks the kernel up for the current device and pads
the grid and block tuples: about 5 µs of host time, as much as the rest of a small pointwise op. The fast
kernels pass only device pointers and numbers, so a :class:`Launcher` packs them with one
``struct.Struct.pack_into`` into a per-thread buffer of 8-byte slots whose addresses form the
``kernelParams`` array ``cuLaunchKernel`` reads (each parameter's value is read from its slot during
the call; a 4-byte ``float`` or ``int`` from the start of its slot), and calls
``cupy.cuda.driver.launchKernel`` on the current stream.

Parameter kinds (one letter each): ``p`` a device pointer (an int: ``array.data.ptr``), ``q`` a 64-bit int,
``i`` a 32-bit int, ``f`` a float, ``d`` a double. Kernels with arguments passed by value as structs keep
CuPy's launch.

:class:`RawLauncher` wraps a ``RawKernel`` for code written against CuPy's call (``kernel(grid, block, args)``):
it reads the kinds from the arguments' types (CuPy arrays, numpy and Python numbers, None for a null pointer,
converted as CuPy converts them) and hands any other argument list to CuPy's call.
"""

from __future__ import annotations

import os
import struct
import threading

import numpy as np

__all__ = ["Launcher", "RawLauncher", "SLOTS", "ENABLED"]

#: False: :class:`RawLauncher` calls CuPy's launch (for tests and benchmarks; the environment variable
#: ``EMBER_CUDA_DIRECT_LAUNCH=0`` starts a process with it, and with ``pointwise.DIRECT_LAUNCH``, off).
ENABLED = os.environ.get("EMBER_CUDA_DIRECT_LAUNCH", "1") != "0"

#: Parameters a launcher takes at most.
SLOTS = 16
_FORMATS = {"p": "Q", "Q": "Q", "q": "q", "i": "i4x", "f": "f4x", "d": "d"}


class _Params(threading.local):
    """This thread's parameter slots, the array of their addresses, and the devices whose context it has
    made current (CuPy's own launch ensures a context per thread and device; this does the same once)."""

    def __init__(self):
        self.slots = np.zeros(SLOTS, np.uint64)
        base = self.slots.ctypes.data
        self.table = np.array([base + 8 * i for i in range(SLOTS)], np.uint64)
        self.address = self.table.ctypes.data
        self.devices = set()


_params = _Params()


class Launcher:
    """``launcher(blocks, threads, *values)`` launches CuPy ``RawKernel`` ``kernel`` (1-D grid and block) with
    ``values`` of the kinds of ``layout`` (see the module docstring) on the current stream."""

    __slots__ = ("_cp", "_kernel", "_pack", "_functions")

    def __init__(self, cp, kernel, layout):
        if len(layout) > SLOTS:
            raise ValueError(f"Launcher: at most {SLOTS} parameters, got {len(layout)}")
        self._cp = cp
        self._kernel = kernel
        self._pack = struct.Struct("<" + "".join(_FORMATS[c] for c in layout)).pack_into
        self._functions = {}  # device -> the kernel's CUfunction there

    def __call__(self, blocks, threads, *values):
        cp = self._cp
        device = cp.cuda.runtime.getDevice()
        function = self._functions.get(device)
        params = _params
        if function is None or device not in params.devices:
            function = self._prepare(device)
        self._pack(params.slots, 0, *values)
        cp.cuda.driver.launchKernel(function, blocks, 1, 1, threads, 1, 1, 0, cp.cuda.get_current_stream().ptr,
                                    params.address, 0)

    def _prepare(self, device):
        return _prepare(self._cp, self._kernel, self._functions, device)


def _prepare(cp, kernel, functions, device):
    """``kernel``'s CUfunction on ``device`` (cached in ``functions``), with a context current on this thread."""
    params = _params
    if device not in params.devices:
        cp.cuda.runtime.memGetInfo()  # a CUDA context current on this thread (as CuPy's launch ensures)
        params.devices.add(device)
    function = functions.get(device)
    if function is None:
        function = functions[device] = kernel.kernel.ptr  # compiled/loaded for this device by CuPy
    return function


# how CuPy passes a kernel argument of each type (cupy/cuda/function.pyx): numpy scalars in their own type,
# Python ints as 64-bit ints, floats as doubles, bools as one byte (here the low byte of a zeroed slot)
_KINDS = {np.int64: "q", np.int32: "i", np.float32: "f", np.float64: "d", int: "q", float: "d", bool: "q",
          np.uint64: "Q", type(None): "p"}


class RawLauncher:
    """CuPy ``RawKernel`` ``kernel`` called as CuPy's ``kernel(grid, block, args)``, launched with ember's packing
    when every argument is a CuPy array, a number or None (see :data:`_KINDS`); otherwise (a struct passed by value,
    keyword arguments) by CuPy."""

    __slots__ = ("raw", "_cp", "_functions", "_packers")

    def __init__(self, cp, kernel):
        self.raw = kernel
        self._cp = cp
        self._functions = {}
        self._packers = {}  # argument types -> pack_into, or None when CuPy must launch

    def __call__(self, grid, block, args, **kwargs):
        if kwargs or not ENABLED or len(args) > SLOTS:
            return self.raw(grid, block, args, **kwargs)
        types = tuple(map(type, args))
        pack = self._packers.get(types, False)
        if pack is False:
            pack = self._packers[types] = self._packer(types)
        if pack is None:
            return self.raw(grid, block, args)
        ndarray = self._cp.ndarray
        values = [a.data.ptr if t is ndarray else (0 if a is None else a) for a, t in zip(args, types)]
        cp = self._cp
        device = cp.cuda.runtime.getDevice()
        function = self._functions.get(device)
        if function is None or device not in _params.devices:
            function = _prepare(cp, self.raw, self._functions, device)
        params = _params
        pack(params.slots, 0, *values)
        gx, gy, gz = (*grid, 1, 1)[:3]
        bx, by, bz = (*block, 1, 1)[:3]
        cp.cuda.driver.launchKernel(function, max(gx, 1), max(gy, 1), max(gz, 1), max(bx, 1), max(by, 1), max(bz, 1),
                                    0, cp.cuda.get_current_stream().ptr, params.address, 0)

    def _packer(self, types):
        ndarray = self._cp.ndarray
        kinds = []
        for t in types:
            kind = "p" if t is ndarray else _KINDS.get(t)
            if kind is None:
                return None
            kinds.append(kind)
        return struct.Struct("<" + "".join(_FORMATS[k] for k in kinds)).pack_into
