"""Loads and stores: locals, cells, globals, constants, attributes, subscripts; stack shuffles."""

from __future__ import annotations

from ..exc import Unsupported
from ..variables.constant import ConstantVariable
from ..variables.functions import CellVariable
from ..variables.misc import NullVariable
from .versions import NULL_AFTER_CALLABLE


class LoadStoreHandlers:
    """Interpreter handlers for loads, stores, deletes and stack shuffles; mixed into the translator."""

    # -- no-ops ------------------------------------------------------------------------------------

    def NOP(self, inst):
        pass

    RESUME = NOP
    PRECALL = NOP
    EXTENDED_ARG = NOP
    CACHE = NOP
    COPY_FREE_VARS = NOP  # the cells of free variables are set up when the frame starts

    # -- the stack -----------------------------------------------------------------------------------

    def POP_TOP(self, inst):
        self.pop()

    def PUSH_NULL(self, inst):
        self.push(NullVariable())

    def COPY(self, inst):
        self.push(self.stack[-inst.arg])

    def SWAP(self, inst):
        i = inst.arg
        self.stack[-1], self.stack[-i] = self.stack[-i], self.stack[-1]

    # -- constants and locals ------------------------------------------------------------------------

    def LOAD_CONST(self, inst):
        # co_consts hold immutable values only (numbers, strings, tuples, code objects...)
        self.push(ConstantVariable(inst.argval))

    def RETURN_CONST(self, inst):
        self.LOAD_CONST(inst)
        self.RETURN_VALUE(inst)

    def LOAD_FAST(self, inst):
        name = inst.argval
        if name not in self.symbolic_locals:
            if name in self.cells:  # 3.13 loads a cell itself with LOAD_FAST to build a closure
                self.push(self.cells[name])
                return
            raise Unsupported(f"local variable {name!r} referenced before assignment")
        self.push(self.symbolic_locals[name])

    LOAD_FAST_CHECK = LOAD_FAST

    def LOAD_FAST_AND_CLEAR(self, inst):
        # 3.12+ inlined comprehensions save the outer binding of their loop variable
        self.push(self.symbolic_locals.pop(inst.argval, NullVariable()))

    def LOAD_FAST_LOAD_FAST(self, inst):
        for name in inst.argval:
            self.push(self.symbolic_locals[name])

    def STORE_FAST(self, inst):
        value = self.pop()
        if isinstance(value, NullVariable):
            self.symbolic_locals.pop(inst.argval, None)  # restoring "unbound" after a comprehension
        else:
            self.symbolic_locals[inst.argval] = value

    def STORE_FAST_LOAD_FAST(self, inst):
        store, load = inst.argval
        self.symbolic_locals[store] = self.pop()
        self.push(self.symbolic_locals[load])

    def STORE_FAST_STORE_FAST(self, inst):
        first, second = inst.argval
        self.symbolic_locals[first] = self.pop()
        self.symbolic_locals[second] = self.pop()

    def DELETE_FAST(self, inst):
        self.symbolic_locals.pop(inst.argval, None)

    # -- cells -----------------------------------------------------------------------------------------

    def MAKE_CELL(self, inst):
        name = inst.argval
        if name in self.cells:
            return
        self.cells[name] = CellVariable(self.symbolic_locals.pop(name, None))

    def LOAD_DEREF(self, inst):
        self.push(self._cell(inst.argval).get(self))

    def STORE_DEREF(self, inst):
        self._cell(inst.argval).set(self, self.pop())

    def LOAD_CLOSURE(self, inst):
        self.push(self._cell(inst.argval))

    def _cell(self, name):
        cell = self.cells.get(name)
        if cell is None:
            cell = self.cells[name] = CellVariable(None)
        return cell

    # -- globals ---------------------------------------------------------------------------------------

    def LOAD_GLOBAL(self, inst):
        push_null = inst.arg & 1
        if push_null and not NULL_AFTER_CALLABLE:
            self.push(NullVariable())
        self.push(self.load_global(inst.argval))
        if push_null and NULL_AFTER_CALLABLE:
            self.push(NullVariable())

    def STORE_GLOBAL(self, inst):
        if self.f_globals is not self.output.f_globals:
            raise Unsupported("storing a global of another module")
        self.output.side_effects.store_global(inst.argval, self.pop())

    # -- attributes ------------------------------------------------------------------------------------

    def LOAD_ATTR(self, inst):
        obj = self.pop()
        method = self.attr_is_method_load(inst)
        attr = obj.getattr(self, inst.argval)
        if method:
            self.push_callable(attr)
        else:
            self.push(attr)

    def LOAD_METHOD(self, inst):  # 3.11
        self.push_callable(self.pop().getattr(self, inst.argval))

    def push_callable(self, fn):
        """Push ``fn`` in the two-slot form a CALL expects (the NULL on the version's side)."""
        if NULL_AFTER_CALLABLE:
            self.push(fn)
            self.push(NullVariable())
        else:
            self.push(NullVariable())
            self.push(fn)

    def STORE_ATTR(self, inst):
        obj = self.pop()
        value = self.pop()
        obj.setattr(self, inst.argval, value)

    def DELETE_ATTR(self, inst):
        obj = self.pop()
        if not hasattr(obj, "delattr"):
            raise Unsupported(f"del of an attribute of {obj.describe()}")
        obj.delattr(self, inst.argval)

    def LOAD_SUPER_ATTR(self, inst):  # 3.12+: super, __class__, self on the stack
        from ..variables.misc import SuperVariable

        obj = self.pop()
        cls = self.pop()
        self.pop()  # the global super
        attr = SuperVariable(cls.as_constant(), obj).getattr(self, inst.argval)
        if inst.arg & 1:
            self.push_callable(attr)
        else:
            self.push(attr)

    # -- subscripts ------------------------------------------------------------------------------------

    def BINARY_SUBSCR(self, inst):
        key = self.pop()
        obj = self.pop()
        self.push(obj.getitem(self, key))

    def STORE_SUBSCR(self, inst):
        key = self.pop()
        obj = self.pop()
        value = self.pop()
        self.setitem(obj, key, value)

    def DELETE_SUBSCR(self, inst):
        key = self.pop()
        obj = self.pop()
        if not hasattr(obj, "delitem"):
            raise Unsupported(f"del of an item of {obj.describe()}")
        obj.delitem(self, key)

    def BINARY_SLICE(self, inst):  # 3.12+
        stop = self.pop()
        start = self.pop()
        obj = self.pop()
        self.push(obj.getitem(self, self.make_slice([start, stop, ConstantVariable(None)])))

    def STORE_SLICE(self, inst):
        stop = self.pop()
        start = self.pop()
        obj = self.pop()
        value = self.pop()
        self.setitem(obj, self.make_slice([start, stop, ConstantVariable(None)]), value)

    def setitem(self, obj, key, value):
        from ..variables.tensor import TensorVariable

        if isinstance(obj, TensorVariable):
            import operator

            if self.output.shape_env:
                from ..graph import _holds_symbolic

                # ``cache[:, pos:pos + 1] = k`` with a symbolic bound: the view by slice/select ops
                # that take the sizes' nodes, then an in-place copy (ember's __setitem__ would turn
                # the bounds into ints, static for each position)
                view = obj._index_with_symbolic_bounds(self, key) if _holds_symbolic(key) else None
                if view is not None and isinstance(value, TensorVariable):
                    self.output.leaf_call(self, lambda dst, src: dst.copy_(src), [view, value], {})
                    return
            self.output.leaf_call(self, operator.setitem, [obj, key, value], {})
            return
        if not hasattr(obj, "setitem"):
            raise Unsupported(f"item assignment on {obj.describe()}")
        obj.setitem(self, key, value)

    # -- imports ------------------------------------------------------------------------------------------

    def IMPORT_NAME(self, inst):
        fromlist = self.pop().as_constant()
        level = self.pop().as_constant()
        # importing is idempotent once the module is loaded: do it for real, as the frame would
        module = __import__(inst.argval, self.f_globals, None, fromlist, level)
        self.push(self.output.wrap(module, None, guard=False))

    def IMPORT_FROM(self, inst):
        self.push(self.stack[-1].getattr(self, inst.argval))
