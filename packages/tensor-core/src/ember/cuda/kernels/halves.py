"""CUDA C of the 16-bit float storage types, shared by the generated kernels that read or write them.

float16 and bfloat16 are loaded as 16-bit words (structs ``f16`` and ``bf16``) and computed in float32:
``to_acc(v)`` widens a value exactly, ``put(&slot, f)`` rounds a float to nearest even and stores it. No CUDA
header is needed (NVRTC finds none by default): float16 converts with the PTX instructions ``cvt.f32.f16`` and
``cvt.rn.f16.f32``, bfloat16 with bit arithmetic (its bits are the top half of a float32's). A NaN stays a quiet
NaN (bfloat16 keeps the sign and the top payload bits, as ml_dtypes does).

The float16 half uses inline PTX, which only a CUDA compiler takes: sources for other dtypes leave it out
(the host tests compile the pointwise kernels with g++).
"""

from __future__ import annotations

__all__ = ["F16_SOURCE", "BF16_SOURCE", "SOURCE", "SOURCES", "CTYPES"]

F16_SOURCE = r"""
struct f16 { unsigned short x; };
__device__ __forceinline__ float to_acc(f16 v) {
    float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.x)); return f;
}
__device__ __forceinline__ void put(f16* p, float v) {
    unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v)); p->x = h;
}
"""

BF16_SOURCE = r"""
struct bf16 { unsigned short x; };
__device__ __forceinline__ float to_acc(bf16 v) { return __uint_as_float(((unsigned int)v.x) << 16); }
__device__ __forceinline__ void put(bf16* p, float v) {
    unsigned int u = __float_as_uint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) { p->x = (unsigned short)((u >> 16) | 0x40u); return; }  // NaN stays NaN
    u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
    p->x = (unsigned short)(u >> 16);
}
"""

#: both types (for kernels compiled once for every dtype)
SOURCE = F16_SOURCE + BF16_SOURCE

#: the source of each 16-bit storage type, by its name in CUDA C (for kernels that include only the one they use)
SOURCES = {"f16": F16_SOURCE, "bf16": BF16_SOURCE}

#: numpy dtype name -> (storage type, compute type) in the CUDA source of the kernels built on these types
CTYPES = {"float32": ("float", "float"), "float64": ("double", "double"), "float16": ("f16", "float"),
          "bfloat16": ("bf16", "float")}
