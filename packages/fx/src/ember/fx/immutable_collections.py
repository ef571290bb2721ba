"""Read-only list and dict used for :attr:`Node.args` and :attr:`Node.kwargs`.

A node's arguments are edited through :class:`~ember.fx.Node` (``node.args = ...``,
``update_arg``) so that the users bookkeeping of the graph stays right; mutating the
containers in place would silently skip it, so they refuse.
"""

from __future__ import annotations

__all__ = ["immutable_list", "immutable_dict"]


def _refuse(self, *args, **kwargs):
    raise TypeError(
        f"'{type(self).__name__}' object is immutable: assign node.args / node.kwargs "
        "or use node.update_arg() / node.update_kwarg() instead"
    )


class immutable_list(list):  # noqa: N801 - PyTorch's name
    """A list that cannot be changed in place (a node's list argument)."""

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __hash__(self):
        return hash(tuple(self))

    def __reduce__(self):
        return (immutable_list, (list(self),))


class immutable_dict(dict):  # noqa: N801 - PyTorch's name
    """A dict that cannot be changed in place (a node's keyword arguments)."""

    __setitem__ = __delitem__ = __ior__ = _refuse
    update = pop = popitem = clear = setdefault = _refuse

    def __hash__(self):
        return hash(tuple(self.items()))

    def __reduce__(self):
        return (immutable_dict, (dict(self),))


def _register_pytree_nodes():
    # Node arguments are pytrees like the builtin containers they stand for (as in PyTorch).
    from ember.utils._pytree import register_pytree_node

    register_pytree_node(
        immutable_list,
        lambda x: (list(x), None),
        lambda children, _: immutable_list(children),
        serialized_type_name="ember.fx.immutable_collections.immutable_list",
    )
    register_pytree_node(
        immutable_dict,
        lambda x: (list(x.values()), list(x.keys())),
        lambda children, keys: immutable_dict(zip(keys, children)),
        serialized_type_name="ember.fx.immutable_collections.immutable_dict",
    )


_register_pytree_nodes()
