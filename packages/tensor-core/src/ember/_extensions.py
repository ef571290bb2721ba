"""Extension points filled by other ember distributions, and the error when one is missing.

``import ember`` loads every module listed under the entry-point group
``ember.extensions`` (ember-autograd, ember-fx, ...). :data:`DISTRIBUTIONS` is the
one table of which distribution provides which modules and where its package lives
in the repository. Using something that a distribution which is not installed
provides raises :class:`MissingDistributionError`, naming the distribution and a
command that installs it from a checkout:

* ``Tensor.backward()`` and the other hooks core calls (:func:`require`);
* ``import ember.fx``, ``from ember import fx`` and the attribute ``ember.fx``
  (a finder appended to :data:`sys.meta_path`, and ``ember.__getattr__``);
* ``import embervision`` and the other domain libraries: a top-level name that no
  ember module is on the path of can only be caught through that same
  :data:`sys.meta_path` finder, so only once ``import ember`` has run.

The finder runs after every other finder and answers only for the modules in the
table whose distribution is not installed: it never hides one that is.
"""

from __future__ import annotations

import sys

from ._entry_points import entry_points  # importlib.metadata's, without its ~30 ms import (see there)

__all__ = [
    "DISTRIBUTIONS",
    "MissingDistributionError",
    "MissingDistributionAttributeError",
    "require",
    "missing_distribution_message",
    "provided_module",
    "load_extensions",
    "loaded_extensions",
    "autograd",
]


class Distribution:
    """One distribution of the ember repository.

    Attributes:
        name: the distribution's name (``pip install NAME``).
        written: whether the repository holds it yet (docs/internals.rst, "Missing distributions").
        requires: the ember distributions it builds on (with theirs, every ember distribution it needs).
        folder: its package folder, under the repository's ``packages/``.
        modules: the top-level modules or ``ember`` subpackages it provides.
    """

    __slots__ = ("name", "written", "requires", "folder", "modules")

    def __init__(self, name, written, requires, folder, modules):
        self.name, self.written, self.requires, self.folder, self.modules = name, written, requires, folder, modules

    def __repr__(self):
        return f"Distribution({self.name!r}, folder={self.folder!r}, modules={self.modules!r})"


# fmt: off
#: Every ember distribution by name, in dependency order (the noxfile's PACKAGE_DIRS lists the same folders).
#: A written distribution lists only the modules it ships (ember.ao joins its row when
#: it is written): a planned module listed there would tell users to install what they already have.
DISTRIBUTIONS = {dist.name: dist for dist in (
    #            name                 written requires             folder under packages/     modules
    Distribution("ember-core",        True,  (),                   "tensor-core",              ("ember",)),
    Distribution("ember-autograd",    True,  ("ember-core",),      "autograd",                 ("ember.autograd",
                                                                                                "ember.optim",
                                                                                                "ember.func")),
    Distribution("ember-fx",          True,  ("ember-autograd",),  "fx",                       ("ember.fx",
                                                                                                "ember.onnx")),
    Distribution("ember-dynamo",      True,  ("ember-fx",),        "dynamo",                   ("ember._dynamo",)),
    Distribution("ember-inductor",    True,  ("ember-fx",),        "inductor",                 ("ember._inductor",)),
    Distribution("ember-distributed", False, ("ember-autograd",),  "distributed",              ("ember.distributed",)),
    Distribution("ember-mobile",      False, ("ember-core",),      "mobile",                   ("ember.mobile",)),
    Distribution("ember-vision",      False, ("ember-core",),      "vision-audio-text/vision", ("embervision",)),
    Distribution("ember-audio",       False, ("ember-core",),      "vision-audio-text/audio",  ("emberaudio",)),
    Distribution("ember-text",        False, ("ember-core",),      "vision-audio-text/text",   ("embertext",)),
    Distribution("ember-csprng",      False, ("ember-core",),      "vision-audio-text/csprng", ("embercsprng",)),
)}
# fmt: on

# module name -> the distribution that provides it (ember-core's own "ember" has no entry)
_PROVIDER = {module: dist.name for dist in DISTRIBUTIONS.values() for module in dist.modules if module != "ember"}


class MissingDistributionError(ImportError, RuntimeError):
    """A feature was used whose distribution is not installed.

    An :class:`ImportError` (whose ``name`` is the module, for an import), so
    ``try: import ember.fx`` / ``except ImportError`` works, and a :class:`RuntimeError`,
    as ``Tensor.backward()`` without ember-autograd raised before. Not a
    ``ModuleNotFoundError``: ``from ember import fx`` swallows that one when its ``name`` is
    the module asked for, and then says only "cannot import name". Attribute access
    (``ember.fx``) raises :class:`MissingDistributionAttributeError` with the same message.
    ``distribution`` is the missing distribution's name.
    """

    def __init__(self, message, *, distribution=None, name=None):
        super().__init__(message, name=name)
        self.distribution = distribution


class MissingDistributionAttributeError(AttributeError):
    """:class:`MissingDistributionError`'s message for an attribute (``ember.fx`` without ember-fx).

    An attribute look-up must fail with an :class:`AttributeError`, or ``hasattr(ember, "fx")``
    and ``getattr(ember, "fx", None)`` would raise instead of answering; an exception class
    cannot be both an ``AttributeError`` and an ``ImportError`` (their layouts differ), so
    attribute access has this class, imports have :class:`MissingDistributionError`.
    ``distribution`` is the missing distribution's name.
    """

    def __init__(self, message, *, distribution=None, name=None, obj=None):
        super().__init__(message, name=name, obj=obj)
        self.distribution = distribution


def _with_dependencies(name):
    """``name`` and every ember distribution it needs, dependencies first."""
    order = []

    def visit(dist):
        for dependency in DISTRIBUTIONS[dist].requires:
            visit(dependency)
        if dist not in order:
            order.append(dist)

    visit(name)
    return order


def missing_distribution_message(feature, distribution):
    """The one message for ``feature`` (a module, function or method name) whose ``distribution`` is missing.

    Example:
        >>> from ember._extensions import missing_distribution_message
        >>> print(missing_distribution_message("ember.fx", "ember-fx"))  # doctest: +NORMALIZE_WHITESPACE
        ember.fx needs the 'ember-fx' distribution, which is not installed. From a checkout of the
        ember repository: nox -s wheels && pip install --find-links dist/wheels ember-fx (or: pip
        install ./packages/tensor-core ./packages/autograd ./packages/fx)
    """
    head = f"{feature} needs the '{distribution}' distribution, which is not installed."
    dist = DISTRIBUTIONS.get(distribution)
    if dist is None:  # not one of the repository's: say only what to install
        return f"{head} Install it with: pip install {distribution}"
    if not dist.written:
        return f"{head} It is planned but not written yet: the ember repository has no packages/{dist.folder}/."
    folders = " ".join(f"./packages/{DISTRIBUTIONS[name].folder}" for name in _with_dependencies(distribution))
    return (
        f"{head} From a checkout of the ember repository: nox -s wheels && "
        f"pip install --find-links dist/wheels {distribution} (or: pip install {folders})"
    )


def require(feature, distribution):
    """Raise :class:`MissingDistributionError` for ``feature`` provided by ``distribution``.

    Args:
        feature (str): what was used, as the user wrote it (``"Tensor.backward()"``).
        distribution (str): the distribution that provides it (``"ember-autograd"``).

    Raises:
        MissingDistributionError: always.
    """
    raise MissingDistributionError(missing_distribution_message(feature, distribution), distribution=distribution)


def _installed(distribution):
    """Whether ``distribution`` is installed: its metadata is found, or a module of it is already imported.

    (A checkout's ``src`` folders on ``PYTHONPATH`` have no metadata.)
    """
    if any(module in sys.modules for module in DISTRIBUTIONS[distribution].modules):
        return True
    import importlib.metadata  # only on this failure path: the import costs ~30 ms

    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _asked_by_an_import():
    """Whether the finder was called by an import (``import x``, ``importlib.import_module``), not a probe.

    The import system reaches a meta-path finder through ``_find_and_load_unlocked`` ->
    ``_find_spec`` -> ``find_spec``; :func:`importlib.util.find_spec`, :mod:`pkgutil` and
    :mod:`runpy` reach ``_find_spec`` otherwise, and ask only whether a module exists.
    """
    frame = sys._getframe(3)  # this function, find_spec, _find_spec, then its caller
    return frame.f_code.co_name == "_find_and_load_unlocked" and "importlib._bootstrap" in frame.f_code.co_filename


class MissingDistributionFinder:
    """A :data:`sys.meta_path` finder that answers imports of the table's modules whose distribution is missing.

    It sits at the end of :data:`sys.meta_path`, so it is asked only about modules that
    no other finder found, and it answers only when the module is in
    :data:`DISTRIBUTIONS` and its distribution is not installed, by raising
    :class:`MissingDistributionError`. It does so for imports only: a probe such as
    ``importlib.util.find_spec("ember.fx") is None`` still gets ``None``. For any other
    name Python raises its usual ``ModuleNotFoundError``.
    """

    def find_spec(self, fullname, path=None, target=None):
        distribution = _PROVIDER.get(fullname)
        if distribution is None or _installed(distribution) or not _asked_by_an_import():
            return None
        raise MissingDistributionError(
            missing_distribution_message(fullname, distribution), distribution=distribution, name=fullname
        )

    def __repr__(self):
        return "ember._extensions.MissingDistributionFinder()"


def _install_finder():
    # By class name, not identity, so that reloading this module adds no second finder.
    if not any(type(finder).__name__ == "MissingDistributionFinder" for finder in sys.meta_path):
        sys.meta_path.append(MissingDistributionFinder())


_install_finder()


def provided_module(package, name):
    """``package.name`` when the table lists that module (importing it), else ``None``; for a package's ``__getattr__``.

    Raises:
        MissingDistributionAttributeError: the module's distribution is not installed (an
            ``AttributeError``, so ``hasattr`` answers False; ``import`` statements raise
            :class:`MissingDistributionError` from the finder instead).
    """
    import importlib
    import sys

    fullname = f"{package}.{name}"
    if fullname not in _PROVIDER:
        return None
    try:
        return importlib.import_module(fullname)
    except MissingDistributionError as exc:
        raise MissingDistributionAttributeError(
            str(exc), distribution=exc.distribution, name=name, obj=sys.modules.get(package)
        ) from None
    except ModuleNotFoundError as exc:
        if exc.name != fullname:  # something the module imports is missing: a real error
            raise
        return None  # its distribution is installed but has no such module (yet): an AttributeError


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
