"""``Fuzzer``: seeded random benchmark inputs -- sizes, dimensions, memory layouts and dtypes.

A benchmark run on one hand-picked shape tells little about the shapes users
have. A :class:`Fuzzer` draws parameters (:class:`FuzzedParameter`: sizes, step
lengths, dimension counts...) from stated distributions, rejects draws that break
constraints (element counts, allocation size, user predicates), and builds
tensors (:class:`FuzzedTensor`) from them, sometimes non-contiguous (permuted
memory order, or sliced with steps). Everything comes from one seed, so a fuzzed
benchmark is reproducible: the same seed gives the same parameters and the same
tensor values.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

__all__ = ["Fuzzer", "FuzzedParameter", "FuzzedTensor", "ParameterAlias"]

_DISTRIBUTIONS = ("loguniform", "uniform")
#: How many draws :class:`Fuzzer` tries before it gives up on finding parameters that meet the constraints.
_MAX_ATTEMPTS = 1000


class FuzzedParameter:
    """A parameter drawn at random for each fuzzed case (a size, a step, a dimension count...).

    Args:
        name: How :class:`FuzzedTensor` sizes and constraints refer to the parameter.
        minval, maxval: The bounds (inclusive) for ``"loguniform"`` and ``"uniform"``.
        distribution: ``"loguniform"`` (uniform in log space, so ``[1, 10)`` is as
            likely as ``[10, 100]``; the value is an int), ``"uniform"`` (integers
            when both bounds are ints, else real numbers), or a dict mapping each
            possible value (possibly a :class:`ParameterAlias`) to its probability.
        strict: Draw this parameter once per case, not again on each rejected
            draw, so that rejection does not skew its distribution (e.g. towards
            small sizes under an element-count limit).

    Raises:
        ValueError: for an unknown distribution, negative or unnormalised
            probabilities, bounds given with a dict, or missing bounds without one.
    """

    def __init__(
        self,
        name: str,
        minval: int | float | None = None,
        maxval: int | float | None = None,
        distribution: str | dict[Any, float] | None = None,
        strict: bool = False,
    ) -> None:
        self._name = name
        self._minval = minval
        self._maxval = maxval
        self._distribution = self._check_distribution(distribution)
        self.strict = strict

    @property
    def name(self) -> str:
        return self._name

    def _check_distribution(self, distribution):
        if isinstance(distribution, dict):
            if any(p < 0 for p in distribution.values()):
                raise ValueError(f"FuzzedParameter {self._name!r}: probabilities cannot be negative: {distribution}")
            if abs(sum(distribution.values()) - 1) > 1e-5:
                raise ValueError(
                    f"FuzzedParameter {self._name!r}: probabilities must sum to 1, got {sum(distribution.values())}"
                )
            if self._minval is not None or self._maxval is not None:
                raise ValueError(f"FuzzedParameter {self._name!r}: minval and maxval must be None with a dict")
            return distribution
        if distribution not in _DISTRIBUTIONS:
            raise ValueError(
                f"FuzzedParameter {self._name!r}: unknown distribution {distribution!r}; expected one of "
                f"{_DISTRIBUTIONS} or a dict of value -> probability"
            )
        if self._minval is None or self._maxval is None:
            raise ValueError(f"FuzzedParameter {self._name!r}: distribution {distribution!r} needs minval and maxval")
        return distribution

    def sample(self, state: np.random.RandomState):
        """One value drawn with ``state``."""
        if self._distribution == "loguniform":
            value = int(2 ** state.uniform(np.log2(self._minval), np.log2(self._maxval)))
            return min(max(value, self._minval), self._maxval)  # int() rounding can step outside the bounds
        if self._distribution == "uniform":
            if isinstance(self._minval, int) and isinstance(self._maxval, int):
                return int(state.randint(self._minval, self._maxval + 1))
            return float(state.uniform(self._minval, self._maxval))
        values = list(self._distribution)
        return values[state.choice(len(values), p=list(self._distribution.values()))]


class ParameterAlias:
    """A value of a :class:`FuzzedParameter`'s dict distribution meaning "the value of parameter ``alias_to``".

    With it, two sizes are sometimes equal and sometimes not, e.g. to fuzz
    broadcasting: ``FuzzedParameter("y_len", distribution={1: 0.5, ParameterAlias("x_len"): 0.5})``.
    Chains of aliases are followed; a cycle raises ``ValueError`` when drawn.
    """

    def __init__(self, alias_to: str) -> None:
        self.alias_to = alias_to

    def __repr__(self) -> str:
        return f"ParameterAlias[alias_to: {self.alias_to}]"


def _prod(values, start: int = 1) -> int:
    # In Python ints: numpy's int64 product can overflow into a negative size that passes a limit check.
    return functools.reduce(lambda a, b: int(a) * int(b), values, start)


class FuzzedTensor:
    """A tensor built for each fuzzed case from the drawn parameters.

    Args:
        name: The key of the tensor in what :meth:`Fuzzer.take` yields.
        size: The shape: ints, or names of parameters whose drawn value is used.
        steps: Optional, like ``size``: allocate ``size[i] * steps[i]`` along each
            dimension and take every ``steps[i]``-th element, giving a strided view.
        probability_contiguous: The chance that the memory order is the usual one;
            otherwise the tensor is laid out in a random permuted order (same
            shape and values, non-contiguous strides).
        min_elements, max_elements: Bounds on the element count; draws outside are rejected.
        max_allocation_bytes: Bound on the bytes allocated (before slicing by ``steps``).
        dim_parameter: Name of a parameter giving the number of dimensions: ``size``
            and ``steps`` are cut to it, or padded with 1s.
        roll_parameter: Accepted for PyTorch compatibility; unused (as in PyTorch).
        dtype: The ember dtype (default ``ember.float32``).
        cuda: Put the tensor on the GPU.
        tensor_constructor: ``f(size=..., dtype=..., **params)`` returning a tensor
            of that size, used instead of ``ember.rand`` (floating and complex
            dtypes) / ``ember.randint(1, 127)`` (others).
    """

    def __init__(
        self,
        name: str,
        size: tuple[str | int, ...],
        steps: tuple[str | int, ...] | None = None,
        probability_contiguous: float = 0.5,
        min_elements: int | None = None,
        max_elements: int | None = None,
        max_allocation_bytes: int | None = None,
        dim_parameter: str | None = None,
        roll_parameter: str | None = None,
        dtype=None,
        cuda: bool = False,
        tensor_constructor: Callable | None = None,
    ) -> None:
        import ember

        if steps is not None and len(steps) != len(size):
            raise ValueError(f"FuzzedTensor {name!r}: steps {steps} must have one entry per size entry {size}")
        self._name = name
        self._size = tuple(size)
        self._steps = tuple(steps) if steps is not None else None
        self._probability_contiguous = probability_contiguous
        self._min_elements = min_elements
        self._max_elements = max_elements
        self._max_allocation_bytes = max_allocation_bytes
        self._dim_parameter = dim_parameter
        self._dtype = ember.float32 if dtype is None else dtype
        self._cuda = cuda
        self._tensor_constructor = tensor_constructor

    @property
    def name(self) -> str:
        return self._name

    @staticmethod
    def default_tensor_constructor(size, dtype, **kwargs):
        """Uniform ``[0, 1)`` values for floating and complex dtypes, integers in ``[1, 127)`` otherwise."""
        import ember

        if dtype.is_floating_point or dtype.is_complex:
            return ember.rand(size, dtype=dtype)
        return ember.randint(1, 127, size=size, dtype=dtype)

    def _get_size_and_steps(self, params: dict) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        """The concrete size, steps and allocated size for the drawn ``params``."""
        dim = params[self._dim_parameter] if self._dim_parameter is not None else len(self._size)

        def resolve(values: tuple) -> tuple[int, ...]:
            concrete = tuple(params.get(v, v) if isinstance(v, str) else v for v in values)[:dim]
            return concrete + (1,) * (dim - len(concrete))

        size, steps = resolve(self._size), resolve(self._steps or ())
        return size, steps, tuple(s * t for s, t in zip(size, steps))

    def satisfies_constraints(self, params: dict) -> bool:
        """Whether the tensor these ``params`` describe respects the element and allocation bounds."""
        size, _, allocation = self._get_size_and_steps(params)
        elements = _prod(size)
        allocated_bytes = _prod(allocation, self._dtype.itemsize)
        if self._max_elements is not None and elements > self._max_elements:
            return False
        if self._min_elements is not None and elements < self._min_elements:
            return False
        return self._max_allocation_bytes is None or allocated_bytes <= self._max_allocation_bytes

    def _make_tensor(self, params: dict, state: np.random.RandomState):
        """The tensor for ``params`` and a dict describing it (numel, order, steps, is_contiguous, dtype)."""
        size, steps, allocation = self._get_size_and_steps(params)
        constructor = self._tensor_constructor or self.default_tensor_constructor
        raw = constructor(size=allocation, dtype=self._dtype, **params)
        if self._cuda:
            raw = raw.cuda()
        dim = len(size)
        order = np.arange(dim)
        if state.rand() > self._probability_contiguous:
            # A random memory order (not the identity): copy in that order, then view it back in the original one.
            while dim > 1 and np.all(order == np.arange(dim)):
                order = state.permutation(dim)
            raw = raw.permute(tuple(int(i) for i in order)).contiguous()
            raw = raw.permute(tuple(int(i) for i in np.argsort(order)))
        tensor = raw[tuple(slice(0, n * step, step) for n, step in zip(size, steps))]
        properties = {
            "numel": int(tensor.numel()),
            "order": order,
            "steps": steps,
            "is_contiguous": tensor.is_contiguous(),
            "dtype": str(self._dtype),
        }
        return tensor, properties


class Fuzzer:
    """Draw benchmark cases: parameters from their distributions, then the tensors they describe.

    Args:
        parameters: :class:`FuzzedParameter`\\ s (nested lists are flattened one level).
        tensors: :class:`FuzzedTensor`\\ s (nested lists are flattened one level).
        constraints: Predicates called with the dict of drawn parameters (as
            PyTorch's Fuzzer calls them); a draw any of them rejects is drawn again.
        seed: Seeds the parameter draws and ember's generator (for the tensor
            values). ``None`` picks a random seed.

    Raises:
        ValueError: if a parameter and a tensor share a name.

    Example:
        >>> import ember
        >>> from ember.utils.benchmark import Fuzzer, FuzzedParameter, FuzzedTensor
        >>> fuzzer = Fuzzer(
        ...     parameters=[FuzzedParameter("n", minval=4, maxval=1024, distribution="loguniform")],
        ...     tensors=[FuzzedTensor("x", size=("n", 3), probability_contiguous=0.5)],
        ...     seed=0,
        ... )
        >>> for tensors, properties, params in fuzzer.take(2):
        ...     assert tuple(tensors["x"].shape) == (params["n"], 3)
    """

    def __init__(
        self,
        parameters: list,
        tensors: list,
        constraints: list[Callable[[dict], bool]] | None = None,
        seed: int | None = None,
    ) -> None:
        if seed is None:
            seed = int(np.random.RandomState().randint(0, 2**32 - 1, dtype=np.int64))
        self._seed = seed
        self._parameters = self._unpack(parameters, FuzzedParameter)
        self._tensors = self._unpack(tensors, FuzzedTensor)
        self._constraints = tuple(constraints or ())
        overlap = {p.name for p in self._parameters} & {t.name for t in self._tensors}
        if overlap:
            raise ValueError(f"Duplicate names in parameters and tensors: {overlap}")
        self._rejections = 0
        self._total_generated = 0

    @staticmethod
    def _unpack(values, cls) -> tuple:
        return tuple(itertools.chain.from_iterable([v] if isinstance(v, cls) else v for v in values))

    def take(self, n: int) -> Iterator[tuple[dict, dict, dict]]:
        """Yield ``n`` cases, each ``(tensors, tensor_properties, params)``: dicts keyed by name.

        Starting again (another ``take``) replays the same cases from the seed.
        """
        import ember

        state = np.random.RandomState(self._seed)
        ember.manual_seed(int(state.randint(0, 2**63 - 1, dtype=np.int64)))
        for _ in range(n):
            params = self._generate(state)
            tensors, properties = {}, {}
            for t in self._tensors:
                tensors[t.name], properties[t.name] = t._make_tensor(params, state)
            yield tensors, properties, params

    @property
    def rejection_rate(self) -> float:
        """The fraction of parameter draws rejected so far."""
        return self._rejections / self._total_generated if self._total_generated else 0.0

    def _generate(self, state: np.random.RandomState) -> dict:
        strict: dict[str, Any] = {}
        for _ in range(_MAX_ATTEMPTS):
            params = {}
            for p in self._parameters:
                if p.strict:
                    if p.name not in strict:
                        strict[p.name] = p.sample(state)
                    params[p.name] = strict[p.name]
                else:
                    params[p.name] = p.sample(state)
            params = self._resolve_aliases(params)
            self._total_generated += 1
            if all(f(params) for f in self._constraints) and all(
                t.satisfies_constraints(params) for t in self._tensors
            ):
                return params
            self._rejections += 1
        raise ValueError(f"Failed to generate a set of valid parameters in {_MAX_ATTEMPTS} attempts.")

    @staticmethod
    def _resolve_aliases(params: dict) -> dict:
        params = dict(params)
        pending = sum(isinstance(v, ParameterAlias) for v in params.values())
        while pending:
            for key, value in params.items():
                if isinstance(value, ParameterAlias):
                    params[key] = params[value.alias_to]
            still = sum(isinstance(v, ParameterAlias) for v in params.values())
            if still == pending:
                raise ValueError(f"ParameterAlias cycle detected\n{params}")
            pending = still
        return params
