"""``ember.nn.Module`` instances: parameters and buffers are graph inputs, ``module(x)`` inlines forward."""

from __future__ import annotations

import types

from ..exc import Unsupported
from ..reconstruct import Constant, FromSource
from ..source import AttrSource
from .base import MethodOf
from .constant import ConstantVariable
from .user_objects import _ObjectBase

__all__ = ["NNModuleVariable"]


class NNModuleVariable(_ObjectBase):
    """A module reachable from the frame; its identity is guarded (ID_MATCH) and the attributes read
    through it are guarded by their own sources (``L['self'].fc.weight``, ``L['self'].training``)."""

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value

    def describe(self):
        return f"module {type(self.value).__name__}"

    def python_type(self):
        return type(self.value)

    def as_python(self, tx):
        raise Unsupported(f"passing {self.describe()} to a function that is not traced")

    def _child_source(self, name):
        return AttrSource(self.source, name) if self.source is not None else None

    def getattr(self, tx, name):
        import ember

        if name in self._MEMBER_ITERATORS and name not in self.value.__dict__:
            if all(name not in klass.__dict__ for klass in type(self.value).__mro__ if klass is not ember.nn.Module):
                return MethodOf(self, name)
        if name == "forward":
            self._guard_forward(tx)
        return super().getattr(tx, name)

    def _guard_forward(self, tx):
        """The class's ``forward`` is read unguarded (methods are code, not state): a guard that
        ``module.forward`` still binds it, so ``m.forward = f`` or ``M.forward = f`` recompiles. To keep
        the guard check small there is one per module class, on the first instance called (the compiled
        module itself, usually); a forward assigned later on any instance called is seen by that module's
        hook-count guard (:class:`~ember._dynamo.source.HookCountSource`). (A forward already in the
        instance ``__dict__`` is guarded as the attribute it is.)"""
        if self.source is None or "forward" in self.value.__dict__:
            return
        seen = tx.output.__dict__.setdefault("_forward_guarded_classes", set())
        if type(self.value) in seen:
            return
        seen.add(type(self.value))
        raw = getattr(type(self.value), "forward", None)
        if isinstance(raw, types.FunctionType):
            from ..guards import GuardKind

            tx.output.add_guard(AttrSource(AttrSource(self.source, "forward"), "__func__"), GuardKind.ID_MATCH, raw)

    def instance_attr(self, tx, name):
        override = tx.output.side_effects.attr_override(self.value, name)
        if override is not None:
            return override
        state = self.value.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            entries = state.get(table)
            if entries is not None and name in entries:
                return tx.output.wrap(entries[name], self._child_source(name))
        if name == "training" and isinstance(state.get(name), bool) and self.source is not None:
            from ..guards import GuardKind

            tx.output.add_guard(self.source, GuardKind.MODULE_TRAINING, state[name])
            return ConstantVariable(state[name])
        if name in state:
            return tx.output.wrap(state[name], self._child_source(name))
        return None

    def setattr(self, tx, name, value):
        from .tensor import TensorVariable

        state = self.value.__dict__
        if any(name in state.get(t, ()) for t in ("_parameters", "_modules")):
            raise Unsupported(f"assigning module attribute {name!r} (a parameter or submodule)")
        if name in state.get("_buffers", ()) and not isinstance(value, TensorVariable):
            raise Unsupported(f"assigning a non-tensor to buffer {name!r}")
        tx.output.side_effects.store_attr(self, self.value, name, value)

    def truth(self, tx):
        return True

    def _children(self, tx):
        """The submodules as ``(name, module)`` pairs; guarded on their names, so a container that
        grows or shrinks after compiling (``ModuleList.append``) recompiles."""
        children = list(self.value.__dict__.get("_modules", {}).items())
        if self.source is not None:
            from ..guards import GuardKind

            tx.output.add_guard(AttrSource(self.source, "_modules"), GuardKind.DICT_KEYS, [k for k, _ in children])
        return children

    def length(self, tx):
        return len(self._children(tx))

    def unpack(self, tx):
        """Iterating a ModuleList/Sequential gives its submodules; a ModuleDict its keys."""
        import ember

        if isinstance(self.value, ember.nn.ModuleDict):
            return [ConstantVariable(k) for k, _ in self._children(tx)]
        if isinstance(self.value, (ember.nn.ModuleList, ember.nn.Sequential)):
            return [tx.output.wrap(m, self._child_source(k)) for k, m in self._children(tx)]
        raise Unsupported(f"iterating over {self.describe()}")

    def getitem(self, tx, key):
        import ember

        index = key.as_constant()
        if isinstance(self.value, ember.nn.ModuleDict):
            return tx.output.wrap(self.value[index], self._child_source(index))
        items = self.unpack(tx)
        if isinstance(index, slice):
            from .containers import ListVariable

            return ListVariable(items[index])  # iterating and calling the slice is what code does with it
        return items[index]

    def _dotted_source(self, dotted):
        source = self.source
        for part in dotted.split(".") if dotted else ():
            if source is None:
                return None
            source = AttrSource(source, part)
        return source

    def _iterate_members(self, tx, name, args, kwargs):
        """``parameters()``, ``named_children()``... computed on the real module (they only read it), each
        item wrapped with its attribute path as source."""
        from .containers import TupleVariable
        from .iterators import IteratorVariable

        values = [a.as_constant() for a in args]
        keywords = {k: v.as_constant() for k, v in kwargs.items()}
        named = name.startswith("named_")
        method = name if named else "named_" + name
        if method == "named_children":
            self._children(tx)  # guards the submodule names: a child added later recompiles
            items = list(self.value.named_children())
        else:
            self._guard_tree(tx, method)
            items = list(getattr(self.value, method)(*values, **keywords))
        prefix = keywords.get("prefix", "") if method != "named_children" else ""
        out = []
        for dotted, value in items:
            path = dotted[len(prefix) + 1:] if prefix and dotted.startswith(prefix + ".") else dotted
            var = tx.output.wrap(value, self._dotted_source(path) if path != prefix else self.source)
            out.append(TupleVariable([ConstantVariable(dotted), var]) if named else var)
        return IteratorVariable(out)

    def _guard_tree(self, tx, method):
        """Guard the names of the submodules of every module in the tree (and of their parameters or
        buffers, for those iterators): a module, parameter or buffer added anywhere later recompiles."""
        if self.source is None:
            return
        from ..guards import GuardKind

        tables = ["_modules"]
        if "parameters" in method:
            tables.append("_parameters")
        elif "buffers" in method:
            tables.append("_buffers")
        for path, module in self.value.named_modules():
            source = self._dotted_source(path) if path else self.source
            for table in tables:
                keys = list(module.__dict__.get(table, {}).keys())
                tx.output.add_guard(AttrSource(source, table), GuardKind.DICT_KEYS, keys)

    _MEMBER_ITERATORS = frozenset({
        "parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children",
        "modules", "named_modules",
    })

    def call_method(self, tx, name, args, kwargs):
        import ember

        if name in self._MEMBER_ITERATORS:
            return self._iterate_members(tx, name, args, kwargs)
        if isinstance(self.value, ember.nn.ModuleDict) and name in ("keys", "values", "items"):
            from .containers import ListVariable, TupleVariable

            children = self._children(tx)
            if name == "keys":
                return ListVariable([ConstantVariable(k) for k, _ in children])
            modules = [tx.output.wrap(m, self._child_source(k)) for k, m in children]
            if name == "values":
                return ListVariable(modules)
            return ListVariable([TupleVariable([ConstantVariable(k), m]) for (k, _), m in zip(children, modules)])
        return self.getattr(tx, name).call(tx, args, kwargs)

    def call(self, tx, args, kwargs):
        """``module(*args)``: forward pre-hooks, forward, forward hooks, all inlined."""
        module = self.value
        _refuse_rnn(module)
        if module._backward_hooks or module._backward_pre_hooks:
            raise Unsupported("module backward hooks inside a compiled function")
        if module._forward_pre_hooks_with_kwargs or module._forward_hooks_with_kwargs:
            raise Unsupported("module forward hooks with kwargs inside a compiled function")
        hook_source = None
        if self.source is not None:  # a hook or an instance forward added later must recompile: one guard
            from ..guards import GuardKind
            from ..source import HookCountSource, hook_count

            tx.output.add_guard(HookCountSource(self.source), GuardKind.EQUALS_MATCH, hook_count(module))
        for hook in list(module._forward_pre_hooks.values()):
            from .containers import TupleVariable

            result = tx.output.wrap(hook, hook_source).call(tx, [self, TupleVariable(args)], {})
            if not (result.is_constant() and result.as_constant() is None):
                args = result.unpack(tx) if isinstance(result, TupleVariable) else [result]
        output = self.getattr(tx, "forward").call(tx, args, kwargs)
        for hook in list(module._forward_hooks.values()):
            from .containers import TupleVariable

            result = tx.output.wrap(hook, hook_source).call(tx, [self, TupleVariable(args), output], {})
            if not (result.is_constant() and result.as_constant() is None):
                output = result
        return output

    def reconstruct(self, out):
        return FromSource(self.source) if self.source is not None else Constant(self.value)


def _refuse_rnn(module):
    """Recurrent layers run eagerly (``config.allow_rnn`` False, as PyTorch's default): unrolled over
    time, one is a graph of hundreds of steps that compiles for minutes and runs no faster than its
    eager kernels."""
    import ember

    from .. import config

    if isinstance(module, ember.nn.RNNBase) and not config.allow_rnn:
        raise Unsupported(
            f"nn.{type(module).__name__} runs eagerly (recurrent layers are not traced; "
            "ember._dynamo.config.allow_rnn = True traces them)"
        )
