"""Extension points filled by other ember distributions.

``import ember`` loads every module listed under the entry-point group
``ember.extensions`` (ember-autograd, ember-fx, ...). A feature that needs a
distribution that is not installed raises :class:`MissingDistributionError`
naming the distribution to install.
"""

from __future__ import annotations

from ._entry_points import entry_points  # importlib.metadata's, without its ~30 ms import (see there)

__all__ = ["MissingDistributionError", "require", "load_extensions", "loaded_extensions", "autograd"]


class MissingDistributionError(RuntimeError):
    """A feature was used whose distribution is not installed."""


def require(feature, distribution):
    """Raise :class:`MissingDistributionError` for ``feature`` provided by ``distribution``."""
    raise MissingDistributionError(
        f"{feature} needs the '{distribution}' distribution, which is not installed. "
        f"Install it with: pip install {distribution} (from a checkout of the ember repository: "
        f"pip install ./packages/<its folder>, e.g. ./packages/autograd for ember-autograd)"
    )


class _AutogradSlot:
    """What ember-autograd provides to core. Until it is installed, every entry says so."""

    installed = False

    def backward(self, tensor, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        require("Tensor.backward()", "ember-autograd")

    def register_hook(self, tensor, hook):
        require("Tensor.register_hook()", "ember-autograd")

    def retain_grad(self, tensor):
        require("Tensor.retain_grad()", "ember-autograd")

    def register_post_accumulate_grad_hook(self, tensor, hook):
        require("Tensor.register_post_accumulate_grad_hook()", "ember-autograd")

    def view_grad_fn(self, tensor):
        return tensor._grad_fn


#: Replaced by ember-autograd with its implementation (see ember.autograd).
autograd = _AutogradSlot()

_loaded: list[str] = []


def load_extensions():
    """Import every module registered under the ``ember.extensions`` entry-point group.

    An extension that fails to import is reported with a warning naming it;
    core keeps working without it.
    """
    import warnings

    for entry in entry_points("ember.extensions"):
        if entry.value in _loaded:
            continue
        try:
            entry.load()
        except Exception as exc:  # noqa: BLE001 - report any failure, keep core usable
            warnings.warn(f"ember extension '{entry.name}' ({entry.value}) failed to load: {exc!r}", stacklevel=2)
            continue
        _loaded.append(entry.value)


def loaded_extensions():
    """Names of the extension modules loaded so far."""
    return list(_loaded)
