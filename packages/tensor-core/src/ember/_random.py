"""Random number generators: :class:`Generator` and the default generator.

Every random op (``ember.rand``, ``Tensor.normal_``, ...) draws from a
:class:`Generator`: the one passed as ``generator=``, or
:data:`default_generator`. A generator wraps a numpy ``np.random.Generator``
over a PCG64 bit generator (O'Neill, "PCG: A Family of Simple Fast
Space-Efficient Statistically Good Algorithms for Random Number Generation",
2014), so the whole state is four integers, which :meth:`Generator.get_state`
packs into a small uint8 tensor.

Like PyTorch, the default generator starts from a fixed seed
(:data:`DEFAULT_SEED`), so a program that never seeds is still reproducible
from one run to the next; call :func:`seed` for a nondeterministic start.
The public module is :mod:`ember.random`.
"""

from __future__ import annotations

import contextlib
import operator
import os
import struct
import threading
import zlib

import numpy as np

from . import _C
from . import _dtype as D
from ._device import canonical_device
from ._tensor import Tensor

__all__ = [
    "Generator",
    "default_generator",
    "manual_seed",
    "seed",
    "initial_seed",
    "get_rng_state",
    "set_rng_state",
    "fork_rng",
    "DEFAULT_SEED",
]

#: The seed of :data:`default_generator` (and of every new :class:`Generator`) before any seeding;
#: the same number PyTorch uses, so that unseeded programs are reproducible.
DEFAULT_SEED = 67280421310721

_SEED_MODULUS = 2**64

# get_state() layout, little-endian: magic, format version, algorithm, the PCG64 state and
# increment (128-bit each), numpy's buffered-uint32 flag and value, the initial seed, and a CRC-32
# of everything before it.
_MAGIC = b"EMBERRNG"
_FORMAT_VERSION = 1
_ALGORITHM_PCG64 = 1
_BODY = struct.Struct("<8sBB16s16sBIQ")
_CRC = struct.Struct("<I")
STATE_SIZE = _BODY.size + _CRC.size
_MAKE_RNG_LOCK = threading.Lock()
_MASK64 = 2**64 - 1

#: Normal fills of at least this many values are split over ember's OpenMP threads (each thread jumps
#: the stream to its part, so the values do not depend on the thread count).
NORMAL_MIN_PARALLEL = 2**18
#: Normal fills of fewer values take their draws through numpy's ``random_raw`` (about 1 us) instead of
#: reading and writing the bit generator's state dict (about 5 us); both give the same values.
NORMAL_RAW_BELOW = 4096


def _reduce_seed(seed, caller):
    """``seed`` as an unsigned 64-bit integer (negative and larger values wrap mod 2**64).

    Raises:
        RuntimeError: if ``seed`` is not an integer (bools and floats included).
    """
    if isinstance(seed, bool) or not hasattr(type(seed), "__index__"):
        raise RuntimeError(f"{caller} expected an int, but got {type(seed).__name__}")
    return operator.index(seed) % _SEED_MODULUS


class Generator:
    """A pseudo-random number generator that random ops draw from.

    Pass one as ``generator=`` to a random op to draw from a stream that is
    independent of :data:`ember.default_generator`. A new generator is seeded
    with :data:`DEFAULT_SEED`.

    Args:
        device (ember.device or str): the device whose random ops may use it
            (``"cpu"`` by default).

    Attributes:
        device (ember.device): that device.

    Raises:
        RuntimeError: for the ``meta`` device, which has no random numbers, or
            an unavailable device.

    Example:
        >>> import ember
        >>> g = ember.Generator().manual_seed(42)
        >>> a = ember.rand(3, generator=g)
        >>> _ = g.manual_seed(42)
        >>> ember.rand(3, generator=g).tolist() == a.tolist()
        True
    """

    def __init__(self, device="cpu"):
        dev = canonical_device(device)
        if dev.type == "meta":
            raise RuntimeError("Generator: the meta device has no random number generator; use device='cpu'")
        self.device = dev
        self.manual_seed(DEFAULT_SEED)

    # -- seeding -------------------------------------------------------------------

    def manual_seed(self, seed):
        """Reset the generator to the stream of ``seed``; returns ``self``.

        Any integer is accepted: it is reduced modulo 2**64, so ``-1`` and
        ``2**64 - 1`` are the same seed.

        Args:
            seed (int): the seed.

        Returns:
            Generator: ``self``, so that ``Generator().manual_seed(0)`` chains.

        Raises:
            RuntimeError: if ``seed`` is not an integer.

        Example:
            >>> import ember
            >>> ember.Generator().manual_seed(-1).initial_seed()
            18446744073709551615
        """
        value = _reduce_seed(seed, "manual_seed")
        self._seed = value
        # Kernels draw from self._rng (a numpy Generator); nothing else holds state. It is made on first
        # use (see __getattr__): numpy.random takes ~10 ms to import and ``import ember`` seeds a generator.
        self.__dict__.pop("_rng", None)
        return self

    def __getattr__(self, name):
        # Reached only while _rng is unset, after a manual_seed: the stream of that seed, made now.
        if name != "_rng" or "_seed" not in self.__dict__:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        with _MAKE_RNG_LOCK:  # two threads' first draws must share one stream
            rng = self.__dict__.get("_rng")
            if rng is None:
                rng = self._rng = np.random.Generator(np.random.PCG64(self._seed))
        return rng

    def seed(self):
        """Seed the generator from the operating system's entropy; returns the seed.

        Returns:
            int: the new seed, an unsigned 64-bit integer (also :meth:`initial_seed`).

        Example:
            >>> import ember
            >>> g = ember.Generator()
            >>> s = g.seed()
            >>> s == g.initial_seed()
            True
        """
        value = int.from_bytes(os.urandom(8), "little")
        self.manual_seed(value)
        return value

    def initial_seed(self):
        """The seed this generator was last seeded with (an unsigned 64-bit integer).

        Example:
            >>> import ember
            >>> ember.Generator().manual_seed(7).initial_seed()
            7
        """
        return self._seed

    # -- state ----------------------------------------------------------------------

    def get_state(self):
        """The generator's full state as a 1-D ``ember.uint8`` tensor.

        The bytes are deterministic (the same state always gives the same
        bytes) and carry a checksum; :meth:`set_state` restores them, after
        which the generator produces exactly the draws it produced after
        ``get_state``. The initial seed is part of the state.

        Returns:
            Tensor: a uint8 tensor of :data:`STATE_SIZE` bytes.

        Example:
            >>> import ember
            >>> g = ember.Generator().manual_seed(0)
            >>> state = g.get_state()
            >>> state.dtype, state.shape
            (ember.uint8, ember.Size([59]))
            >>> first = ember.rand(2, generator=g).tolist()
            >>> _ = g.set_state(state)
            >>> ember.rand(2, generator=g).tolist() == first
            True
        """
        state = self._rng.bit_generator.state
        inner = state["state"]
        body = _BODY.pack(
            _MAGIC,
            _FORMAT_VERSION,
            _ALGORITHM_PCG64,
            int(inner["state"]).to_bytes(16, "little"),
            int(inner["inc"]).to_bytes(16, "little"),
            int(state["has_uint32"]),
            int(state["uinteger"]),
            self._seed,
        )
        data = body + _CRC.pack(zlib.crc32(body))
        return Tensor._make(np.frombuffer(data, dtype=np.uint8).copy())

    def set_state(self, new_state):
        """Restore a state returned by :meth:`get_state`; returns ``self``.

        Args:
            new_state (Tensor): a 1-D ``ember.uint8`` tensor from :meth:`get_state`.

        Returns:
            Generator: ``self``.

        Raises:
            TypeError: if ``new_state`` is not a uint8 tensor.
            RuntimeError: if it has the wrong size, lives on the meta device, or
                is not an intact ember generator state (bad header, unknown
                version, checksum mismatch, impossible values).

        Example:
            >>> import ember
            >>> g = ember.Generator()
            >>> _ = g.set_state(ember.Generator().manual_seed(5).get_state())
            >>> g.initial_seed()
            5
        """
        raw = _state_bytes(new_state)
        body, (crc,) = raw[: _BODY.size], _CRC.unpack(raw[_BODY.size :])
        magic, version, algorithm, state_b, inc_b, has_uint32, uinteger, seed = _BODY.unpack(body)
        if magic != _MAGIC:
            raise RuntimeError(
                f"set_state: not an ember generator state (header {magic!r}, expected {_MAGIC!r}); "
                "pass a tensor returned by Generator.get_state()"
            )
        if version != _FORMAT_VERSION:
            raise RuntimeError(
                f"set_state: unsupported generator state format version {version} (expected {_FORMAT_VERSION})"
            )
        if algorithm != _ALGORITHM_PCG64:
            raise RuntimeError(f"set_state: unknown bit generator id {algorithm} (expected {_ALGORITHM_PCG64}, PCG64)")
        if zlib.crc32(body) != crc:
            raise RuntimeError("set_state: the generator state is corrupted (checksum mismatch)")
        inc = int.from_bytes(inc_b, "little")
        if inc % 2 == 0 or has_uint32 not in (0, 1):
            raise RuntimeError(
                f"set_state: invalid PCG64 state (increment must be odd, got {inc}; buffered flag must be 0 or 1, "
                f"got {has_uint32})"
            )
        rng = np.random.Generator(np.random.PCG64())
        rng.bit_generator.state = {
            "bit_generator": "PCG64",
            "state": {"state": int.from_bytes(state_b, "little"), "inc": inc},
            "has_uint32": has_uint32,
            "uinteger": uinteger,
        }
        self._rng = rng
        self._seed = seed
        return self

    # -- native sampling ----------------------------------------------------------

    def _fill_normal(self, out, mean=0.0, std=1.0):
        """Fill ``out`` with samples of N(mean, std**2), drawn from this generator's PCG64 stream.

        The Box-Muller sampler of ``ember._C.normal_fill`` (csrc/random.cpp) steps the stream numpy's
        bit generator holds: it reads the state, draws, and writes the advanced state back, under
        the bit generator's lock. ``n`` values advance the stream by ``ceil(n / 2)`` 64-bit draws for
        float32 and ``2 * ceil(n / 2)`` for float64 (docs/internals.rst, "Random generators").

        Args:
            out (numpy.ndarray): a C-contiguous, writeable float32 or float64 array.
            mean (float): the mean; the kernel computes ``mean + std * z`` in ``out``'s dtype.
            std (float): the standard deviation.
        """
        bit_generator = self._rng.bit_generator
        n = out.size
        if n < NORMAL_RAW_BELOW:
            pairs = (n + 1) // 2
            raw = bit_generator.random_raw(pairs if out.dtype == np.float32 else 2 * pairs)  # takes the lock
            _C.normal_from_draws(out, raw, mean, std)
            return
        with bit_generator.lock:
            state = bit_generator.state
            inner = state["state"]
            current, inc = inner["state"], inner["inc"]
            hi, lo = _C.normal_fill(
                out, current >> 64, current & _MASK64, inc >> 64, inc & _MASK64, mean, std, NORMAL_MIN_PARALLEL
            )
            inner["state"] = (hi << 64) | lo
            bit_generator.state = state

    def __repr__(self):
        return f"<ember.Generator device={self.device} initial_seed={self._seed}>"


def _state_bytes(new_state):
    """The bytes of a state tensor, after checking its type, dtype, device and size."""
    if not isinstance(new_state, Tensor):
        raise TypeError(f"RNG state must be an ember.uint8 tensor, not {type(new_state).__name__}")
    if new_state.dtype is not D.uint8:
        raise TypeError(f"RNG state must be an ember.uint8 tensor, got a tensor of dtype {new_state.dtype}")
    if new_state.device.type == "meta":
        raise RuntimeError("RNG state is a meta tensor, which has no data")
    if new_state.ndim != 1 or new_state.shape[0] != STATE_SIZE:
        raise RuntimeError(
            f"Expected an RNG state of shape [{STATE_SIZE}] (a Generator.get_state() result) but got shape "
            f"{list(new_state.shape)}"
        )
    return np.ascontiguousarray(new_state._host_array()).tobytes()


#: The generator random ops use when no ``generator=`` is given.
default_generator = Generator()

#: Per-device-type seeding hooks (``ember.cuda`` adds one): ``hook(seed)`` seeds that type's default
#: generators, so that :func:`manual_seed` makes draws on every device reproducible, as in PyTorch.
_device_seed_hooks = []
#: The seed device generators created later start from (the last :func:`manual_seed`, else the default).
_device_seed = [DEFAULT_SEED]


def register_device_seed_hook(hook):
    """Have :func:`manual_seed` also call ``hook(seed)`` (for a device type's default generators)."""
    _device_seed_hooks.append(hook)


def device_initial_seed():
    """The seed a device type's default generator starts from when it is created."""
    return _device_seed[0]


def manual_seed(seed):
    """Seed the default generator (and every device's, e.g. CUDA's), making random draws reproducible.

    Args:
        seed (int): any integer (converted with ``int``; reduced modulo 2**64).

    Returns:
        Generator: :data:`ember.default_generator`.

    Raises:
        ValueError: if ``seed`` can't be converted to an int.

    Example:
        >>> import ember
        >>> _ = ember.manual_seed(0)
        >>> a = ember.randn(3).tolist()
        >>> _ = ember.manual_seed(0)
        >>> ember.randn(3).tolist() == a
        True
    """
    seed = int(seed)
    _device_seed[0] = seed
    for hook in _device_seed_hooks:  # the device generators (ember.cuda's), when they exist
        hook(seed)
    return default_generator.manual_seed(seed)


def seed():
    """Seed the default generator nondeterministically (from OS entropy); returns the seed.

    Example:
        >>> import ember
        >>> s = ember.seed()
        >>> ember.initial_seed() == s
        True
    """
    return default_generator.seed()


def initial_seed():
    """The seed the default generator was last seeded with.

    Example:
        >>> import ember
        >>> _ = ember.manual_seed(3)
        >>> ember.initial_seed()
        3
    """
    return default_generator.initial_seed()


def get_rng_state():
    """The default generator's state, as a uint8 tensor (see :meth:`Generator.get_state`).

    Example:
        >>> import ember
        >>> state = ember.get_rng_state()
        >>> a = ember.rand(2).tolist()
        >>> ember.set_rng_state(state)
        >>> ember.rand(2).tolist() == a
        True
    """
    return default_generator.get_state()


def set_rng_state(new_state):
    """Restore the default generator's state from :func:`get_rng_state`.

    Args:
        new_state (Tensor): a uint8 tensor returned by :func:`get_rng_state`.

    Raises:
        TypeError: if ``new_state`` is not a uint8 tensor.
        RuntimeError: if it is not an intact generator state.
    """
    default_generator.set_state(new_state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, device_type="cuda"):
    """Run a block with the default generator's state saved and restored afterwards.

    Random draws inside the block advance the generator as usual; on exit
    (normal or by exception) its state is put back, so code after the block
    sees the same numbers as if the block had not run.

    Args:
        devices (iterable of int, optional): accelerator devices whose
            generators to fork as well. Ember has only the CPU generator
            today, so this is accepted for PyTorch compatibility and unused.
        enabled (bool): if False, the block runs without saving anything.
        device_type (str): the accelerator type ``devices`` refers to (unused, as ``devices``).

    Yields:
        None

    Example:
        >>> import ember
        >>> _ = ember.manual_seed(0)
        >>> with ember.random.fork_rng():
        ...     inside = ember.rand(2).tolist()
        >>> ember.rand(2).tolist() == inside
        True
    """
    if not enabled:
        yield
        return
    saved = default_generator.get_state()
    try:
        yield
    finally:
        default_generator.set_state(saved)
