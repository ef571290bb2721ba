"""The symbolic interpreter: runs a function's bytecode over variable trackers and builds a graph.

``translate(fn, frame_locals, config=...)`` interprets ``fn``'s instructions (decoded with
``dis.get_instructions``) with a stack of :mod:`variables` trackers.  Tensor work is recorded into
one FX graph of registry ops (:class:`~ember._dynamo.graph.OutputGraph`); Python work on constants
is done right away, with a guard on every fact read from the frame; calls of user functions,
methods and ``nn.Module.forward`` are inlined (a child translator over their code).

When an instruction cannot be traced (:class:`~ember._dynamo.exc.Unsupported`), the capture is
redone from the start and stopped just before that instruction of the compiled frame (restarting
avoids undoing half-done work): the graph so far is closed, its outputs are the values on the
stack and the live locals, and the result carries the bytecode engineer's
:func:`~ember._dynamo.resume.plan_graph_break` for that offset.  A failure inside an inlined call
breaks at the call in the compiled frame.
"""

from __future__ import annotations

import dis
import logging
import types

from .exc import ObservedException, SkipFrame, Unsupported
from .graph import CapturedFrame, GraphBreak, OutputGraph
from .handlers import (
    BuildHandlers,
    CallHandlers,
    ControlHandlers,
    ExceptionHandlers,
    LoadStoreHandlers,
    MatchHandlers,
    OperatorHandlers,
)
from .handlers.versions import PY
from .source import AttrSource, ClosureSource, GlobalSource, ImportSource, LocalSource
from .symbolic import SizeSpecialized
from .variables.builtins import BuiltinVariable
from .variables.functions import CellVariable
from .variables.misc import NullVariable

__all__ = ["translate", "CapturedFrame", "GraphBreak", "InstructionTranslator"]

_log = logging.getLogger("ember._dynamo")

#: How deep inlined calls may nest (deeper recursion graph-breaks at the outermost call).
MAX_INLINE_DEPTH = 64

_CO_GENERATOR = 0x20
_NOT_TRACEABLE_FLAGS = (
    0x80  # CO_COROUTINE
    | 0x100  # CO_ITERABLE_COROUTINE
    | 0x200  # CO_ASYNC_GENERATOR
)


_INSTRUCTIONS = {}  # code -> (instructions, offset -> index)


def _decode(code):
    entry = _INSTRUCTIONS.get(code)
    if entry is None:
        instructions = list(dis.get_instructions(code))
        entry = (instructions, {inst.offset: i for i, inst in enumerate(instructions)})
        _INSTRUCTIONS[code] = entry
    return entry


class InstructionTranslatorBase(
    LoadStoreHandlers, OperatorHandlers, ControlHandlers, CallHandlers, BuildHandlers, ExceptionHandlers, MatchHandlers
):
    """Interprets one code object; the handler of each instruction is the method named after its opcode."""

    def __init__(self, code, f_globals, symbolic_locals, cells, output, depth=0):
        self.code = code
        self.f_globals = f_globals
        self.f_builtins = f_globals.get("__builtins__", __builtins__)
        if isinstance(self.f_builtins, types.ModuleType):
            self.f_builtins = self.f_builtins.__dict__
        self.symbolic_locals = symbolic_locals
        self.cells = cells
        self.output = output
        self.depth = depth
        self.instructions, self.index_of = _decode(code)
        self.stack = []
        self.ip = 0
        self.kw_names = None
        self.lineno = code.co_firstlineno
        self.return_value = None
        self.current = None
        self.is_generator = False  # a generator function's frame (suspended at each yield)
        self.exc_stack = []  # exceptions being handled (PUSH_EXC_INFO .. POP_EXCEPT)
        self.suspended = None  # the value of the yield a generator frame stopped at
    # -- the stack --------------------------------------------------------------------------------------

    def push(self, var):
        self.stack.append(var)

    def pop(self):
        return self.stack.pop()

    def popn(self, n):
        if n == 0:
            return []
        values = self.stack[-n:]
        del self.stack[-n:]
        return values

    def jump(self, offset):
        self.ip = self.index_of[offset]

    def attr_is_method_load(self, inst):
        return PY >= (3, 12) and bool(inst.arg & 1)

    # -- running ----------------------------------------------------------------------------------------

    def step(self):
        """Run one instruction; returns False once the frame has returned."""
        inst = self.instructions[self.ip]
        self.current = inst
        self.ip += 1
        if inst.positions is not None and inst.positions.lineno is not None:
            self.lineno = inst.positions.lineno
        handler = getattr(self, inst.opname, None)
        try:
            if handler is None:
                raise Unsupported(f"instruction {inst.opname} is not supported by the translator")
            try:
                handler(inst)
            except ObservedException as error:
                if not self.handle_observed(error):
                    raise
        except Unsupported as e:
            e.locate(self.code, self.lineno)
            raise
        return self.return_value is None

    def run_to_return(self):
        while self.step():
            pass
        return self.return_value

    def run_to_yield(self):
        """Run a suspended generator frame up to its next yield (returns the value) or its end (None)."""
        while self.step():
            if self.suspended is not None:
                value, self.suspended = self.suspended, None
                return value
        return None

    def inline_suspended(self, fn, args, kwargs):
        """A child translator over generator function ``fn``, ready to :meth:`run_to_yield`."""
        if not fn.get_code().co_flags & _CO_GENERATOR:
            raise Unsupported(f"{fn.fn_name()} is not a generator function")
        return self._child(fn, args, kwargs)

    # -- names --------------------------------------------------------------------------------------

    def global_source(self, name):
        if self.f_globals is self.output.f_globals:
            return GlobalSource(name)
        module = self.f_globals.get("__name__")
        if module is None:
            return None
        return AttrSource(ImportSource(module), name)

    def load_global(self, name):
        override = self.output.side_effects.global_override(name) if self.f_globals is self.output.f_globals else None
        if override is not None:
            return override
        if name in self.f_globals:
            # ember's own module globals (``F``, helper functions) do not change: no guards on them
            trusted = str(self.f_globals.get("__name__", "")).startswith("ember.")
            return self.output.wrap(self.f_globals[name], self.global_source(name), guard=not trusted)
        if name in self.f_builtins:
            return BuiltinVariable(self.f_builtins[name])
        raise Unsupported(f"name {name!r} is not defined")

    def implicit_super_args(self):
        """``super()`` with no arguments: the ``__class__`` cell and the first argument."""
        cell = self.cells.get("__class__")
        if cell is None or self.code.co_argcount == 0:
            raise Unsupported("super() outside a method")
        first = self.code.co_varnames[0]
        obj = self.symbolic_locals.get(first)
        if obj is None and first in self.cells:
            obj = self.cells[first].get(self)
        return cell.get(self).as_constant(), obj

    # -- inlining ---------------------------------------------------------------------------------------

    def _child(self, fn, args, kwargs):
        """A translator over ``fn``'s code with ``args`` bound, nested one level deeper."""
        code = fn.get_code()
        if code.co_flags & _NOT_TRACEABLE_FLAGS:
            raise Unsupported(f"calling coroutine function {fn.fn_name()}()")
        if self.depth + 1 > MAX_INLINE_DEPTH:
            raise Unsupported(f"inlining deeper than {MAX_INLINE_DEPTH} calls (recursion?)")
        symbolic_locals = fn.bound_locals(self, args, kwargs)
        cells = dict(zip(code.co_freevars, fn.get_closure_cells(self)))
        child = InstructionTranslatorBase(code, fn.get_globals(), symbolic_locals, cells, self.output, self.depth + 1)
        child.is_generator = bool(code.co_flags & _CO_GENERATOR)
        return child

    def inline_call(self, fn, args, kwargs):
        """Run a user function's bytecode in a child translator; returns the tracker of its result."""
        child = self._child(fn, args, kwargs)
        if child.is_generator:
            # a generator (a generator expression, ``named_children()``...): an iterator whose items the
            # suspended frame makes on demand, so a loop that stops early stops the generator too
            from .variables.iterators import IteratorVariable

            return IteratorVariable([], generator=child)
        return child.run_to_return()


class InstructionTranslator(InstructionTranslatorBase):
    """The compiled frame itself: counts its steps so that a capture can stop before a given one."""

    def __init__(self, code, f_globals, closure, frame_locals, output, break_at_step=None):
        symbolic_locals = {}
        argnames = code.co_varnames[: _arg_count(code)]
        for name in argnames:
            if name in frame_locals:
                value = frame_locals[name]
                if _is_null(value):  # a NULL call slot handed to a continuation
                    symbolic_locals[name] = NullVariable()
                else:
                    symbolic_locals[name] = output.wrap(value, LocalSource(name))
        cells = {}
        for i, name in enumerate(code.co_freevars):
            if closure is not None and i < len(closure):
                try:
                    value = closure[i].cell_contents
                except ValueError:
                    cells[name] = CellVariable(None)
                    continue
            elif name in frame_locals:
                value = frame_locals[name]
            else:
                continue
            cells[name] = CellVariable(pending=(value, ClosureSource(name)))
        super().__init__(code, f_globals, symbolic_locals, cells, output)
        self.break_at_step = break_at_step
        self.steps = 0
        self.failed_step = None

    def run(self, break_reason=None):
        """Interpret the frame; returns ``(return tracker or None, break info or None)``."""
        while True:
            if self.steps == self.break_at_step:
                return None, self.current_instruction()
            try:
                more = self.step()
            except Unsupported:
                self.failed_step = self.steps
                raise
            self.steps += 1
            if not more:
                return self.return_value, None

    def current_instruction(self):
        return self.instructions[self.ip]


def _is_null(value):
    from .resume import NULL

    return value is NULL


def _arg_count(code):
    n = code.co_argcount + code.co_kwonlyargcount
    if code.co_flags & 0x04:  # *args
        n += 1
    if code.co_flags & 0x08:  # **kwargs
        n += 1
    return n


def _unpack_target(target):
    """``(code, globals, closure)`` of a function, a bound method, or a ``(code, globals, closure)`` tuple."""
    if isinstance(target, types.MethodType):
        target = target.__func__
    if isinstance(target, types.FunctionType):
        return target.__code__, target.__globals__, target.__closure__
    if isinstance(target, tuple) and len(target) == 3:
        return target
    raise TypeError(f"translate: expected a function or (code, globals, closure), got {type(target).__name__}")


def _config_flag(config, name, default):
    if config is None:
        return default
    if isinstance(config, dict):
        return config.get(name, default)
    return getattr(config, name, default)


def translate(fn_or_code_and_env, frame_locals, *, config=None, fullgraph=None):
    """Capture one call of a function into an FX graph of registry ops.

    Args:
        fn_or_code_and_env: the function (or bound method), or a ``(code, globals, closure)`` tuple.
        frame_locals (dict): the call's arguments by parameter name (and, for free variables, the
            contents of their cells by name: :class:`ClosureSource` reads them there at run time).
        config: an object or dict with ``fullgraph`` (bool); the keyword ``fullgraph`` overrides it.

    Returns:
        CapturedFrame: the graph, its inputs and example inputs, guards, side effects, how to build
        the result, and the graph break (None when the frame returned).

    Raises:
        Unsupported: with ``fullgraph=True``, on the first thing that cannot be captured (its
            reason and the user's file, line and source text).
        SkipFrame: when no graph can be made (the frame must run eagerly): a break where the
            interpreter's state cannot be handed to a continuation.
    """
    code, f_globals, closure = _unpack_target(fn_or_code_and_env)
    if fullgraph is None:
        fullgraph = bool(_config_flag(config, "fullgraph", False))
    if code.co_flags & _NOT_TRACEABLE_FLAGS:
        error = Unsupported(f"{code.co_name} is a generator or coroutine function").locate(code, code.co_firstlineno)
        if fullgraph:
            raise error
        raise SkipFrame(error.reason, error.filename, error.lineno, error.source_line)
    dynamic = (_config_flag(config, "dynamic", None), _config_flag(config, "dynamic_dims", None) or {}, ())
    try:
        return _capture_dynamic(code, f_globals, closure, frame_locals, None, None, dynamic)
    except SkipFrame:
        raise
    except Unsupported as first:
        if fullgraph:
            raise
        failed_step = getattr(first, "failed_step", None)
        if failed_step is None:
            raise SkipFrame(first.reason, first.filename, first.lineno, first.source_line) from first
        try:
            return _capture_dynamic(code, f_globals, closure, frame_locals, failed_step, first, dynamic)
        except SkipFrame:
            raise
        except Unsupported as second:
            raise SkipFrame(
                f"{first.reason} (and the graph break there failed: {second.reason})",
                first.filename, first.lineno, first.source_line,
            ) from second


def _capture_dynamic(code, f_globals, closure, frame_locals, break_at_step, break_error, dynamic):
    """:func:`_capture`, again with fewer symbolic sizes while the graph would hold a size as a constant:
    without the input dim found responsible (a few times), then with static sizes (one graph per size)."""
    for _ in range(_SIZE_RETRIES):
        try:
            return _capture(code, f_globals, closure, frame_locals, break_at_step, break_error, dynamic)
        except SizeSpecialized as e:
            if e.culprit is None:
                _log.info("dynamic shapes off for %s: %s", code.co_name, e.reason)
                break
            _log.info("%s: size %s.size(%d) kept static: %s", code.co_name, e.culprit[0], e.culprit[1], e.reason)
            dynamic = (dynamic[0], dynamic[1], (*dynamic[2], e.culprit))
    return _capture(code, f_globals, closure, frame_locals, break_at_step, break_error, (False, {}, ()))


_SIZE_RETRIES = 8


def _capture(code, f_globals, closure, frame_locals, break_at_step, break_error, dynamic=(None, {}, ())):
    output = OutputGraph(f_globals, dynamic=dynamic[0], dynamic_dims=dynamic[1], static_dims=dynamic[2])
    tx = InstructionTranslator(code, f_globals, closure, frame_locals, output, break_at_step)
    try:
        try:
            value, break_inst = tx.run()
        except Unsupported as e:
            e.failed_step = tx.failed_step
            raise
        if break_inst is None:
            gm, result, effects = output.finish(value)
            graph_break = None
        else:
            gm, result, effects, graph_break = _finish_at_break(tx, output, break_inst, break_error)
    finally:
        output.restore_grad_mode()
    output.shape_env.annotate(gm, output.graph_inputs)  # which input dims are symbolic, for the backend
    return CapturedFrame(
        gm=gm,
        graph_inputs=list(output.graph_inputs),
        example_inputs=list(output.example_inputs),
        guards=output.guard_list(),
        side_effects=effects,
        result=result,
        graph_break=graph_break,
        ops_in_graph=output.ops_in_graph(),
        symbols=tuple(output.shape_env.symbols),
    )


def _finish_at_break(tx, output, inst, error):
    """Close the graph before ``inst``: outputs are the stack and the live locals the plan needs."""
    from .resume import plan_graph_break
    from .variables.containers import TupleVariable

    try:
        plan = plan_graph_break(tx.code, inst.offset, len(tx.stack))
    except Exception as e:  # noqa: BLE001 - a region the continuation cannot re-enter
        raise SkipFrame(f"{error.reason} (no continuation at offset {inst.offset}: {e})") from e
    stack = list(tx.stack)
    values = []
    for name in plan.live_locals:
        if name in tx.symbolic_locals:
            values.append(tx.symbolic_locals[name])
        elif name in tx.cells and not tx.cells[name].real:
            values.append(tx.cells[name].get(tx))
        else:
            values.append(NullVariable())  # unbound here: the continuation leaves it unbound
    # result.build gives (stack values, live local values): the break function's arguments
    gm, result, effects = output.finish(TupleVariable([TupleVariable(stack), TupleVariable(values)]))
    graph_break = GraphBreak(error.reason, error.filename, error.lineno, error.source_line, plan)
    graph_break.callee_stack_index = _inlined_callee_index(tx, inst, error)
    return gm, result, effects, graph_break


def _inlined_callee_index(tx, inst, error):
    """The stack index of the user function called at ``inst`` when the break reason lies inside it."""
    from .handlers.versions import NULL_AFTER_CALLABLE
    from .variables.functions import UserMethodVariable, _InlinableFunction
    from .variables.nn_module import NNModuleVariable

    if inst.opname not in ("CALL", "CALL_KW", "PRECALL", "CALL_FUNCTION_EX") or error.filename is None:
        return None
    if error.filename == tx.code.co_filename and error.lineno == tx.lineno:
        return None  # the call itself is what failed
    if inst.opname == "CALL_FUNCTION_EX":  # f(*args, **kwargs): the args tuple, and the kwargs dict if flagged
        argc = 1 + (inst.arg & 1)
    else:
        argc = inst.arg + (1 if inst.opname == "CALL_KW" else 0)
    first = len(tx.stack) - argc - 2
    if first < 0:
        return None
    if NULL_AFTER_CALLABLE or not isinstance(tx.stack[first], NullVariable):
        index = first
    else:
        index = first + 1
    if isinstance(tx.stack[index], (_InlinableFunction, UserMethodVariable, NNModuleVariable)):
        return index
    return None
