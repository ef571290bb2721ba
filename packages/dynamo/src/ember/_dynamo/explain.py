"""``explain(fn)(*args)``: capture ``fn`` on some arguments and report graphs, breaks and ops.

The function is compiled with a recording backend (the graphs run eagerly), called once, and every
capture it caused - the first frame and the continuation frames after its graph breaks - is
listed. The captures are then dropped from the cache, so explaining a function does not change
how it runs afterwards.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field

from . import frames
from .cache import all_caches

__all__ = ["explain", "ExplainOutput", "BreakReason"]


@dataclass
class BreakReason:
    """One graph break (or a frame that had to run eagerly as a whole).

    Attributes:
        reason (str): why the translator stopped.
        user_stack (list[traceback.FrameSummary]): where, in the user's code.
        graph_break (bool): ``True`` for a break inside a frame; ``False`` when the whole frame ran eagerly.
    """

    reason: str
    user_stack: list = field(default_factory=list)
    graph_break: bool = True

    def __str__(self):
        where = "".join(f"\n      {frame.filename}:{frame.lineno}: {frame.line}" for frame in self.user_stack)
        return f"{self.reason}{where}"


@dataclass
class ExplainOutput:
    """What :func:`explain` found (the attributes of PyTorch's ``ExplainOutput``).

    Attributes:
        graphs (list[GraphModule]): the captured graphs with at least one op, in capture order.
        graph_count (int): ``len(graphs)``.
        graph_break_count (int): ``len(break_reasons)``.
        break_reasons (list[BreakReason]): every graph break, with its reason and source line.
        op_count (int): ops over all graphs.
        ops_per_graph (list[list]): each graph's op targets, in graph order.
        out_guards (list[Guard]): the guards of every capture.
        compile_times (str): capture + backend seconds per frame.
    """

    graphs: list
    graph_count: int
    graph_break_count: int
    break_reasons: list
    op_count: int
    ops_per_graph: list = field(default_factory=list)
    out_guards: list = field(default_factory=list)
    compile_times: str = ""

    def __str__(self):
        lines = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}"]
        lines.append(f"Op Count: {self.op_count}")
        lines.append("Break Reasons:")
        for i, reason in enumerate(self.break_reasons, 1):
            lines.append(f"  Break Reason {i}:\n    {reason}")
        lines.append("Ops per Graph:")
        for i, ops in enumerate(self.ops_per_graph, 1):
            lines.append(f"  Ops {i}:")
            lines.extend(f"    {_op_name(op)}" for op in ops)
        lines.append("Out Guards:")
        lines.extend(f"  Guard {i}: {guard}" for i, guard in enumerate(self.out_guards, 1))
        if self.compile_times:
            lines.append(f"Compile Times: {self.compile_times}")
        return "\n".join(lines)


def _op_name(target) -> str:
    return getattr(target, "name", None) or getattr(target, "__name__", None) or str(target)


def _graph_ops(gm) -> list:
    return [node.target for node in gm.graph.nodes if node.op == "call_function"]


def _break_reason(brk) -> BreakReason:
    stack = [traceback.FrameSummary(brk.filename or "<unknown>", brk.lineno or 0, "", line=brk.source_line or "")]
    return BreakReason(brk.reason, stack, graph_break=True)


def _eager_reason(record) -> BreakReason:
    code = record.code
    exc_where = [traceback.FrameSummary(code.co_filename, code.co_firstlineno, code.co_name)]
    return BreakReason(record.eager_reason, exc_where, graph_break=False)


def _summarize(records) -> ExplainOutput:
    graphs, ops_per_graph, reasons, guards, times = [], [], [], [], []
    for record in records:
        captured = record.captured
        if captured is None:
            reasons.append(_eager_reason(record))
            continue
        if captured.ops_in_graph:
            graphs.append(captured.gm)
            ops_per_graph.append(_graph_ops(captured.gm))
        brk = captured.graph_break
        # a break inside a call the capture inlined: the callee is then compiled on its own
        # (cache.CacheEntry._compiled_callee), and its capture reports the same break
        if brk is not None and brk.callee_stack_index is None:
            reasons.append(_break_reason(brk))
        guards.extend(captured.guards)
        times.append(f"{record.code.co_name}: {record.seconds:.4f} s")
    return ExplainOutput(
        graphs=graphs,
        graph_count=len(graphs),
        graph_break_count=len(reasons),
        break_reasons=reasons,
        op_count=sum(len(ops) for ops in ops_per_graph),
        ops_per_graph=ops_per_graph,
        out_guards=guards,
        compile_times=", ".join(times),
    )


def explain(fn, *extra_args, **extra_kwargs):
    """Report how ``ember.compile`` captures ``fn``: ``explain(fn)(*args, **kwargs) -> ExplainOutput``.

    Args:
        fn (callable or nn.Module): what to explain (a compiled function is explained as its original).
        extra_args, extra_kwargs: the older spelling ``explain(fn, *args)``: run at once.

    Returns:
        callable: ``(*args, **kwargs) -> ExplainOutput`` (or the ExplainOutput itself with extra args).

    Example::

        >>> import ember
        >>> def f(x):
        ...     y = x.sin()
        ...     print("between")  # a graph break
        ...     return y.cos()
        >>> out = ember._dynamo.explain(f)(ember.ones(2))  # doctest: +ELLIPSIS
        between
        >>> out.graph_count, out.graph_break_count
        (2, 1)
    """
    import ember

    target = getattr(fn, "_orig_fn", None) or getattr(fn, "_orig_mod", None) or fn

    def run(*args, **kwargs) -> ExplainOutput:
        compiled = ember.compile(target, backend="eager")
        settings = compiled._compiled_call._settings if hasattr(compiled, "_compiled_call") else compiled._settings
        records = []

        def observe(record):
            if record.settings is settings:
                records.append(record)

        eager_before = {id(cache): cache.eager_reason for cache in all_caches()}
        frames.capture_observers.append(observe)
        try:
            compiled(*args, **kwargs)
        finally:
            frames.capture_observers.remove(observe)
            for cache in all_caches():  # leave the caches as they were
                cache.drop(settings)
                cache.eager_reason = eager_before.get(id(cache))
        return _summarize(records)

    if extra_args or extra_kwargs:
        return run(*extra_args, **extra_kwargs)
    return run
