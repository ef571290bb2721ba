"""Flattening a call's inputs along a recorded :class:`~ember.utils._pytree.TreeSpec` (``torch.fx._pytree``).

A GraphModule traced with structured inputs (``concrete_args={"batch": {"x": PH, "y": PH}}``)
has one placeholder per leaf; its generated ``forward`` takes the structures and calls
:func:`tree_flatten_spec` to pick the leaves out in the order of the placeholders.
Unlike :func:`ember.utils._pytree.tree_flatten`, it follows the *spec*: a dict's values
are read by the recorded keys (so insertion order does not matter, and extra keys are
ignored) and a list may stand for a tuple.
"""

from __future__ import annotations

from collections import OrderedDict, namedtuple

from ember.utils._pytree import SUPPORTED_NODES, TreeSpec

__all__ = ["tree_flatten_spec"]


def tree_flatten_spec(pytree, spec):
    """The leaves of ``pytree`` at the places where ``spec`` has leaves, in spec order.

    Raises:
        TypeError: if ``spec`` is not a TreeSpec, or ``pytree`` does not fit it (the message
            says where: ``input[1]['x']``).
    """
    if not isinstance(spec, TreeSpec):
        raise TypeError(f"tree_flatten_spec: spec must be a TreeSpec, got {type(spec).__name__}")
    out = []
    _flatten_spec(pytree, spec, out, "input")
    return out


def _children(pytree, spec, where):
    kind = spec.type
    if kind in (dict, OrderedDict):
        if not isinstance(pytree, dict):
            raise TypeError(f"{where} must be a dict with keys {spec.context!r}, got {type(pytree).__name__}")
        missing = [k for k in spec.context if k not in pytree]
        if missing:
            raise TypeError(f"{where} lacks the key(s) {missing!r}; the traced structure had {spec.context!r}")
        return [pytree[k] for k in spec.context], [f"{where}[{k!r}]" for k in spec.context]
    if kind in (tuple, list) or kind is namedtuple:
        if not isinstance(pytree, (tuple, list)) or len(pytree) != spec.num_children:
            raise TypeError(
                f"{where} must be a sequence of {spec.num_children} items as when traced, got {_describe(pytree)}"
            )
        return list(pytree), [f"{where}[{i}]" for i in range(len(pytree))]
    if type(pytree) is not kind:
        raise TypeError(f"{where} must be a {kind.__name__} as when traced, got {type(pytree).__name__}")
    children, _ = SUPPORTED_NODES[kind].flatten_fn(pytree)
    if len(children) != spec.num_children:
        raise TypeError(f"{where} has {len(children)} children, the traced one had {spec.num_children}")
    return children, [f"{where}[{i}]" for i in range(len(children))]


def _flatten_spec(pytree, spec, out, where):
    if spec.is_leaf():
        out.append(pytree)
        return
    children, places = _children(pytree, spec, where)
    for child, child_spec, place in zip(children, spec.children_specs, places):
        _flatten_spec(child, child_spec, out, place)


def _describe(value):
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"
