"""The structure's nodes decoded into Python objects, for :func:`ember.load` (see :mod:`ember.serialization`
for the node kinds). Each node is checked as it is decoded: a hostile structure raises
:class:`~ember.serialization.SerializationError`.
"""

from __future__ import annotations

import math
from collections import Counter, OrderedDict

import numpy as np

from ._device import device as _device_cls
from ._dtype import BY_NAME
from ._serialization_format import (
    _BYTES_ONLY_NDARRAY_DTYPES,
    _EXTENSIONS_BY_NAME,
    _MAX_INT,
    _MAX_NDIM,
    SerializationError,
    _Lazy,
    _numpy_dtype_named,
    _short,
)
from ._tensor import Size, Tensor

_FIELD_SETS = {}  # the field names of a node kind -> the keys its JSON object must have
_PLAIN_JSON = frozenset((type(None), bool, int, float, str))  # nodes that decode to themselves


class _Decoder:
    """Turns the validated JSON structure back into Python objects."""

    def __init__(self, reader, records, storages):
        self.reader = reader
        self.records = records
        self.storages = storages
        # Made on first reference: a record that nothing refers to costs no tensor.
        self.tensors = [None] * len(records)
        self.arrays = {}  # record index -> numpy array, so an array saved twice loads as one object

    def error(self, where, what):
        return self.reader.error(f"structure at {where}: {what}")

    def decode(self, node, where):
        kind = type(node)
        if node is None or kind in (bool, int, float, str):
            return node
        if kind is list:
            return self.decode_all(node, where)
        if kind is not dict or type(node.get("t")) is not str:
            raise self.error(where, f"expected a value or an object tagged with 't', got {_short(node)}")
        handler = _NODE_HANDLERS.get(node["t"])
        if handler is None:
            raise self.error(where, f"unknown tag {node['t']!r}")
        return handler(self, node, where)

    def decode_all(self, nodes, where):
        """The list ``nodes`` with its elements decoded, in place.

        The parsed JSON list is this loader's own and is not used again, so it becomes the
        result: a list of millions of elements is not held twice. Scalars (most elements of a
        big list) stay as they are.
        """
        tensors = self.tensors
        for i, x in enumerate(nodes):
            if type(x) in _PLAIN_JSON:
                continue
            if type(x) is list:  # decoded in place: nothing to assign (and nothing to do for [])
                if x:
                    self.decode_all(x, _Lazy("{}[{}]", where, i))
                continue
            # A reference to an already made tensor (a list of many references to a few tensors):
            # the same checks as node_tensor, without the call.
            if type(x) is dict and len(x) == 2 and x.get("t") == "tensor":
                k = x.get("i")
                if type(k) is int and 0 <= k < len(tensors) and tensors[k] is not None:
                    nodes[i] = tensors[k]
                    continue
            nodes[i] = self.decode(x, _Lazy("{}[{}]", where, i))
        return nodes

    def fields(self, node, where, *names):
        expected = _FIELD_SETS.get(names)
        if expected is None:
            expected = _FIELD_SETS[names] = frozenset(("t", *names))
        if node.keys() != expected:
            raise self.error(where, f"a {node['t']!r} node must have exactly the fields t, {', '.join(names)}")
        return [node[n] for n in names]

    def node_tensor(self, node, where):
        (i,) = self.fields(node, where, "i")
        if type(i) is not int or not 0 <= i < len(self.tensors):
            raise self.error(where, f"tensor index {_short(i)} out of range for {len(self.tensors)} tensor records")
        t = self.tensors[i]
        if t is None:
            t = self.tensors[i] = self.reader.make_tensor(self.records[i], self.storages)
        return t

    def node_float(self, node, where):
        (v,) = self.fields(node, where, "v")
        values = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
        if type(v) is not str or v not in values:
            raise self.error(where, f"float value {_short(v)} is not one of 'nan', 'inf', '-inf'")
        return values[v]

    def node_complex(self, node, where):
        re, im = self.fields(node, where, "re", "im")
        parts = []
        for part in (re, im):
            part = self.decode(part, where) if type(part) is dict else part
            if type(part) not in (int, float):
                raise self.error(where, f"complex parts must be numbers, got {_short(part)}")
            try:
                parts.append(float(part))
            except OverflowError:  # an integer beyond the float range
                raise self.error(where, f"complex part {_short(part)} is out of the range of a float") from None
        return complex(*parts)

    def node_tuple(self, node, where):
        (v,) = self.fields(node, where, "v")
        if type(v) is not list:
            raise self.error(where, "a tuple's 'v' must be a list")
        return tuple(self.decode_all(v, where))

    def node_size(self, node, where):
        (v,) = self.fields(node, where, "v")
        if type(v) is not list or not all(type(x) is int and 0 <= x <= _MAX_INT for x in v):
            raise self.error(
                where, f"an ember.Size must be a list of non-negative integers (at most 2**63 - 1), got {_short(v)}"
            )
        return Size(v)

    def node_dict(self, node, where, cls=dict):
        (items,) = self.fields(node, where, "items")
        if type(items) is not list:
            raise self.error(where, "a dict's 'items' must be a list")
        result = cls()
        for i, item in enumerate(items):
            if type(item) is not list or len(item) != 2:
                raise self.error(where, f"item {i} of a dict must be a [key, value] pair")
            key = self.decode(item[0], _Lazy("{}.key{}", where, i))
            try:
                hash(key)
            except TypeError:
                raise self.error(where, f"dict key {i} is unhashable ({type(key).__name__})") from None
            if isinstance(key, Tensor) or key in result:
                raise self.error(where, f"dict key {_short(key)} is repeated or not a valid key")
            value = item[1]
            items[i] = None  # the parsed pair is not needed again: a big dict is not held twice
            result[key] = value if type(value) in _PLAIN_JSON else self.decode(value, _Lazy("{}[{!r}]", where, key))
        return result

    def node_odict(self, node, where):
        return self.node_dict(node, where, OrderedDict)

    def node_counter(self, node, where):
        return self.node_dict(node, where, Counter)

    def node_set(self, node, where, cls=set):
        (v,) = self.fields(node, where, "v")
        if type(v) is not list:
            raise self.error(where, f"a {node['t']}'s 'v' must be a list")
        elements = self.decode_all(v, where)
        try:
            result = cls(elements)
        except TypeError:
            raise self.error(where, f"a {node['t']} element is unhashable") from None
        if len(result) != len(elements) or any(isinstance(x, Tensor) for x in elements):
            raise self.error(where, f"a {node['t']}'s elements are repeated or not valid elements")
        return result

    def node_frozenset(self, node, where):
        return self.node_set(node, where, frozenset)

    def node_bytes(self, node, where):
        t = self.node_tensor({"t": "tensor", "i": node.get("i")}, where) if set(node) == {"t", "i"} else None
        if t is None:
            raise self.error(where, "a 'bytes' node must have exactly the fields t, i")
        if t.dtype.name != "uint8" or t.dim() != 1 or t.device.type == "meta":
            raise self.error(where, "a 'bytes' node must refer to a 1-D uint8 tensor with data")
        return _host_numpy(t).tobytes()

    def node_ndarray(self, node, where):
        name, shape, i = self.fields(node, where, "dtype", "shape", "i")
        np_dtype = _numpy_dtype_named(name) if type(name) is str else None
        if np_dtype is None:
            raise self.error(where, f"unsupported numpy dtype {_short(name)}")
        if type(shape) is not list or not all(type(n) is int and 0 <= n <= _MAX_INT for n in shape):
            raise self.error(where, f"a numpy array's shape must be a list of non-negative ints, got {_short(shape)}")
        if len(shape) > _MAX_NDIM:
            raise self.error(where, f"a numpy array has {len(shape)} dimensions; at most {_MAX_NDIM} are supported")
        if type(i) is not int:
            raise self.error(where, f"a numpy array's tensor index must be an integer, got {_short(i)}")
        if i in self.arrays:
            return self.arrays[i]
        t = self.node_tensor({"t": "tensor", "i": i}, where)
        stored_as = "uint8" if name in _BYTES_ONLY_NDARRAY_DTYPES else name
        if t.dtype.name != stored_as or t.dim() != 1 or t.device.type == "meta" or t.stride() != (1,):
            raise self.error(where, f"a {name} numpy array must refer to a contiguous 1-D {stored_as} tensor with data")
        if t.numel() * t.element_size() != math.prod(shape) * np_dtype.itemsize:
            raise self.error(
                where,
                f"a numpy array of shape {shape} and dtype {name} needs {math.prod(shape) * np_dtype.itemsize} "
                f"bytes, but its tensor holds {t.numel() * t.element_size()}",
            )
        array = _host_numpy(t).view(np_dtype).reshape(shape)
        self.arrays[i] = array
        return array

    def node_npscalar(self, node, where):
        name, value = self.fields(node, where, "dtype", "v")
        np_dtype = _numpy_dtype_named(name) if type(name) is str else None
        if np_dtype is None:
            raise self.error(where, f"unsupported numpy dtype {_short(name)}")
        value = self.decode(value, where) if type(value) is dict else value
        expected = {"b": (bool,), "i": (int,), "u": (int,), "f": (int, float), "c": (int, float, complex)}
        kind = "f" if name == "bfloat16" else np_dtype.kind
        if type(value) not in expected.get(kind, ()):
            raise self.error(where, f"a numpy {name} scalar cannot hold {_short(value)}")
        if kind in "iu" and not np.iinfo(np_dtype).min <= value <= np.iinfo(np_dtype).max:
            raise self.error(where, f"{_short(value)} is out of the range of numpy {name}")
        try:
            if kind in "fc" and type(value) is int:  # through a Python float: some ml_dtypes releases take no int
                value = float(value)
            with np.errstate(over="raise"):  # a finite value beyond the dtype's range: not what save wrote
                return np_dtype.type(value)
        except (OverflowError, FloatingPointError):  # beyond the float range of the dtype (or of Python's float)
            raise self.error(where, f"{_short(value)} is out of the range of numpy {name}") from None

    def node_dtype(self, node, where):
        (v,) = self.fields(node, where, "v")
        if type(v) is not str or v not in BY_NAME:
            raise self.error(where, f"unknown dtype {_short(v)}")
        return BY_NAME[v]

    def node_ext(self, node, where):
        name, value = self.fields(node, where, "type", "v")
        entry = _EXTENSIONS_BY_NAME.get(name) if type(name) is str else None
        if entry is None:
            raise self.error(
                where,
                f"unknown extension type {_short(name)}; import the package that registers it "
                "(ember.serialization.register_serializable_type) before loading",
            )
        decoded = self.decode(value, f"{where}<{name}>")
        try:
            return entry.decode(decoded)
        except SerializationError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise self.error(where, f"cannot rebuild a {name}: {exc}") from None

    def node_device(self, node, where):
        (v,) = self.fields(node, where, "v")
        if type(v) is not str:
            raise self.error(where, f"a device must be a string, got {_short(v)}")
        try:
            return _device_cls(v)
        except (RuntimeError, TypeError, ValueError) as exc:
            raise self.error(where, f"invalid device {v!r}: {exc}") from None


_NODE_HANDLERS = {
    "tensor": _Decoder.node_tensor,
    "float": _Decoder.node_float,
    "complex": _Decoder.node_complex,
    "tuple": _Decoder.node_tuple,
    "size": _Decoder.node_size,
    "dict": _Decoder.node_dict,
    "odict": _Decoder.node_odict,
    "counter": _Decoder.node_counter,
    "set": _Decoder.node_set,
    "frozenset": _Decoder.node_frozenset,
    "bytes": _Decoder.node_bytes,
    "ndarray": _Decoder.node_ndarray,
    "npscalar": _Decoder.node_npscalar,
    "dtype": _Decoder.node_dtype,
    "device": _Decoder.node_device,
    "ext": _Decoder.node_ext,
}


def _host_numpy(t):
    """The values of a loaded tensor as a numpy array in host memory (its storage's view on CPU)."""
    return t._data if t.device.type == "cpu" else t._host_array()
