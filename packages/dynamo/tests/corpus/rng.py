"""Random numbers inside compiled code: the graph draws from the global generator in eager's order, and
leaves the generator where eager leaves it (each entry's state check draws the next numbers)."""

from __future__ import annotations

import ember
import ember.nn as nn
import ember.nn.functional as F

from ._entry import Theme

theme = Theme("rng")


def _seed():
    ember.manual_seed(1234)


def _next_numbers():
    """The next numbers the global generator gives: equal only if the call advanced it as eager does."""
    return ember.rand(3)


@theme.fn(lambda g: g.randn(8), trains=True, state=(_seed, _next_numbers))
def dropout_training(x):
    return F.dropout(x, p=0.5, training=True) * 2


@theme.fn(lambda g: g.randn(4), trains=True, state=(_seed, _next_numbers))
def gaussian_noise(x):
    return x + 0.1 * ember.randn_like(x)


@theme.fn(lambda g: g.randn(3, 3), state=(_seed, _next_numbers))
def rand_and_bernoulli_mask(x):
    keep = ember.bernoulli(ember.full_like(x, 0.7))
    return x * keep + ember.rand(3)


@theme.fn(lambda g: g.randn(5), state=(_seed, _next_numbers))
def randint_and_randperm(x):
    perm = ember.randperm(5)
    return x[perm] + ember.randint(0, 3, (5,)).float()


@theme.module(lambda g: g.randn(4, 6), trains=True, state=(_seed, _next_numbers))
def dropout_module_training():
    return nn.Sequential(nn.Linear(6, 6), nn.Dropout(0.3), nn.ReLU(), nn.Linear(6, 2))
