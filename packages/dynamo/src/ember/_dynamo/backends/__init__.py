"""Backends: what a captured graph is handed to.

A backend is a callable ``backend(gm, example_inputs) -> callable``: ``gm`` is an
:class:`ember.fx.GraphModule` of registry ops whose placeholders are the graph inputs, and
``example_inputs`` the real values seen at capture. The callable it returns runs the graph.

* ``"eager"``: ``gm.forward`` (the captured graph run by ember's eager kernels): checks the
  capture alone.
* ``"aot_eager"`` and ``"inductor"``: ember-inductor's backends
  (:mod:`ember._inductor.backends`), when that distribution is installed; naming one without it
  raises :class:`~ember._extensions.MissingDistributionError`.
* any callable (a user backend), or a name registered with :func:`register_backend`.
"""

from __future__ import annotations

__all__ = [
    "register_backend",
    "lookup_backend",
    "list_backends",
    "eager",
    "BackendCompilerFailed",
    "drop_default_arguments",
]

# Provided by ember-inductor (looked up there, never copied here).
_INDUCTOR_BACKENDS = ("aot_eager", "inductor")

_BACKENDS: dict[str, object] = {}


class BackendCompilerFailed(RuntimeError):
    """A backend raised while compiling a captured graph; ``backend_name`` and ``inner_exception`` say which and why."""

    def __init__(self, backend_name, inner_exception):
        self.backend_name = backend_name
        self.inner_exception = inner_exception
        super().__init__(f"backend={backend_name!r} raised:\n{type(inner_exception).__name__}: {inner_exception}")


def register_backend(compiler_fn=None, *, name=None):
    """Register ``compiler_fn`` as a backend named ``name`` (default: its ``__name__``); usable as a decorator.

    Args:
        compiler_fn (callable): ``(gm, example_inputs) -> callable``.
        name (str or None): the backend's name.

    Returns:
        callable: ``compiler_fn`` (or, as ``@register_backend(name=...)``, a decorator).

    Raises:
        TypeError: ``compiler_fn`` is not callable.
        ValueError: the name is taken.
    """
    if compiler_fn is None:
        return lambda fn: register_backend(fn, name=name)
    if not callable(compiler_fn):
        raise TypeError(f"register_backend: compiler_fn must be callable, got {type(compiler_fn).__name__}")
    key = name or compiler_fn.__name__
    if key in _BACKENDS or key in _INDUCTOR_BACKENDS:
        raise ValueError(f"register_backend: a backend named {key!r} is already registered")
    _BACKENDS[key] = compiler_fn
    return compiler_fn


def _inductor_backends():
    """ember-inductor's backend module, or ``None`` when that distribution is not installed."""
    try:
        from ember._inductor import backends
    except ImportError:
        return None
    return backends


def lookup_backend(backend):
    """The backend ``backend`` names (a callable is returned unchanged).

    Args:
        backend (str or callable): a backend name (see :func:`list_backends`) or a compiler callable.

    Returns:
        callable: ``(gm, example_inputs) -> callable``.

    Raises:
        ember._extensions.MissingDistributionError: ``"aot_eager"``/``"inductor"`` without ember-inductor.
        ValueError: an unknown name (the message lists the known ones).
        TypeError: neither a string nor a callable.
    """
    if callable(backend):
        return backend
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a str or a callable, got {type(backend).__name__}")
    if backend in _BACKENDS:
        return _BACKENDS[backend]
    if backend in _INDUCTOR_BACKENDS:
        module = _inductor_backends()
        if module is None:
            from ember._extensions import require

            require(f"ember.compile(backend={backend!r})", "ember-inductor")
        return module.lookup_backend(backend)
    raise ValueError(f"unknown backend {backend!r}; the backends are {list_backends()}")


def list_backends(exclude_tags=()) -> list[str]:
    """The names of the usable backends, sorted (ember-inductor's only when it is installed).

    Args:
        exclude_tags: accepted for PyTorch compatibility; ember's backends have no tags.
    """
    names = set(_BACKENDS)
    if _inductor_backends() is not None:
        names.update(_INDUCTOR_BACKENDS)
    return sorted(names)


def backend_name(backend) -> str:
    """A readable name for a backend (its registered name or its callable's name)."""
    if isinstance(backend, str):
        return backend
    return getattr(backend, "__name__", type(backend).__name__)


@register_backend
def eager(gm, example_inputs):
    """Run the captured graph as it is, with ember's eager kernels.

    Arguments a node passes with their default value are dropped first (the same call, but an op
    called without keyword arguments takes the dispatcher's fast path: about 10 us less per op).
    """
    if drop_default_arguments(gm):
        gm.recompile()
    return gm.forward


_PLAIN = (type(None), bool, int, float, str)


def _op_parameters(op):
    """The parameters of a registry op's signature (its meta function's), or ``None``."""
    import inspect

    from ember._ops._registry import Op

    if not isinstance(op, Op):
        return None
    try:
        return list(inspect.signature(op.meta).parameters.values())
    except (TypeError, ValueError):
        return None


def _is_default(value, param) -> bool:
    default = param.default
    return default is not param.empty and type(value) in _PLAIN and type(value) is type(default) and value == default


def drop_default_arguments(gm) -> bool:
    """Remove, in place, the arguments of registry-op nodes that equal their defaults; whether any was."""
    changed = False
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        params = _op_parameters(node.target)
        if params is None:
            continue
        by_name = {p.name: p for p in params}
        kwargs = {k: v for k, v in node.kwargs.items() if not (k in by_name and _is_default(v, by_name[k]))}
        args = list(node.args)
        while args and len(args) <= len(params) and _is_default(args[-1], params[len(args) - 1]):
            if params[len(args) - 1].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
                break
            args.pop()
        if len(kwargs) != len(node.kwargs) or len(args) != len(node.args):
            node.args, node.kwargs = tuple(args), kwargs
            changed = True
    return changed
