"""``ember.nn.functional``: the functional NN ops, as ``F.relu(x)`` in PyTorch.

Nearly every name here is an op of the registry (tagged ``nn.functional`` or
``nn.functional_only``); they are collected, not redefined, so FX and the
dispatcher see the same objects as ``ember.<name>`` where both exist. The
exceptions are Python compositions of ops that, as in PyTorch, are not ops
themselves: :func:`multi_head_attention_forward` (weights passed as arguments)
and :func:`triplet_margin_with_distance_loss` (takes a Python callable).
"""

from .._ops import OP_MODULES as _OP_MODULES
from .._ops import nn_functional_ops as _nn_functional_ops
from .._ops import registry as _registry

globals().update(_nn_functional_ops())
# F-names whose registry name differs (F.unfold is im2col: "unfold" is Tensor.unfold's op).
for _module in _OP_MODULES:
    for _alias, _name in getattr(_module, "NN_FUNCTIONAL_ALIASES", {}).items():
        globals()[_alias] = _registry[_name]
# PyTorch keeps F.sigmoid and F.tanh besides torch.sigmoid/tanh: the same ops.
sigmoid = _registry["sigmoid"]
tanh = _registry["tanh"]

from ._mha_functional import multi_head_attention_forward  # noqa: E402,F401
from ._triplet_functional import triplet_margin_with_distance_loss  # noqa: E402,F401

__all__ = sorted(name for name in globals() if not name.startswith("_"))
