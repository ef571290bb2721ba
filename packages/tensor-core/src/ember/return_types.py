"""Named tuples returned by multi-output ops, as ``torch.return_types``.

``ember.max(x, dim=0)`` returns an ``ember.return_types.max`` with fields
``values`` and ``indices``; each class here is the ``return_type`` of its op
in the registry, collected rather than redefined.
"""

from ._ops import registry as _registry

for _op in _registry.values():
    if _op.return_type is not None:
        globals()[_op.return_type.__name__] = _op.return_type

__all__ = sorted(name for name in globals() if not name.startswith("_"))
