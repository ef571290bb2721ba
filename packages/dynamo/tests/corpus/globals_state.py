"""Global state: module-level constants, tensors, configs read (guarded) and written (replayed)."""

from __future__ import annotations

import math

import ember
import ember.nn.functional as F

from ._entry import Theme

theme = Theme("globals_state")

EPS = 1e-5
ACTIVATION = "gelu"
SETTINGS = {"scale": 3.0, "use_bias": True}
BIAS = ember.linspace(-1, 1, 4)
CALL_LOG = []
STATS = {"calls": 0}


class _Registry:
    value = 1.0


REGISTRY = _Registry()


@theme.fn(lambda g: g.randn(2, 4), trains=True)
def global_constant_eps(x):
    return x / ember.sqrt((x * x).mean(-1, keepdim=True) + EPS)


@theme.fn(lambda g: g.randn(4), trains=True)
def global_string_config(x):
    return F.gelu(x) if ACTIVATION == "gelu" else F.relu(x)


@theme.fn(lambda g: g.randn(4), trains=True)
def global_dict_config(x):
    y = x * SETTINGS["scale"]
    if SETTINGS["use_bias"]:
        y = y + BIAS
    return y


@theme.fn(lambda g: g.randn(4), trains=True, numpy=lambda x: x * math.pi)
def math_module_constant(x):
    return x * math.pi + math.sqrt(4) - 2


def _reset_log():
    CALL_LOG.clear()


@theme.fn(lambda g: g.randn(3), state=(_reset_log, lambda: list(CALL_LOG)))
def append_to_global_list(x):
    CALL_LOG.append("called")
    CALL_LOG.append(x.shape[0])
    return x + len(CALL_LOG)


def _reset_stats():
    STATS["calls"] = 0


@theme.fn(lambda g: g.randn(3), state=(_reset_stats, lambda: dict(STATS)))
def increment_global_dict(x):
    STATS["calls"] += 1
    return x * STATS["calls"]


def _reset_registry():
    REGISTRY.value = 1.0


@theme.fn(lambda g: g.randn(3), state=(_reset_registry, lambda: REGISTRY.value))
def setattr_on_global_object(x):
    REGISTRY.value = REGISTRY.value * 2
    return x * REGISTRY.value


_COUNTER = 0


def _reset_counter():
    global _COUNTER
    _COUNTER = 0


@theme.fn(lambda g: g.randn(3), state=(_reset_counter, lambda: _COUNTER))
def global_statement_rebinds(x):
    global _COUNTER
    _COUNTER += 1
    return x + _COUNTER


@theme.fn(lambda g: g.randn(2, 2))
def global_tensor_read(x):
    return x @ BIAS[:2].diag()
