"""Guards: the conditions under which a captured graph may be reused.

The translator records a :class:`Guard` for everything the capture depended on: the type of an
argument, a tensor's dtype/device/shape/strides/requires_grad, the value of a Python constant it
read, the identity of a global or a module, a module's ``training`` flag, the grad mode. A cache
entry is valid for a call exactly when all of its guards hold.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from .source import HookCountSource, Source

__all__ = ["GuardKind", "Guard", "TensorSpec", "GuardCheck", "order_guards", "describe_failure"]


class GuardKind(str, enum.Enum):
    """What a guard checks about the value at its source."""

    TYPE_MATCH = "TYPE_MATCH"  # type(v) is expected
    ID_MATCH = "ID_MATCH"  # v is expected (modules, functions, objects read from globals)
    EQUALS_MATCH = "EQUALS_MATCH"  # type(v) is type(expected) and v == expected (constants read)
    LEN_MATCH = "LEN_MATCH"  # len(v) == expected (lists, tuples, dicts whose items were read)
    DICT_KEYS = "DICT_KEYS"  # list(v.keys()) == expected (key order matters, as for iteration)
    TENSOR_MATCH = "TENSOR_MATCH"  # expected is a TensorSpec
    MODULE_TRAINING = "MODULE_TRAINING"  # v.training == expected
    GRAD_MODE = "GRAD_MODE"  # ember.is_grad_enabled() == expected (source is None)
    AUTOCAST = "AUTOCAST"  # autocast_state() == expected: the enabled device types and their dtypes (source None)
    DEFAULT_DTYPE = "DEFAULT_DTYPE"  # ember.get_default_dtype() is expected (source None)
    IS_NONE = "IS_NONE"  # v is None
    NOT_NONE = "NOT_NONE"  # v is not None
    SHAPE_EXPR = "SHAPE_EXPR"  # a relation between input sizes held (source None; expected: symbolic.ShapeRelation)


@dataclass(frozen=True)
class TensorSpec:
    """What TENSOR_MATCH checks: ``shape``/``stride`` entries that are None are dynamic (any size)."""

    dtype: Any
    device: Any
    shape: tuple
    stride: tuple
    requires_grad: bool
    layout: Any = None  # a sparse layout (its tensor has no strides: ``stride`` None); None: strided


@dataclass(frozen=True)
class Guard:
    """One condition: ``kind`` applied to the value at ``source`` (None for global state)."""

    source: Source | None
    kind: GuardKind
    expected: Any = None

    def __str__(self) -> str:
        where = self.source.name() if self.source is not None else "<global state>"
        return f"{self.kind.value}({where}, {self.expected!r})"


# ------------------------------------------------------------------------------ the guard compiler
#
# A cache entry's guards become ONE generated Python function, ``___check(L, G) -> bool``: a chain
# of ``if not (...): return False`` tests, cheapest first, each source path read once into a local.
# Any exception while checking (an attribute that is gone, a value of another type) means "no
# match": the body runs inside a try block, which costs nothing in CPython 3.11+ until it raises.

# Cost rank of each kind: identity and type tests first (a pointer compare), then small Python
# values, then tensors (several attribute reads each), then global state (a function call).
_RANK = {
    GuardKind.TYPE_MATCH: 0,
    GuardKind.ID_MATCH: 0,
    GuardKind.IS_NONE: 0,
    GuardKind.NOT_NONE: 0,
    GuardKind.EQUALS_MATCH: 1,
    GuardKind.LEN_MATCH: 1,
    GuardKind.MODULE_TRAINING: 1,
    GuardKind.DICT_KEYS: 2,
    GuardKind.TENSOR_MATCH: 3,
    GuardKind.GRAD_MODE: 4,
    GuardKind.AUTOCAST: 4,
    GuardKind.DEFAULT_DTYPE: 4,
    GuardKind.SHAPE_EXPR: 6,  # after the TENSOR_MATCH guards that check the ranks it indexes
}


def _depth(source) -> int:
    """How many steps a source path has (``L['x']`` is 1, ``L['m'].fc.weight`` is 3)."""
    depth = 0
    while source is not None:
        depth += 1
        source = getattr(source, "base", None)
    return depth


def order_guards(guards) -> list:
    """``guards`` without duplicates, cheapest kinds and shortest paths first (stable otherwise)."""
    unique, seen = [], set()
    for guard in guards:
        key = guard
        try:
            hash(key)
        except TypeError:  # an unhashable expected value (a list of dict keys): compare by identity
            key = (guard.source, guard.kind, id(guard.expected))
        if key not in seen:
            seen.add(key)
            unique.append(guard)
    return sorted(unique, key=lambda g: (_RANK.get(g.kind, 5), _depth(g.source)))


class _CodeWriter:
    """Builds the check function's text: source paths as locals, constants as default arguments."""

    def __init__(self, frame=None):
        self.frame = frame  # (frame_locals, frame_globals) of the capture, to pick fast paths; or None
        self.lines: list[str] = []
        self.constants: dict[str, Any] = {}
        self._const_ids: dict[int, str] = {}
        self._locals: dict[Source, str] = {}
        self._stores: dict[tuple[str, str], str] = {}

    def const(self, value) -> str:
        """A name bound to ``value`` (an identity, a type, an expected value) in the generated function."""
        key = id(value)
        if key not in self._const_ids:
            name = f"___c{len(self._const_ids)}"
            self._const_ids[key] = name
            self.constants[name] = value
        return self._const_ids[key]

    def value(self, source) -> str:
        """A local holding the value at ``source``, assigned on its first use (its base reused)."""
        if source in self._locals:
            return self._locals[source]
        expr = self._expr(source)
        name = f"___v{len(self._locals)}"
        self.lines.append(f"{name} = {expr}")
        self._locals[source] = name
        return name

    def _expr(self, source) -> str:
        from . import source as sources

        if isinstance(source, sources.AttrSource):
            base = self.value(source.base)
            store = _module_store(source, self.frame)
            if store is not None:  # a submodule/parameter/buffer: read from its store, not via Module.__getattr__
                return f"{self._store(base, store)}[{source.attr!r}]"
            return f"{base}.{source.attr}" if source.attr.isidentifier() else f"getattr({base}, {source.attr!r})"
        if isinstance(source, sources.GetItemSource):
            return f"{self.value(source.base)}[{self.const(source.index)}]"
        # composite sources of the translator: their parts become shared locals too
        if isinstance(source, sources.HookCountSource):
            m = self.value(source.module)
            return f"(-1 if 'forward' in {m}.__dict__ else len({m}._forward_pre_hooks) + len({m}._forward_hooks))"
        if isinstance(source, sources.SameObjectSource):
            return f"({self.value(source.first)} is {self.value(source.second)})"
        if isinstance(source, sources.IteratorItemSource):
            if source.offset is None:
                return f"{self.const(sources.iterator_remaining)}({self.value(source.base)})"
            return f"{self.const(sources.iterator_item)}({self.value(source.base)}, {int(source.offset)})"
        return source.name()  # a root path (L[...], G[...]) or a source kind this writer does not split

    def _store(self, base: str, store: str) -> str:
        """A local holding module ``base``'s store dict (read once, shared by its members' paths)."""
        key = (base, store)
        if key not in self._stores:
            name = f"___s{len(self._stores)}"
            self.lines.append(f"{name} = {base}.__dict__[{store!r}]")
            self._stores[key] = name
        return self._stores[key]

    def test(self, condition: str) -> None:
        self.lines.append(f"if not ({condition}):")
        self.lines.append("    return False")


# Module.__getattr__ (a Python function, run after the normal lookup fails) costs about a microsecond
# per step of a path like L['self'].blocks[0].attn.qkv.weight; the stores it searches are plain dicts.
_MODULE_STORES = ("_parameters", "_buffers", "_modules")  # Module.__getattr__'s order


def _module_store(source, frame):
    """The store (``"_modules"``...) an attribute of an ``nn.Module`` lives in, when reading it from
    there is exactly what ``getattr`` does at capture time (no instance or class attribute shadows
    it); else ``None``. If the module changes later so that the store read fails, the guard fails."""
    if frame is None:
        return None
    try:
        obj = source.base.read(*frame)
    except Exception:
        return None
    import ember

    if not isinstance(obj, ember.nn.Module):
        return None
    attr = source.attr
    if attr in obj.__dict__ or any(attr in klass.__dict__ for klass in type(obj).__mro__):
        return None
    for store in _MODULE_STORES:
        if attr in obj.__dict__.get(store, ()):
            return store
    return None


def _tensor_tests(w: _CodeWriter, v: str, spec: TensorSpec) -> None:
    """The tests of one TENSOR_MATCH: shape (the most likely to change) first."""
    if spec.layout is not None:
        _sparse_tests(w, v, spec)
        return
    numpy_dtype = getattr(spec.dtype, "numpy_dtype", None)
    if numpy_dtype is not None and all(s is not None for s in spec.shape):
        # The common static case as ONE tuple comparison, done in C: shape, the array's numpy dtype, the
        # device object and the requires_grad flag (identical objects compare without calling __eq__;
        # equal but distinct ones still compare equal). The attributes are those behind Tensor.shape,
        # .dtype, .device and .requires_grad.
        expected = (tuple(spec.shape), numpy_dtype, spec.device, bool(spec.requires_grad))
        w.test(f"(({v}d := {v}._data).shape, {v}d.dtype, {v}._device, {v}._requires_grad) == {w.const(expected)}")
        _stride_tests(w, v, spec)
        return
    # Tensor._data is the array behind the tensor (numpy, CuPy or meta): its ``shape`` is a plain
    # tuple, read without building an ember.Size, which costs more than every other test here.
    if all(s is not None for s in spec.shape):
        w.test(f"{v}._data.shape == {w.const(tuple(spec.shape))}")
    else:
        w.test(f"len({v}._data.shape) == {len(spec.shape)}")
        for i, s in enumerate(spec.shape):
            if s is not None:
                w.test(f"{v}._data.shape[{i}] == {int(s)}")
    # dtype and device: an identity test on what the tensor stores first (numpy dtypes and a tensor's
    # device object are shared), the public comparison only when that fails
    if numpy_dtype is not None:
        w.test(f"{v}._data.dtype is {w.const(numpy_dtype)} or {v}.dtype is {w.const(spec.dtype)}")
    else:
        w.test(f"{v}.dtype is {w.const(spec.dtype)}")
    w.test(f"{v}._device is {w.const(spec.device)} or {v}.device == {w.const(spec.device)}")
    # the attributes behind Tensor.requires_grad and Tensor.stride() (strides computed on first use)
    w.test(f"{v}._requires_grad == {bool(spec.requires_grad)}")
    _stride_tests(w, v, spec)


def _sparse_tests(w: _CodeWriter, v: str, spec: TensorSpec) -> None:
    """A sparse input: its layout (a strided tensor has no ``_layout`` attribute: no match), shape, dtype,
    device, requires_grad; not its number of stored elements (the graph never reads it)."""
    w.test(f"{v}._layout is {w.const(spec.layout)}")
    w.test(f"{v}._data.shape == {w.const(tuple(spec.shape))}")
    w.test(f"{v}.dtype is {w.const(spec.dtype)}")
    w.test(f"{v}._device is {w.const(spec.device)} or {v}.device == {w.const(spec.device)}")
    w.test(f"{v}.requires_grad == {bool(spec.requires_grad)}")


def _stride_tests(w: _CodeWriter, v: str, spec: TensorSpec) -> None:
    if spec.stride is not None:
        if all(s is not None for s in spec.stride):
            w.test(f"({v}._strides or {v}.stride()) == {w.const(tuple(spec.stride))}")
        else:
            for i, s in enumerate(spec.stride):
                if s is not None:
                    w.test(f"{v}.stride({i}) == {int(s)}")


def _write_guard(w: _CodeWriter, guard: Guard) -> None:
    kind = guard.kind
    if kind is GuardKind.AUTOCAST:
        state = w.const(_autocast_internal_state())
        key = w.const(autocast_state)
        if not guard.expected:  # captured outside autocast: no autocast mode is the fast, common answer
            w.test(f"{state}.mode is None or {key}() == ()")
        else:
            w.test(f"{key}() == {w.const(tuple(guard.expected))}")
        return
    if kind is GuardKind.DEFAULT_DTYPE:
        w.test(f"{w.const(_default_dtype_table())}['float'] is {w.const(guard.expected)}")
        return
    if kind is GuardKind.GRAD_MODE:
        # the grad-mode flag itself (ember._grad_mode.state, thread-local), not a call of is_grad_enabled()
        w.test(f"{w.const(_grad_state())}.grad_enabled == {bool(guard.expected)}")
        return
    if kind is GuardKind.SHAPE_EXPR:
        guard.expected.write(w)
        return
    if guard.source is None:
        raise ValueError(f"guard {guard}: kind {kind.value} needs a source")
    if kind is GuardKind.EQUALS_MATCH and guard.expected == 0 and isinstance(guard.source, HookCountSource):
        # "no forward hooks, no forward of its own": truth tests of the hook dicts, no len() calls and no sum
        m = w.value(guard.source.module)
        w.test(f"not {m}._forward_pre_hooks and not {m}._forward_hooks and 'forward' not in {m}.__dict__")
        return
    v = w.value(guard.source)
    if kind is GuardKind.TYPE_MATCH:
        w.test(f"type({v}) is {w.const(guard.expected)}")
    elif kind is GuardKind.ID_MATCH:
        w.test(f"{v} is {w.const(guard.expected)}")
    elif kind is GuardKind.EQUALS_MATCH:
        w.test(f"type({v}) is {w.const(type(guard.expected))} and {v} == {w.const(guard.expected)}")
    elif kind is GuardKind.LEN_MATCH:
        w.test(f"len({v}) == {int(guard.expected)}")
    elif kind is GuardKind.DICT_KEYS:
        keys = list(guard.expected)
        # an empty mapping (a module's hook dicts, usually) is one truth test
        w.test(f"not {v}" if not keys else f"list({v}.keys()) == {w.const(keys)}")
    elif kind is GuardKind.MODULE_TRAINING:
        w.test(f"{v}.training is {bool(guard.expected)}")
    elif kind is GuardKind.IS_NONE:
        w.test(f"{v} is None")
    elif kind is GuardKind.NOT_NONE:
        w.test(f"{v} is not None")
    elif kind is GuardKind.TENSOR_MATCH:
        _tensor_tests(w, v, guard.expected)
    else:
        raise ValueError(f"guard {guard}: the guard compiler has no rule for kind {kind!r}")


def _default_dtype_table():
    from ember._dtype import _default

    return _default


def default_dtype():
    """``ember.get_default_dtype()`` (a graph's factories and dtype reads were traced under it)."""
    return _default_dtype_table()["float"]


def _autocast_internal_state():
    from ember._autocast import _state

    return _state


def autocast_state() -> tuple:
    """The autocast regions in force on this thread: ``((device_type, dtype), ...)`` of the enabled
    device types, sorted (``()`` outside autocast). A graph captured under one state is reused only
    under the same one."""
    state = _autocast_internal_state()
    return tuple(sorted((device, state.dtypes[device]) for device, on in state.enabled.items() if on))


def _grad_state():
    from ember._grad_mode import state

    return state


class GuardCheck:
    """The compiled guards of one cache entry: call it as ``check(L, G)`` for a bool.

    Attributes:
        guards (list[Guard]): the guards, in the order they are tested.
        source (str): the generated function's Python text (for debugging and ``explain``).
    """

    __slots__ = ("guards", "source", "_fn")

    def __init__(self, guards, frame_locals=None, frame_globals=None):
        self.guards = order_guards(guards)
        # with the capture's frame, paths through nn.Modules read their stores directly (faster)
        w = _CodeWriter(None if frame_locals is None else (frame_locals, frame_globals or {}))
        for guard in self.guards:
            _write_guard(w, guard)
        params = "".join(f", {name}={name}" for name in w.constants)
        body = "\n".join("        " + line for line in w.lines) or "        pass"
        self.source = (
            f"def ___check(L, G{params}):\n"
            f"    try:\n{body}\n"
            "    except Exception:\n"
            "        return False\n"
            "    return True\n"
        )
        namespace = dict(w.constants)
        exec(compile(self.source, "<ember._dynamo guards>", "exec"), namespace)  # noqa: S102 - our own text
        self._fn = namespace["___check"]

    def __call__(self, frame_locals, frame_globals) -> bool:
        return self._fn(frame_locals, frame_globals)

    def failures(self, frame_locals, frame_globals) -> list[str]:
        """Why each failing guard fails on this frame, in check order (empty if all hold)."""
        return [msg for guard in self.guards if (msg := describe_failure(guard, frame_locals, frame_globals))]

    def explain_failure(self, frame_locals, frame_globals) -> str | None:
        """The first failing guard and why, as text (``None`` if every guard holds)."""
        failures = self.failures(frame_locals, frame_globals)
        return failures[0] if failures else None


def describe_failure(guard: Guard, frame_locals, frame_globals) -> str | None:
    """Why ``guard`` fails on this frame, in words (``None`` when it holds).

    Evaluated one guard at a time (slow, only on a cache miss): names the source path, what was
    expected and what was found.
    """
    kind, expected = guard.kind, guard.expected
    if kind is GuardKind.GRAD_MODE:
        now = bool(_grad_state().grad_enabled)
        return None if now is bool(expected) else f"grad mode changed: expected {bool(expected)}, got {now}"
    if kind is GuardKind.AUTOCAST:
        now = autocast_state()
        return None if now == tuple(expected) else f"autocast changed: expected {tuple(expected)}, got {now}"
    if kind is GuardKind.DEFAULT_DTYPE:
        now = default_dtype()
        return None if now is expected else f"default dtype changed: expected {expected}, got {now}"
    if kind is GuardKind.SHAPE_EXPR:
        return expected.describe_failure(frame_locals, frame_globals)
    where = guard.source.name()
    try:
        v = guard.source.read(frame_locals, frame_globals)
    except Exception as exc:  # the path itself is gone
        return f"{where} cannot be read: {type(exc).__name__}: {exc}"
    if kind is GuardKind.TYPE_MATCH:
        ok = type(v) is expected
        return None if ok else f"type({where}) changed: expected {expected.__qualname__}, got {type(v).__qualname__}"
    if kind is GuardKind.ID_MATCH:
        return None if v is expected else f"{where} is a different object than at capture (expected {expected!r})"
    if kind is GuardKind.EQUALS_MATCH:
        ok = type(v) is type(expected) and v == expected
        return None if ok else f"{where} == {expected!r} failed: got {v!r}"
    if kind is GuardKind.LEN_MATCH:
        return _compare(f"len({where})", lambda: len(v), expected)
    if kind is GuardKind.DICT_KEYS:
        return _compare(f"{where}.keys()", lambda: list(v.keys()), list(expected))
    if kind is GuardKind.MODULE_TRAINING:
        return _compare(f"{where}.training", lambda: v.training, bool(expected))
    if kind is GuardKind.IS_NONE:
        return None if v is None else f"{where} is None failed: got {type(v).__qualname__}"
    if kind is GuardKind.NOT_NONE:
        return None if v is not None else f"{where} is not None failed: got None"
    if kind is GuardKind.TENSOR_MATCH:
        return _tensor_failure(where, v, expected)
    return f"{where}: no rule for guard kind {kind!r}"


def _compare(what, get, expected):
    try:
        got = get()
    except Exception as exc:
        return f"{what} cannot be read: {type(exc).__name__}: {exc}"
    return None if got == expected else f"{what} == {expected!r} failed: got {got!r}"


def _tensor_failure(where, v, spec: TensorSpec) -> str | None:
    """The first property of tensor ``v`` that differs from ``spec``, in words."""
    try:
        shape = tuple(v.shape)
    except Exception:
        return f"{where} is not a tensor any more: got {type(v).__qualname__}"
    if len(shape) != len(spec.shape):
        return f"{where} has {len(shape)} dims, expected {len(spec.shape)} (shape {list(shape)})"
    for i, (got, want) in enumerate(zip(shape, spec.shape)):
        if want is not None and got != want:
            return f"tensor {where} size mismatch at index {i}: expected {want}, actual {got}"
    if v.dtype is not spec.dtype:
        return f"tensor {where} dtype mismatch: expected {spec.dtype}, actual {v.dtype}"
    if v.device != spec.device:
        return f"tensor {where} device mismatch: expected {spec.device}, actual {v.device}"
    if bool(v.requires_grad) != bool(spec.requires_grad):
        return f"tensor {where} requires_grad mismatch: expected {spec.requires_grad}, actual {v.requires_grad}"
    if spec.stride is not None:
        for i, (got, want) in enumerate(zip(v.stride(), spec.stride)):
            if want is not None and got != want:
                return f"tensor {where} stride mismatch at index {i}: expected {want}, actual {got}"
    return None


def size_mismatch_dims(guard: Guard, frame_locals, frame_globals) -> tuple[int, ...]:
    """The dims in which a TENSOR_MATCH fails ONLY by size (same rank, dtype, device): else ``()``.

    Automatic dynamic shapes mark exactly these dims dynamic on the next capture.
    """
    if guard.kind is not GuardKind.TENSOR_MATCH:
        return ()
    spec = guard.expected
    try:
        v = guard.source.read(frame_locals, frame_globals)
        shape = tuple(v._data.shape)
        if len(shape) != len(spec.shape) or v.dtype is not spec.dtype or v.device != spec.device:
            return ()
    except Exception:
        return ()
    return tuple(i for i, (got, want) in enumerate(zip(shape, spec.shape)) if want is not None and got != want)
