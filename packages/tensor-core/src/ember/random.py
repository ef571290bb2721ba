"""``ember.random``: seeding and state of the default random number generator.

The functions act on :data:`ember.default_generator`, the generator that
random ops draw from when no ``generator=`` is given. The seeding functions
are also available as ``ember.manual_seed``, ``ember.seed``, and so on.

Example:
    >>> import ember
    >>> _ = ember.random.manual_seed(1234)
    >>> a = ember.randint(0, 100, (4,)).tolist()
    >>> _ = ember.random.manual_seed(1234)
    >>> ember.randint(0, 100, (4,)).tolist() == a
    True
"""

from __future__ import annotations

from ._random import (
    DEFAULT_SEED,
    Generator,
    default_generator,
    fork_rng,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)

__all__ = [
    "manual_seed",
    "seed",
    "initial_seed",
    "get_rng_state",
    "set_rng_state",
    "fork_rng",
    "default_generator",
    "Generator",
    "DEFAULT_SEED",
]
