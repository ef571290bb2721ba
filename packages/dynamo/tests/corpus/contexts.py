"""Context managers: grad mode (``no_grad``, ``enable_grad``, ``set_grad_enabled``) and their decorators."""

from __future__ import annotations

import ember
import ember.nn as nn

from ._entry import Theme

theme = Theme("contexts")


@theme.fn(lambda g: (g.randn(3), g.randn(3)), trains=True)
def no_grad_block(x, y):
    with ember.no_grad():
        scale = (y * y).sum()
    return x * scale


@theme.fn(lambda g: g.randn(3), trains=True)
def no_grad_result_requires_grad_flag(x):
    with ember.no_grad():
        z = x * 2
    return z + 1, z.requires_grad


@theme.fn(lambda g: g.randn(3), trains=True)
def enable_grad_inside_no_grad(x):
    with ember.no_grad():
        a = x * 2
        with ember.enable_grad():
            b = x * 3
    return a + b


@theme.fn(lambda g: (g.randn(3), False), trains=True)
def set_grad_enabled_argument(x, enabled):
    with ember.set_grad_enabled(enabled):
        y = x.exp()
    return y + x


@ember.no_grad()
def _frozen_stats(t):
    return t.mean(), t.std()


@theme.fn(lambda g: g.randn(6), trains=True)
def no_grad_decorated_helper(x):
    mean, std = _frozen_stats(x)
    return (x - mean) / std


@theme.fn(lambda g: g.randn(3), trains=True)
def grad_mode_queried(x):
    if ember.is_grad_enabled():
        return x * 2
    return x


@theme.fn(lambda g: g.randn(2, 3), trains=True)
def detach_inside(x):
    target = (x * 2).detach()
    return ((x - target) ** 2).mean()


class EmaTeacher(nn.Module):
    """A student and an exponential-moving-average teacher; the teacher runs without grad."""

    def __init__(self):
        super().__init__()
        self.student = nn.Linear(4, 4)
        self.teacher = nn.Linear(4, 4)

    def forward(self, x):
        with ember.no_grad():
            target = self.teacher(x).softmax(-1)
        return -(target * self.student(x).log_softmax(-1)).sum(-1).mean()


@theme.module(lambda g: g.randn(3, 4), trains=True)
def ema_teacher():
    return EmaTeacher()
