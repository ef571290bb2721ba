"""``ember.nn.functional``: the functional NN ops, as ``F.relu(x)`` in PyTorch.

Every name here is an op of the registry (tagged ``nn.functional`` or
``nn.functional_only``); they are collected, not redefined, so FX and the
dispatcher see the same objects as ``ember.<name>`` where both exist.
"""

from .._ops import nn_functional_ops as _nn_functional_ops

globals().update(_nn_functional_ops())
__all__ = sorted(_nn_functional_ops())
