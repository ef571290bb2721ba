"""The host tests' stand-in for ``cupy.RawModule``: a CUDA C source built by g++ for the CPU.

Each host test file gives its own shim (a header standing in for CUDA's built-ins and types) that declares
``gridDim``, ``blockDim``, ``blockIdx`` and ``threadIdx``; :class:`HostModule` adds, per ``__global__``
kernel, a launcher that runs every block and thread in turn, and calls it with the arguments converted as
CuPy converts them.
"""

from __future__ import annotations

import ctypes
import hashlib
import re
import subprocess

import numpy as np

__all__ = ["HostModule"]

_LAUNCHER = r"""
extern "C" void launch_NAME(unsigned gx, unsigned bx, void** args) {
    gridDim = {gx, 1, 1};
    blockDim = {bx, 1, 1};
    for (unsigned b = 0; b < gx; ++b)
        for (unsigned t = 0; t < bx; ++t) {
            blockIdx = {b, 0, 0}; threadIdx = {t, 0, 0};
            NAME(ARGS);
        }
}
"""

# CuPy's conversions of kernel arguments: numpy scalars in their type, Python ints as int64, floats as doubles,
# bools as one byte, None as a null pointer (arrays are pointers, structured scalars are passed by value)
_CTYPES = {np.float32: ctypes.c_float, np.float64: ctypes.c_double, np.int64: ctypes.c_int64, np.int32: ctypes.c_int32,
           np.uint64: ctypes.c_uint64, np.uint32: ctypes.c_uint32, int: ctypes.c_int64, float: ctypes.c_double,
           bool: ctypes.c_bool, type(None): ctypes.c_void_p}

_KERNEL = re.compile(r'extern "C" __global__ void (?:__launch_bounds__\(\w+\)\s*)?(\w+)\((.*?)\)\s*\{', re.S)


class HostModule:
    """``cupy.RawModule(code=..., options=...)`` for the CPU: ``shim + code`` built by g++ into ``directory``
    (files named ``<prefix>_<hash>``), with floating-point contraction off, as ``--fmad=false`` has it on the GPU.

    Raises:
        AssertionError: if ``options`` lacks ``--fmad=false`` or g++ fails (its messages in the error).
    """

    def __init__(self, code, options, directory, shim, prefix):
        assert "--fmad=false" in options  # g++ contracts nothing either (-ffp-contract=off below)
        launchers = []
        for match in _KERNEL.finditer(code):
            name, params = match.group(1), [p.strip() for p in match.group(2).split(",")]
            declared = [re.sub(r"\s*\b\w+$", "", p.replace("__restrict__", "")) for p in params]
            args = ", ".join(f"*({t}*)args[{k}]" for k, t in enumerate(declared))
            launchers.append(_LAUNCHER.replace("NAME", name).replace("ARGS", args))
        source = shim + code + "".join(launchers)
        path = directory / f"{prefix}_{hashlib.sha1(source.encode()).hexdigest()[:12]}"
        path.with_suffix(".cpp").write_text(source)
        result = subprocess.run(["g++", "-std=c++17", "-O1", "-ffp-contract=off", "-Wno-unknown-pragmas", "-shared",
                                 "-fPIC", str(path.with_suffix(".cpp")), "-o", str(path.with_suffix(".so"))],
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[:3000]
        self.lib = ctypes.CDLL(str(path.with_suffix(".so")))

    def get_function(self, name):
        """``kernel(grid, block, args)`` as CuPy's ``RawKernel`` is called (one-dimensional grids and blocks)."""
        launch = getattr(self.lib, f"launch_{name}")

        def call(grid, block, args):
            keep = []
            for a in args:
                if isinstance(a, np.ndarray) and a.dtype.kind == "V" and a.dtype.type is np.void:  # a struct by value
                    keep.append((ctypes.c_char * a.nbytes).from_buffer_copy(a.tobytes()))
                elif isinstance(a, np.ndarray):
                    keep.append(ctypes.c_void_p(a.ctypes.data))
                else:
                    keep.append(_CTYPES[type(a)](a))
            pointers = (ctypes.c_void_p * len(keep))(*[ctypes.addressof(v) for v in keep])
            launch(ctypes.c_uint(grid[0]), ctypes.c_uint(block[0]), pointers)

        return call
