"""What :func:`ember.save` writes: an object turned into the header's JSON structure, tensor records and
the storages to write (see :mod:`ember.serialization` for the format).
"""

from __future__ import annotations

import json
import math
from collections import Counter, OrderedDict

import numpy as np

from ._device import device as _device_cls
from ._device import get_backend
from ._dtype import dtype as _dtype_cls
from ._serialization_format import (
    _BYTES_ONLY_NDARRAY_DTYPES,
    _META_CHECKSUM,
    _META_STRUCTURE,
    _META_VERSION,
    _METADATA,
    FORMAT_VERSION,
    _contiguous_strides,
    _extension_for,
    _header_checksum,
    _numpy_dtype_named,
)
from ._storage import array_data_ptr, storage_of
from ._tensor import Size, Tensor


class _StoragePlan:
    """One storage to write: where its bytes come from and how it is labelled."""

    __slots__ = ("name", "storage", "device", "dtypes", "host_bytes", "nbytes")

    def __init__(self, name, storage, device, host_bytes=None):
        self.name = name
        self.storage = storage
        self.device = device
        self.dtypes = set()
        self.host_bytes = host_bytes  # set for copies made at plan time; else read at write time
        self.nbytes = storage.nbytes if storage is not None else host_bytes.nbytes

    def code_and_count(self):
        """The safetensors dtype code and element count this storage is written with."""
        element_types = {d.to_real() for d in self.dtypes}
        if len(element_types) == 1:
            (element,) = element_types
            if self.nbytes % element.itemsize == 0:
                return element._safetensors_code, self.nbytes // element.itemsize
        return "U8", self.nbytes

    def bytes(self):
        """The whole storage as a flat, C-contiguous uint8 numpy array in host memory."""
        if self.host_bytes is not None:
            return self.host_bytes
        base = self.storage.base
        if self.device.type != "cpu":
            base = get_backend(self.device.type).to_numpy(base)
        flat = np.ascontiguousarray(base).reshape(-1).view(np.uint8)
        if flat.nbytes != self.nbytes:
            raise RuntimeError(
                f"ember.save: storage '{self.name}' on {self.device} exported {flat.nbytes} bytes, "
                f"expected {self.nbytes}"
            )
        return flat


class _Plan:
    """Everything :func:`save` writes: the header bytes and the storages in file order."""

    __slots__ = ("header", "storages")

    def __init__(self, header, storages):
        self.header = header
        self.storages = storages


class _Encoder:
    """Turns an object into the JSON structure, the tensor records and the storages to write."""

    def __init__(self):
        self.records = []
        self.tensor_index = {}  # id(tensor) -> record index
        self.storages = {}  # id(storage) -> _StoragePlan
        self.storage_order = []
        self.names = set()
        self.keep_alive = []  # ids stay unique only while the objects live
        self.active = set()  # ids of containers being encoded, to detect cycles
        self.ndarray_nodes = {}  # id(numpy array) -> its node: one array saved twice loads as one

    def plan(self, obj):
        root = self.encode(obj, "obj", ())
        structure = {
            "storages": {p.name: {"device": str(p.device), "nbytes": p.nbytes} for p in self.storage_order},
            "tensors": self.records,
            "root": root,
        }
        header = {}
        offset = 0
        for p in self.storage_order:
            code, count = p.code_and_count()
            header[p.name] = {"dtype": code, "shape": [count], "data_offsets": [offset, offset + p.nbytes]}
            offset += p.nbytes
        metadata = {
            _META_VERSION: FORMAT_VERSION,
            _META_STRUCTURE: json.dumps(structure, separators=(",", ":"), ensure_ascii=True, allow_nan=False),
        }
        header = {_METADATA: metadata, **header}
        metadata[_META_CHECKSUM] = _header_checksum(header)
        text = json.dumps(header, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode("ascii")
        text += b" " * (-len(text) % 8)  # 8 + len(text) is then a multiple of 8: aligned data
        return _Plan(text, self.storage_order)

    # -- nodes ------------------------------------------------------------------

    def encode(self, obj, where, path):
        kind = type(obj)
        if obj is None or kind is bool or kind is str:
            return obj
        if kind is int:
            return obj
        if kind is float:
            return _encode_float(obj)
        if kind is complex:
            return {"t": "complex", "re": _encode_float(obj.real), "im": _encode_float(obj.imag)}
        if isinstance(obj, Tensor) and _extension_for(kind) is None:  # sparse tensors are an extension type
            return {"t": "tensor", "i": self.tensor(obj, where, path)}
        if kind is _dtype_cls:
            return {"t": "dtype", "v": obj.name}
        if kind is _device_cls:
            return {"t": "device", "v": str(obj)}
        if kind is Size:
            return {"t": "size", "v": [int(s) for s in obj]}
        if kind is np.ndarray:
            return self.ndarray(obj, where, path)
        if isinstance(obj, np.generic):
            return _encode_numpy_scalar(obj, where)
        if kind is bytes:
            return {"t": "bytes", "i": self.byte_tensor(obj, path)}
        if kind in (set, frozenset):
            elements = [self.encode_key(v, where) for v in obj]
            return {"t": kind.__name__, "v": elements}
        if kind in (list, tuple, dict, OrderedDict, Counter):
            if id(obj) in self.active:
                raise ValueError(f"ember.save: {where} contains itself; reference cycles cannot be saved")
            self.active.add(id(obj))
            try:
                if kind is list:
                    return [self.encode(v, f"{where}[{i}]", (*path, str(i))) for i, v in enumerate(obj)]
                if kind is tuple:
                    return {
                        "t": "tuple",
                        "v": [self.encode(v, f"{where}[{i}]", (*path, str(i))) for i, v in enumerate(obj)],
                    }
                items = []
                for k, v in obj.items():
                    items.append([self.encode_key(k, where), self.encode(v, f"{where}[{k!r}]", (*path, str(k)))])
                return {"t": _MAPPING_TAGS[kind], "items": items}
            finally:
                self.active.discard(id(obj))
        extension = _extension_for(kind)
        if extension is not None:
            if id(obj) in self.active:
                raise ValueError(f"ember.save: {where} contains itself; reference cycles cannot be saved")
            self.active.add(id(obj))
            try:
                value = self.encode(extension.encode(obj), f"{where}<{extension.name}>", path)
            finally:
                self.active.discard(id(obj))
            return {"t": "ext", "type": extension.name, "v": value}
        raise TypeError(
            f"ember.save: cannot save {where} of type {kind.__module__}.{kind.__qualname__}; supported are "
            "tensors, dict, OrderedDict, collections.Counter, list, tuple, set, frozenset, ember.Size, int, float, "
            "bool, complex, str, bytes, None, numpy arrays and scalars of numeric dtypes, ember.dtype, "
            "ember.device and types registered with ember.serialization.register_serializable_type "
            "(other subclasses than of Tensor are not, since loading must not run their code)"
        )

    def encode_key(self, key, where):
        kind = type(key)
        if key is None or kind in (bool, int, float, str):
            return self.encode(key, where, ())
        if kind is tuple:
            return {"t": "tuple", "v": [self.encode_key(k, where) for k in key]}
        raise TypeError(
            f"ember.save: cannot save the key {key!r} of {where}: dict keys must be str, int, float, bool, None "
            f"or tuples of those, not {kind.__qualname__}"
        )

    # -- numpy arrays and bytes ---------------------------------------------------

    def ndarray(self, array, where, path):
        """A numpy array as a 1-D tensor record of its bytes' element type, plus dtype and shape.

        Dtypes ember has go in as tensors of that dtype (a safetensors reader sees ``"F32"``);
        uint16/32/64 as uint8 bytes. Like pickle, each array is saved as a contiguous copy:
        views of one array do not share memory after loading.
        """
        node = self.ndarray_nodes.get(id(array))
        if node is not None:
            return node
        name = _check_ndarray_dtype(array.dtype, where)
        # A fresh native-byte-order copy: a view would make the tensor's storage its whole base array.
        flat = np.array(array, dtype=array.dtype.newbyteorder("="), order="C", copy=True).reshape(-1)
        if name in _BYTES_ONLY_NDARRAY_DTYPES:
            flat = flat.view(np.uint8)
        node = {"t": "ndarray", "dtype": name, "shape": [int(n) for n in array.shape]}
        node["i"] = self.tensor(Tensor._make(flat), where, path)
        self.ndarray_nodes[id(array)] = node
        self.keep_alive.append(array)
        return node

    def byte_tensor(self, data, path):
        """The record index of a uint8 tensor holding ``data`` (a bytes object)."""
        return self.tensor(Tensor._make(np.frombuffer(data, dtype=np.uint8)), "bytes", path)

    # -- tensors ----------------------------------------------------------------

    def tensor(self, t, where, path):
        index = self.tensor_index.get(id(t))
        if index is not None:
            return index
        self.keep_alive.append(t)
        dt = t.dtype
        shape = [int(s) for s in t.shape]
        device = t.device
        record = {
            "storage": None,
            "dtype": dt.name,
            "shape": shape,
            "stride": [int(s) for s in t.stride()],
            "storage_offset": int(t.storage_offset()) if device.type == "meta" else 0,
            "requires_grad": bool(t.requires_grad),
        }
        if device.type != "meta":
            storage = storage_of(t)
            plan = self.storages.get(id(storage))
            if plan is None and storage.base is not None:
                plan = self.storages[id(storage)] = self.new_storage(path, storage, device, None)
                self.keep_alive.append(storage)
            if plan is not None:
                record["storage_offset"] = _element_offset(t, storage, where)
            else:
                # A device whose storage cannot be exported whole: save this tensor's values alone.
                values = np.ascontiguousarray(t._host_array())
                plan = self.new_storage(path, None, device, values.reshape(-1).view(np.uint8))
                record["stride"] = _contiguous_strides(shape)
            plan.dtypes.add(dt)
            record["storage"] = plan.name
        self.tensor_index[id(t)] = len(self.records)
        self.records.append(record)
        return self.tensor_index[id(t)]

    def new_storage(self, path, storage, device, host_bytes):
        base = ".".join(path) or "tensor"
        if base == _METADATA:
            base = "tensor"
        name, n = base, 1
        while name in self.names:
            n += 1
            name = f"{base}#{n}"
        self.names.add(name)
        plan = _StoragePlan(name, storage, device, host_bytes)
        self.storage_order.append(plan)
        return plan


def _element_offset(t, storage, where):
    """``t``'s offset into ``storage`` in elements (the view's own record, else from addresses)."""
    if t._offset is not None:  # views record their offset; an empty one may not point into its storage
        return t._offset
    itemsize = t.element_size()
    byte_offset = array_data_ptr(t._data) - storage.data_ptr()
    if t.numel() == 0 and not 0 <= byte_offset <= storage.nbytes:
        return 0  # an empty view's address is not meaningful; nothing is read through it
    if byte_offset % itemsize:
        raise ValueError(
            f"ember.save: {where} starts {byte_offset} bytes into its storage, which is not a multiple of its "
            f"element size {itemsize}; save a .clone() of it instead"
        )
    return byte_offset // itemsize




_MAPPING_TAGS = {dict: "dict", OrderedDict: "odict", Counter: "counter"}


def _check_ndarray_dtype(dtype, where):
    """The name :func:`save` records for numpy dtype ``dtype``.

    Raises:
        TypeError: for dtypes that cannot be saved without pickle (object, strings, ...).
    """
    name = dtype.name
    if _numpy_dtype_named(name) is None or dtype.fields is not None:
        raise TypeError(
            f"ember.save: cannot save {where}, a numpy array or scalar of dtype {dtype}: only numeric dtypes "
            "(bool, int8-64, uint8-64, float16, bfloat16, float32, float64, complex64, complex128) can be saved "
            "without pickle; convert it (e.g. .astype(np.float64), .tolist()) first"
        )
    return name


def _encode_numpy_scalar(value, where):
    """A numpy scalar (``np.float32(1.5)``) as its dtype name and the Python value it holds exactly."""
    name = _check_ndarray_dtype(value.dtype, where)
    python_value = value.item()
    if isinstance(python_value, complex):
        node_value = {"t": "complex", "re": _encode_float(python_value.real), "im": _encode_float(python_value.imag)}
    elif isinstance(python_value, float):
        node_value = _encode_float(python_value)
    else:  # bool or int: exact in JSON
        node_value = python_value
    return {"t": "npscalar", "dtype": name, "v": node_value}


def _encode_float(x):
    if math.isfinite(x):
        return x
    return {"t": "float", "v": "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")}
