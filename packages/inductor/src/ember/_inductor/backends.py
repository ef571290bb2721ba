"""Compiler backends by name: what ``ember.compile(fn, backend=...)`` hands a captured graph to.

A backend is a callable ``backend(gm, example_inputs) -> callable``: it receives an
FX graph of registry ops and example inputs, and returns a function with the
graph's signature. Three are built in, from least to most work, to narrow down
where a problem comes from:

* ``"eager"``: runs the graph as it is (checks the capture alone);
* ``"aot_eager"``: the joint forward+backward trace, functionalization and the
  default partition, each graph then run eagerly (checks aot autograd alone);
* ``"inductor"``: :func:`~ember._inductor.compile_fx.compile_fx`, the whole compiler.

``register_backend`` adds one; ``lookup_backend`` finds one by name (or passes a
callable through)::

    @register_backend
    def my_backend(gm, example_inputs):
        return gm.forward
"""

from __future__ import annotations

__all__ = ["register_backend", "lookup_backend", "list_backends", "eager", "aot_eager", "inductor"]

_BACKENDS: dict[str, object] = {}


def register_backend(compiler_fn=None, *, name=None):
    """Register ``compiler_fn`` under ``name`` (default: its ``__name__``); usable as a decorator.

    Args:
        compiler_fn (callable): ``(gm, example_inputs) -> callable``.
        name (str or None): the backend's name.

    Returns:
        callable: ``compiler_fn`` (or, as ``@register_backend(name=...)``, a decorator).

    Raises:
        ValueError: the name is already registered.
        TypeError: ``compiler_fn`` is not callable.
    """
    if compiler_fn is None:
        return lambda fn: register_backend(fn, name=name)
    if not callable(compiler_fn):
        raise TypeError(f"register_backend: compiler_fn must be callable, got {type(compiler_fn).__name__}")
    key = name or compiler_fn.__name__
    if key in _BACKENDS:
        raise ValueError(f"register_backend: a backend named {key!r} is already registered")
    _BACKENDS[key] = compiler_fn
    return compiler_fn


def lookup_backend(backend):
    """The backend named ``backend`` (a callable is returned unchanged).

    Raises:
        ValueError: no backend has that name (the message lists the names).
    """
    if callable(backend):
        return backend
    if not isinstance(backend, str) or backend not in _BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; the backends are {list_backends()}")
    return _BACKENDS[backend]


def list_backends() -> list[str]:
    """The names of the registered backends, sorted."""
    return sorted(_BACKENDS)


@register_backend
def eager(gm, example_inputs):
    """Run the graph as captured, with ember's eager kernels."""
    return gm.forward


@register_backend
def aot_eager(gm, example_inputs):
    """aot autograd (joint trace, functionalization, default partition), then each graph eagerly."""
    from .aot.api import aot_module_simplified
    from .compile_fx import _eager_callable

    def run_graph(graph, inputs):  # a graph compiler that compiles nothing: the aot graph runs eagerly
        return _eager_callable(graph)

    return aot_module_simplified(gm, list(example_inputs), fw_compiler=run_graph, bw_compiler=run_graph)


@register_backend
def inductor(gm, example_inputs):
    """The whole compiler: :func:`~ember._inductor.compile_fx.compile_fx`."""
    from .compile_fx import compile_fx

    return compile_fx(gm, example_inputs)
