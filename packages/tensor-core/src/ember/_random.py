"""Random number generators (placeholder until the RNG module lands)."""

from __future__ import annotations

import numpy as np

__all__ = ["Generator", "default_generator", "manual_seed"]


class Generator:
    """A pseudo-random generator (numpy PCG64)."""

    def __init__(self, device="cpu"):
        self._rng = np.random.Generator(np.random.PCG64(67280421310721))
        self._seed = 67280421310721

    def manual_seed(self, seed):
        self._seed = int(seed)
        self._rng = np.random.Generator(np.random.PCG64(self._seed))
        return self


default_generator = Generator()


def manual_seed(seed):
    """Seed the default generator."""
    return default_generator.manual_seed(seed)
