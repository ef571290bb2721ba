"""Exceptions raised and caught inside the traced code: the exception table, except clauses, re-raise."""

from __future__ import annotations

from ..bytecode.instructions import parse_exception_table
from ..exc import ObservedException, Unsupported
from ..variables.constant import ConstantVariable

_TABLES = {}  # code -> exception table entries


def exception_table(code):
    """The code's exception table entries (start, end, target, depth, lasti), end exclusive."""
    table = _TABLES.get(code)
    if table is None:
        table = _TABLES[code] = parse_exception_table(code)  # the bytecode layer's reader
    return table


class ExceptionHandlers:
    """Interpreter handlers for raising and catching exceptions inside traced code; mixed into the translator."""

    def handle_observed(self, error):
        """Unwind to the handler that covers the current instruction; False when none does."""
        offset = self.current.offset
        for start, end, target, depth, lasti in exception_table(self.code):
            if start <= offset < end:
                del self.stack[depth:]
                if lasti:
                    self.push(ConstantVariable(offset))
                self.push(error.exception)
                self.jump(target)
                return True
        return False

    def _exception_of(self, value):
        """The tracker to raise for ``raise value`` (a class is instantiated)."""
        from ..variables.exceptions import ExceptionVariable

        if isinstance(value, ExceptionVariable):
            return value
        cls = value.as_constant() if value.is_constant() else None
        if isinstance(cls, type) and issubclass(cls, BaseException):
            return ExceptionVariable(cls, [])
        raise Unsupported(f"raise of {value.describe()}")

    def RAISE_VARARGS(self, inst):
        if inst.arg == 0:
            if not self.exc_stack:
                raise Unsupported("bare raise with no exception being handled")
            raise ObservedException(self.exc_stack[-1])
        if inst.arg == 2:
            self.pop()  # the cause of ``raise ... from cause``
        raise ObservedException(self._exception_of(self.pop()))

    def RERAISE(self, inst):
        exception = self.pop()
        if inst.arg:
            self.pop()  # the saved lasti
        raise ObservedException(exception)

    def PUSH_EXC_INFO(self, inst):
        exception = self.pop()
        self.push(self.exc_stack[-1] if self.exc_stack else ConstantVariable(None))
        self.push(exception)
        self.exc_stack.append(exception)

    def POP_EXCEPT(self, inst):
        self.pop()
        if self.exc_stack:
            self.exc_stack.pop()

    def CHECK_EXC_MATCH(self, inst):
        from ..variables.builtins import _class_of

        classes = _class_of(self, self.pop())
        self.push(ConstantVariable(issubclass(self.stack[-1].python_type(), classes)))

    def LOAD_ASSERTION_ERROR(self, inst):
        from ..variables.builtins import BuiltinVariable

        self.push(BuiltinVariable(AssertionError))

    def WITH_EXCEPT_START(self, inst):
        from ..variables.functions import UserMethodVariable
        from ..variables.misc import GradModeExitVariable

        exception = self.stack[-1]
        for value in reversed(self.stack[-5:-1]):
            if isinstance(value, GradModeExitVariable):
                self.push(value.call(self, [], {}))
                return
            if type(value).__name__ == "GeneratorContextExit":
                self.push(value.call(self, [ConstantVariable(exception.python_type()), exception], {}))
                return
            if isinstance(value, UserMethodVariable) and getattr(value.function, "fn_name", lambda: "")() == "__exit__":
                args = [ConstantVariable(exception.python_type()), exception, ConstantVariable(None)]
                self.push(value.call(self, args, {}))
                return
        raise Unsupported("an exception inside a with block while tracing")
