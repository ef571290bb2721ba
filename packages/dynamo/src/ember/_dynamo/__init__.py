"""ember-dynamo: ``ember.compile`` - capture Python bytecode into FX graphs, with guards and graph breaks.

``ember.compile(fn)`` returns a wrapper; its first call symbolically runs ``fn``'s bytecode with the
actual arguments, recording tensor work as an FX graph of registry ops, and the guards under which
that graph may be reused. The graph goes to a backend (``"inductor"`` by default); later calls
whose guards hold run the compiled graph directly. Whatever cannot be traced is a graph break: the
graph so far runs, the unsupported instruction runs in Python, and tracing resumes after it.

See the package README for how calls are intercepted and the limits that follow.
"""

from __future__ import annotations

import types

from . import config
from .backends import BackendCompilerFailed, list_backends, lookup_backend, register_backend
from .backends import backend_name as _backend_name
from .cache import reset as _reset_caches
from .eval_frame import CompiledFunction, DisabledFunction, OptimizedModule, disable, is_disabled
from .explain import ExplainOutput, explain  # binds the function over the submodule of the same name
from .frames import CompileSettings

__all__ = [
    "compile",
    "optimize",
    "reset",
    "explain",
    "ExplainOutput",
    "list_backends",
    "register_backend",
    "lookup_backend",
    "disable",
    "is_disabled",
    "mark_dynamic",
    "mark_static",
    "is_compiling",
    "config",
    "OptimizedModule",
    "CompiledFunction",
    "DisabledFunction",
    "BackendCompilerFailed",
]

_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def _check_arguments(fullgraph, dynamic, mode, options):
    if not isinstance(fullgraph, bool):
        raise TypeError(f"ember.compile: fullgraph must be a bool, got {type(fullgraph).__name__}")
    if dynamic not in (None, True, False):
        raise TypeError(f"ember.compile: dynamic must be None, True or False, got {dynamic!r}")
    if mode not in _MODES:
        raise RuntimeError(f"ember.compile: unknown mode {mode!r}; the modes are {list(_MODES[1:])}")
    if mode is not None and options is not None:
        raise RuntimeError("ember.compile: either mode or options can be given, not both")
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"ember.compile: options must be a dict, got {type(options).__name__}")


def _settings(backend, fullgraph, dynamic, mode, options):
    _check_arguments(fullgraph, dynamic, mode, options)
    compiler = lookup_backend(backend)
    name = _backend_name(backend)
    if options and name == "inductor":  # unknown option names fail now, not at the first call
        from ember._inductor import config as inductor_config

        unknown = sorted(set(options) - set(inductor_config._SETTINGS))
        if unknown:
            raise RuntimeError(
                f"ember.compile: unknown inductor option(s) {unknown}; "
                f"the options are {list(inductor_config._SETTINGS)}"
            )
    return CompileSettings(compiler, name, fullgraph=fullgraph, dynamic=dynamic, mode=mode, options=options)


def compile(  # noqa: A001 - the public name, as torch.compile
    model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None, disable=False
):
    """Compile a function or ``nn.Module``: calls run captured graphs through ``backend``.

    Usable as ``ember.compile(fn)``, ``@ember.compile`` and ``@ember.compile(backend=...)``.

    Args:
        model (callable or nn.Module or None): a Python function, a method, or a module
            (``None``: return a decorator).
        fullgraph (bool): a graph break raises (with the reason and source line) instead of
            splitting the function into several graphs. Default: ``False``.
        dynamic (bool or None): ``True``: sizes symbolic from the start; ``False``: one graph per
            size; ``None`` (default): static first, then the dims that caused a recompile dynamic.
        backend (str or callable): ``"inductor"`` (default), ``"aot_eager"``, ``"eager"``, a name
            from :func:`list_backends`, or a callable ``(gm, example_inputs) -> callable``.
        mode (str or None): ``"default"``, ``"reduce-overhead"``, ``"max-autotune"`` or
            ``"max-autotune-no-cudagraphs"``. On cuda graphs, ``"reduce-overhead"`` replays the
            compiled graphs as CUDA graphs and ``"max-autotune"`` also chooses Triton matmul templates
            by benchmarking (``ember._inductor.config.mode_options`` lists what each turns on); the CPU
            compiler treats them alike.
        options (dict or None): ember-inductor settings (:mod:`ember._inductor.config`) for this
            function's compiles.
        disable (bool): return ``model`` unchanged (a no-op switch).

    Returns:
        CompiledFunction, OptimizedModule or a decorator.

    Raises:
        ValueError: an unknown backend name.
        ember._extensions.MissingDistributionError: ``"inductor"``/``"aot_eager"`` without ember-inductor.
        TypeError: ``model`` is neither a Python function nor a module.

    Example::

        >>> import ember
        >>> @ember.compile(backend="eager")
        ... def f(x):
        ...     return (x * 2).sin()
    """
    if model is None:

        def decorator(fn):
            return compile(
                fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options, disable=disable
            )

        return decorator
    settings = _settings(backend, fullgraph, dynamic, mode, options)
    if disable:
        return model
    import ember

    if isinstance(model, ember.nn.Module):
        return OptimizedModule(model, settings)
    if isinstance(model, DisabledFunction):
        return model  # a disabled function stays disabled
    if isinstance(model, CompiledFunction):
        model = model._orig_fn  # compiling again replaces the settings
    if not isinstance(model, (types.FunctionType, types.MethodType)) and callable(model):
        call = next((k.__dict__["__call__"] for k in type(model).__mro__ if "__call__" in k.__dict__), None)
        if isinstance(call, types.FunctionType):  # an object with a Python __call__: compile that
            model = types.MethodType(call, model)
    return CompiledFunction(model, settings)


def optimize(backend="inductor", *, nopython=False, dynamic=None, disable=False):
    """The older spelling: ``optimize(backend)(fn)`` is ``compile(fn, backend=backend, fullgraph=nopython)``."""
    return compile(backend=backend, fullgraph=nopython, dynamic=dynamic, disable=disable)


def compile_module_call(module, **kwargs):
    """The compiled ``__call__`` that ``nn.Module.compile(**kwargs)`` installs on ``module``."""
    from .eval_frame import module_call_function

    settings = _settings(
        kwargs.pop("backend", "inductor"),
        kwargs.pop("fullgraph", False),
        kwargs.pop("dynamic", None),
        kwargs.pop("mode", None),
        kwargs.pop("options", None),
    )
    kwargs.pop("disable", None)
    if kwargs:
        raise TypeError(f"Module.compile() got unexpected keyword argument(s) {sorted(kwargs)}")
    return CompiledFunction(module_call_function(module), settings)


def reset() -> None:
    """Forget every capture and compiled graph (all cache entries, recompile counts, dynamic dims)."""
    from . import resume

    _reset_caches()
    resume.clear_cache()


def mark_dynamic(t, index, *, min=None, max=None) -> None:  # noqa: A002 - PyTorch's names
    """Make dim ``index`` of tensor ``t`` dynamic (a symbolic size) in the captures that see ``t``.

    Args:
        t (Tensor): an input of a compiled function.
        index (int or list[int]): the dim(s).
        min, max (int or None): accepted for PyTorch compatibility (no range is checked).

    Raises:
        TypeError: ``t`` is not a tensor; IndexError: a dim out of range.
    """
    import ember

    if not isinstance(t, ember.Tensor):
        raise TypeError(f"mark_dynamic: t must be a Tensor, got {type(t).__name__}")
    dims = list(index) if isinstance(index, (list, tuple)) else [index]
    indices = set(getattr(t, "_dynamo_dynamic_indices", ()))
    for d in dims:
        if not isinstance(d, int) or not -t.dim() <= d < t.dim():
            raise IndexError(f"mark_dynamic: dim {d!r} is out of range for a tensor of {t.dim()} dims")
        indices.add(d % t.dim())
    t._dynamo_dynamic_indices = indices


def mark_static(t, index=None) -> None:
    """Undo :func:`mark_dynamic` for dim ``index`` of ``t`` (all dims when ``None``)."""
    indices = set(getattr(t, "_dynamo_dynamic_indices", ()))
    if index is None:
        indices.clear()
    else:
        indices.discard(index % t.dim())
    t._dynamo_dynamic_indices = indices


def is_compiling() -> bool:
    """``False`` when running normally; code being traced sees ``True`` (the translator's constant)."""
    return False
