"""What a corpus entry is: a callable to compile, a seeded factory for its inputs, and what to expect.

Each theme module of the corpus makes one :class:`Theme` and registers its functions and modules on it
with the ``@theme.fn(...)`` and ``@theme.module(...)`` decorators; ``corpus/__init__.py`` lists the themes
explicitly. The decorators return the decorated object unchanged, so entries may call each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import ember


class Gen:
    """Seeded input values: ``g.randn(2, 3)`` is the same tensor for the same seed, every run.

    ``grow`` adds to the first dimension of every tensor made (``g.randn(2, 3)`` is 3x3 with ``grow=1``):
    the same entry on other sizes, for the dynamic-shape tests (an entry whose inputs must keep their sizes
    then fails eagerly, and the test skips it).
    """

    def __init__(self, seed: int, grow: int = 0):
        self._rng = np.random.default_rng(seed)
        self._grow = grow

    def _shape(self, shape):
        return (shape[0] + self._grow, *shape[1:]) if shape else shape

    def randn(self, *shape, dtype="float32"):
        return ember.tensor(self._rng.standard_normal(self._shape(shape)).astype(dtype))

    def rand(self, *shape):
        return ember.tensor(self._rng.random(self._shape(shape)).astype("float32"))

    def randint(self, high, *shape):
        return ember.tensor(self._rng.integers(0, high, size=self._shape(shape)).astype("int64"))

    def uniform(self, low, high):
        return float(self._rng.uniform(low, high))


@dataclass(frozen=True)
class Args:
    """Positional and keyword arguments of one call of an entry."""

    args: tuple = ()
    kwargs: dict = field(default_factory=dict)


def call(*args, **kwargs) -> Args:
    """The arguments ``(*args, **kwargs)`` as an :class:`Args` (for inputs factories that need keywords)."""
    return Args(args, kwargs)


@dataclass(frozen=True)
class Entry:
    """One function or module of the corpus.

    Attributes:
        name: ``theme.qualname``, the test id.
        make: builds a fresh callable to run (the function itself; a module built after
            ``ember.manual_seed(0)``, so two builds hold the same weights).
        inputs: ``(seed, grow=0) -> Args``, fresh values each call (an entry may mutate them); ``grow``
            enlarges the first dimension of every input tensor (see :class:`Gen`).
        breaks: the graph breaks the entry is meant to have (0: one whole graph).
        reason: text every break reason of the entry contains (entries that break must give one).
        trains: gradients of the float inputs and of the parameters are compared too.
        is_module: ``make`` builds an ``nn.Module`` (compiled as ``ember.compile(module)``).
        numpy: ``numpy inputs -> numpy result``, an independent oracle of the eager value.
        state: ``(reset, read)`` of global state the entry changes: reset before each run, and
            ``read()`` compared after it.
        tol: ``(rtol, atol)`` for comparing compiled with eager values.
        recompiles: graphs a second identical call compiles again by design (an entry that changes a
            Python value its guards read, such as a module's call counter: PyTorch recompiles too).
    """

    name: str
    make: Callable[[], Callable]
    inputs: Callable[..., Args]
    breaks: int = 0
    reason: str | None = None
    trains: bool = False
    is_module: bool = False
    numpy: Callable | None = None
    state: tuple[Callable[[], None], Callable[[], Any]] | None = None
    tol: tuple[float, float] = (1e-5, 1e-6)
    recompiles: int = 0


def _as_args(value) -> Args:
    if isinstance(value, Args):
        return value
    if isinstance(value, tuple):
        return Args(value)
    return Args((value,))


class Theme:
    """The entries of one corpus module, registered by its decorators in definition order."""

    def __init__(self, name: str):
        self.name = name
        self.entries: list[Entry] = []

    def _add(self, obj, make, inputs, is_module, **meta):
        if meta.get("breaks", 0) and not meta.get("reason"):
            raise ValueError(f"{self.name}.{obj.__name__}: an entry meant to break must give its reason text")
        name = f"{self.name}.{obj.__name__}"
        if any(e.name == name for e in self.entries):
            raise ValueError(f"corpus entry {name} registered twice")

        def seeded_inputs(seed, grow=0, _inputs=inputs):
            return _as_args(_inputs(Gen(seed, grow)))

        self.entries.append(Entry(name, make, seeded_inputs, is_module=is_module, **meta))

    def fn(self, inputs: Callable[[Gen], Any], **meta):
        """Register a function; ``inputs(g)`` returns its arguments (a tuple, one value, or :func:`call`)."""

        def register(f):
            self._add(f, lambda: f, inputs, False, **meta)
            return f

        return register

    def module(self, inputs: Callable[[Gen], Any], **meta):
        """Register an ``nn.Module`` class (or a no-argument factory of one), built after ``manual_seed(0)``."""

        def register(factory):
            def make():
                ember.manual_seed(0)
                return factory()

            self._add(factory, make, inputs, True, **meta)
            return factory

        return register
