"""Philox4x32-10 random numbers inside generated Triton kernels (``th_random.`` in the kernel source).

The same numbers, bit for bit, as the C++ kernels' ``ember_philox_rand`` (uniforms; the normals agree to
a few ulp, through each backend's ``log``/``cos``): a Philox4x32-10 block (Salmon et al., SC'11) of counter
``(lo32(b), hi32(b), stream, 0)`` under key ``(lo32(seed), hi32(seed))`` gives four words; element
``offset`` of a uniform of random node ``stream`` is word ``offset & 3`` of block ``offset >> 2``, of a
normal words ``2j, 2j + 1`` (``j = offset & 1``) of block ``offset >> 1``; see
:mod:`ember._inductor.inkernel_random`. Here each element computes its block (the C++ kernels share one
between the elements that use it). Every argument is an int64
tensor (the seed and the ordinal broadcast to the block); the arithmetic is uint32.
"""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["philox_rand", "philox_randn"]

_M0 = tl.constexpr(0xD2511F53)
_M1 = tl.constexpr(0xCD9E8D57)
_W0 = tl.constexpr(0x9E3779B9)
_W1 = tl.constexpr(0xBB67AE85)


@triton.jit
def _philox(seed, block, stream):
    """The four words of Philox4x32-10 of counter ``(lo32(block), hi32(block), stream, 0)``, key ``seed``."""
    seed = seed.to(tl.uint64, bitcast=True)
    block = block.to(tl.uint64, bitcast=True)
    c0 = (block & 0xFFFFFFFF).to(tl.uint32)
    c1 = (block >> 32).to(tl.uint32)
    c2 = (stream.to(tl.uint64, bitcast=True) & 0xFFFFFFFF).to(tl.uint32)
    c3 = c0 ^ c0
    k0 = (seed & 0xFFFFFFFF).to(tl.uint32)
    k1 = (seed >> 32).to(tl.uint32)
    for _ in tl.static_range(10):
        a = c0
        b = c2
        c0 = tl.umulhi(b, _M1) ^ c1 ^ k0
        c2 = tl.umulhi(a, _M0) ^ c3 ^ k1
        c1 = b * _M1
        c3 = a * _M0
        k0 = k0 + _W0
        k1 = k1 + _W1
    return c0, c1, c2, c3


@triton.jit
def _u24(w):
    """The top 24 bits of word ``w`` times 2**-24: a float32 uniform in [0, 1)."""
    return (w >> 8).to(tl.int32).to(tl.float32) * 5.9604644775390625e-08


@triton.jit
def philox_rand(seed, offset, stream):
    """A float32 uniform in [0, 1) per element: word ``offset & 3`` of block ``offset >> 2``."""
    offset = offset.to(tl.uint64, bitcast=True)
    w0, w1, w2, w3 = _philox(seed, offset >> 2, stream)
    j = offset & 3
    return _u24(tl.where(j == 0, w0, tl.where(j == 1, w1, tl.where(j == 2, w2, w3))))


@triton.jit
def philox_randn(seed, offset, stream):
    """A float32 standard normal per element: Box-Muller of the uniforms of words ``2j`` and ``2j + 1``
    (``j = offset & 1``) of block ``offset >> 1``."""
    offset = offset.to(tl.uint64, bitcast=True)
    w0, w1, w2, w3 = _philox(seed, offset >> 1, stream)
    odd = (offset & 1) == 1
    u0 = _u24(tl.where(odd, w2, w0))
    u1 = _u24(tl.where(odd, w3, w1))
    return tl.sqrt(-2.0 * tl.log(1.0 - u0)) * tl.cos(6.283185307179586 * u1)
