"""``ember.nn.functional``: the functional NN ops, as ``F.relu(x)`` in PyTorch.

Every name here is an op of the registry (tagged ``nn.functional`` or
``nn.functional_only``); they are collected, not redefined, so FX and the
dispatcher see the same objects as ``ember.<name>`` where both exist.
"""

from .._ops import OP_MODULES as _OP_MODULES
from .._ops import nn_functional_ops as _nn_functional_ops
from .._ops import registry as _registry

globals().update(_nn_functional_ops())
# F-names whose registry name differs (F.unfold is im2col: "unfold" is Tensor.unfold's op).
for _module in _OP_MODULES:
    for _alias, _name in getattr(_module, "NN_FUNCTIONAL_ALIASES", {}).items():
        globals()[_alias] = _registry[_name]
__all__ = sorted(name for name in globals() if not name.startswith("_"))
