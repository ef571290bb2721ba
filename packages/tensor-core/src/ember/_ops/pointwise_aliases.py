"""Second public names of pointwise ops that PyTorch has (``ember.clip`` is ``ember.clamp``,
``ember.arcsin`` is ``ember.asin``), registered as composite ops, and their Tensor methods.
"""

from __future__ import annotations

from ._pointwise_helpers import alias
from ._registry import registry

__all__ = []

# -- aliases ---------------------------------------------------------------------------------------

#: Public aliases PyTorch has (``ember.clip`` is ``ember.clamp``), registered as composite ops.
ALIAS_OPS = {
    "absolute": "abs", "negative": "neg", "subtract": "sub", "multiply": "mul", "divide": "div",
    "true_divide": "div", "clip": "clamp", "arctan2": "atan2", "arcsin": "asin", "arccos": "acos",
    "arctan": "atan", "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh", "fix": "trunc",
    "greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le", "not_equal": "ne",
}
for _alias, _target in ALIAS_OPS.items():
    alias(_alias, registry[_target])


#: Tensor method aliases: the public aliases and their in-place forms (``x.clip_``).
ALIASES = dict(ALIAS_OPS)
ALIASES.update({f"{a}_": f"{t}_" for a, t in ALIAS_OPS.items() if f"{t}_" in registry})


#: Ops of this module that are also Tensor methods (see ember._tensor_methods): none, the aliases are methods
#: through ALIASES.
METHODS = []

del _alias, _target
