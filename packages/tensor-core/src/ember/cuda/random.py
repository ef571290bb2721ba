"""Per-GPU random number generators (``ember.cuda.manual_seed`` and friends).

Each GPU has a default :class:`ember.Generator` of its own (device ``cuda:i``),
created on first use and seeded from the last :func:`ember.manual_seed` (which
also reseeds existing ones), so programs that seed once are reproducible on
every device, as in PyTorch. The generators draw with the same PCG64 stream as
CPU generators, on the host, and the values are copied to the GPU: a CUDA
tensor drawn after ``manual_seed(s)`` equals the CPU tensor drawn after the
same seed.

The random ops' CUDA kernels (registered by :mod:`ember.cuda._backend`) draw this
way too: factories and in-place samplers copy host draws to the GPU; samplers of
GPU tensors given a generator (``bernoulli``, ``bernoulli_(p)``, :func:`multinomial`)
compute on the GPU from uploaded draws (:class:`DeviceDraws`), never copying the
tensors to the host. Noise drawn with the default generator inside kernels
(``bernoulli``, so dropout; RReLU; Gumbel noise) is made on the GPU by ember's
counter-based Philox4x32-10 kernels (:mod:`ember.cuda.kernels.philox`), keyed by
the GPU generator (:class:`DeviceNoise`): large masks would cost too much as host
draws, so those values differ from the CPU's.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _random

__all__ = [
    "default_generators", "generator_for", "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed",
    "get_rng_state", "set_rng_state", "DeviceDraws", "DeviceNoise", "DeviceNoiseDraws", "device_rng", "multinomial",
]

_generators = {}  # device index -> ember.Generator


def generator_for(index):
    """The default generator of GPU ``index``, created (and seeded) on first use."""
    gen = _generators.get(index)
    if gen is None:
        gen = _random.Generator(f"cuda:{index}")
        gen.manual_seed(_random.device_initial_seed())
        _generators[index] = gen
    return gen


class _DefaultGenerators:
    """``ember.cuda.default_generators``: one generator per GPU, indexable like PyTorch's tuple."""

    def __len__(self):
        from . import device_count

        return device_count()

    def __getitem__(self, index):
        if not -len(self) <= index < len(self):
            raise IndexError(f"default_generators index {index} out of range for {len(self)} device(s)")
        return generator_for(index % len(self))

    def __iter__(self):
        return (self[i] for i in range(len(self)))


default_generators = _DefaultGenerators()


def _index(device):
    from . import _device_index

    return _device_index(device)


def manual_seed(seed):
    """Seed the current GPU's default generator with ``seed`` (any integer).

    Without CUDA it does nothing, as in PyTorch, so seeding code runs on any machine
    (``ember.manual_seed`` also seeds the GPUs' generators when they are created).
    """
    from ._runtime import is_available

    if not is_available():
        return
    generator_for(_index(None)).manual_seed(int(seed))


def manual_seed_all(seed):
    """Seed every GPU's default generator with ``seed``."""
    from . import device_count

    for index in range(device_count()):
        generator_for(index).manual_seed(int(seed))


def seed():
    """Seed the current GPU's generator from OS entropy."""
    generator_for(_index(None)).seed()


def seed_all():
    """Seed every GPU's generator from one draw of OS entropy."""
    from . import device_count

    value = generator_for(_index(None)).seed()
    for index in range(device_count()):
        generator_for(index).manual_seed(value)


def initial_seed():
    """The seed of the current GPU's generator."""
    return generator_for(_index(None)).initial_seed()


def get_rng_state(device=None):
    """The state of a GPU's generator as a uint8 CPU tensor."""
    return generator_for(_index(device)).get_state()


def set_rng_state(new_state, device=None):
    """Restore a GPU's generator from :func:`get_rng_state`'s tensor."""
    generator_for(_index(device)).set_state(new_state)


def _reseed_existing(seed):
    # ember.manual_seed(s): existing GPU generators restart from s; later ones start from it.
    for gen in _generators.values():
        gen.manual_seed(seed)


_random.register_device_seed_hook(_reseed_existing)


# -- kernels of the random ops on the GPU ----------------------------------------------------------------
# Values are drawn on the host from the GPU's generator (as the factories' are) and copied over; anything
# computed from tensor arguments (probabilities, weights) is computed on the GPU, from the uploaded draws.


class _UploadedDraws:
    """A numpy ``Generator`` look-alike over ``rng`` whose array results come back as CuPy arrays."""

    def __init__(self, rng):
        self._rng = rng

    def __getattr__(self, name):
        method = getattr(self._rng, name)

        def draw(*args, **kwargs):
            from ._backend import upload

            result = method(*args, **kwargs)
            return upload(result) if isinstance(result, np.ndarray) else result

        return draw


class DeviceDraws:
    """What a CPU sampling kernel takes as ``generator=`` on the GPU: its draws land on the GPU.

    CPU kernels read a generator's ``_rng`` (a numpy ``Generator``); this one's
    draws come from ``generator`` (a cuda :class:`ember.Generator`, whose state
    they advance) and are copied to the current GPU, so that the kernel's
    arithmetic on them and on CuPy arrays runs on the GPU.
    """

    def __init__(self, generator):
        self.device = generator.device
        self._rng = _UploadedDraws(generator._rng)


class DeviceNoise:
    """Noise for kernels that draw from a GPU's default generator (dropout masks, RReLU slopes, Gumbel
    noise), made on the GPU: ``random``, ``standard_exponential`` and ``standard_normal`` with numpy
    ``Generator``'s signatures, returning CuPy arrays, and the one-pass Bernoulli mask :meth:`bernoulli`.

    Each draw takes one 64-bit key from ``generator`` (:meth:`key`, advancing its state, so
    ``ember.manual_seed`` and ``get_rng_state``/``set_rng_state`` reproduce it) and runs ember's
    Philox4x32-10 kernels (:mod:`ember.cuda.kernels.philox`; Salmon et al., "Parallel random numbers: as
    easy as 1, 2, 3", SC 2011) from that key: a counter-based generator has no state on the GPU to set up,
    so a draw is one kernel launch. Drawing the values on the host and copying them, as the random
    factories do, costs about a second for the 100M-element attention-dropout mask of one
    transformer-layer step. The values differ from the CPU's draws for the same seed (as PyTorch's CUDA
    masks differ from its CPU masks).
    """

    def __init__(self, generator):
        self._generator = generator

    def key(self):
        """One key for a Philox stream: an integer in [0, 2**63) drawn from the generator (advancing it)."""
        return int(self._generator._rng.integers(0, 2**63))

    def random(self, size=None, dtype=np.float32):
        """Uniform draws in [0, 1) of shape ``size`` (``()`` when None), float32 unless ``dtype`` is float64.

        float32 values are ``(w >> 8) * 2**-24`` of the Philox words, float64 ones carry 53 random bits
        (:func:`ember.cuda.kernels.philox.uniform`); masks compare ``u < keep``.

        Raises:
            TypeError: for a dtype other than float32 and float64 (as numpy's ``Generator.random``).
        """
        from .kernels import philox

        return philox.uniform(_size(size), self.key(), 0, dtype)

    def bernoulli(self, size, p, dtype, value=1):
        """A mask of shape ``size`` and numpy ``dtype``: ``value`` with probability ``p``, else 0, in one pass.

        Element for element it is ``random(size) < p`` for the same generator state (``p`` compared
        exactly), with the uniforms never stored (:func:`ember.cuda.kernels.philox.bernoulli`).

        Raises:
            TypeError: for a dtype the kernel does not write (complex).
            ValueError: for ``p`` outside [0, 1].
        """
        from .kernels import philox

        return philox.bernoulli(_size(size), p, dtype, self.key(), 0, value)

    def standard_exponential(self, size=None, dtype=np.float64):
        """Draws of the exponential distribution of rate 1, of shape ``size`` and ``dtype``: ``-log(1 - u)``
        of :meth:`random`'s uniforms (inversion; ``1 - u`` is in ``(0, 1]``, so the values are finite)."""
        e = self.random(size, np.float64 if np.dtype(dtype) == np.float64 else np.float32)
        cp = _cupy()
        cp.negative(e, out=e)
        cp.log1p(e, out=e)
        cp.negative(e, out=e)
        return e.astype(dtype, copy=False)

    def standard_normal(self, size=None, dtype=np.float64):
        """Draws of the standard normal distribution, of shape ``size`` and ``dtype``: Box-Muller
        (``sqrt(-2 log(1 - u1)) * cos(2 pi u2)``) of two float64 uniforms per value (Box and Muller, "A note
        on the generation of random normal deviates", 1958)."""
        shape = _size(size)
        n = math.prod(shape)
        cp = _cupy()
        u = self.random((2, n), np.float64)
        radius = cp.sqrt(-2.0 * cp.log1p(-u[0]))
        z = radius * cp.cos((2.0 * math.pi) * u[1])
        return z.reshape(shape).astype(dtype, copy=False)


def _size(size):
    """numpy's ``size`` argument as a shape tuple (None: a single value, shape ``()``)."""
    if size is None:
        return ()
    if isinstance(size, (int, np.integer)):
        return (int(size),)
    return tuple(int(s) for s in size)


def _cupy():
    from ._runtime import cupy_module

    return cupy_module()


class DeviceNoiseDraws:
    """``generator=`` for a CPU sampling kernel run on the GPU whose draws are made on the GPU
    (:class:`DeviceNoise`): what ``bernoulli`` (and so dropout) uses with the default generator."""

    def __init__(self, generator):
        self.device = generator.device
        self._rng = DeviceNoise(generator)


def device_rng(index=None):
    """A :class:`DeviceNoise` over GPU ``index``'s default generator (the current GPU when None): for
    kernels that draw from the default generator (dropout masks, noise) and run on the GPU."""
    return DeviceNoise(generator_for(_index(index)))


def multinomial(weights, num_samples, replacement, generator):
    """``ember.multinomial`` of the rows of CuPy array ``weights`` (2-D, float64) on the GPU.

    The same draws as the CPU kernel for the same generator state: uniforms (with
    replacement, inverse-CDF) or exponential keys ``E / w`` (without; the
    ``num_samples`` smallest keys, the categories of weight 0 last, ordered by
    ``E``), drawn on the host and copied over; the search and the sorts run on
    the GPU.

    Raises:
        RuntimeError: on weights that are negative, inf or nan, or a row that sums to 0 (checking them
            reads one flag back, as PyTorch's check does).
    """
    from .._ops.random import check_multinomial_weights
    from ._backend import upload
    from ._runtime import cupy_module

    cp = cupy_module()
    rows, k = weights.shape
    n = int(num_samples)
    rng = generator._rng
    if rows == 0:
        return cp.empty((0, n), np.int64)
    check_multinomial_weights(cp, weights)
    if replacement:
        cdf = cp.cumsum(weights, axis=1)
        u = upload(rng.random((rows, n)))
        targets = u * cdf[:, -1:]
        out = cp.empty((rows, n), np.int64)
        for r in range(rows):  # one binary search per row (rows are few where sampling is done)
            out[r] = cp.searchsorted(cdf[r], targets[r], side="right")
        # u * total can round up to total: clamp to each row's last category of positive weight
        last = k - 1 - cp.argmax((weights > 0)[:, ::-1], axis=1)
        return cp.minimum(out, last[:, None])
    e = upload(rng.standard_exponential((rows, k)))
    positive = weights > 0
    # the positive weights in order of their keys E / w (ties have probability 0) ...
    by_key = cp.argsort(cp.where(positive, e / cp.where(positive, weights, 1.0), cp.inf), axis=1)
    # ... then the weights 0, in order of E (as the CPU kernel's lexsort by (key, E) puts them)
    zeros_by_e = cp.argsort(cp.where(positive, -cp.inf, e), axis=1)
    count = positive.sum(axis=1)[:, None]
    order = cp.where(cp.arange(k)[None, :] < count, by_key, zeros_by_e)
    return cp.ascontiguousarray(order[:, :n]).astype(np.int64, copy=False)
