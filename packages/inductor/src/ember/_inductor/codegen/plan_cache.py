"""The plan cache: a compiled graph's run plan on disk, so a warm start neither lowers nor imports SymPy.

:func:`~ember._inductor.codegen.wrapper.compile_graph` lowers, schedules and generates C++ for a
graph; the C++ library is cached by :mod:`ember._inductor.codecache`, but the lowering itself (and
the SymPy it imports) took most of a warm start. The run plan (the C++ source, the steps, the
pointer slots, the extern calls with their buffer references: plain values) is pickled here under
a key of

* the graph's code (``gm.code``: ops, arguments, shapes in view calls),
* each input's shape, strides and dtype (or a number input's type and value),
* a hash of the compiler's own source files (any change to the compiler makes new keys),

so a later process with the same graph and inputs loads the plan and the library and runs. Graphs
with tensor constants (``get_attr``), plans whose extern arguments are not plain values, and
compilations with debugging on (the stages must be written) are not cached. Files live in
``<cache_dir>/plans/<key>.pkl``, written to a temporary name and renamed into place.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import tempfile
from pathlib import Path

import ember

from .. import config

__all__ = ["key", "read", "write"]

_FORMAT = "ember-inductor run plan v1"


@functools.lru_cache(maxsize=1)
def _compiler_hash():
    """sha256 of the compiler package's Python sources (read once per process)."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _describe(value):
    if isinstance(value, ember.Tensor):
        return f"T{tuple(value.shape)}{tuple(value.stride())}{value.dtype}{value.device.type}"
    if value is None or isinstance(value, (bool, int, float)):
        return f"{type(value).__name__}:{value!r}"
    return None


def key(gm, example_inputs):
    """The cache key of compiling ``gm`` for ``example_inputs``, or None when it is not cached."""
    if config.resolved_debug():
        return None
    if any(node.op == "get_attr" for node in gm.graph.nodes):
        return None
    described = [_describe(v) for v in example_inputs]
    if any(d is None for d in described):
        return None
    digest = hashlib.sha256()
    for part in (_FORMAT, _compiler_hash(), repr(config.extra_cflags), repr(config.cxx), gm.code, *described):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _path(cache_key):
    return config.resolved_cache_dir() / "plans" / f"{cache_key}.pkl"


def read(cache_key):
    """The plan stored under ``cache_key``, or None (missing, or unreadable: compiled again)."""
    try:
        with open(_path(cache_key), "rb") as f:
            plan = pickle.load(f)
    except Exception:  # noqa: BLE001 - a missing or damaged entry is a miss
        return None
    return plan if getattr(plan, "format", None) == _FORMAT else None


def _plain(value):
    """Whether an extern argument survives pickling as the same value (buffer references included)."""
    from .wrapper import _BufRef, _StridedRef

    if value is None or isinstance(value, (bool, int, float, str, ember.dtype, ember.device, _BufRef, _StridedRef)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    return False


def write(cache_key, plan):
    """Store ``plan`` under ``cache_key`` (atomically); plans with unusual extern arguments are skipped."""
    for kind, step in plan.steps:
        if kind == "extern" and not (_plain(step.args) and _plain(list(step.kwargs.values()))):
            return
    if plan.constants or not all(from_values or _plain(v) for from_values, v in plan.outputs):
        return
    plan.format = _FORMAT
    path = _path(cache_key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(plan, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        return
