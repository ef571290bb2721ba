"""Names: readable qualified names of call targets, and unique Python identifiers for nodes."""

from __future__ import annotations

import builtins
import keyword
import operator
import re

__all__ = ["qualified_name", "Namespace", "snake_case"]


def _ember():
    import ember

    return ember


def _is_op(obj):
    from ember._ops import Op

    return isinstance(obj, Op)


def op_path(op):
    """Where an ember op is reachable from ``import ember``: ``"ember.relu"``, ``"ember.nn.functional.linear"``.

    Returns None when neither namespace holds this very op (private ops).
    """
    ember = _ember()
    if getattr(ember, op.name, None) is op:
        return f"ember.{op.name}"
    import ember.nn.functional as F  # noqa: N812 - PyTorch's alias

    if getattr(F, op.name, None) is op:
        return f"ember.nn.functional.{op.name}"
    for name, value in vars(F).items():  # F-names that differ from the registry name (F.unfold)
        if value is op and not name.startswith("_"):
            return f"ember.nn.functional.{name}"
    return None


def qualified_name(target):
    """A readable dotted name of a call target (``ember.relu``, ``operator.add``, ``mymod.fn``)."""
    if isinstance(target, str):
        return target
    if _is_op(target):
        return op_path(target) or f"ember._ops.registry[{target.name!r}]"
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)
    if getattr(builtins, name, None) is target:
        return f"builtins.{name}"
    module = getattr(target, "__module__", None) or ""
    module = {"_operator": "operator"}.get(module, module)
    if getattr(operator, name, None) is target:
        module = "operator"
    return f"{module}.{name}" if module else name


_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def snake_case(s):
    """``"BatchNorm2d"`` -> ``"batch_norm2d"``, the way generated names read."""
    return _CAMEL_BOUNDARY.sub("_", s).lower()


_ILLEGAL = re.compile(r"[^0-9a-zA-Z_]+")
_SUFFIX = re.compile(r"^(.*)_(\d+)$")

# Names generated code relies on; a node called ``getattr`` would shadow the builtin.
_RESERVED = set(dir(builtins)) | set(keyword.kwlist) | {"self", "ember", "operator", "inf", "nan", "device"}


class Namespace:
    """Hands out unique Python identifiers derived from name hints (``relu``, ``relu_1``, ...)."""

    def __init__(self):
        self._used = set()
        self._next_suffix = {}

    def create_name(self, candidate):
        """A fresh identifier close to ``candidate``."""
        candidate = _ILLEGAL.sub("_", str(candidate)) or "_unnamed"
        if candidate[0].isdigit():
            candidate = f"_{candidate}"
        match = _SUFFIX.match(candidate)
        base, num = (match.group(1), int(match.group(2))) if match else (candidate, None)
        name = candidate if num is None else f"{base}_{num}"
        if name in self._used or name in _RESERVED:
            num = self._next_suffix.get(base, 1)
            while f"{base}_{num}" in self._used or f"{base}_{num}" in _RESERVED:
                num += 1
            name = f"{base}_{num}"
            self._next_suffix[base] = num + 1
        self._used.add(name)
        return name

    def mark_used(self, name):
        """Reserve ``name`` (it exists already)."""
        self._used.add(name)

    def copy(self):
        new = Namespace()
        new._used = set(self._used)
        new._next_suffix = dict(self._next_suffix)
        return new
