"""The :class:`Distribution` base class: shapes, sampling, densities and argument validation."""

from __future__ import annotations

import warnings

import ember

from . import constraints
from .utils import lazy_property

__all__ = ["Distribution"]


class Distribution:
    """A probability distribution, possibly a batch of independent ones.

    Shapes: a distribution has a ``batch_shape`` (independent, differently parameterised distributions)
    and an ``event_shape`` (the shape of one draw). ``sample(sample_shape)`` returns a tensor of shape
    ``sample_shape + batch_shape + event_shape`` and ``log_prob(value)`` one of
    ``sample_shape + batch_shape``.

    Args:
        batch_shape (ember.Size): the batch's shape.
        event_shape (ember.Size): one sample's shape.
        validate_args (bool, optional): check parameters on construction and values given to
            ``log_prob``/``cdf``; the class default (:meth:`set_default_validate_args`, True) when None.
            The value checks are skipped while ``ember.compile`` traces (they would break the graph).

    Raises:
        ValueError: with validation, a parameter outside its constraint (``arg_constraints``).
    """

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value):
        """Turn validation on or off for distributions constructed without ``validate_args``.

        Raises:
            ValueError: if ``value`` is not a bool.
        """
        if value not in [True, False]:
            raise ValueError(f"set_default_validate_args expects a bool, got {value!r}")
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = ember.Size(batch_shape)
        self._event_shape = ember.Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        # the checks read tensor values into Python (a graph break), so they are skipped while ember.compile
        # traces (torch.compile turns validation off altogether, eager code included)
        if self._validate_args and not ember.compiler.is_compiling():
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
                warnings.warn(
                    f"{self.__class__} does not define `arg_constraints`. Please set `arg_constraints = {{}}` "
                    "or initialize the distribution with `validate_args=False` to turn off validation.",
                    stacklevel=2,
                )
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue  # depends on other parameters: nothing to check
                if param not in self.__dict__ and isinstance(getattr(type(self), param), lazy_property):
                    continue  # derived from the given parameter, not given itself
                value = getattr(self, param)
                valid = constraint.check(value)
                if not bool(valid.all()):
                    raise ValueError(
                        f"Expected parameter {param} ({type(value).__name__} of shape {tuple(value.shape)}) "
                        f"of distribution {repr(self)} to satisfy the constraint {repr(constraint)}, "
                        f"but found invalid values:\n{value}"
                    )
        super().__init__()

    def expand(self, batch_shape, _instance=None):
        """A new distribution whose batch is this one's expanded to ``batch_shape`` (parameters are expanded
        views, not copies).

        Raises:
            NotImplementedError: for a distribution that does not define it.
        """
        raise NotImplementedError

    @property
    def batch_shape(self):
        """ember.Size: the shape over which parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self):
        """ember.Size: the shape of one sample (without batching)."""
        return self._event_shape

    @property
    def arg_constraints(self):
        """dict[str, Constraint]: each parameter's constraint."""
        raise NotImplementedError

    @property
    def support(self):
        """Constraint: the set of values that have positive density or mass."""
        raise NotImplementedError

    @property
    def mean(self):
        raise NotImplementedError(f"{self.__class__} does not implement mean")

    @property
    def mode(self):
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError(f"{self.__class__} does not implement variance")

    @property
    def stddev(self):
        """The standard deviation: ``variance.sqrt()``."""
        return self.variance.sqrt()

    def sample(self, sample_shape=()):
        """Draw ``sample_shape`` samples (a batch of them if parameters are batched), without gradients."""
        with ember.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        """Draw reparameterised samples: gradients flow to the parameters.

        Raises:
            NotImplementedError: if the distribution has no reparameterised sampler (``has_rsample`` False).
        """
        raise NotImplementedError

    def sample_n(self, n):
        """``sample((n,))`` (deprecated, as in PyTorch)."""
        warnings.warn("sample_n will be deprecated. Use .sample((n,)) instead", UserWarning, stacklevel=2)
        return self.sample(ember.Size((n,)))

    def log_prob(self, value):
        """The log of the density (or mass) at ``value``, of shape ``sample_shape + batch_shape``."""
        raise NotImplementedError

    def cdf(self, value):
        """The cumulative distribution function at ``value``."""
        raise NotImplementedError

    def icdf(self, value):
        """The inverse cumulative distribution function at probabilities ``value``."""
        raise NotImplementedError

    def enumerate_support(self, expand=True):
        """Every value of a discrete distribution's support, along a new leftmost dimension.

        Args:
            expand (bool): expand to ``(cardinality,) + batch_shape + event_shape`` (else the batch
                dimensions have size 1).
        """
        raise NotImplementedError

    def entropy(self):
        """The entropy, of shape ``batch_shape``."""
        raise NotImplementedError

    def perplexity(self):
        """``exp(entropy)``."""
        return ember.exp(self.entropy())

    def _extended_shape(self, sample_shape=()):
        """``sample_shape + batch_shape + event_shape``."""
        if not isinstance(sample_shape, ember.Size):
            sample_shape = ember.Size(sample_shape)
        return ember.Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value):
        """Check that ``value`` is a tensor whose shape fits the event and batch shapes and that lies in the support.

        Raises:
            ValueError: naming what is wrong (type, shape, or the values outside the support).
        """
        if not isinstance(value, ember.Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = len(value.size()) - len(self._event_shape)
        if tuple(value.size()[event_dim_start:]) != tuple(self._event_shape):
            raise ValueError(
                f"The right-most size of value must match event_shape: {value.size()} vs {self._event_shape}."
            )
        actual_shape = value.size()
        expected_shape = self._batch_shape + self._event_shape
        for i, j in zip(reversed(actual_shape), reversed(expected_shape)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(
                    f"Value is not broadcastable with batch_shape+event_shape: {actual_shape} vs {expected_shape}."
                )
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(
                f"{self.__class__} does not define `support` to enable sample validation. Please initialize "
                "the distribution with `validate_args=False` to turn off validation.",
                stacklevel=2,
            )
            return
        if support is None:
            raise ValueError(f"{self.__class__.__name__}.support is None")
        if ember.compiler.is_compiling():
            return  # the value check reads tensor values into Python: skipped while ember.compile traces
        valid = support.check(value)
        if not bool(valid.all()):
            raise ValueError(
                "Expected value argument "
                f"({type(value).__name__} of shape {tuple(value.shape)}) "
                f"to be within the support ({repr(support)}) "
                f"of the distribution {repr(self)}, "
                f"but found invalid values:\n{value}"
            )

    def _get_checked_instance(self, cls, _instance=None):
        """A bare instance of ``cls`` for ``expand`` (or ``_instance``).

        Raises:
            NotImplementedError: if a subclass with its own ``__init__`` did not override ``expand``.
        """
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom __init__ method "
                "must also define a custom .expand() method."
            )
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self):
        param_names = [k for k, _ in self.arg_constraints.items() if k in self.__dict__]
        args_string = ", ".join(
            f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size()}"
            for p in param_names
        )
        return self.__class__.__name__ + "(" + args_string + ")"
