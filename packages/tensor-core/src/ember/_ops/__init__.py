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
from . import reductions  # noqa: E402
from . import shape  # noqa: E402
from . import linalg  # noqa: E402
from . import nn_conv  # noqa: E402
from . import nn_functional  # noqa: E402

#: The op modules, in registration order. Each lists its Tensor methods in ``METHODS``
#: (and ``ALIASES``, ``OPERATORS`` for dunder methods), which ember._tensor_methods installs.
OP_MODULES = (creation, views, pointwise, indexing, random, reductions, shape, linalg, nn_conv, nn_functional)

__all__ = ["Op", "registry", "defop", "get", "PRIM", "COMPOSITE", "public_ops", "OP_MODULES"]

# Registry names that are not public functions of the ember namespace (PyTorch has
# them only as Tensor methods, or under another name).
_NOT_PUBLIC = {"slice", "view_as", "expand_as", "repeat"}


def public_ops():
    """The ops exported as ``ember.<name>``: not private, not in-place variants, not ``nn.functional``-only."""
    return {
        name: op
        for name, op in _registry.registry.items()
        if not name.startswith("_") and op.kind != "inplace" and name not in _NOT_PUBLIC
        and "nn.functional_only" not in op.tags
    }


def nn_functional_ops():
    """The ops exported as ``ember.nn.functional.<name>``: tagged ``nn.functional`` or ``nn.functional_only``."""
    return {
        name: op
        for name, op in _registry.registry.items()
        if "nn.functional" in op.tags or "nn.functional_only" in op.tags
    }
