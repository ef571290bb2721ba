"""``GraphModule.to_folder``: write a GraphModule as a Python package with its weights.

The folder holds ``module.py`` (a class whose ``forward`` is the generated code and
whose ``__init__`` rebuilds the submodules and loads the tensors), ``state.pt`` (every
tensor the module holds, written with :func:`ember.save`: no pickle) and
``__init__.py``. Submodules are rebuilt from their ``repr`` (``Linear(in_features=4,
...)``), which is checked when writing. A leaf its ``repr`` does not rebuild (your own
leaf modules) is written as ``YourLayer()``, imported by name, when that no-argument
constructor builds a module with the same tensors and the same plain attributes (the
tensors' values then come from ``state.pt``); anything else is refused with an error, as
is a global the generated code needs but cannot import. Constructor arguments cannot be
recovered in general (a module does not record them, and pickling is what we avoid).
"""

from __future__ import annotations

import os
import types
from pathlib import Path

__all__ = ["write_folder"]

_STATE_FILE = "state.pt"

_INSTALL_HELPER = '''
def _install(root, target, value, kind, requires_grad):
    """Put one saved tensor back at its qualified name."""
    *path, field = target.split(".")
    owner = root.get_submodule(".".join(path))
    if kind == "parameter":
        setattr(owner, field, ember.nn.Parameter(value, requires_grad=requires_grad))
    elif kind in ("buffer", "buffer_non_persistent"):
        owner.register_buffer(field, value, persistent=kind == "buffer")
    else:
        setattr(owner, field, value)
'''


def _import_line(name, obj):
    """A statement binding ``name`` to ``obj`` in the written module.

    Raises:
        RuntimeError: if ``obj`` cannot be imported by name.
    """
    import ember
    from ember._ops import Op

    if isinstance(obj, types.ModuleType):
        return f"import {obj.__name__} as {name}" if obj.__name__ != name else f"import {name}"
    if isinstance(obj, Op):
        return f"{name} = ember._ops.get({obj.name!r})"
    if isinstance(obj, (ember.dtype, ember.device)):
        return f"{name} = ember.{obj.name}" if isinstance(obj, ember.dtype) else f"{name} = ember.device({str(obj)!r})"
    if isinstance(obj, float):
        return f"{name} = float({str(obj)!r})"
    from ember.utils._pytree import TreeSpec, treespec_dumps

    if isinstance(obj, TreeSpec):  # the input/output structure of a pytree-flattened forward
        try:
            text = treespec_dumps(obj)
        except NotImplementedError as exc:
            raise RuntimeError(f"to_folder: cannot write the structure {name}: {exc}") from None
        return f"import ember.utils._pytree\n{name} = ember.utils._pytree.treespec_loads({text!r})"
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if module and qualname and "<" not in qualname and module != "__main__":
        head, _, rest = qualname.partition(".")
        line = (
            f"from {module} import {head} as {name}"
            if not rest
            else f"from {module} import {head}\n{name} = {qualname}"
        )
        return line
    raise RuntimeError(
        f"to_folder: the generated code uses {obj!r} (as {name}), which cannot be imported by name; "
        "define it at the top level of an importable module"
    )


def _module_expr(module, imports):
    """Python that rebuilds ``module`` (adding any import it needs to ``imports``), or raises RuntimeError."""
    import ember
    import ember.nn as nn

    if type(module) is nn.Module:
        return "ember.nn.Module()"
    text = repr(module)
    cls = type(module)
    if "\n" not in text and getattr(nn, cls.__name__, None) is cls:
        expr = f"ember.nn.{text}"
        try:
            rebuilt = eval(expr, {"ember": ember, "inf": float("inf"), "nan": float("nan")})  # noqa: S307 - own repr
        except Exception:  # noqa: BLE001 - any failure means the repr does not rebuild it
            rebuilt = None
        if type(rebuilt) is cls and _same_state_layout(rebuilt, module):
            return expr
    expr = _default_constructor_expr(module, imports)
    if expr is not None:
        return expr
    raise RuntimeError(
        f"to_folder: cannot write submodule of type {cls.__name__}: its repr does not rebuild it and "
        f"{cls.__name__}() (its constructor without arguments, imported by name) does not build an equal "
        "layer (ember.fx never pickles modules); make it traceable (not a leaf) or write it yourself"
    )


def _default_constructor_expr(module, imports):
    """``Name()`` for a leaf whose class is importable and whose no-argument constructor builds a module
    with the same tensors (names, shapes) and the same plain attributes; None otherwise.

    The tensors' values then come from the saved state, as for every other layer.
    """
    cls = type(module)
    module_name, qualname = cls.__module__, cls.__qualname__
    if not module_name or module_name == "__main__" or "<" in qualname or "." in qualname:
        return None
    try:
        rebuilt = cls()
    except Exception:  # noqa: BLE001 - needs arguments (or fails): not rebuildable this way
        return None
    if not (_same_state_layout(rebuilt, module) and _plain_attributes(rebuilt) == _plain_attributes(module)):
        return None
    alias = f"_{qualname}"
    line = f"from {module_name} import {qualname} as {alias}"
    if line not in imports:
        imports.append(line)
    return f"{alias}()"


def _plain_attributes(module):
    """The configuration a module keeps in plain attributes (numbers, strings, tuples), training mode aside."""
    plain = (bool, int, float, complex, str, bytes, type(None), tuple)
    return {
        (prefix, name): value
        for prefix, sub in module.named_modules()
        for name, value in vars(sub).items()
        if isinstance(value, plain) and name != "training"
    }


def _same_state_layout(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(tuple(sa[k].shape) == tuple(sb[k].shape) for k in sa)


def _module_lines(gm, imports):
    """``__init__`` lines creating every submodule the module holds (leaves from repr, holders empty)."""
    import ember.nn as nn

    lines = []

    def visit(module, prefix):
        for name, child in module.named_children():
            target = f"{prefix}{name}"
            parent = f"self.get_submodule({prefix[:-1]!r})" if prefix else "self"
            if type(child) is nn.Module:
                lines.append(f"{parent}.add_module({name!r}, ember.nn.Module())")
                visit(child, f"{target}.")
            else:
                lines.append(f"{parent}.add_module({name!r}, {_module_expr(child, imports)})")

    visit(gm, "")
    return lines


def _tensors(gm):
    """Every tensor the module holds: ``{qualified name: (tensor, kind, requires_grad)}``."""
    import ember

    found = {}
    for prefix, module in gm.named_modules():
        dot = f"{prefix}." if prefix else ""
        for name, p in module._parameters.items():
            if p is not None:
                found[f"{dot}{name}"] = (p, "parameter", p.requires_grad)
        for name, b in module._buffers.items():
            if b is not None:
                kind = "buffer_non_persistent" if name in module._non_persistent_buffers_set else "buffer"
                found[f"{dot}{name}"] = (b, kind, False)
        for name, value in vars(module).items():
            if isinstance(value, ember.Tensor):
                found[f"{dot}{name}"] = (value, "tensor", False)
    return found


def write_folder(gm, folder, module_name="FxModule"):
    """Write ``gm`` to ``folder`` (see the module documentation); returns the folder as a Path."""
    import ember

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    code = gm._graph.python_code(root_module="self")
    imports = ["import os", "", "import ember", "import ember.nn", ""]
    for name, obj in code.globals.items():
        if name == "ember" or name.startswith("__"):
            continue
        imports.append(_import_line(name, obj))
    tensors = _tensors(gm)
    ember.save({k: v[0].detach() for k, v in tensors.items()}, os.fspath(folder / _STATE_FILE))
    kinds = {k: (kind, grad) for k, (_, kind, grad) in tensors.items()}
    init = [
        "def __init__(self):",
        "    super().__init__()",
        *(f"    {line}" for line in _module_lines(gm, imports)),
        f"    state = ember.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), {_STATE_FILE!r}))",
        f"    for target, (kind, requires_grad) in {kinds!r}.items():",
        "        _install(self, target, state[target], kind, requires_grad)",
        f"    self.train({gm.training!r})",
    ]
    body = "\n".join(f"    {line}" if line else "" for line in [*init, "", *code.src.splitlines()])
    text = (
        f'"""{module_name}: written by ember.fx GraphModule.to_folder."""\n\n'
        + "\n".join(imports)
        + "\n\n\n"
        + _INSTALL_HELPER.strip()
        + f"\n\n\nclass {module_name}(ember.nn.Module):\n{body}\n"
    )
    (folder / "module.py").write_text(text)
    (folder / "__init__.py").write_text(f"from .module import {module_name}\n\n__all__ = [{module_name!r}]\n")
    return folder
