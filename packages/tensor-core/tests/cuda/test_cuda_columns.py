"""The column kernels (ember.cuda.kernels.columns): a bias added to rows, and column sums.

Their CUDA C is also compiled for the CPU by g++ (threads run one after another: the kernels use no
barriers) and checked against numpy here; on a GPU the same checks run on the device.
"""

import ctypes
import hashlib
import shutil
import subprocess
import types

import numpy as np
import pytest

from ember.cuda.kernels import columns

_SHIM = r"""
struct ember_dim3 { unsigned x, y, z; };
static ember_dim3 threadIdx, blockIdx, blockDim, gridDim;
#define __global__
#define __restrict__ __restrict
"""
_LAUNCHER = r"""
extern "C" void launch(unsigned gx, unsigned gy, unsigned bx, void** args) {
    gridDim = {gx, gy, 1};
    blockDim = {bx, 1, 1};
    for (unsigned y = 0; y < gy; ++y)
        for (unsigned x = 0; x < gx; ++x)
            for (unsigned t = 0; t < bx; ++t) {
                blockIdx = {x, y, 0}; threadIdx = {t, 0, 0};
                NAME(ARGS);
            }
}
"""


class _HostKernel:
    """``cupy.RawKernel`` for the CPU: ``kernel(grid, block, args)`` with CuPy's argument conventions."""

    def __init__(self, code, name, directory):
        import re

        params = re.search(rf"void {name}\((.*?)\)", code, re.S).group(1).split(",")
        declared = [re.sub(r"\s*\b\w+$", "", p.replace("__restrict__", "").strip()) for p in params]
        args = ", ".join(f"*({t}*)args[{k}]" for k, t in enumerate(declared))
        source = _SHIM + code + _LAUNCHER.replace("NAME", name).replace("ARGS", args)
        path = directory / f"columns_{hashlib.sha1(source.encode()).hexdigest()[:12]}"
        path.with_suffix(".cpp").write_text(source)
        subprocess.run(["g++", "-O1", "-shared", "-fPIC", str(path.with_suffix(".cpp")), "-o",
                        str(path.with_suffix(".so"))], check=True, capture_output=True)
        self.launch = ctypes.CDLL(str(path.with_suffix(".so"))).launch
        self.arity = len(params)

    def __call__(self, grid, block, args):
        assert len(args) == self.arity
        values = [ctypes.c_void_p(a.ctypes.data) if isinstance(a, np.ndarray) else ctypes.c_int64(int(a))
                  for a in args]
        pointers = (ctypes.c_void_p * len(values))(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p)
                                                     for v in values])
        grid = tuple(grid) + (1,) * (2 - len(grid))
        self.launch(ctypes.c_uint(grid[0]), ctypes.c_uint(grid[1]), ctypes.c_uint(block[0]), pointers)


@pytest.fixture
def host_xp(tmp_path_factory, monkeypatch):
    """numpy in CuPy's place, with RawKernel compiled by g++ (skips without g++); new arrays hold NaN."""
    if shutil.which("g++") is None:
        pytest.skip("needs g++ to compile the CUDA kernels for the CPU")
    directory = tmp_path_factory.mktemp("columns")
    fake = types.SimpleNamespace(
        ndarray=lambda shape, dtype: np.full(shape, np.nan, dtype),  # what columns allocates with (cupy.empty's core)
        RawKernel=lambda code, name, options=(): _HostKernel(code, name, directory),
    )
    monkeypatch.setattr(columns, "cupy_module", lambda: fake)
    monkeypatch.setattr(columns, "_kernels", {})
    return np


def _device_xp():
    import ember

    ember.cuda.init()
    import cupy

    return cupy


SHAPES = [(1, 1), (7, 5), (128, 512), (256, 3), (257, 3), (1000, 300), (3, 1000)]


def _check_add_to_rows(xp, dtype):
    rng = np.random.default_rng(0)
    for rows, cols in SHAPES:
        out = rng.standard_normal((rows, cols)).astype(dtype)
        bias = rng.standard_normal(cols).astype(dtype)
        bias[0] = np.inf if cols > 1 else bias[0]
        want = out + bias  # one IEEE addition per element (float16: in float32, rounded once): the same bits
        got = columns.add_to_rows(xp.asarray(out), xp.asarray(bias))
        np.testing.assert_array_equal(np.asarray(got.get() if hasattr(got, "get") else got), want)


def _check_column_sums(xp, dtype, chunk):
    rng = np.random.default_rng(1)
    for rows, cols in SHAPES + [(chunk * 3 + 1, 4), (chunk * 2, 2)]:
        x = rng.standard_normal((rows, cols)).astype(dtype)
        got = columns.column_sums(xp.asarray(x))
        got = np.asarray(got.get() if hasattr(got, "get") else got)
        assert got.shape == (cols,) and got.dtype == dtype
        # float64 accumulation in a fixed order, then rounded once: within one rounding of the exact sum
        exact = x.astype(np.float64).sum(axis=0)
        np.testing.assert_allclose(got, exact.astype(dtype), rtol=np.finfo(dtype).eps * 2, atol=1e-12)
        # the same order on every call
        again = columns.column_sums(xp.asarray(x))
        np.testing.assert_array_equal(np.asarray(again.get() if hasattr(again, "get") else again), got)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_add_to_rows_on_the_host(host_xp, dtype):
    _check_add_to_rows(host_xp, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_column_sums_on_the_host(host_xp, dtype, monkeypatch):
    monkeypatch.setattr(columns, "CHUNK", 16)  # several chunks, and the second pass, on small matrices
    _check_column_sums(host_xp, dtype, 16)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_add_to_rows_on_the_gpu(dtype):
    _check_add_to_rows(_device_xp(), dtype)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_column_sums_on_the_gpu(dtype):
    _check_column_sums(_device_xp(), dtype, columns.CHUNK)
