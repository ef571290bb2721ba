"""Philox4x32-10 random numbers on the GPU: uniforms and one-pass Bernoulli masks, with a numpy reference.

Philox4x32-10 is the counter-based generator of Salmon, Moraes, Dror and Shaw, "Parallel random
numbers: as easy as 1, 2, 3" (SC 2011): a keyed bijection of 128-bit counters, ten rounds of

    (c0, c1, c2, c3) -> (hi(M1 * c2) ^ c1 ^ k0,  lo(M1 * c2),  hi(M0 * c0) ^ c3 ^ k1,  lo(M0 * c0))

with ``M0 = 0xD2511F53``, ``M1 = 0xCD9E8D57`` (``hi``/``lo``: the high and low 32 bits of the 64-bit
product), the 64-bit key ``(k0, k1)`` bumped by the Weyl constants ``W0 = 0x9E3779B9``,
``W1 = 0xBB67AE85`` between rounds. Each output word depends on nothing but its counter and the key, so
every GPU thread computes its own words with no state to load or store, and a stream is reproduced by its
key alone. :func:`philox4x32_10` is a numpy implementation of the bijection (checked against the
Random123 known-answer vectors in the tests); the CUDA C in :data:`SOURCE` computes the same words.

Layout of a stream (``key``: 64 bits, ``offset``: 64 bits, both as Python ints):

* counter of block ``j`` (``j`` = 0, 1, ...): ``(lo32(j), hi32(j), lo32(offset), hi32(offset))``, key
  ``(lo32(key), hi32(key))``; so ``offset`` selects one of 2**64 disjoint streams of one key;
* float32 (and every Bernoulli mask): element ``i`` is word ``i % 4`` of block ``i // 4``, mapped to
  ``u = (w >> 8) * 2**-24`` (the top 24 bits; every value in ``[0, 1 - 2**-24]`` exactly, never 1);
* float64: element ``i`` takes words ``(2h, 2h + 1)``, ``h = i % 2``, of block ``i // 2``:
  ``u = ((a >> 5) * 2**26 + (b >> 6)) * 2**-53`` (53 random bits, in ``[0, 1 - 2**-53]``, never 1);
* Bernoulli mask of probability ``p``: element ``i`` is ``value`` where ``u_i < p`` (``u_i`` the float32
  uniform above, compared with ``p`` exactly, as real numbers: ``(w >> 8) < ceil(p * 2**24)``, see
  :func:`threshold`) and 0 elsewhere, written in the output dtype in the same pass.

On the GPU, one thread computes one Philox block (4 float32 values or mask elements, 2 float64 values)
and stores them with one vector store where the block is whole.
"""

from __future__ import annotations

import math

import numpy as np

from .._runtime import cupy_module

__all__ = [
    "SOURCE", "M0", "M1", "W0", "W1", "philox4x32_10", "threshold", "mask_dtype_supported",
    "uniform", "bernoulli", "uniform_reference", "bernoulli_reference",
]

M0 = 0xD2511F53
M1 = 0xCD9E8D57
W0 = 0x9E3779B9
W1 = 0xBB67AE85

_THREADS = 256
_MASK32 = np.uint64(0xFFFFFFFF)
_TWO_24 = 1 << 24

# -- CUDA source -----------------------------------------------------------------------------------------

#: The CUDA C of the kernels (no headers needed; compiled by NVRTC through ``cupy.RawModule``).
SOURCE = r"""
#define EMBER_PHILOX_M0 0xD2511F53u
#define EMBER_PHILOX_M1 0xCD9E8D57u
#define EMBER_PHILOX_W0 0x9E3779B9u
#define EMBER_PHILOX_W1 0xBB67AE85u

struct ember_philox_words { unsigned int v[4]; };
template <typename S> struct __align__(4 * sizeof(S)) ember_pack4 { S v[4]; };
struct __align__(16) ember_double2 { double v[2]; };

// Philox4x32-10 of counter (lo32(j), hi32(j), lo32(offset), hi32(offset)) under key (lo32(key), hi32(key)).
__device__ __forceinline__ ember_philox_words ember_philox_block(unsigned long long j, unsigned long long key,
                                                                 unsigned long long offset) {
    unsigned int c0 = (unsigned int)j, c1 = (unsigned int)(j >> 32);
    unsigned int c2 = (unsigned int)offset, c3 = (unsigned int)(offset >> 32);
    unsigned int k0 = (unsigned int)key, k1 = (unsigned int)(key >> 32);
#pragma unroll
    for (int r = 0; r < 10; ++r) {
        const unsigned int hi0 = __umulhi(EMBER_PHILOX_M0, c0), lo0 = EMBER_PHILOX_M0 * c0;
        const unsigned int hi1 = __umulhi(EMBER_PHILOX_M1, c2), lo1 = EMBER_PHILOX_M1 * c2;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += EMBER_PHILOX_W0;  // (the bump after the last round is never used)
        k1 += EMBER_PHILOX_W1;
    }
    ember_philox_words w;
    w.v[0] = c0; w.v[1] = c1; w.v[2] = c2; w.v[3] = c3;
    return w;
}

// float32 uniforms: u = (w >> 8) * 2^-24, four per block.
extern "C" __global__ void ember_philox_uniform_f32(float* __restrict__ out, const long long n,
                                                    const unsigned long long key, const unsigned long long offset) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long first = j * 4;
    if (first >= n) return;
    const ember_philox_words w = ember_philox_block((unsigned long long)j, key, offset);
    ember_pack4<float> r;
#pragma unroll
    for (int k = 0; k < 4; ++k) r.v[k] = (float)(w.v[k] >> 8) * 5.9604644775390625e-08f;  // 2^-24, exact
    if (first + 4 <= n) {
        *reinterpret_cast<ember_pack4<float>*>(out + first) = r;
    } else {  // the last, partial block (unrolled: r stays in registers)
#pragma unroll
        for (int k = 0; k < 4; ++k) if (first + k < n) out[first + k] = r.v[k];
    }
}

// float64 uniforms: u = ((a >> 5) * 2^26 + (b >> 6)) * 2^-53 from the word pairs (0, 1) and (2, 3) of a block.
extern "C" __global__ void ember_philox_uniform_f64(double* __restrict__ out, const long long n,
                                                    const unsigned long long key, const unsigned long long offset) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long first = j * 2;
    if (first >= n) return;
    const ember_philox_words w = ember_philox_block((unsigned long long)j, key, offset);
    ember_double2 r;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const unsigned long long bits = ((unsigned long long)(w.v[2 * h] >> 5) << 26) | (w.v[2 * h + 1] >> 6);
        r.v[h] = (double)bits * 1.1102230246251565404236316680908203125e-16;  // 2^-53, exact
    }
    if (first + 2 <= n) {
        *reinterpret_cast<ember_double2*>(out + first) = r;
    } else {
        out[first] = r.v[0];
    }
}

// Bernoulli masks: value where (w >> 8) < threshold (u < p), else 0, stored as raw S-sized words (any dtype of
// that size: the caller passes value's bit pattern; 0 is all-zero bits in every supported dtype).
template <typename S>
__device__ __forceinline__ void ember_philox_bernoulli(S* __restrict__ out, const long long n,
                                                       const unsigned long long key, const unsigned long long offset,
                                                       const unsigned int threshold, const S value) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long first = j * 4;
    if (first >= n) return;
    const ember_philox_words w = ember_philox_block((unsigned long long)j, key, offset);
    ember_pack4<S> r;
#pragma unroll
    for (int k = 0; k < 4; ++k) r.v[k] = (w.v[k] >> 8) < threshold ? value : (S)0;
    if (first + 4 <= n) {
        *reinterpret_cast<ember_pack4<S>*>(out + first) = r;
    } else {  // the last, partial block (unrolled: r stays in registers)
#pragma unroll
        for (int k = 0; k < 4; ++k) if (first + k < n) out[first + k] = r.v[k];
    }
}

#define EMBER_PHILOX_BERNOULLI(SUFFIX, S)                                                                   \
    extern "C" __global__ void ember_philox_bernoulli_##SUFFIX(S* __restrict__ out, const long long n,      \
            const unsigned long long key, const unsigned long long offset, const unsigned int threshold,   \
            const S value) {                                                                               \
        ember_philox_bernoulli<S>(out, n, key, offset, threshold, value);                                  \
    }
EMBER_PHILOX_BERNOULLI(1, unsigned char)
EMBER_PHILOX_BERNOULLI(2, unsigned short)
EMBER_PHILOX_BERNOULLI(4, unsigned int)
EMBER_PHILOX_BERNOULLI(8, unsigned long long)
"""

# the word type of each storage size: the kernels write a mask element as its bit pattern
_WORDS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

_modules = {}  # device index -> cupy.RawModule of SOURCE
_functions = {}  # (device index, kernel name) -> its function


def _function(name):
    """Kernel ``name`` of :data:`SOURCE`, compiled once per GPU (CuPy also caches the binary on disk)."""
    cp = cupy_module()
    device = cp.cuda.runtime.getDevice()
    fn = _functions.get((device, name))
    if fn is None:
        module = _modules.get(device)
        if module is None:
            module = _modules[device] = cp.RawModule(code=SOURCE)
        fn = _functions[device, name] = module.get_function(name)
    return fn


# -- argument checks -------------------------------------------------------------------------------------


def _shape(shape):
    """``shape`` (an int or a sequence of ints) as a tuple, and its element count."""
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"philox: negative dimension in shape {shape}")
    return shape, math.prod(shape)


def _u64(name, value):
    """``value`` as an int in [0, 2**64).

    Raises:
        ValueError: outside that range.
    """
    value = int(value)
    if not 0 <= value < 1 << 64:
        raise ValueError(f"philox: {name} must be in [0, 2**64), got {value}")
    return value


def threshold(p):
    """The integer ``t`` with ``(w >> 8) < t`` exactly when ``u = (w >> 8) * 2**-24 < p``.

    ``u`` takes the values ``m * 2**-24``, ``m`` = 0 .. 2**24 - 1; ``m * 2**-24 < p`` holds for
    ``m < ceil(p * 2**24)`` (``p * 2**24`` is exact in double precision, a power-of-two scaling). So ``p``
    is compared as the real number it is, not rounded to float32 first: ``t`` = 0 for ``p = 0`` (all
    zeros), ``2**24`` for ``p = 1`` (all ones).

    Args:
        p (float): a probability in [0, 1].

    Returns:
        int: in ``[0, 2**24]``.

    Raises:
        ValueError: if ``p`` is not in [0, 1] (NaN included).

    Example:
        >>> threshold(0.5), threshold(1.0), threshold(0.0)
        (8388608, 16777216, 0)
    """
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"philox: p must be a probability in [0, 1], got {p}")
    return math.ceil(p * _TWO_24)


def mask_dtype_supported(dtype):
    """Whether :func:`bernoulli` writes masks of numpy ``dtype``: bool, the integer types, float16,
    bfloat16, float32 and float64 (not complex)."""
    dtype = np.dtype(dtype)
    return (dtype.kind in "biuf" or dtype.name == "bfloat16") and dtype.itemsize in _WORDS


def _value_bits(value, dtype):
    """The bit pattern of ``value`` rounded to numpy ``dtype`` (the mask's nonzero element), as a word."""
    if not mask_dtype_supported(dtype):
        raise TypeError(f"philox: masks of dtype {dtype} are not supported (bool, integers, float16, "
                        "bfloat16, float32, float64)")
    word = _WORDS[dtype.itemsize]
    return np.asarray(value, dtype=dtype).view(word)[()]


# -- GPU kernels -----------------------------------------------------------------------------------------


def _launch(name, n, per_thread, args):
    threads = -(-n // per_thread)  # one Philox block per thread
    blocks = -(-threads // _THREADS)
    _function(name)((blocks,), (_THREADS,), args)


def uniform(shape, key, offset=0, dtype=np.float32):
    """Uniform draws in [0, 1) on the current GPU, from Philox4x32-10 keyed by ``key`` (see the module docstring).

    Args:
        shape (int or tuple of int): the result's shape (any size, 0 included).
        key (int): the 64-bit key, in [0, 2**64).
        offset (int): the 64-bit stream index (words 2 and 3 of every counter), in [0, 2**64).
        dtype: ``numpy.float32`` (24 random bits, ``(w >> 8) * 2**-24``) or ``numpy.float64`` (53 bits).

    Returns:
        cupy.ndarray: C-contiguous, of ``shape`` and ``dtype``; equal bit for bit to
        :func:`uniform_reference` of the same arguments.

    Raises:
        TypeError: for another dtype.
        ValueError: for a negative dimension, or ``key``/``offset`` outside [0, 2**64).
    """
    cp = cupy_module()
    dtype = np.dtype(dtype)
    if dtype != np.float32 and dtype != np.float64:
        raise TypeError(f"philox.uniform: dtype must be float32 or float64, got {dtype}")
    shape, n = _shape(shape)
    key, offset = _u64("key", key), _u64("offset", offset)
    out = cp.empty(shape, dtype)
    if n:
        if dtype == np.float32:
            _launch("ember_philox_uniform_f32", n, 4, (out, np.int64(n), np.uint64(key), np.uint64(offset)))
        else:
            _launch("ember_philox_uniform_f64", n, 2, (out, np.int64(n), np.uint64(key), np.uint64(offset)))
    return out


def bernoulli(shape, p, dtype, key, offset=0, value=1):
    """A Bernoulli mask on the current GPU in one pass: ``value`` where ``u < p``, else 0.

    ``u`` is exactly :func:`uniform`'s float32 draw for the same ``key`` and ``offset``, so
    ``bernoulli(s, p, d, k) == (uniform(s, k) < p)`` element for element (``p`` compared exactly, see
    :func:`threshold`); the uniforms are never stored. With ``value = 1 / keep`` it is dropout's scaled mask.

    Args:
        shape (int or tuple of int): the result's shape.
        p (float): the probability of ``value``, in [0, 1].
        dtype: the result's numpy dtype: bool, an integer type, float16, bfloat16, float32 or float64.
        key (int): the 64-bit key, in [0, 2**64).
        offset (int): the 64-bit stream index, in [0, 2**64).
        value (number): the nonzero element, rounded to ``dtype`` (default 1).

    Returns:
        cupy.ndarray: C-contiguous, of ``shape`` and ``dtype``; equal to :func:`bernoulli_reference`.

    Raises:
        TypeError: for another dtype (complex).
        ValueError: for ``p`` outside [0, 1], a negative dimension, or ``key``/``offset`` out of range.
    """
    cp = cupy_module()
    dtype = np.dtype(dtype)
    bits = _value_bits(value, dtype)
    t = threshold(p)
    shape, n = _shape(shape)
    key, offset = _u64("key", key), _u64("offset", offset)
    out = cp.empty(shape, dtype)
    if n:
        # bfloat16 arrays are handed over as their 16-bit words (the kernel writes bit patterns anyway)
        target = out if dtype.kind in "biuf" else out.view(_WORDS[dtype.itemsize])
        _launch(f"ember_philox_bernoulli_{dtype.itemsize}", n, 4,
                (target, np.int64(n), np.uint64(key), np.uint64(offset), np.uint32(t), bits))
    return out


# -- numpy reference -------------------------------------------------------------------------------------


def philox4x32_10(counter, key):
    """The Philox4x32-10 bijection in numpy: the reference the CUDA kernels are checked against.

    Args:
        counter (array-like of uint32, shape ``(..., 4)``): counters ``(c0, c1, c2, c3)``.
        key (array-like of uint32, shape ``(..., 2)``, broadcastable to the counters): keys ``(k0, k1)``.

    Returns:
        numpy.ndarray: uint32 of shape ``(..., 4)``: the output words.

    Example:
        >>> [f"{w:08x}" for w in philox4x32_10([0, 0, 0, 0], [0, 0])]
        ['6627e8d5', 'e169c58d', 'bc57ac4c', '9b00dbd8']
    """
    counter = np.asarray(counter, dtype=np.uint32)
    key = np.asarray(key, dtype=np.uint32)
    if counter.shape[-1:] != (4,) or key.shape[-1:] != (2,):
        raise ValueError(f"philox4x32_10: counters end in 4 words and keys in 2, got {counter.shape} and {key.shape}")
    # 32-bit words held in uint64, so that a product of two of them is exact
    c0, c1, c2, c3 = (counter[..., i].astype(np.uint64) for i in range(4))
    k0, k1 = key[..., 0].astype(np.uint64), key[..., 1].astype(np.uint64)
    m0, m1, w0, w1 = np.uint64(M0), np.uint64(M1), np.uint64(W0), np.uint64(W1)
    shift = np.uint64(32)
    for r in range(10):
        if r:
            k0 = (k0 + w0) & _MASK32
            k1 = (k1 + w1) & _MASK32
        p0 = m0 * c0
        p1 = m1 * c2
        c0, c1, c2, c3 = (p1 >> shift) ^ c1 ^ k0, p1 & _MASK32, (p0 >> shift) ^ c3 ^ k1, p0 & _MASK32
    return np.stack(np.broadcast_arrays(c0, c1, c2, c3), axis=-1).astype(np.uint32)


def _words(blocks, key, offset):
    """The words of Philox blocks 0 .. ``blocks - 1`` of stream ``(key, offset)``: uint32 ``(blocks, 4)``."""
    j = np.arange(blocks, dtype=np.uint64)
    counter = np.empty((blocks, 4), np.uint32)
    counter[:, 0] = j & _MASK32
    counter[:, 1] = j >> np.uint64(32)
    counter[:, 2] = offset & 0xFFFFFFFF
    counter[:, 3] = offset >> 32
    return philox4x32_10(counter, [key & 0xFFFFFFFF, key >> 32])


def uniform_reference(shape, key, offset=0, dtype=np.float32):
    """:func:`uniform` computed in numpy on the host (same arguments, same values bit for bit).

    Example:
        >>> uniform_reference(3, key=0).tolist()
        [0.3990464210510254, 0.8805201649665833, 0.7357127666473389]
    """
    dtype = np.dtype(dtype)
    if dtype != np.float32 and dtype != np.float64:
        raise TypeError(f"philox.uniform_reference: dtype must be float32 or float64, got {dtype}")
    shape, n = _shape(shape)
    key, offset = _u64("key", key), _u64("offset", offset)
    if dtype == np.float32:
        w = _words(-(-n // 4), key, offset).reshape(-1)[:n]
        return ((w >> 8).astype(np.float32) * np.float32(2.0**-24)).reshape(shape)
    w = _words(-(-n // 2), key, offset).reshape(-1, 2)[:n].astype(np.uint64)
    bits = ((w[:, 0] >> np.uint64(5)) << np.uint64(26)) | (w[:, 1] >> np.uint64(6))
    return (bits.astype(np.float64) * 2.0**-53).reshape(shape)


def bernoulli_reference(shape, p, dtype, key, offset=0, value=1):
    """:func:`bernoulli` computed in numpy on the host (same arguments, same values bit for bit)."""
    dtype = np.dtype(dtype)
    bits = _value_bits(value, dtype)
    t = threshold(p)
    shape, n = _shape(shape)
    key, offset = _u64("key", key), _u64("offset", offset)
    w = _words(-(-n // 4), key, offset).reshape(-1)[:n]
    out = np.where((w >> 8) < t, bits, bits.dtype.type(0))
    return out.view(dtype).reshape(shape)
