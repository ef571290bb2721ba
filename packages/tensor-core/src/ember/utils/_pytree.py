"""Pytrees: nested containers flattened to a list of leaves plus a :class:`TreeSpec` that rebuilds them.

The counterpart of ``torch.utils._pytree``. A *pytree* is a leaf or a container
node whose children are pytrees. The node types known out of the box are
``tuple``, ``list``, ``dict``, ``collections.OrderedDict``, ``collections.defaultdict``,
``collections.deque`` and named tuples (``ember.return_types.max`` ... included);
everything else, ``None`` included (as in PyTorch 2.13), is a leaf. More node
types are added with :func:`register_pytree_node`.

Leaves come out depth first, left to right; a dict's children come in its
insertion order and its keys are part of the spec (so ``{"a": 1, "b": 2}`` and
``{"b": 2, "a": 1}`` have different specs, as in PyTorch).

Example:
    >>> from ember.utils._pytree import tree_flatten, tree_unflatten
    >>> leaves, spec = tree_flatten({"w": 1, "b": [2, (3, None)]})
    >>> leaves
    [1, 2, 3, None]
    >>> spec
    TreeSpec(dict, ['w', 'b'], [*,
      TreeSpec(list, None, [*,
        TreeSpec(tuple, None, [*,
          *])])])
    >>> tree_unflatten([x * 10 for x in leaves[:3]] + [None], spec)
    {'w': 10, 'b': [20, (30, None)]}

:func:`tree_flatten_with_path`, :func:`tree_leaves_with_path` and :func:`tree_map_with_path`
also give each leaf's *key path*, a tuple of key entries (:class:`SequenceKey`,
:class:`MappingKey`, :class:`GetAttrKey`) that :func:`keystr` prints as ``['w'][1].x``.

:func:`treespec_dumps` writes a spec as JSON (in the layout PyTorch uses, protocol 1)
and :func:`treespec_loads` reads it back. Loading only looks types up among the
registered ones (by their ``serialized_type_name``); it never imports or runs code
named by the text.
"""

from __future__ import annotations

import builtins
import dataclasses
import json
import types
from collections import OrderedDict, defaultdict, deque, namedtuple
from collections.abc import Callable
from typing import NamedTuple

__all__ = [
    "TreeSpec",
    "LeafSpec",
    "register_pytree_node",
    "tree_flatten",
    "tree_unflatten",
    "tree_leaves",
    "tree_structure",
    "tree_iter",
    "tree_map",
    "tree_map_only",
    "tree_all",
    "tree_any",
    "tree_is_leaf",
    "treespec_dumps",
    "treespec_loads",
    "SUPPORTED_NODES",
    "SequenceKey",
    "MappingKey",
    "GetAttrKey",
    "keystr",
    "tree_flatten_with_path",
    "tree_leaves_with_path",
    "tree_map_with_path",
]

DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL = 1
NO_SERIALIZED_TYPE_NAME_FOUND = "NO_SERIALIZED_TYPE_NAME_FOUND"


class NodeDef(NamedTuple):
    """How one container type is taken apart and put back together."""

    type: type
    flatten_fn: Callable  # node -> (children list, context)
    unflatten_fn: Callable  # (children iterable, context) -> node
    flatten_with_keys_fn: Callable | None = None  # node -> ([(key entry, child), ...], context)


class _SerializeNodeDef(NamedTuple):
    """How one container type's context is written to and read from JSON."""

    type: type
    serialized_type_name: str
    to_dumpable_context: Callable | None
    from_dumpable_context: Callable | None


#: Container type -> :class:`NodeDef`.
SUPPORTED_NODES: dict[type, NodeDef] = {}
SUPPORTED_SERIALIZED_TYPES: dict[type, _SerializeNodeDef] = {}
SERIALIZED_TYPE_TO_PYTHON_TYPE: dict[str, type] = {}


def register_pytree_node(
    cls,
    flatten_fn,
    unflatten_fn,
    *,
    serialized_type_name=None,
    to_dumpable_context=None,
    from_dumpable_context=None,
    flatten_with_keys_fn=None,
):
    """Make instances of ``cls`` pytree nodes.

    Args:
        cls: the container type (exact type: subclasses are leaves unless registered too).
        flatten_fn (callable): ``node -> (children, context)``; ``children`` is a list of the
            node's direct children, ``context`` anything (hashable and comparable with ``==``)
            needed to rebuild the node.
        unflatten_fn (callable): ``(children, context) -> node``.
        serialized_type_name (str or None): the name :func:`treespec_dumps` writes for this
            type and :func:`treespec_loads` looks up; defaults to ``"<module>.<qualname>"``.
        to_dumpable_context (callable or None): ``context -> JSON-able value``; by default the
            context itself is written (it must then be JSON-able).
        from_dumpable_context (callable or None): the inverse; by default the JSON value is used.
        flatten_with_keys_fn (callable or None): ``node -> (list of (key entry, child), context)``,
            the key entries (:class:`SequenceKey`, :class:`MappingKey`, :class:`GetAttrKey` or any
            object with ``__str__`` and ``get(parent)``) naming each child for
            :func:`tree_flatten_with_path`; without it, the ``*_with_path`` functions raise on ``cls``.

    Raises:
        ValueError: if ``cls`` is already registered, or ``serialized_type_name`` is taken by another type.
        TypeError: if ``cls`` is not a type or a function is not callable.

    Example:
        >>> from ember.utils._pytree import register_pytree_node, tree_leaves
        >>> class Pair:
        ...     def __init__(self, a, b):
        ...         self.a, self.b = a, b
        >>> register_pytree_node(Pair, lambda p: ([p.a, p.b], None), lambda c, _: Pair(*c))
        >>> tree_leaves([Pair(1, 2), 3])
        [1, 2, 3]
    """
    if not isinstance(cls, type) and cls is not namedtuple:  # namedtuple: the key for all named tuples
        raise TypeError(f"register_pytree_node: cls must be a type, got {cls!r}")
    functions = [("flatten_fn", flatten_fn), ("unflatten_fn", unflatten_fn)]
    if flatten_with_keys_fn is not None:
        functions.append(("flatten_with_keys_fn", flatten_with_keys_fn))
    for name, fn in functions:
        if not callable(fn):
            raise TypeError(f"register_pytree_node: {name} must be callable, got {type(fn).__name__}")
    if cls in SUPPORTED_NODES:
        raise ValueError(f"{cls} is already registered as pytree node.")
    if serialized_type_name is None:
        serialized_type_name = f"{cls.__module__}.{cls.__qualname__}"
    holder = SERIALIZED_TYPE_TO_PYTHON_TYPE.get(serialized_type_name)
    if holder is not None and holder is not cls:
        raise ValueError(
            f"register_pytree_node: serialized_type_name {serialized_type_name!r} is already used by {holder}"
        )
    SUPPORTED_NODES[cls] = NodeDef(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn)
    SUPPORTED_SERIALIZED_TYPES[cls] = _SerializeNodeDef(
        cls, serialized_type_name, to_dumpable_context, from_dumpable_context
    )
    SERIALIZED_TYPE_TO_PYTHON_TYPE[serialized_type_name] = cls


def _deregister_pytree_node(cls):
    """Undo :func:`register_pytree_node` (for tests)."""
    SUPPORTED_NODES.pop(cls, None)
    info = SUPPORTED_SERIALIZED_TYPES.pop(cls, None)
    if info is not None:
        SERIALIZED_TYPE_TO_PYTHON_TYPE.pop(info.serialized_type_name, None)


# -- the built-in node types ---------------------------------------------------------------------------


def _is_namedtuple_instance(obj):
    cls = type(obj)
    return issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple)


def _node_type(tree):
    """The registry key for ``tree``: its type, or ``namedtuple`` for any named tuple."""
    if _is_namedtuple_instance(tree) and type(tree) not in SUPPORTED_NODES:
        return namedtuple
    return type(tree)


def _dict_context_dump(keys):
    if not all(k is None or type(k) in (str, int, float, bool) for k in keys):
        raise NotImplementedError(f"treespec_dumps: dict keys {keys!r} are not all JSON scalars")
    return keys


# Named tuple classes are written by name and found again only through this table (no imports on load).
_NAMEDTUPLE_NAMES: dict[type, str] = {}
_NAMEDTUPLE_BY_NAME: dict[str, type] = {}


def _register_namedtuple(cls, *, serialized_type_name):
    """Let :func:`treespec_dumps`/:func:`treespec_loads` handle specs holding the named tuple ``cls``."""
    if not (isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")):
        raise TypeError(f"_register_namedtuple: {cls!r} is not a named tuple class")
    _NAMEDTUPLE_NAMES[cls] = serialized_type_name
    _NAMEDTUPLE_BY_NAME[serialized_type_name] = cls


def _namedtuple_dump(cls):
    name = _NAMEDTUPLE_NAMES.get(cls)
    if name is None:
        raise NotImplementedError(
            f"treespec_dumps: the named tuple {cls.__module__}.{cls.__qualname__} is not registered for "
            "serialization; call ember.utils._pytree._register_namedtuple(cls, serialized_type_name=...)"
        )
    return name


def _namedtuple_load(name):
    cls = _NAMEDTUPLE_BY_NAME.get(name)
    if cls is None:
        raise ValueError(f"treespec_loads: unknown named tuple {name!r}; register it with _register_namedtuple")
    return cls


def _defaultdict_dump(context):
    factory, keys = context
    # Only builtin factories: loading must find them without importing anything.
    if factory is not None and getattr(builtins, getattr(factory, "__name__", ""), None) is not factory:
        raise NotImplementedError(f"treespec_dumps: defaultdict factory {factory!r} is not a builtin")
    return [None if factory is None else factory.__name__, _dict_context_dump(keys)]


def _defaultdict_load(value):
    name, keys = value
    factory = None if name is None else getattr(builtins, name, None)
    if name is not None and not isinstance(factory, type):
        raise ValueError(f"treespec_loads: defaultdict factory {name!r} is not a builtin type")
    return [factory, keys]


# -- key entries: how a child is reached from its parent (for the *_with_path functions) ----------------


@dataclasses.dataclass(frozen=True, slots=True)
class SequenceKey:
    """The child at position ``idx`` of a sequence (a tuple, list or deque); prints as ``[idx]``."""

    idx: int

    def __str__(self):
        return f"[{self.idx!r}]"

    def get(self, sequence):
        """``sequence[idx]``."""
        return sequence[self.idx]


@dataclasses.dataclass(frozen=True, slots=True)
class MappingKey:
    """The value under ``key`` of a mapping (a dict, OrderedDict or defaultdict); prints as ``[key]``
    with the key's repr (``['a']``)."""

    key: object

    def __str__(self):
        return f"[{self.key!r}]"

    def get(self, mapping):
        """``mapping[key]``."""
        return mapping[self.key]


@dataclasses.dataclass(frozen=True, slots=True)
class GetAttrKey:
    """The attribute ``name`` of an object (a named tuple's field); prints as ``.name``."""

    name: str

    def __str__(self):
        return f".{self.name}"

    def get(self, obj):
        """``getattr(obj, name)``."""
        return getattr(obj, self.name)


def _sequence_with_keys(seq, context):
    return [(SequenceKey(i), c) for i, c in enumerate(seq)], context


def _mapping_with_keys(mapping, context):
    return [(MappingKey(k), v) for k, v in mapping.items()], context


register_pytree_node(
    tuple,
    lambda t: (list(t), None),
    lambda c, _: tuple(c),
    serialized_type_name="builtins.tuple",
    flatten_with_keys_fn=lambda t: _sequence_with_keys(t, None),
)
register_pytree_node(
    list,
    lambda t: (list(t), None),
    lambda c, _: list(c),
    serialized_type_name="builtins.list",
    flatten_with_keys_fn=lambda t: _sequence_with_keys(t, None),
)
register_pytree_node(
    dict,
    lambda d: (list(d.values()), list(d.keys())),
    lambda c, keys: dict(zip(keys, c)),
    serialized_type_name="builtins.dict",
    to_dumpable_context=_dict_context_dump,
    flatten_with_keys_fn=lambda d: _mapping_with_keys(d, list(d.keys())),
)
register_pytree_node(
    OrderedDict,
    lambda d: (list(d.values()), list(d.keys())),
    lambda c, keys: OrderedDict(zip(keys, c)),
    serialized_type_name="collections.OrderedDict",
    to_dumpable_context=_dict_context_dump,
    flatten_with_keys_fn=lambda d: _mapping_with_keys(d, list(d.keys())),
)
register_pytree_node(
    defaultdict,
    lambda d: (list(d.values()), [d.default_factory, list(d.keys())]),
    lambda c, ctx: defaultdict(ctx[0], zip(ctx[1], c)),
    serialized_type_name="collections.defaultdict",
    to_dumpable_context=_defaultdict_dump,
    from_dumpable_context=_defaultdict_load,
    flatten_with_keys_fn=lambda d: _mapping_with_keys(d, [d.default_factory, list(d.keys())]),
)
register_pytree_node(
    deque,
    lambda d: (list(d), d.maxlen),
    lambda c, maxlen: deque(c, maxlen=maxlen),
    serialized_type_name="collections.deque",
    flatten_with_keys_fn=lambda d: _sequence_with_keys(d, d.maxlen),
)
register_pytree_node(
    namedtuple,  # stands for every named tuple class; the context is the class
    lambda t: (list(t), type(t)),
    lambda c, cls: cls(*c),
    serialized_type_name="collections.namedtuple",
    to_dumpable_context=_namedtuple_dump,
    from_dumpable_context=_namedtuple_load,
    flatten_with_keys_fn=lambda t: ([(GetAttrKey(f), v) for f, v in zip(t._fields, t)], type(t)),
)


# -- TreeSpec --------------------------------------------------------------------------------------------


class TreeSpec:
    """The structure of a pytree without its leaves.

    Its attributes: ``type``, the node's class (``None`` for a leaf, ``namedtuple`` for named
    tuples); ``context``, what that class needs besides the children (a dict's keys, a named
    tuple's class); ``children_specs``, the children's specs (a list of TreeSpec);
    ``num_leaves``, how many leaves the structure holds; ``num_nodes``, how many nodes,
    leaves included.

    Two specs are equal when their types, contexts and children are.
    """

    __slots__ = ("type", "context", "children_specs", "num_leaves", "num_nodes")

    def __init__(self, type, context, children_specs):  # noqa: A002 - PyTorch's argument name
        self.type = type
        self.context = context
        self.children_specs = list(children_specs)
        if type is None and self.children_specs:
            raise ValueError("TreeSpec: a leaf spec (type None) cannot have children")
        if type is None:
            self.num_leaves, self.num_nodes = 1, 1
        else:
            self.num_leaves = sum(c.num_leaves for c in self.children_specs)
            self.num_nodes = 1 + sum(c.num_nodes for c in self.children_specs)

    @property
    def num_children(self):
        """How many direct children the node has."""
        return len(self.children_specs)

    def is_leaf(self):
        """Whether this spec stands for a single leaf."""
        return self.type is None

    def unflatten(self, leaves):
        """Rebuild the pytree from ``leaves`` (see :func:`tree_unflatten`)."""
        return tree_unflatten(leaves, self)

    def flatten_up_to(self, tree):
        """The subtrees of ``tree`` that sit where this spec has leaves.

        Raises:
            ValueError: if ``tree`` does not have this spec's structure down to its leaves.
        """
        out = []
        self._flatten_up_to(tree, out, "tree")
        return out

    def _flatten_up_to(self, tree, out, where):
        if self.type is None:
            out.append(tree)
            return
        kind = _node_type(tree)
        if kind is not self.type:
            raise ValueError(f"{where} is a {type(tree).__name__} where the spec expects {_type_name(self.type)}")
        children, context = SUPPORTED_NODES[kind].flatten_fn(tree)
        if len(children) != len(self.children_specs):
            raise ValueError(f"{where} has {len(children)} children where the spec expects {len(self.children_specs)}")
        if context != self.context:
            raise ValueError(f"{where} has context {context!r} where the spec expects {self.context!r}")
        for i, (child, spec) in enumerate(zip(children, self.children_specs)):
            spec._flatten_up_to(child, out, f"{where}[{i}]")

    def __eq__(self, other):
        if not isinstance(other, TreeSpec):
            return NotImplemented
        return self.type is other.type and self.context == other.context and self.children_specs == other.children_specs

    def __hash__(self):
        return hash((self.type, _hashable(self.context), tuple(self.children_specs)))

    def __repr__(self):
        return self._repr(0)

    def _repr(self, indent):
        if self.type is None:
            return "*"
        context = self.context
        if self.type is namedtuple:
            context = f"<class '{context.__module__}.{context.__qualname__}'>"
        else:
            context = repr(context)
        children = []
        for i, child in enumerate(self.children_specs):
            text = child._repr(indent + 2)
            children.append(text if i == 0 else "\n" + " " * (indent + 2) + text)
        return f"TreeSpec({_type_name(self.type)}, {context}, [{','.join(children)}])"


class LeafSpec(TreeSpec):
    """The spec of a single leaf; its repr is ``*``."""

    __slots__ = ()

    def __init__(self):
        super().__init__(None, None, [])


_LEAF_SPEC = LeafSpec()


def _type_name(t):
    return "namedtuple" if t is namedtuple else t.__name__


def _hashable(context):
    try:
        hash(context)
        return context
    except TypeError:
        return repr(context)


# -- flatten and unflatten ---------------------------------------------------------------------------


def tree_is_leaf(tree, is_leaf=None):
    """Whether ``tree`` is a leaf: not a registered node type, or ``is_leaf(tree)`` says so."""
    if is_leaf is not None and is_leaf(tree):
        return True
    return _node_type(tree) not in SUPPORTED_NODES


def tree_flatten(tree, is_leaf=None):
    """The leaves of ``tree`` (depth first, left to right) and its :class:`TreeSpec`.

    Args:
        tree: a pytree.
        is_leaf (callable or None): ``subtree -> bool``; subtrees for which it is True are
            kept whole as leaves.

    Returns:
        tuple[list, TreeSpec]
    """
    leaves = []
    spec = _flatten(tree, leaves, is_leaf)
    return leaves, spec


def _flatten(tree, leaves, is_leaf):
    if tree_is_leaf(tree, is_leaf):
        leaves.append(tree)
        return _LEAF_SPEC
    kind = _node_type(tree)
    children, context = SUPPORTED_NODES[kind].flatten_fn(tree)
    return TreeSpec(kind, context, [_flatten(c, leaves, is_leaf) for c in children])


def tree_unflatten(leaves, treespec):
    """Rebuild a pytree of structure ``treespec`` whose leaves are ``leaves``, in order.

    Raises:
        TypeError: if ``treespec`` is not a :class:`TreeSpec`.
        ValueError: if the number of leaves differs from ``treespec.num_leaves``.
    """
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"tree_unflatten(leaves, treespec): treespec must be a TreeSpec, got {type(treespec).__name__}")
    leaves = list(leaves)
    if len(leaves) != treespec.num_leaves:
        raise ValueError(
            f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but the spec refers to a pytree "
            f"that holds {treespec.num_leaves} items ({treespec})."
        )
    return _unflatten(iter(leaves), treespec)


def _unflatten(leaves, spec):
    if spec.type is None:
        return next(leaves)
    children = [_unflatten(leaves, c) for c in spec.children_specs]
    return SUPPORTED_NODES[spec.type].unflatten_fn(children, spec.context)


def tree_leaves(tree, is_leaf=None):
    """The leaves of ``tree`` as a list (see :func:`tree_flatten`)."""
    return tree_flatten(tree, is_leaf)[0]


def tree_iter(tree, is_leaf=None):
    """An iterator over the leaves of ``tree``."""
    return iter(tree_leaves(tree, is_leaf))


def tree_structure(tree, is_leaf=None):
    """The :class:`TreeSpec` of ``tree``."""
    return tree_flatten(tree, is_leaf)[1]


def tree_map(func, tree, *rests, is_leaf=None):
    """A pytree like ``tree`` whose leaves are ``func(leaf, *corresponding leaves of rests)``.

    Args:
        func (callable): called once per leaf.
        tree: the pytree that sets the structure.
        *rests: pytrees with ``tree``'s structure (a leaf of ``tree`` may face a whole subtree).
        is_leaf (callable or None): see :func:`tree_flatten`.

    Raises:
        ValueError: if a tree of ``rests`` does not have ``tree``'s structure.
    """
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [spec.flatten_up_to(r) for r in rests]
    return tree_unflatten([func(*xs) for xs in zip(leaves, *others)], spec)


# -- key paths -----------------------------------------------------------------------------------------


def keystr(kp):
    """A key path (a tuple of key entries) as text: the entries' ``str`` joined, e.g. ``['a'][0].x``."""
    return "".join(str(k) for k in kp)


def tree_leaves_with_path(tree, is_leaf=None):
    """The leaves of ``tree`` with their key paths: a list of ``(key path, leaf)``, in
    :func:`tree_leaves`' order. A key path is a tuple of key entries (:class:`SequenceKey`,
    :class:`MappingKey`, :class:`GetAttrKey`...) leading from the root to the leaf; the root
    itself, when a leaf, has the path ``()``.

    Raises:
        ValueError: if ``tree`` holds a node type registered without ``flatten_with_keys_fn``.

    Example:
        >>> from ember.utils._pytree import keystr, tree_leaves_with_path
        >>> [(keystr(path), leaf) for path, leaf in tree_leaves_with_path({"a": [1, 2]})]
        [("['a'][0]", 1), ("['a'][1]", 2)]
    """
    out = []
    _leaves_with_path(tree, (), out, is_leaf)
    return out


def _leaves_with_path(tree, path, out, is_leaf):
    if tree_is_leaf(tree, is_leaf):
        out.append((path, tree))
        return
    kind = _node_type(tree)
    with_keys = SUPPORTED_NODES[kind].flatten_with_keys_fn
    if with_keys is None:
        raise ValueError(
            f"Did not find a flatten_with_keys_fn for type: {kind}. "
            "Please pass a flatten_with_keys_fn argument to register_pytree_node."
        )
    children, _ = with_keys(tree)
    for key, child in children:
        _leaves_with_path(child, (*path, key), out, is_leaf)


def tree_flatten_with_path(tree, is_leaf=None):
    """:func:`tree_flatten` with key paths: ``(list of (key path, leaf), TreeSpec)``.

    Raises:
        ValueError: as :func:`tree_leaves_with_path`.
    """
    return tree_leaves_with_path(tree, is_leaf), tree_structure(tree, is_leaf)


def tree_map_with_path(func, tree, *rests, is_leaf=None):
    """:func:`tree_map` whose ``func`` gets each leaf's key path first: ``func(key path, leaf, *others)``.

    Raises:
        ValueError: as :func:`tree_leaves_with_path`, or if a tree of ``rests`` does not have
            ``tree``'s structure.
    """
    pairs, spec = tree_flatten_with_path(tree, is_leaf)
    others = [spec.flatten_up_to(r) for r in rests]
    return tree_unflatten([func(path, leaf, *xs) for (path, leaf), *xs in zip(pairs, *others)], spec)


def _type_predicate(type_or_types_or_pred):
    if isinstance(type_or_types_or_pred, (type, tuple, types.UnionType)):
        return lambda x: isinstance(x, type_or_types_or_pred)
    if callable(type_or_types_or_pred):
        return type_or_types_or_pred
    raise TypeError(
        "type_or_types_or_pred must be a type, a tuple of types, a union or a predicate, "
        f"got {type(type_or_types_or_pred).__name__}"
    )


def map_only(type_or_types_or_pred):
    """Decorator: the function is applied to the values matching the types (or predicate); others pass through."""
    pred = _type_predicate(type_or_types_or_pred)

    def wrap(func):
        def wrapped(x):
            return func(x) if pred(x) else x

        return wrapped

    return wrap


def tree_map_only(type_or_types_or_pred, /, func, tree, is_leaf=None):
    """Like :func:`tree_map`, but ``func`` is applied only to leaves of the given type(s) or
    for which the predicate is True; other leaves are kept as they are."""
    return tree_map(map_only(type_or_types_or_pred)(func), tree, is_leaf=is_leaf)


def tree_all(pred, tree, is_leaf=None):
    """Whether ``pred`` is True for every leaf."""
    return all(map(pred, tree_leaves(tree, is_leaf)))


def tree_any(pred, tree, is_leaf=None):
    """Whether ``pred`` is True for some leaf."""
    return any(map(pred, tree_leaves(tree, is_leaf)))


# -- serialisation ---------------------------------------------------------------------------------------


def treespec_dumps(treespec, protocol=None):
    """``treespec`` as JSON text, loadable by :func:`treespec_loads`.

    The text is ``[protocol, node]`` with node ``{"type": serialized type name or null
    for a leaf, "context": the context as JSON text, "children_spec": [node, ...]}``.

    Raises:
        TypeError: if ``treespec`` is not a TreeSpec.
        ValueError: for an unknown protocol.
        NotImplementedError: if a context cannot be written as JSON (a named tuple class
            not registered with ``_register_namedtuple``, a dict key that is not a JSON scalar).
    """
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"treespec_dumps: expected a TreeSpec, got {type(treespec).__name__}")
    if protocol is None:
        protocol = DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL
    if protocol != 1:
        raise ValueError(f"Unknown protocol {protocol}. Available protocols: [1]")
    return json.dumps([protocol, _spec_to_json(treespec)])


def _spec_to_json(spec):
    if spec.type is None:
        return {"type": None, "context": None, "children_spec": []}
    info = SUPPORTED_SERIALIZED_TYPES.get(spec.type)
    if info is None:
        raise NotImplementedError(f"treespec_dumps: type {spec.type} is not registered for serialization")
    context = spec.context if info.to_dumpable_context is None else info.to_dumpable_context(spec.context)
    try:
        text = json.dumps(context)
    except TypeError as exc:
        raise NotImplementedError(
            f"treespec_dumps: the context of a {_type_name(spec.type)} node is not JSON-serialisable ({exc}); "
            "pass to_dumpable_context to register_pytree_node"
        ) from None
    return {
        "type": info.serialized_type_name,
        "context": text,
        "children_spec": [_spec_to_json(c) for c in spec.children_specs],
    }


def treespec_loads(serialized):
    """The :class:`TreeSpec` written by :func:`treespec_dumps`.

    Types are looked up among the registered node types by serialized name only; nothing is
    imported or executed.

    Raises:
        ValueError: for malformed text, an unknown protocol or an unknown type name.
    """
    try:
        protocol, node = json.loads(serialized)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"treespec_loads: not a serialized TreeSpec: {exc}") from None
    if protocol != 1:
        raise ValueError(f"Unknown protocol {protocol}. Available protocols: [1]")
    return _json_to_spec(node)


def _json_to_spec(node):
    if type(node) is not dict or set(node) != {"type", "context", "children_spec"}:
        raise ValueError(f"treespec_loads: malformed node {node!r:.80}")
    name = node["type"]
    if name is None:
        if node["children_spec"]:
            raise ValueError("treespec_loads: a leaf node cannot have children")
        return _LEAF_SPEC
    cls = SERIALIZED_TYPE_TO_PYTHON_TYPE.get(name) if type(name) is str else None
    if cls is None:
        raise ValueError(f"treespec_loads: unknown type {name!r}; register it with register_pytree_node first")
    info = SUPPORTED_SERIALIZED_TYPES[cls]
    if type(node["context"]) is not str or type(node["children_spec"]) is not list:
        raise ValueError(f"treespec_loads: malformed {name} node")
    context = json.loads(node["context"])
    if info.from_dumpable_context is not None:
        context = info.from_dumpable_context(context)
    return TreeSpec(cls, context, [_json_to_spec(c) for c in node["children_spec"]])


def _register_return_types():
    """Make the named tuples of ``ember.return_types`` serialisable by name."""
    from ember import return_types

    for name in return_types.__all__:
        cls = getattr(return_types, name)
        if isinstance(cls, type) and issubclass(cls, tuple):
            _register_namedtuple(cls, serialized_type_name=f"ember.return_types.{name}")


_register_return_types()
