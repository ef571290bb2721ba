"""Module containers: ``Sequential``, ``ModuleList``, ``ModuleDict``, ``ParameterList``, ``ParameterDict``.

Children are registered under PyTorch's names (``"0"``, ``"1"``, ... for the list-like ones, the
given keys for the dict-like ones), so state-dict keys match PyTorch's.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections import abc as container_abcs
from itertools import chain

from ..._tensor import Tensor
from ..parameter import Parameter
from .module import Module, _indent_tail, _typename

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]


# -- helpers shared by the containers -----------------------------------------------------------------


def _checked_position(index, length):
    """``index`` (any integer-like, negative counts from the end) as a position in ``[0, length)``."""
    index = operator.index(index)
    if index < -length or index >= length:
        raise IndexError(f"index {index} is out of range")
    return index % length


def _renumbered(entries):
    """The entries of a list-like container re-keyed ``"0"``, ``"1"``, ... after a deletion left gaps."""
    return OrderedDict((str(position), entry) for position, entry in enumerate(entries))


def _open_slot(modules, index):
    """Shift the entries at ``index`` and after one key up, leaving ``str(index)`` to be filled."""
    for position in range(len(modules), index, -1):
        modules[str(position)] = modules[str(position - 1)]


def _key_value_pairs(pairs, container_name):
    """Validate an iterable of ``(key, value)`` pairs for ``update``, yielding each pair."""
    for number, pair in enumerate(pairs):
        if not isinstance(pair, container_abcs.Iterable):
            raise TypeError(
                f"{container_name} update sequence element #{number} should be Iterable; is{type(pair).__name__}"
            )
        if len(pair) != 2:
            raise ValueError(
                f"{container_name} update sequence element #{number} has length {len(pair)}; 2 is required"
            )
        yield pair[0], pair[1]


def _as_parameter(value):
    """Parameter containers register tensors as parameters; other objects are kept as they are."""
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


def _entry_line(key, value, tensor_type_name):
    """One line of a parameter container's repr: ``(key): Parameter containing: [... of size 2x3]``."""
    if not isinstance(value, Tensor):
        return f"  ({key}): Object of type: {type(value).__name__}"
    shape = "x".join(str(n) for n in value.size())
    where = "" if value.device.type == "cpu" else f" ({value.device})"
    kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
    return f"  ({key}): {kind} containing: [{tensor_type_name(value)} of size {shape}{where}]"


def _without_index_names(names):
    # "0", "1", ... are not identifiers: leave them out of tab completion.
    return [name for name in names if not name.isdigit()]


# -- containers ------------------------------------------------------------------------------------


class Sequential(Module):
    """Modules run one after the other: ``forward(x)`` feeds ``x`` through each in order.

    Args:
        *args (Module): the modules, registered as ``"0"``, ``"1"``, ...; or one ``OrderedDict``
            of ``name -> module``.

    Example:
        >>> import ember
        >>> from ember import nn
        >>> s = nn.Sequential(nn.Module(), nn.Module())
        >>> len(s[1:]), list(dict(s.named_children()))
        (1, ['0', '1'])
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            named = args[0].items()
        else:
            named = ((str(position), module) for position, module in enumerate(args))
        for name, module in named:
            self.add_module(name, module)

    def _name_at(self, index):
        """The registered name of the child at ``index`` (names need not be ``"0"``, ``"1"``...)."""
        return list(self._modules)[_checked_position(index, len(self))]

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return self._modules[self._name_at(idx)]

    def __setitem__(self, idx, module):
        setattr(self, self._name_at(idx), module)

    def __delitem__(self, idx):
        doomed = list(self._modules)[idx] if isinstance(idx, slice) else [self._name_at(idx)]
        for name in doomed:
            delattr(self, name)
        self._modules = _renumbered(self._modules.values())

    def __len__(self):
        return len(self._modules)

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError(
                f"add operator supports only objects of Sequential class, but {str(type(other))} is given."
            )
        return Sequential(*self, *other)

    def pop(self, key):
        """Remove the module at ``key`` (an int or a slice) and return it."""
        removed = self[key]
        del self[key]
        return removed

    def __iadd__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError(
                f"add operator supports only objects of Sequential class, but {str(type(other))} is given."
            )
        for module in other:
            self.append(module)
        return self

    def __mul__(self, other):
        if not isinstance(other, int):
            raise TypeError(f"unsupported operand type(s) for *: {type(self)} and {type(other)}")
        if other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for {type(self)}")
        # The same module objects, repeated: the copies share parameters.
        return Sequential(*(list(self) * other))

    def __rmul__(self, other):
        return self.__mul__(other)

    def __dir__(self):
        return _without_index_names(super().__dir__())

    def __iter__(self):
        return iter(self._modules.values())

    def forward(self, input):
        """Feed ``input`` through every module in order."""
        for module in self:
            input = module(input)
        return input

    def append(self, module):
        """Add ``module`` at the end; returns ``self``."""
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index, module):
        """Insert ``module`` before position ``index`` (negative counts from the end); returns ``self``.

        Raises:
            AssertionError: if ``module`` is not a Module.
            IndexError: if ``index`` is out of ``[-len, len]``.
        """
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        length = len(self._modules)
        if index < -length or index > length:
            raise IndexError(f"Index out of range: {index}")
        index = index + length if index < 0 else index
        _open_slot(self._modules, index)
        self._modules[str(index)] = module
        return self

    def extend(self, sequential):
        """Append every module of the iterable ``sequential``; returns ``self``."""
        for module in sequential:
            self.append(module)
        return self


class ModuleList(Module):
    """A list of modules, registered as ``"0"``, ``"1"``, ... (indexable, sliceable, iterable).

    Args:
        modules (iterable of Module, optional): the initial modules.
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self += modules

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_checked_position(idx, len(self)))]

    def __setitem__(self, idx, module):
        setattr(self, str(_checked_position(idx, len(self))), module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            doomed = range(len(self._modules))[idx]
        else:
            doomed = [_checked_position(idx, len(self))]
        for position in doomed:
            delattr(self, str(position))
        self._modules = _renumbered(self._modules.values())

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        return ModuleList(chain(self, other))

    def __repr__(self):
        """PyTorch's compressed form: runs of equal children print as ``(0-2): 3 x Linear(...)``."""
        if len(self) == 0:
            return self._get_name() + "()"
        runs = []  # [first position, last position, repr], consecutive equal reprs merged
        for position, child in enumerate(self):
            text = repr(child)
            if runs and runs[-1][2] == text:
                runs[-1][1] = position
            else:
                runs.append([position, position, text])
        lines = [_indent_tail(_run_line(first, last, text), 2) for first, last, text in runs]
        return self._get_name() + "(" + "".join(f"\n  {line}" for line in lines) + "\n)"

    def __dir__(self):
        return _without_index_names(super().__dir__())

    def insert(self, index, module):
        """Insert ``module`` before position ``index``."""
        _open_slot(self._modules, index)
        self._modules[str(index)] = module

    def append(self, module):
        """Add ``module`` at the end; returns ``self``."""
        self.add_module(str(len(self)), module)
        return self

    def pop(self, key):
        """Remove the module at ``key`` and return it."""
        removed = self[key]
        del self[key]
        return removed

    def extend(self, modules):
        """Append the modules of an iterable; returns ``self``.

        Raises:
            TypeError: if ``modules`` is not iterable.
        """
        if not isinstance(modules, container_abcs.Iterable):
            raise TypeError("ModuleList.extend should be called with an iterable, but got " + type(modules).__name__)
        first_new = len(self)
        for position, module in enumerate(modules, start=first_new):
            self.add_module(str(position), module)
        return self


def _run_line(first, last, text):
    if first == last:
        return f"({first}): {text}"
    return f"({first}-{last}): {last - first + 1} x {text}"


class ModuleDict(Module):
    """An ordered dict of modules, registered under their keys.

    Args:
        modules (Mapping[str, Module] or iterable of (str, Module), optional): the initial entries.
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        """Remove every entry."""
        self._modules.clear()

    def pop(self, key):
        """Remove ``key`` and return its module."""
        removed = self[key]
        del self[key]
        return removed

    def keys(self):
        """The keys, in insertion order."""
        return self._modules.keys()

    def items(self):
        """The ``(key, module)`` pairs, in insertion order."""
        return self._modules.items()

    def values(self):
        """The modules, in insertion order."""
        return self._modules.values()

    def update(self, modules):
        """Add or overwrite entries from a mapping or an iterable of ``(key, module)`` pairs.

        Raises:
            TypeError: if ``modules`` is not iterable, or an element is not a pair.
            ValueError: if an element has a length other than 2.
        """
        if not isinstance(modules, container_abcs.Iterable):
            raise TypeError(
                "ModuleDict.update should be called with an iterable of key/value pairs, but got "
                + type(modules).__name__
            )
        is_mapping = isinstance(modules, (container_abcs.Mapping, ModuleDict))
        pairs = modules.items() if is_mapping else _key_value_pairs(modules, "ModuleDict")
        for key, module in pairs:
            self[key] = module


class ParameterList(Module):
    """A list of parameters registered as ``"0"``, ``"1"``, ...; plain tensors are wrapped in Parameter.

    Args:
        values (iterable, optional): the initial values.
    """

    def __init__(self, values=None):
        super().__init__()
        # Entries that are not tensors become plain attributes, so the length is counted here.
        self._size = 0
        if values is not None:
            self += values

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)().extend(self[position] for position in range(len(self))[idx])
        return getattr(self, str(_checked_position(idx, len(self))))

    def __setitem__(self, idx, param):
        setattr(self, str(_checked_position(idx, len(self))), _as_parameter(param))

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[position] for position in range(len(self)))

    def __iadd__(self, parameters):
        return self.extend(parameters)

    def __dir__(self):
        return _without_index_names(super().__dir__())

    def append(self, value):
        """Add ``value`` at the end; returns ``self``."""
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values):
        """Append the values of an iterable (not a tensor); returns ``self``.

        Raises:
            TypeError: if ``values`` is not iterable or is a tensor.
        """
        if not isinstance(values, container_abcs.Iterable) or isinstance(values, Tensor):
            raise TypeError("ParameterList.extend should be called with an iterable, but got " + type(values).__name__)
        for value in values:
            self.append(value)
        return self

    def extra_repr(self):
        return "\n".join(_entry_line(k, value, lambda t: str(t.dtype)) for k, value in enumerate(self))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """An ordered dict of parameters registered under their keys; plain tensors are wrapped in Parameter.

    Args:
        parameters (Mapping or iterable of (str, value), optional): the initial entries. A plain
            ``dict`` is inserted in sorted key order, as in PyTorch.
    """

    def __init__(self, parameters=None):
        super().__init__()
        # Insertion order of the keys (values are unused): entries live as attributes, which may be
        # parameters or plain objects.
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    @staticmethod
    def _check_key(key):
        if not isinstance(key, str):
            raise TypeError(
                "Index given to ParameterDict cannot be used as a key as it is "
                f"not a string (type is '{type(key).__name__}'). Open an issue on "
                "github if you need non-string keys."
            )

    def __getitem__(self, key):
        self._check_key(key)
        return getattr(self, key)

    def __setitem__(self, key, value):
        self._check_key(key)
        self._keys[key] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key):
        del self._keys[key]
        self._check_key(key)
        delattr(self, key)

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(self._keys)

    def copy(self):
        """A new ParameterDict holding the same parameters."""
        return ParameterDict(OrderedDict(self.items()))

    def __contains__(self, key):
        return key in self._keys

    def setdefault(self, key, default=None):
        """``self[key]``, inserting ``default`` first when ``key`` is absent."""
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        """Remove every entry."""
        for key in list(self._keys):
            del self[key]

    def pop(self, key):
        """Remove ``key`` and return its value."""
        removed = self[key]
        del self[key]
        return removed

    def popitem(self):
        """Remove and return the last inserted ``(key, value)`` pair."""
        if not self._keys:
            raise KeyError("popitem(): dictionary is empty")
        last = next(reversed(self._keys))
        return last, self.pop(last)

    def get(self, key, default=None):
        """``self[key]`` if present, else ``default``."""
        return self[key] if key in self else default

    def fromkeys(self, keys, default=None):
        """A new ParameterDict with ``keys``, each set to ``default``."""
        return ParameterDict((k, default) for k in keys)

    def keys(self):
        """The keys, in insertion order."""
        return self._keys.keys()

    def items(self):
        """The ``(key, value)`` pairs, in insertion order."""
        return ((k, self[k]) for k in self._keys)

    def values(self):
        """The values, in insertion order."""
        return (self[k] for k in self._keys)

    def update(self, parameters):
        """Add or overwrite entries (a plain dict in sorted key order, as PyTorch does).

        Raises:
            TypeError: if ``parameters`` is not iterable, or an element is not a pair.
            ValueError: if an element has a length other than 2.
        """
        if not isinstance(parameters, container_abcs.Iterable):
            raise TypeError(
                "ParametersDict.update should be called with an iterable of key/value pairs, but got "
                + type(parameters).__name__
            )
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            pairs = parameters.items()
        elif isinstance(parameters, container_abcs.Mapping):
            pairs = sorted(parameters.items())  # a plain dict's order is not meaningful to PyTorch
        else:
            pairs = _key_value_pairs(parameters, "ParameterDict")
        for key, value in pairs:
            self[key] = value

    def extra_repr(self):
        return "\n".join(_entry_line(k, value, _typename) for k, value in self.items())

    def __call__(self, input):
        raise RuntimeError("ParameterDict should not be called.")

    def __or__(self, other):
        merged = self.copy()
        merged.update(other)
        return merged

    def __ror__(self, other):
        merged = other.copy()
        merged.update(self)
        return merged

    def __ior__(self, other):
        self.update(other)
        return self
