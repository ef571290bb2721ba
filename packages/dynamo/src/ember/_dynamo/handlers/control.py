"""Control flow: jumps (conditions must be Python values), loops over iterators, ``with``, return."""

from __future__ import annotations

from ..exc import Unsupported
from ..variables.constant import ConstantVariable
from .versions import FOR_ITER_EXHAUSTED_SKIP


class ControlHandlers:
    """Interpreter handlers for jumps, FOR_ITER loops, ``with`` blocks and returns; mixed into the translator."""

    # -- jumps ----------------------------------------------------------------------------------------

    def JUMP_FORWARD(self, inst):
        self.jump(inst.argval)

    JUMP_BACKWARD = JUMP_FORWARD
    JUMP_BACKWARD_NO_INTERRUPT = JUMP_FORWARD
    JUMP_ABSOLUTE = JUMP_FORWARD
    JUMP = JUMP_FORWARD

    def _pop_jump_if(self, inst, test):
        value = self.stack[-1]
        taken = test(value)  # may raise Unsupported (a tensor condition): the value is still on the stack
        self.pop()
        if taken:
            self.jump(inst.argval)

    def POP_JUMP_IF_TRUE(self, inst):
        self._pop_jump_if(inst, lambda v: v.truth(self))

    def POP_JUMP_IF_FALSE(self, inst):
        self._pop_jump_if(inst, lambda v: not v.truth(self))

    def POP_JUMP_IF_NONE(self, inst):
        self._pop_jump_if(inst, lambda v: v.is_constant() and v.as_constant() is None)

    def POP_JUMP_IF_NOT_NONE(self, inst):
        self._pop_jump_if(inst, lambda v: not (v.is_constant() and v.as_constant() is None))

    # 3.11 spells the direction in the name
    POP_JUMP_FORWARD_IF_TRUE = POP_JUMP_BACKWARD_IF_TRUE = POP_JUMP_IF_TRUE
    POP_JUMP_FORWARD_IF_FALSE = POP_JUMP_BACKWARD_IF_FALSE = POP_JUMP_IF_FALSE
    POP_JUMP_FORWARD_IF_NONE = POP_JUMP_BACKWARD_IF_NONE = POP_JUMP_IF_NONE
    POP_JUMP_FORWARD_IF_NOT_NONE = POP_JUMP_BACKWARD_IF_NOT_NONE = POP_JUMP_IF_NOT_NONE

    def JUMP_IF_TRUE_OR_POP(self, inst):  # 3.11
        if self.stack[-1].truth(self):
            self.jump(inst.argval)
        else:
            self.pop()

    def JUMP_IF_FALSE_OR_POP(self, inst):  # 3.11
        if not self.stack[-1].truth(self):
            self.jump(inst.argval)
        else:
            self.pop()

    # -- loops ----------------------------------------------------------------------------------------

    def GET_ITER(self, inst):
        from ..variables.iterators import IteratorVariable

        value = self.pop()
        self.push(value if isinstance(value, IteratorVariable) else IteratorVariable(value.unpack(self)))

    def FOR_ITER(self, inst):
        from ..variables.iterators import IteratorVariable

        iterator = self.stack[-1]
        if not isinstance(iterator, IteratorVariable):
            raise Unsupported(f"for loop over {iterator.describe()}")
        item = iterator.next_item()
        if item is not None:
            self.push(item)
            return
        self.pop()
        self.jump(inst.argval)
        self.ip += FOR_ITER_EXHAUSTED_SKIP

    def END_FOR(self, inst):  # 3.12 pops iterator and value; 3.13 only the value (a POP_TOP follows)
        from .versions import PY

        self.pop()
        if PY == (3, 12):
            self.pop()

    # -- with -----------------------------------------------------------------------------------------

    def BEFORE_WITH(self, inst):
        from ..variables.misc import AutocastVariable, GradModeVariable
        from ..variables.user_objects import _ObjectBase

        ctx = _autocast_region(self.pop(), self)
        if isinstance(ctx, (GradModeVariable, AutocastVariable)):
            self.push(ctx.enter(self))
            # what ``as`` binds: autocast's __enter__ returns the region, no_grad's None
            self.push(ctx if isinstance(ctx, AutocastVariable) else ConstantVariable(None))
            return
        from ..variables.contexts import GeneratorContextExit, GeneratorContextVariable

        if isinstance(ctx, GeneratorContextVariable):
            entered = ctx.enter(self)
            self.push(GeneratorContextExit(ctx))
            self.push(entered)
            return
        if isinstance(ctx, _ObjectBase) and _python_method(ctx, "__enter__") and _python_method(ctx, "__exit__"):
            # a context manager class written in Python: its __enter__/__exit__ are inlined
            exit_method = ctx.getattr(self, "__exit__")
            entered = ctx.getattr(self, "__enter__").call(self, [], {})
            self.push(exit_method)
            self.push(entered)
            return
        raise Unsupported(f"a with block over {ctx.describe()} (a context manager that is not traced)")

    # -- leaving --------------------------------------------------------------------------------------

    def RETURN_VALUE(self, inst):
        self.return_value = self.pop()

    def RETURN_GENERATOR(self, inst):
        if not self.is_generator:
            raise Unsupported("generator or coroutine function")
        self.push(ConstantVariable(None))  # the POP_TOP after it discards this

    def YIELD_VALUE(self, inst):
        if not self.is_generator:
            raise Unsupported("yield outside a generator being inlined")
        self.suspended = self.pop()  # run_to_yield hands it out; the value sent back is pushed on resume

    def SEND(self, inst):
        raise Unsupported("yield from / await while tracing")

    def LOAD_BUILD_CLASS(self, inst):
        raise Unsupported("class definition inside a compiled function")

    def SETUP_ANNOTATIONS(self, inst):
        raise Unsupported("annotations block inside a compiled function")


def _python_method(obj, name):
    import types

    for klass in obj.python_type().__mro__:
        if name in klass.__dict__:
            return isinstance(klass.__dict__[name], types.FunctionType)
    return False


def _autocast_region(ctx, tx):
    """``ctx`` as an :class:`AutocastVariable` or :class:`GradModeVariable` when it is a real
    ``ember.autocast`` or grad-mode object (``no_grad()``, ``inference_mode()``...) reached through
    another tracker (made outside the frame, or by a decorator such as ``@ember.autocast(...)`` or
    ``@ember.inference_mode()``); ``ctx`` itself otherwise."""
    import ember
    from ember._grad_mode import _GradModeContext

    from ..variables.misc import AutocastVariable, GradModeVariable

    if isinstance(ctx, (AutocastVariable, GradModeVariable)):
        return ctx
    value = getattr(ctx, "value", None)
    if isinstance(value, ember.autocast):
        return AutocastVariable(value)
    if isinstance(value, _GradModeContext):
        return GradModeVariable(value._enter_value(), tx.output.grad_enabled)
    return ctx
