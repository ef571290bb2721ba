"""``match`` statements: sequence, mapping and class patterns."""

from __future__ import annotations

import collections.abc

from ..exc import Unsupported
from ..variables.constant import ConstantVariable


class MatchHandlers:
    """Interpreter handlers for ``match`` statement patterns; mixed into the translator."""

    def GET_LEN(self, inst):
        self.push(ConstantVariable(self.stack[-1].length(self)))

    def MATCH_SEQUENCE(self, inst):
        cls = self.stack[-1].python_type()
        is_sequence = issubclass(cls, collections.abc.Sequence) and not issubclass(cls, (str, bytes, bytearray))
        self.push(ConstantVariable(is_sequence))

    def MATCH_MAPPING(self, inst):
        self.push(ConstantVariable(issubclass(self.stack[-1].python_type(), collections.abc.Mapping)))

    def MATCH_KEYS(self, inst):
        from ..variables.containers import DictVariable, TupleVariable

        keys = self.stack[-1].as_constant()
        subject = self.stack[-2]
        if not isinstance(subject, DictVariable):
            raise Unsupported(f"a mapping pattern over {subject.describe()}")
        if all(k in subject.items for k in keys):
            self.push(TupleVariable([subject.items[k] for k in keys]))
        else:
            self.push(ConstantVariable(None))

    def MATCH_CLASS(self, inst):
        from ..variables.containers import TupleVariable

        names = self.pop().as_constant()
        cls = self.pop().as_constant()
        subject = self.pop()
        if not issubclass(subject.python_type(), cls):
            self.push(ConstantVariable(None))
            return
        positional = getattr(cls, "__match_args__", ())
        if inst.arg > len(positional):
            if inst.arg == 1 and cls in (bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple):
                self.push(TupleVariable([subject]))  # ``case int(n)`` matches the subject itself
                return
            raise Unsupported(f"class pattern {cls.__name__}() with more positional patterns than __match_args__")
        attributes = [*positional[: inst.arg], *names]
        self.push(TupleVariable([subject.getattr(self, name) for name in attributes]))
