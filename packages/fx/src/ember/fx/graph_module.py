"""``GraphModule``: an ``ember.nn.Module`` whose ``forward`` is Python generated from a Graph.

The module holds the parameters, buffers and submodules its graph refers to (copied
by qualified name from the module it was built from) and the graph itself. Editing
``gm.graph`` then calling :meth:`GraphModule.recompile` regenerates ``forward``;
:attr:`GraphModule.code` is the generated source, readable like hand-written code.
"""

from __future__ import annotations

import copy
import itertools
import linecache

from ember.nn import Module

from .graph import Graph

__all__ = ["GraphModule"]

_source_counter = itertools.count()


def _forward_from_src(src, globals_):
    """Compile generated source into a function; register the text so tracebacks show it."""
    key = f"<eval_with_key>.{next(_source_counter)}"
    linecache.cache[key] = (len(src), None, src.splitlines(True), key)
    namespace = dict(globals_)
    exec(compile(src, key, "exec"), namespace)  # noqa: S102 - the source is our own generated code
    return namespace["forward"]


def _copy_attr(from_module, to_module, target):
    """Make ``to_module.<target>`` the same object as ``from_module.<target>``, creating empty holder modules."""
    *prefix, field = target.split(".")
    for item in prefix:
        source = getattr(from_module, item)
        holder = getattr(to_module, item, None)
        if holder is source:
            return  # the whole submodule is shared already
        if holder is None:
            holder = Module()
            to_module.add_module(item, holder)
        from_module, to_module = source, holder
    orig = getattr(from_module, field)
    if isinstance(from_module, Module) and field in from_module._buffers:
        to_module.register_buffer(field, orig, persistent=field not in from_module._non_persistent_buffers_set)
    else:
        setattr(to_module, field, orig)


def _assign_attr(value, to_module, target):
    *prefix, field = target.split(".")
    for item in prefix:
        holder = getattr(to_module, item, None)
        if holder is None:
            holder = Module()
            to_module.add_module(item, holder)
        to_module = holder
    setattr(to_module, field, value)


class GraphModule(Module):
    """A module generated from a :class:`~ember.fx.Graph`.

    Args:
        root (ember.nn.Module or dict): where the graph's ``get_attr`` and ``call_module``
            targets come from: a module (attributes are looked up by qualified name and
            shared, not copied) or a dict from qualified name to value.
        graph (Graph): the graph; ``forward`` is generated from it.
        class_name (str): the name shown in ``repr`` and errors.

    Raises:
        RuntimeError: if a target is missing from a dict ``root``, or ``root`` has another type.
    """

    def __new__(cls, *args, **kwargs):
        # Each instance gets its own subclass, so that recompile() can set `forward` on it
        # without affecting other GraphModules.
        for base in cls.__mro__:
            if base.__name__ != "GraphModuleImpl" or base.__module__ != __name__:
                cls = base
                break

        class GraphModuleImpl(cls):
            pass

        return super().__new__(GraphModuleImpl)

    def __init__(self, root, graph, class_name="GraphModule"):
        super().__init__()
        self.__class__.__name__ = class_name
        self.__class__.__qualname__ = class_name
        if isinstance(root, Module):
            self.training = root.training
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    _copy_attr(root, self, node.target)
        elif isinstance(root, dict):
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    if node.target not in root:
                        raise RuntimeError(
                            f"Node {node} referenced target {node.target} but that target was not provided in ``root``!"
                        )
                    _assign_attr(root[node.target], self, node.target)
        else:
            raise RuntimeError(f"Unsupported type {type(root).__name__} passed for root!")
        self.meta = {}
        self.graph = graph

    # -- the graph and its code --------------------------------------------------------------------

    @property
    def graph(self):
        """The graph; assigning one regenerates the code."""
        return self._graph

    @graph.setter
    def graph(self, g):
        if not isinstance(g, Graph):
            raise TypeError(f"GraphModule.graph must be an ember.fx.Graph, got {type(g).__name__}")
        self._graph = g
        g.owning_module = self
        self.recompile()

    @property
    def code(self):
        """The Python source of ``forward``, generated from :attr:`graph`."""
        return self._code

    def recompile(self):
        """Regenerate ``forward`` from :attr:`graph` (call it after editing the graph).

        Returns:
            PythonCode: the generated source and its globals.
        """
        python_code = self._graph.python_code(root_module="self")
        self._code = python_code.src
        info = getattr(self._graph._codegen, "pytree_info", None)
        if info is not None:  # PyTorch's attribute names for the structures forward takes and returns
            self._in_spec, self._out_spec = info.in_spec, info.out_spec
        type(self).forward = _forward_from_src(self._code, python_code.globals)
        return python_code

    def print_readable(self, print_output=True):
        """The generated code as a class definition; printed unless ``print_output`` is False.

        Submodules that are GraphModules themselves (e.g. after
        :func:`~ember.fx.passes.split_module.split_module`) appear as nested classes.

        Returns:
            str
        """
        text = self._readable(type(self).__name__)
        if print_output:
            print(text)
        return text

    def _readable(self, name):
        nested = [
            child._readable(child_name) for child_name, child in self.named_children() if isinstance(child, GraphModule)
        ]
        lines = [f"class {name}(ember.nn.Module):"]
        for block in nested:
            lines += [f"    {line}" if line else "" for line in block.splitlines()] + [""]
        lines += [f"    {line}" if line else "" for line in self._code.splitlines()]
        return "\n".join(lines) + "\n"

    def to_folder(self, folder, module_name="FxModule"):
        """Write this module as an importable Python package in ``folder``, weights included.

        The folder gets ``module.py`` (class ``module_name``: submodules rebuilt from their
        ``repr``, or for your own leaf modules from their no-argument constructor imported
        by name when that builds an equal layer; ``forward`` the generated code),
        ``state.pt`` (every tensor, written by :func:`ember.save`, no pickle) and
        ``__init__.py``. ``from <folder> import <module_name>`` then gives a module equal
        to this one.

        Returns:
            pathlib.Path: the folder.

        Raises:
            RuntimeError: for a submodule neither its ``repr`` nor its no-argument
                constructor rebuilds, or a function the code calls that cannot be imported by name.
        """
        from ._to_folder import write_folder

        return write_folder(self, folder, module_name)

    def __str__(self):
        return f"{super().__str__()}\n\n\n{self._code}"

    # -- copies ------------------------------------------------------------------------------------

    def __deepcopy__(self, memo):
        holder = Module()
        state = {k: v for k, v in self.__dict__.items() if k != "_graph"}
        holder.__dict__.update(copy.deepcopy(state, memo))
        result = GraphModule(holder, copy.deepcopy(self._graph, memo), type(self).__name__)
        result.meta = copy.deepcopy(self.meta, memo)
        memo[id(self)] = result
        return result

    def __reduce__(self):
        # Pickle the module state and the graph; forward is regenerated on load.
        state = {k: v for k, v in self.__dict__.items() if k != "_graph"}
        return (_rebuild_graph_module, (state, self._graph, type(self).__name__))

    def __copy__(self):
        result = GraphModule(self, self._graph, type(self).__name__)
        result.meta = dict(self.meta)
        return result

    # -- submodules --------------------------------------------------------------------------------

    def add_submodule(self, target, m):
        """Install module ``m`` at qualified name ``target``, creating empty parent modules as needed.

        Returns:
            bool: False if a prefix of ``target`` names something that is not a module.
        """
        *prefix, field = target.split(".")
        mod = self
        for item in prefix:
            sub = getattr(mod, item, None)
            if sub is None:
                sub = Module()
                mod.add_module(item, sub)
            if not isinstance(sub, Module):
                return False
            mod = sub
        mod.add_module(field, m)
        return True

    def delete_submodule(self, target):
        """Remove the submodule at ``target``.

        Returns:
            bool: False if there is no module there.
        """
        *prefix, field = target.split(".")
        mod = self
        for item in prefix:
            mod = getattr(mod, item, None)
            if not isinstance(mod, Module):
                return False
        if not isinstance(getattr(mod, field, None), Module):
            return False
        delattr(mod, field)
        return True

    def delete_all_unused_submodules(self):
        """Remove every submodule that no ``call_module`` or ``get_attr`` node needs."""
        used = set()
        for node in self._graph.nodes:
            if node.op not in ("call_module", "get_attr"):
                continue
            atoms = node.target.split(".")
            for i in range(1, len(atoms) + 1):
                used.add(".".join(atoms[:i]))
            target = self
            for atom in atoms:
                target = getattr(target, atom, None)
            if isinstance(target, Module):
                for name, _ in target.named_modules():
                    if name:
                        used.add(f"{node.target}.{name}")
        for name, _ in list(self.named_modules()):
            if name and name not in used:
                self.delete_submodule(name)


def _rebuild_graph_module(state, graph, class_name):
    """Inverse of ``GraphModule.__reduce__``."""
    holder = Module()
    holder.__dict__.update(state)
    result = GraphModule(holder, graph, class_name)
    result.meta = state.get("meta", {})
    return result
