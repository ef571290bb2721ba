"""The plan cache: a compiled graph's run plan on disk, so a warm start neither lowers nor imports SymPy.

:func:`~ember._inductor.codegen.wrapper.compile_graph` lowers, schedules and generates C++ for a
graph; the C++ library is cached by :mod:`ember._inductor.codecache`, but the lowering itself (and
the SymPy it imports) took most of a warm start. The run plan (the C++ source, the steps, the
pointer slots, the extern calls with their buffer references: plain values) is stored here as JSON
(loading runs no code: no pickle; dtypes, devices and buffer references are tagged objects rebuilt
through ember's own tables) under a key of

* the graph's code (``gm.code``: ops, arguments, shapes in view calls),
* each input's shape, strides and dtype (or a number input's type and value),
* a hash of the compiler's own source files (any change to the compiler makes new keys),
* the compiler's settings (``config``: ``fallback_random`` decides how random ops lower, ``threads``,
  ``cxx`` and ``extra_cflags`` what the C++ becomes; any setting but where files go and whether
  errors are raised, so a new setting is covered too),

so a later process with the same graph and inputs loads the plan and the library and runs. Graphs
with tensor constants (``get_attr``), plans holding values JSON cannot tag (an extern argument that
is not a number, string, dtype, device or buffer), and compilations with debugging on (the stages
must be written) are not cached. Files live in ``<cache_dir>/plans/<key>.json``, written to a
temporary name and renamed into place; an unreadable entry is a miss.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path

import ember

from .. import config

__all__ = ["key", "read", "write"]

_FORMAT = "ember-inductor run plan v4"


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
        # a sparse graph input has no strides: its layout (the plan never depends on its nnz)
        strides = tuple(value.stride()) if value.layout is ember.strided else value.layout
        return f"T{tuple(value.shape)}{strides}{value.dtype}{value.device.type}"
    if value is None or isinstance(value, (bool, int, float)):
        return f"{type(value).__name__}:{value!r}"
    return None


#: Settings that cannot change a compiled plan: where files go, and whether a failure is raised (a plan
#: is only stored after a compile that succeeded).
_SETTINGS_NOT_IN_KEY = frozenset({"cache_dir", "debug_dir", "fallback_on_compile_error"})


def _settings():
    """The compiler's settings that are part of the key, as text (aliases name another setting)."""
    names = [n for n in config._SETTINGS if n not in config._ALIASES and n not in _SETTINGS_NOT_IN_KEY]
    return repr([(n, getattr(config, n)) for n in names])


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
    for part in (_FORMAT, _compiler_hash(), _settings(), gm.code, *described):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _path(cache_key):
    return config.resolved_cache_dir() / "plans" / f"{cache_key}.json"


# ---------------------------------------------------------------------------------- the JSON form
# Each value is a JSON number, string, bool, null or list (a Python list), or an object with one key
# saying what it is: {"tuple": [...]}, {"dtype": "float32"}, {"np": "float32"} (a numpy dtype, named by
# its ember dtype), {"device": "cpu"}, {"dict": [[k, v], ...]}, {"buf": ...}, {"strided": ...},
# {"extern": ...}. Anything else cannot be stored (the plan is then not cached).

_PLAN_FIELDS = ("source", "slots", "nslots", "native", "steps", "scalar_inputs", "opaque_inputs",
                "output_is_sequence", "inputs", "constants", "fresh", "scratch", "outputs")


class _NotPlain(Exception):
    """A plan value the JSON form has no tag for."""


def _encode(v):
    import numpy as np

    from .wrapper import _BufRef, _EmptyRef, _ExternStep, _InputRef, _StridedRef

    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, list):
        return [_encode(x) for x in v]
    if isinstance(v, tuple) and not hasattr(v, "_fields"):
        return {"tuple": [_encode(x) for x in v]}
    if isinstance(v, dict):
        return {"dict": [[_encode(k), _encode(x)] for k, x in v.items()]}
    if isinstance(v, ember.dtype):
        return {"dtype": str(v).removeprefix("ember.")}
    if isinstance(v, np.dtype):
        from ember._dtype import from_numpy_dtype

        return {"np": str(from_numpy_dtype(v)).removeprefix("ember.")}
    if isinstance(v, ember.device):
        return {"device": str(v)}
    if isinstance(v, _BufRef):
        if v.constant is not None:
            raise _NotPlain("a buffer holding a tensor constant")
        return {"buf": [v.name, v.slot, _encode(v.sizes), _encode(v.np_dtype), v.nbytes]}
    if isinstance(v, _StridedRef):
        return {"strided": [_encode(v.buffer), _encode(v.sizes), _encode(v.strides), v.offset]}
    if isinstance(v, _EmptyRef):
        return {"empty": [_encode(v.sizes), _encode(v.np_dtype)]}
    if isinstance(v, _InputRef):
        return {"input": v.name}
    if isinstance(v, _ExternStep):
        return {"extern": [v.op_name, _encode(v.args), _encode(v.kwargs), _encode(v.outputs)]}
    raise _NotPlain(f"a value of type {type(v).__name__}")


def _ember_dtype(name):
    dtype = getattr(ember, name, None)
    if not isinstance(dtype, ember.dtype):
        raise ValueError(f"not an ember dtype: {name!r}")
    return dtype


def _decode(v):
    from .wrapper import _BufRef, _EmptyRef, _ExternStep, _InputRef, _numpy_dtype, _StridedRef

    if isinstance(v, list):
        return [_decode(x) for x in v]
    if not isinstance(v, dict):
        return v
    (tag, body), = v.items()
    if tag == "tuple":
        return tuple(_decode(x) for x in body)
    if tag == "dict":
        return {_decode(k): _decode(x) for k, x in body}
    if tag == "dtype":
        return _ember_dtype(body)
    if tag == "np":  # the array dtype ember's kernels expect (they compare numpy dtypes by identity)
        return _numpy_dtype(_ember_dtype(body))
    if tag == "device":
        return ember.device(body)
    if tag == "buf":
        ref = _BufRef.__new__(_BufRef)
        ref.name, ref.slot, sizes, np_dtype, ref.nbytes = body
        ref.sizes, ref.np_dtype, ref.constant = _decode(sizes), _decode(np_dtype), None
        return ref
    if tag == "strided":
        ref = _StridedRef.__new__(_StridedRef)
        ref.buffer, ref.sizes, ref.strides, ref.offset = (_decode(x) for x in body)
        return ref
    if tag == "empty":  # not through __init__: it passes the sizes through SymPy (an import of ~0.3 s)
        ref = _EmptyRef.__new__(_EmptyRef)
        ref.sizes, ref.np_dtype = (_decode(x) for x in body)
        return ref
    if tag == "input":
        return _InputRef(body)
    if tag == "extern":
        step = _ExternStep.__new__(_ExternStep)
        step.op_name = body[0]
        step.args, step.kwargs, step.outputs = (_decode(x) for x in body[1:])
        step._op = None
        return step
    raise ValueError(f"unknown tag {tag!r}")


def read(cache_key):
    """The plan stored under ``cache_key``, or None (missing, or unreadable: compiled again)."""
    from .wrapper import _RunPlan

    try:
        with open(_path(cache_key), encoding="utf-8") as f:
            stored = json.load(f)
        if stored.get("format") != _FORMAT:
            return None
        plan = _RunPlan.__new__(_RunPlan)
        for field in _PLAN_FIELDS:
            setattr(plan, field, _decode(stored[field]))
    except Exception:  # noqa: BLE001 - a missing or damaged entry is a miss
        return None
    return plan


def write(cache_key, plan):
    """Store ``plan`` under ``cache_key`` (atomically); plans with values JSON cannot tag are skipped."""
    if plan.constants:
        return
    try:
        stored = {"format": _FORMAT, **{field: _encode(getattr(plan, field)) for field in _PLAN_FIELDS}}
    except _NotPlain:
        return
    path = _path(cache_key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(stored, f)
        os.replace(tmp, path)
    except OSError:
        return
