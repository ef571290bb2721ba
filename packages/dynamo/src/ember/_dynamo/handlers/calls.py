"""Calls and function creation."""

from __future__ import annotations

from ..exc import Unsupported
from ..variables.misc import NullVariable
from .versions import NULL_AFTER_CALLABLE


class CallHandlers:
    """Interpreter handlers for calls (CALL, CALL_KW, CALL_FUNCTION_EX) and MAKE_FUNCTION; a translator mixin."""

    def KW_NAMES(self, inst):  # 3.11/3.12: names of the next CALL's keyword arguments
        names = inst.argval
        if not isinstance(names, tuple):  # 3.11's dis does not resolve the co_consts index
            names = self.code.co_consts[inst.arg]
        self.kw_names = tuple(names)

    def _pop_callable(self):
        """Pop the two call slots: returns ``(fn, self_or_None)``."""
        second = self.pop()
        first = self.pop()
        if NULL_AFTER_CALLABLE:
            fn, bound_self = first, second
        elif isinstance(first, NullVariable):
            fn, bound_self = second, None
        else:
            fn, bound_self = first, second
        if isinstance(bound_self, NullVariable):
            bound_self = None
        return fn, bound_self

    def _call(self, argc, kw_names):
        args = self.popn(argc)
        fn, bound_self = self._pop_callable()
        if bound_self is not None:
            args = [bound_self, *args]
        kwargs = {}
        if kw_names:
            kwargs = dict(zip(kw_names, args[len(args) - len(kw_names):]))
            args = args[: len(args) - len(kw_names)]
        self.push(fn.call(self, args, kwargs))

    def CALL(self, inst):
        kw_names, self.kw_names = self.kw_names, None
        self._call(inst.arg, kw_names)

    def CALL_KW(self, inst):  # 3.13: the keyword names are a tuple on the stack
        names = self.pop().as_constant()
        self._call(inst.arg, names)

    def CALL_FUNCTION_EX(self, inst):
        kwargs = self.pop() if inst.arg & 1 else None
        args = self.pop()
        fn, bound_self = self._pop_callable()
        positional = args.unpack(self)
        if bound_self is not None:
            positional = [bound_self, *positional]
        keywords = {}
        if kwargs is not None:
            from ..variables.containers import DictVariable

            if not isinstance(kwargs, DictVariable):
                raise Unsupported(f"**kwargs from {kwargs.describe()}")
            keywords = dict(kwargs.items)
        self.push(fn.call(self, positional, keywords))

    # -- making functions -------------------------------------------------------------------------------

    def MAKE_FUNCTION(self, inst):
        from ..variables.functions import NestedFunctionVariable

        code = self.pop().as_constant()
        flags = inst.arg or 0
        closure = self.pop() if flags & 0x08 else None
        annotations = self.pop() if flags & 0x04 else None
        kwdefaults = self.pop() if flags & 0x02 else None
        defaults = self.pop() if flags & 0x01 else None
        fn = NestedFunctionVariable(code, self.f_globals, code.co_qualname, defaults, kwdefaults, closure, annotations)
        self.push(fn)

    def SET_FUNCTION_ATTRIBUTE(self, inst):  # 3.13
        fn = self.pop()
        value = self.pop()
        attribute = {0x01: "defaults", 0x02: "kwdefaults", 0x04: "annotations", 0x08: "closure"}[inst.arg]
        setattr(fn, attribute, value)
        self.push(fn)
