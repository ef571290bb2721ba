"""Building and unpacking containers, slices and strings."""

from __future__ import annotations

from ..exc import Unsupported
from ..variables.constant import ConstantVariable
from ..variables.containers import DictVariable, ListVariable, SetVariable, SliceVariable, TupleVariable


class BuildHandlers:
    """Interpreter handlers for BUILD_*/UNPACK_* (containers, slices, strings); mixed into the translator."""

    def BUILD_TUPLE(self, inst):
        self.push(TupleVariable(self.popn(inst.arg)))

    def BUILD_LIST(self, inst):
        self.push(ListVariable(self.popn(inst.arg)))

    def BUILD_SET(self, inst):
        self.push(SetVariable([v.as_constant() for v in self.popn(inst.arg)]))

    def BUILD_MAP(self, inst):
        flat = self.popn(2 * inst.arg)
        items = {}
        for key, value in zip(flat[::2], flat[1::2]):
            items[key.as_constant()] = value
        self.push(DictVariable(items))

    def BUILD_CONST_KEY_MAP(self, inst):
        keys = self.pop().as_constant()
        values = self.popn(inst.arg)
        self.push(DictVariable(dict(zip(keys, values))))

    def BUILD_STRING(self, inst):
        parts = self.popn(inst.arg)
        self.push(ConstantVariable("".join(p.as_constant() for p in parts)))

    def make_slice(self, parts):
        from ..variables.symbolic import SymIntVariable

        if all(p.is_constant() and not isinstance(p, SymIntVariable) for p in parts):
            return ConstantVariable(slice(*[p.as_constant() for p in parts]))
        return SliceVariable(parts)

    def BUILD_SLICE(self, inst):
        parts = self.popn(inst.arg)
        if len(parts) == 2:
            parts.append(ConstantVariable(None))
        self.push(self.make_slice(parts))

    def LIST_APPEND(self, inst):
        value = self.pop()
        self.stack[-inst.arg].items.append(value)

    def SET_ADD(self, inst):
        value = self.pop()
        self.stack[-inst.arg].values.add(value.as_constant())

    def MAP_ADD(self, inst):
        value = self.pop()
        key = self.pop()
        self.stack[-inst.arg].items[key.as_constant()] = value

    def LIST_EXTEND(self, inst):
        values = self.pop()
        self.stack[-inst.arg].items.extend(values.unpack(self))

    def SET_UPDATE(self, inst):
        values = self.pop()
        self.stack[-inst.arg].values.update(v.as_constant() for v in values.unpack(self))

    def DICT_UPDATE(self, inst):
        other = self.pop()
        if not isinstance(other, DictVariable):
            raise Unsupported(f"dict update from {other.describe()}")
        self.stack[-inst.arg].items.update(other.items)

    DICT_MERGE = DICT_UPDATE

    def LIST_TO_TUPLE(self, inst):
        self.push(TupleVariable(self.pop().items))

    def UNPACK_SEQUENCE(self, inst):
        items = self.pop().unpack(self)
        if len(items) != inst.arg:
            raise Unsupported(f"unpacking {len(items)} values into {inst.arg}")
        for item in reversed(items):
            self.push(item)

    def UNPACK_EX(self, inst):
        items = self.pop().unpack(self)
        before, after = inst.arg & 0xFF, inst.arg >> 8
        if len(items) < before + after:
            raise Unsupported("not enough values to unpack")
        middle = ListVariable(items[before: len(items) - after])
        for item in reversed(items[len(items) - after:]):
            self.push(item)
        self.push(middle)
        for item in reversed(items[:before]):
            self.push(item)

    # -- f-strings ------------------------------------------------------------------------------------------

    def FORMAT_VALUE(self, inst):  # 3.11/3.12
        spec = self.pop().as_constant() if (inst.arg & 0x04) == 0x04 else ""
        value = self.pop().as_constant()
        conversion = inst.arg & 0x03
        if conversion == 1:
            value = str(value)
        elif conversion == 2:
            value = repr(value)
        elif conversion == 3:
            value = ascii(value)
        self.push(ConstantVariable(format(value, spec)))

    def FORMAT_SIMPLE(self, inst):  # 3.13
        self.push(ConstantVariable(format(self.pop().as_constant(), "")))

    def FORMAT_WITH_SPEC(self, inst):  # 3.13
        spec = self.pop().as_constant()
        self.push(ConstantVariable(format(self.pop().as_constant(), spec)))

    def CONVERT_VALUE(self, inst):  # 3.13
        value = self.pop().as_constant()
        self.push(ConstantVariable({1: str, 2: repr, 3: ascii}[inst.arg](value)))
