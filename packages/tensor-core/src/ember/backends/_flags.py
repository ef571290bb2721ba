"""Module-level flags that check what is assigned to them, as ``torch.backends.*`` flags do.

``ember.backends.cudnn.benchmark = True`` must store a bool and refuse anything else. A plain
module global cannot check an assignment, so :func:`install` gives the module a class
(a :class:`types.ModuleType` subclass) with one property per flag.
"""

from __future__ import annotations

import contextlib
import sys
import types

__all__ = ["install", "check_bool", "temporarily"]


def check_bool(name, value):
    """``value`` if it is a bool.

    Raises:
        RuntimeError: otherwise (PyTorch raises RuntimeError for these flags too).
    """
    if type(value) is not bool:
        raise RuntimeError(f"{name} expects a bool, but got {type(value).__name__}")
    return value


def install(module_name, specs):
    """Give module ``module_name`` one checked, settable attribute per entry of ``specs``.

    Args:
        module_name (str): the module's ``__name__`` (it must be in ``sys.modules``).
        specs (dict): flag name -> ``(default, check)``; ``check(qualified_name, value)``
            returns the value to store or raises.
    """
    module = sys.modules[module_name]
    values = {name: default for name, (default, _) in specs.items()}
    namespace = {"__doc__": module.__doc__}
    for name, (_, check) in specs.items():
        qualified = f"{module_name}.{name}"

        def getter(self, name=name):
            return values[name]

        def setter(self, value, name=name, check=check, qualified=qualified):
            values[name] = check(qualified, value)

        namespace[name] = property(getter, setter, doc=f"The flag {qualified}.")
    module.__class__ = type(f"{module_name.rsplit('.', 1)[-1]}_flags_module", (types.ModuleType,), namespace)


@contextlib.contextmanager
def temporarily(module, **values):
    """Set flags of ``module`` (those not None) inside the block; restore every one afterwards."""
    saved = {name: getattr(module, name) for name in values}
    try:
        for name, value in values.items():
            if value is not None:
                setattr(module, name, value)
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)
