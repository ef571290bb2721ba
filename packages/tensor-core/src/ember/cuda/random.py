"""Per-GPU random number generators (``ember.cuda.manual_seed`` and friends).

Each GPU has a default :class:`ember.Generator` of its own (device ``cuda:i``),
created on first use and seeded from the last :func:`ember.manual_seed` (which
also reseeds existing ones), so programs that seed once are reproducible on
every device, as in PyTorch. The generators draw with the same PCG64 stream as
CPU generators, on the host, and the values are copied to the GPU: a CUDA
tensor drawn after ``manual_seed(s)`` equals the CPU tensor drawn after the
same seed. (A counter-based on-device generator such as Philox is the planned
replacement for large draws; see docs/internals.rst, "The CUDA backend".)
"""

from __future__ import annotations

from .. import _random

__all__ = [
    "default_generators", "generator_for", "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed",
    "get_rng_state", "set_rng_state",
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
    """Seed the current GPU's default generator with ``seed`` (any integer)."""
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
