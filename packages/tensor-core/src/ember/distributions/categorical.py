"""The categorical distribution over ``{0, ..., K - 1}``."""

from __future__ import annotations

import ember

from . import constraints
from .distribution import Distribution
from .utils import _expand_probs_or_logits, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Categorical"]


class Categorical(Distribution):
    r"""The categorical distribution: index ``i`` with probability ``probs[..., i]``.

    Give exactly one of ``probs`` (non-negative weights, normalised over the last dimension) and
    ``logits`` (unnormalised log-probabilities). The last dimension indexes the ``K`` categories; the
    others make the batch shape. Samples are int64 indices of shape ``sample_shape + batch_shape``.

    Args:
        probs (Tensor, optional): weights of shape ``batch_shape + (K,)``.
        logits (Tensor, optional): log-weights of shape ``batch_shape + (K,)``.
        validate_args (bool, optional): check arguments (see :class:`Distribution`).

    Raises:
        ValueError: if both or neither of ``probs`` and ``logits`` are given, or the parameter is 0-dim.
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            # log-probabilities: subtract the log of the normaliser
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.size()[-1]
        batch_shape = self._param.size()[:-1] if self._param.ndimension() > 1 else ember.Size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Categorical, _instance)
        batch_shape = ember.Size(batch_shape)
        param_shape = batch_shape + ember.Size((self._num_events,))
        _expand_probs_or_logits(self, new, param_shape)
        new._num_events = self._num_events
        super(Categorical, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _new(self, *args, **kwargs):
        return self._param.new(*args, **kwargs)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def param_shape(self):
        return self._param.size()

    @property
    def mean(self):
        return ember.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype, device=self.probs.device)

    @property
    def mode(self):
        return self.probs.argmax(dim=-1)

    @property
    def variance(self):
        return ember.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype, device=self.probs.device)

    def sample(self, sample_shape=()):
        if not isinstance(sample_shape, ember.Size):
            sample_shape = ember.Size(sample_shape)
        probs_2d = self.probs.reshape(-1, self._num_events)
        n = sample_shape.numel()
        with ember.no_grad():
            samples_2d = ember.multinomial(probs_2d, max(n, 1), True).T
        return samples_2d[:n].reshape(self._extended_shape(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        # One flat look-up: the index of (batch element, category) in the flattened logits. Broadcasting the
        # logits to the values' shape instead would touch K times as many elements.
        value = value.long()
        shape = ember.broadcast_shapes(value.shape, self._batch_shape)
        logits = self.logits.reshape(-1)
        if len(self._batch_shape):
            rows = ember.arange(self._batch_shape.numel(), device=value.device).reshape(self._batch_shape)
            value = value + rows * self._num_events
        return logits[value.expand(shape)]

    def entropy(self):
        min_real = ember.finfo(self.logits.dtype).min
        logits = ember.clamp(self.logits, min=min_real)
        p_log_p = logits * self.probs
        return -p_log_p.sum(-1)

    def enumerate_support(self, expand=True):
        num_events = self._num_events
        values = ember.arange(num_events, dtype=ember.long, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
