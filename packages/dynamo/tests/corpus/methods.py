"""User classes: method calls, ``super()``, properties, class attributes, dataclasses, namedtuples."""

from __future__ import annotations

import dataclasses
import typing

import ember
import ember.nn as nn
import ember.nn.functional as F

from ._entry import Theme

theme = Theme("methods")


class Scaler:
    def __init__(self, factor):
        self.factor = factor

    def __call__(self, x):
        return x * self.factor

    def apply_twice(self, x):
        return self(self(x))

    @property
    def doubled(self):
        return self.factor * 2

    @staticmethod
    def shift(x):
        return x + 1

    @classmethod
    def unit(cls):
        return cls(1.0)


_SCALER = Scaler(1.5)


@theme.fn(lambda g: g.randn(3), trains=True, numpy=lambda x: x * 1.5 * 1.5)
def method_call_on_global_object(x):
    return _SCALER.apply_twice(x)


@theme.fn(lambda g: g.randn(3), trains=True)
def object_created_inside(x):
    s = Scaler(0.5)
    return s(x) + s.doubled


@theme.fn(lambda g: g.randn(3), trains=True)
def static_and_class_methods(x):
    return Scaler.shift(x) * Scaler.unit().factor


@theme.fn(lambda g: (g.randn(3), Scaler(2.0)), trains=True)
def object_argument_property(x, scaler):
    return scaler(x) - scaler.doubled


class Base:
    def transform(self, x):
        return x * 2

    def describe(self):
        return "base"


class Child(Base):
    def transform(self, x):
        return super().transform(x) + 1

    def describe(self):
        return super().describe() + "+child"


class GrandChild(Child):
    def transform(self, x):
        y = super().transform(x)
        return y.relu()


@theme.fn(lambda g: g.randn(4), trains=True)
def super_call_chain(x):
    obj = GrandChild()
    return obj.transform(x) * len(obj.describe())


class Normed(nn.Linear):
    """A Linear whose forward normalises its input first, calling the parent's forward."""

    def forward(self, x):
        return super().forward(F.normalize(x, dim=-1))


@theme.module(lambda g: g.randn(2, 4), trains=True)
def module_super_forward():
    return Normed(4, 3)


class WithProperty(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 3)
        self.alpha = 0.5

    @property
    def scale(self):
        return self.alpha * 4

    def forward(self, x):
        return self.proj(x) * self.scale


@theme.module(lambda g: g.randn(2, 3), trains=True)
def module_with_property():
    return WithProperty()


@dataclasses.dataclass
class Config:
    width: int = 4
    scale: float = 2.0
    act: str = "relu"


@theme.fn(lambda g: (g.randn(2, 4), Config()), trains=True)
def dataclass_argument(x, cfg):
    y = x[:, : cfg.width] * cfg.scale
    return F.relu(y) if cfg.act == "relu" else y


@theme.fn(lambda g: g.randn(3), trains=True)
def dataclass_built_inside(x):
    cfg = Config(width=2, scale=0.5)
    return x[: cfg.width] * cfg.scale


class Pair(typing.NamedTuple):
    first: ember.Tensor
    second: ember.Tensor


@theme.fn(lambda g: g.randn(4), trains=True)
def namedtuple_return(x):
    return Pair(x.sin(), second=x.cos())


@theme.fn(lambda g: (Pair(g.randn(3), g.randn(3)),), trains=True)
def namedtuple_argument(p):
    a, b = p
    return p.first * b + a


class Counter:
    calls = 0

    def tick(self, x):
        self.calls += 1
        return x + self.calls


@theme.fn(lambda g: (g.randn(3), Counter()))
def method_mutates_object(x, counter):
    y = counter.tick(x)
    return counter.tick(y), counter.calls


@theme.fn(lambda g: g.randn(3, 3), trains=True)
def tensor_method_chain(x):
    return x.t().contiguous().view(-1).softmax(0).reshape(3, 3).sum(dim=1, keepdim=True)


@theme.fn(lambda g: g.randn(3), trains=True)
def getattr_hasattr_on_object(x):
    s, name = Scaler(3.0), "factor"
    if hasattr(s, name) and not hasattr(s, "missing"):
        x = x * getattr(s, name)
    return x + getattr(s, "offset", 0.25)


@theme.fn(lambda g: g.randn(3), trains=True)
def bound_method_as_value(x):
    f = Scaler(2.0).apply_twice
    return f(x)
