"""The op registry (``ember._ops``): every public operator, defined once.

See :mod:`ember._ops._registry` for what an entry holds and
:mod:`ember._ops._dispatch` for how calls reach kernels. The op modules are
imported here explicitly, in dependency order.
"""

from . import _registry
from ._registry import COMPOSITE, PRIM, Op, defop, get, registry

from . import creation  # noqa: E402,I001 - registration order matters
from . import views  # noqa: E402
from . import pointwise  # noqa: E402
from . import indexing  # noqa: E402
from . import random  # noqa: E402

__all__ = ["Op", "registry", "defop", "get", "PRIM", "COMPOSITE", "public_ops"]

# Registry names that are not public functions of the ember namespace.
_NOT_PUBLIC = {"slice"}


def public_ops():
    """The ops exported as ``ember.<name>``: not private, not in-place variants."""
    return {
        name: op
        for name, op in _registry.registry.items()
        if not name.startswith("_") and op.kind != "inplace" and name not in _NOT_PUBLIC
    }
