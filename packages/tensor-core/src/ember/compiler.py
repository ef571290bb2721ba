"""``ember.compiler``: the compiler's user-facing switches (as ``torch.compiler``).

Each function is provided by ember-dynamo; without it they raise
:class:`~ember._extensions.MissingDistributionError` naming the distribution to install (except
:func:`is_compiling`, which is simply ``False`` when nothing can compile).
"""

from __future__ import annotations

__all__ = [
    "compile",
    "disable",
    "reset",
    "list_backends",
    "is_compiling",
    "is_dynamo_compiling",
    "is_exporting",
    "cudagraph_mark_step_begin",
]


def compile(*args, **kwargs):  # noqa: A001 - PyTorch's name
    """``ember.compile`` (the same function, as ``torch.compiler.compile`` is ``torch.compile``)."""
    import ember

    return ember.compile(*args, **kwargs)


def _dynamo(feature):
    try:
        import ember._dynamo as dynamo
    except ImportError:
        from ._extensions import require

        require(feature, "ember-dynamo")
    return dynamo


def disable(fn=None, recursive=True, *, reason=None):
    """Exclude ``fn`` from ``ember.compile``: it always runs natively (a graph break when a
    compiled function calls it). Usable as ``@ember.compiler.disable``.

    Args:
        fn (callable or None): the function (``None``: return a decorator).
        recursive (bool): also run eagerly the compiled functions ``fn`` calls. Default: ``True``.
        reason (str or None): why, shown in graph-break messages.

    Returns:
        callable: the disabled function (or a decorator).
    """
    return _dynamo("ember.compiler.disable").disable(fn, recursive=recursive, reason=reason)


def reset():
    """Forget every compiled function's captures (``ember._dynamo.reset``)."""
    _dynamo("ember.compiler.reset").reset()


def list_backends(exclude_tags=()):
    """The names of the backends ``ember.compile(backend=...)`` accepts."""
    return _dynamo("ember.compiler.list_backends").list_backends(exclude_tags)


def is_compiling() -> bool:
    """Whether the code is being traced by ``ember.compile`` (``False`` when it runs normally)."""
    try:
        import ember._dynamo as dynamo
    except ImportError:
        return False
    return dynamo.is_compiling()


is_dynamo_compiling = is_compiling


def is_exporting() -> bool:
    """Whether an export is tracing the code: always ``False`` (ember has no ``export`` yet)."""
    return False


def cudagraph_mark_step_begin() -> None:
    """Mark the start of a new iteration for compiled code under CUDA graphs (``mode="reduce-overhead"``).

    The backwards of the forwards run so far will not run: the next replay of a compiled forward may
    overwrite their outputs (outputs of the previous replay still alive are invalidated, and touching
    one raises). Call it before each model invocation when a forward runs without its backward (an
    evaluation under grad mode). Nothing to do without ember-inductor.
    """
    try:
        from ember._inductor.runtime.cudagraphs import mark_step_begin
    except ImportError:
        return
    mark_step_begin()
