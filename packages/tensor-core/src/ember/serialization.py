"""Saving and loading tensors and the Python structures that hold them, without pickle.

:func:`save` writes an object (a tensor, or a state dict: nested dicts, lists
and tuples of tensors, Python scalars, strings and numpy arrays; optimizer and LR
scheduler state dicts) to a file that any safetensors reader can open, and
:func:`load` reads it back. Nothing in a file is ever executed: the structure is
JSON, the tensor data raw bytes, and every claim the file makes (sizes, offsets,
strides) is checked before it is used.

File layout (a valid safetensors file)::

    8 bytes    little-endian unsigned length N of the header
    N bytes    UTF-8 JSON header, padded with spaces so the data starts 8-byte aligned
    rest       the storages' bytes, back to back, in header order

The header maps one name per distinct *storage* (the allocation that a tensor
and its views share) to ``{"dtype": code, "shape": [n], "data_offsets":
[begin, end]}``: each storage is stored once, whole and byte-exact, as a flat
1-D tensor. Its dtype code is that of the tensors that view it when they all
share one element type (``"F32"`` for float32, ...); a complex storage is
stored as interleaved (real, imaginary) pairs (``"F32"`` for complex64,
``"F64"`` for complex128), because safetensors has no complex128; a storage
viewed with several element types is stored as ``"U8"`` bytes. A storage is
named after the first place in the object where a tensor uses it
(``"layer.weight"``).

``"__metadata__"`` (a string-to-string map, as safetensors requires) holds:

* ``"ember.format_version"``: ``"1"``;
* ``"ember.structure"``: JSON text ``{"storages": {name: {"device": "cpu",
  "nbytes": n}}, "tensors": [record, ...], "root": node}``. A tensor record is
  ``{"storage": name, "dtype": "float32", "shape": [...], "stride": [...],
  "storage_offset": k, "requires_grad": false}``; ``"storage"`` is ``null``
  for a meta tensor, which has no data. A node is JSON ``null``, ``true``/
  ``false``, a string, an integer, a finite float or a list (a Python list),
  or an object tagged by ``"t"``: ``{"t": "tensor", "i": k}`` (the k-th record;
  the same tensor object saved twice is one record and loads as one object),
  ``{"t": "tuple", "v": [...]}``, ``{"t": "size", "v": [...]}``
  (:class:`ember.Size`), ``{"t": "dict" | "odict", "items": [[key, value],
  ...]}`` (keys are nodes too, so int keys stay ints), ``{"t": "float", "v":
  "nan" | "inf" | "-inf"}``, ``{"t": "complex", "re": x, "im": y}``,
  ``{"t": "dtype", "v": "float32"}``, ``{"t": "device", "v": "cuda:0"}``,
  ``{"t": "counter", "items": [...]}`` (:class:`collections.Counter`, like a dict),
  ``{"t": "set" | "frozenset", "v": [...]}`` (elements are nodes of the kinds dict
  keys may be), ``{"t": "bytes", "i": k}`` (record k: a 1-D uint8 tensor),
  ``{"t": "ndarray", "dtype": name, "shape": [...], "i": k}`` (a numpy array: record k
  is a contiguous 1-D tensor of its values in C order, of dtype ``name`` when ember has
  it, else of uint8 bytes for ``uint16``/``uint32``/``uint64``; ``name`` is a numpy
  dtype name from that closed list, so object, string and structured arrays cannot be
  described), ``{"t": "npscalar", "dtype": name, "v": node}`` (a numpy scalar of that
  dtype holding the number node ``v``, exact for every listed dtype) and
  ``{"t": "ext", "type": name, "v": node}`` (an object of a type registered with
  :func:`register_serializable_type`, by the name it was registered under);
* ``"ember.header_sha256"``: the SHA-256 of the header in canonical JSON
  (keys sorted, no spaces, ASCII) without this entry, so a damaged header is
  detected even where it still parses. The data bytes are not checksummed.

A safetensors file written by another program (without ``ember.*`` metadata)
loads as a dict from tensor names to tensors.

Saving to a path writes a temporary file beside the target first,
``.<name>.ember-tmp-<host>-<pid>-<random>.tmp``, and renames it over the target
once complete. A process killed while saving leaves its temporary behind; the
next save to the same target deletes the temporaries of that target that are
abandoned: written on this machine by a process that no longer exists, or not
modified for over a day (a temporary of another machine sharing the directory,
or of a pid reused since). Temporaries of a live process are never touched.

Loading costs time and memory linear in the file's size: each JSON value of
the header is looked at a bounded number of times, tensors are made only for
records the structure refers to, and nothing is copied twice. Memory is bounded
by a small multiple of the header plus the data (Python objects for a list of
millions of small values are what bounds it).
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import io
import json
import math
import os
import reprlib
from collections import Counter, OrderedDict

import numpy as np

from ._device import canonical_device, get_backend
from ._device import device as _device_cls
from ._dtype import ALL_DTYPES, BY_NAME
from ._dtype import dtype as _dtype_cls
from ._meta import MetaArray
from ._safe_globals import (  # noqa: F401 - PyTorch's torch.serialization names; no-ops (ember never unpickles)
    add_safe_globals,
    clear_safe_globals,
    get_safe_globals,
    get_unsafe_globals_in_checkpoint,
    safe_globals,
)
from ._storage import Storage, array_data_ptr, storage_of
from ._tensor import Size, Tensor

# register_serializable_type is public too (ember.serialization.register_serializable_type), for
# distributions; it stays out of __all__, which lists what `ember` itself re-exports.
__all__ = ["save", "load", "SerializationError"]

FORMAT_VERSION = "1"
"""The version written to ``"ember.format_version"``; :func:`load` accepts only this one."""

MAX_HEADER_BYTES = 100_000_000
"""The largest header :func:`load` accepts (safetensors' own limit)."""

_META_VERSION = "ember.format_version"
_META_STRUCTURE = "ember.structure"
_META_CHECKSUM = "ember.header_sha256"
_METADATA = "__metadata__"

_MAX_NDIM = 64  # numpy's limit
_MAX_INT = 2**63 - 1  # sizes, strides and offsets are int64 in every framework we interoperate with
_CHUNK = 64 * 1024 * 1024  # bytes per read/write call on streams

_BY_CODE = {d._safetensors_code: d for d in ALL_DTYPES}
_FIELD_SETS = {}  # the field names of a node kind -> the keys its JSON object must have
_SHAREABLE = frozenset((type(None), bool, int, str))
_PLAIN_JSON = frozenset((type(None), bool, int, float, str))  # nodes that decode to themselves
_ENTRY_FIELDS = frozenset(("dtype", "shape", "data_offsets"))
_RECORD_FIELDS = frozenset(("storage", "dtype", "shape", "stride", "storage_offset", "requires_grad"))
_META_DEVICE = _device_cls("meta")
_CPU = _device_cls("cpu")


class SerializationError(RuntimeError):
    """A file that :func:`ember.load` cannot read: truncated, corrupted, hostile or not an ember/safetensors file.

    The message names the file and what is wrong with it.
    """


# ---------------------------------------------------------------------------
# extension types


class _ExtensionType:
    __slots__ = ("cls", "name", "encode", "decode")

    def __init__(self, cls, name, encode, decode):
        self.cls, self.name, self.encode, self.decode = cls, name, encode, decode


_EXTENSIONS_BY_TYPE: dict[type, _ExtensionType] = {}
_EXTENSIONS_BY_NAME: dict[str, _ExtensionType] = {}


def register_serializable_type(cls, name, encode, decode):
    """Let :func:`save` and :func:`load` handle instances of ``cls`` (and its subclasses).

    This is how a distribution makes its own type saveable without pickle (``ember.fx``
    registers ``GraphModule``). :func:`save` calls ``encode(obj)``, which must return a
    value made of the supported types (dicts, lists, tuples, tensors, scalars, strings,
    other registered types), and stores it tagged with ``name``. :func:`load` decodes that
    value and passes it to ``decode(value)``, which rebuilds the object.

    Safety: the file only names a type; it never names code. ``decode`` is looked up
    among the functions registered *in this process* (by packages the user imported),
    so loading runs no code that the file chose. A ``decode`` must in turn treat
    ``value`` as untrusted data: validate it and raise :class:`SerializationError`
    (or ``ValueError``/``TypeError``/``KeyError``, reported as one) for anything
    unexpected, and never ``eval``/``exec``/import what it contains.

    Args:
        cls: the type.
        name (str): the name stored in files, unique (``"ember.fx.GraphModule"``).
        encode (callable): ``obj -> saveable value``.
        decode (callable): ``value -> obj``.

    Raises:
        ValueError: if ``name`` or ``cls`` is already registered (to something else).
        TypeError: if ``cls`` is not a type, ``name`` not a string or a function not callable.
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_serializable_type: cls must be a type, got {cls!r}")
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_serializable_type: name must be a non-empty string, got {name!r}")
    if not callable(encode) or not callable(decode):
        raise TypeError("register_serializable_type: encode and decode must be callable")
    for table, key in ((_EXTENSIONS_BY_NAME, name), (_EXTENSIONS_BY_TYPE, cls)):
        if key in table:
            raise ValueError(f"register_serializable_type: {key!r} is already registered (as {table[key].name!r})")
    entry = _ExtensionType(cls, name, encode, decode)
    _EXTENSIONS_BY_TYPE[cls] = entry
    _EXTENSIONS_BY_NAME[name] = entry


def _extension_for(kind):
    """The registration covering type ``kind`` (its own or a base class's), or None."""
    for base in kind.__mro__:
        entry = _EXTENSIONS_BY_TYPE.get(base)
        if entry is not None:
            return entry
    return None


# ---------------------------------------------------------------------------
# save


def save(
    obj,
    f,
    pickle_module=None,
    pickle_protocol=None,
    _use_new_zipfile_serialization=True,
    _disable_byteorder_record=False,
):
    """Save ``obj`` to ``f`` in a safetensors-compatible file, without pickle.

    ``obj`` may be a tensor or any nesting of ``dict`` (keys: str, int, float,
    bool, None or tuples of those), ``collections.OrderedDict``,
    ``collections.Counter``, ``list``, ``tuple``, ``set`` and ``frozenset`` (of
    what dict keys may be), :class:`ember.Size`, tensors, Python scalars (``int``,
    ``float`` including nan and infinities, ``bool``, ``complex``, ``None``,
    ``str``, ``bytes``), numpy arrays and numpy scalars of numeric dtypes (bool,
    int8 to int64, uint8 to uint64, float16, bfloat16, float32, float64,
    complex64, complex128), :class:`ember.dtype`, :class:`ember.device` and
    instances of types registered with :func:`register_serializable_type`
    (``ember.fx.GraphModule``). This covers what PyTorch programs checkpoint
    besides tensors: optimizer and LR-scheduler state dicts, epoch
    counters, metrics, configuration dicts. Types are kept exactly (a tuple loads as a
    tuple, an OrderedDict as an OrderedDict, a numpy array as a numpy array with its
    dtype and shape; like pickle, each array is written as a contiguous copy). Each storage is written once, so
    views keep sharing memory after :func:`load`, with their strides and
    storage offsets. Meta tensors keep shape, dtype and strides only. Tensors
    on other devices are copied to host memory for writing and remember their
    device. Tensor subclasses are saved as plain tensors; ``.grad`` and the
    autograd graph are not saved (``requires_grad`` is).

    Args:
        obj: the object to save.
        f (str, os.PathLike or binary file object): a path, written atomically
            (to a temporary file in the same directory, flushed and fsynced,
            then renamed over ``f``, and the directory fsynced), so a crash or
            error never leaves a partial file and leaves an existing ``f``
            untouched (a temporary left by a killed save is removed by the next
            save to ``f``: see the module documentation); or a file object opened for binary writing, written at
            its current position.
        pickle_module, pickle_protocol, _use_new_zipfile_serialization, _disable_byteorder_record: PyTorch's
            pickling options, accepted so that PyTorch programs run and ignored:
            ember writes no pickle.

    Raises:
        TypeError: if ``obj`` holds an object of a type that cannot be saved
            (the message gives where, e.g. ``obj['opt'][2]``), or ``f`` is
            neither a path nor a writable file object.
        ValueError: if ``obj`` contains itself (a reference cycle).
        OSError: if writing fails (any existing file at ``f`` is left as it was).

    Example:
        >>> import os, tempfile
        >>> import ember
        >>> weight = ember.arange(6, dtype=ember.float32).reshape(2, 3)
        >>> state = {"weight": weight, "weight_t": weight.t(), "step": 10}
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = os.path.join(tmp, "checkpoint.safetensors")
        ...     ember.save(state, path)
        ...     loaded = ember.load(path)
        >>> loaded["step"]
        10
        >>> loaded["weight_t"].tolist()
        [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
        >>> loaded["weight"].untyped_storage() is loaded["weight_t"].untyped_storage()
        True
    """
    del pickle_module, pickle_protocol, _use_new_zipfile_serialization, _disable_byteorder_record  # no pickle
    plan = _Encoder().plan(obj)
    if isinstance(f, (str, os.PathLike)):
        _atomic_write(os.fspath(f), plan)
    elif hasattr(f, "write"):
        if isinstance(f, io.TextIOBase):
            raise TypeError("ember.save: f is a text-mode file; open it in binary mode ('wb')")
        _write_payload(f, plan)
        flush = getattr(f, "flush", None)
        if flush is not None:
            flush()
    else:
        raise TypeError(
            f"ember.save: f must be a path (str or os.PathLike) or a binary file object, not {type(f).__name__}"
        )


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


def _contiguous_strides(shape):
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return strides[::-1]


_MAPPING_TAGS = {dict: "dict", OrderedDict: "odict", Counter: "counter"}

# numpy dtypes ember has no tensor dtype for, saved as raw bytes; every name here and in
# ember's dtype table is accepted for arrays and scalars, nothing else (no object, str,
# datetime, structured or extended-precision arrays).
_BYTES_ONLY_NDARRAY_DTYPES = ("uint16", "uint32", "uint64")


def _numpy_dtype_named(name):
    """The numpy dtype of an accepted dtype name (``"bfloat16"`` is ml_dtypes'), or None."""
    if name in _BYTES_ONLY_NDARRAY_DTYPES:
        return np.dtype(name)
    dt = BY_NAME.get(name)
    return None if dt is None else np.dtype(dt.numpy_dtype)


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


def _header_checksum(header):
    """SHA-256 (hex) of ``header`` in canonical JSON, without the checksum entry itself."""
    metadata = {k: v for k, v in header.get(_METADATA, {}).items() if k != _META_CHECKSUM}
    canonical = {**header, _METADATA: metadata}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    import hashlib  # here, not at the top: hashlib and tempfile are ~6 ms of `import ember`

    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _write_all(fh, data):
    """Write every byte of ``data`` (raw files may accept fewer per call)."""
    view = memoryview(data).cast("B")
    while len(view):
        written = fh.write(view[:_CHUNK])
        if written is None:
            raise BlockingIOError("ember.save: the stream is non-blocking and would block; pass a blocking file")
        view = view[written:]


def _write_payload(fh, plan):
    """Write the whole file (length, header, storages) to ``fh`` at its position."""
    _write_all(fh, len(plan.header).to_bytes(8, "little"))
    _write_all(fh, plan.header)
    for storage in plan.storages:
        _write_all(fh, storage.bytes())


def _atomic_write(path, plan):
    """Write ``plan`` to ``path`` through a temporary file and a rename, fsyncing both."""
    target = os.path.realpath(path)  # keep a symlink at ``path`` pointing where it did
    directory, filename = os.path.split(target)
    import tempfile  # (imported on first save, as hashlib in _header_checksum)

    _remove_stale_temporaries(directory, filename)
    prefix = f"{_temporary_prefix(filename)}{_host_tag()}-{os.getpid()}-"
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            _write_payload(fh, plan)
            fh.flush()
            os.fsync(fh.fileno())
            _chmod_like_open(fh.fileno(), target)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_directory(directory)


# A save to a path writes ``.<name>.ember-tmp-<host>-<pid>-<random>`` beside it first. A process
# killed while writing (SIGKILL, power loss) leaves that file behind; the next save of the same
# target removes it once it is clearly abandoned (see _is_stale).
_TMP_TAG = "ember-tmp"
_STALE_AFTER_S = 24 * 3600
_MAX_NAME_IN_PREFIX = 150  # the temporary's name stays under the usual 255-byte limit


def _temporary_prefix(filename):
    return f".{filename[:_MAX_NAME_IN_PREFIX]}.{_TMP_TAG}-"


def _host_tag():
    """This machine's name, made of letters, digits and ``_`` (a directory may be shared over the network)."""
    uname = getattr(os, "uname", None)
    name = uname().nodename if uname is not None else os.environ.get("COMPUTERNAME", "")
    return "".join(c if c.isascii() and c.isalnum() else "_" for c in name)[:64] or "_"


def _remove_stale_temporaries(directory, filename):
    """Delete the temporaries that earlier, killed saves to ``filename`` in ``directory`` left behind.

    Best effort: a file that cannot be listed, examined or removed is left alone.
    """
    prefix = _temporary_prefix(filename)
    try:
        with os.scandir(directory or ".") as listing:
            candidates = [entry for entry in listing if entry.name.startswith(prefix)]
    except OSError:
        return
    for entry in candidates:
        try:
            if entry.is_file(follow_symlinks=False) and _is_stale(entry.name[len(prefix) :], entry.stat().st_mtime):
                os.unlink(entry.path)
        except OSError:
            pass


def _is_stale(tag, mtime):
    """Whether a temporary whose name ends in ``tag`` (``<host>-<pid>-<random>``) was abandoned.

    It was when the process that wrote it, on this machine, has ended, or when it was last
    modified over a day ago (a live save writes its temporary continuously; this also covers
    temporaries written by another machine sharing the directory, and pids reused since).
    A temporary of this process (a concurrent save in another thread) is never stale.
    """
    import time

    host, _, rest = tag.partition("-")
    pid_text = rest.partition("-")[0]
    if host == _host_tag() and pid_text.isdigit() and os.name == "posix":
        pid = int(pid_text)
        if pid == os.getpid():
            return False
        try:
            os.kill(pid, 0)  # signal 0: only asks whether the process exists
        except ProcessLookupError:
            return True
        except (PermissionError, OverflowError, OSError):
            pass  # it exists (another user's) or cannot be asked
        # A live process with that pid may be another one that reused it: judge by age too.
    return time.time() - mtime > _STALE_AFTER_S


def _chmod_like_open(fd, target):
    """Give the new file the mode ``open(target, "wb")`` would: the old file's, or 0o666 minus the umask."""
    if not hasattr(os, "fchmod"):
        return
    try:
        mode = os.stat(target).st_mode & 0o7777
    except OSError:
        mode = 0o666 & ~_umask()
    os.fchmod(fd, mode)


def _umask():
    try:  # Linux reports it without changing it (os.umask would race with other threads)
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_directory(directory):
    """Make the rename durable; a no-op where directories cannot be opened (Windows)."""
    flags = getattr(os, "O_DIRECTORY", None)
    if flags is None:
        return
    fd = os.open(directory or ".", os.O_RDONLY | flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------
# load


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None, **pickle_load_args):
    """Load an object saved by :func:`save` (or any safetensors file) from ``f``.

    Loading never executes code from the file. Every size, offset, stride and
    name in the header is checked against the file before memory is allocated
    or data is read, so a truncated, corrupted or hostile file raises
    :class:`SerializationError` instead of allocating what the header claims.

    Args:
        f (str, os.PathLike or binary file object): a path, or a file object
            opened for binary reading, read from its current position (and left
            just past the saved object).
        map_location: where tensors load. ``None``: the device they were
            saved from. A device or string (``"cpu"``, ``"cuda:1"``): every
            tensor goes there. A dict from saved device strings to devices
            (``{"cuda:0": "cpu"}``): those saved on a listed device go to its
            value, the others stay. A callable taking the saved device string
            (``"cuda:0"``) and returning a device, a string, or ``None`` to keep
            the saved device; or PyTorch's two-argument form ``fn(storage,
            location)`` returning the storage where it should be
            (``lambda storage, loc: storage``, ``lambda s, loc: s.cuda(1)``): it is
            called with an empty CPU tensor standing for the storage, and the
            device of what it returns is where the storage loads. Meta tensors stay
            on meta; mapping a device to ``"meta"`` loads its tensors without data.
        pickle_module: accepted for PyTorch compatibility and ignored: nothing is unpickled.
        weights_only (bool): accepted for PyTorch compatibility; loading is
            always weights-only, whatever the value, since nothing is unpickled.
            (So :func:`add_safe_globals` and :class:`safe_globals` have nothing to allow.)
        mmap (bool, optional): accepted for PyTorch compatibility; ember reads the
            tensor bytes into memory whatever its value.
        **pickle_load_args: PyTorch's unpickler options (``encoding=...``), ignored.

    Returns:
        The saved object, with the types it had (tensors, dict, OrderedDict,
        Counter, list, tuple, set, frozenset, ember.Size, scalars, strings,
        bytes, numpy arrays and scalars, dtypes, devices). Tensors
        that shared a storage share one again; a tensor saved twice loads as
        one object. A plain safetensors file loads as a dict from names to
        tensors.

    Raises:
        SerializationError: if the file is truncated, corrupted, hostile, of
            an unknown format version, or if a saved device is not available
            here and ``map_location`` does not map it elsewhere.
        TypeError: if ``f`` is neither a path nor a readable file object, or
            ``map_location`` is of an unsupported type.
        OSError: if the file cannot be opened or read.

    Example:
        >>> import io
        >>> import ember
        >>> buffer = io.BytesIO()
        >>> ember.save({"x": ember.ones(2), 3: (1.5, None)}, buffer)
        >>> _ = buffer.seek(0)
        >>> loaded = ember.load(buffer, map_location="cpu")
        >>> loaded[3]
        (1.5, None)
        >>> loaded["x"].tolist()
        [1.0, 1.0]
    """
    del pickle_module, weights_only, mmap, pickle_load_args  # no pickle: weights-only in effect, always
    if isinstance(f, (str, os.PathLike)):
        name = os.fspath(f)
        with open(name, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            return _Reader(fh, repr(name), size, exact=True).load(map_location)
    if hasattr(f, "read"):
        if isinstance(f, io.TextIOBase):
            raise TypeError("ember.load: f is a text-mode file; open it in binary mode ('rb')")
        label = getattr(f, "name", None)
        label = repr(label) if isinstance(label, (str, bytes)) else f"<{type(f).__name__} object>"
        return _Reader(f, label, _remaining_bytes(f), exact=False).load(map_location)
    raise TypeError(
        f"ember.load: f must be a path (str or os.PathLike) or a binary file object, not {type(f).__name__}"
    )


def _remaining_bytes(fh):
    """Bytes from the position of ``fh`` to its end, or ``None`` for streams that cannot seek."""
    try:
        if not fh.seekable():
            return None
        position = fh.tell()
        end = fh.seek(0, os.SEEK_END)
        fh.seek(position)
    except (AttributeError, OSError, ValueError):
        return None
    return max(end - position, 0)


class _StorageEntry:
    """One validated data entry of the header."""

    __slots__ = ("name", "dtype", "shape", "begin", "end")

    def __init__(self, name, dtype, shape, begin, end):
        self.name, self.dtype, self.shape, self.begin, self.end = name, dtype, shape, begin, end

    @property
    def nbytes(self):
        return self.end - self.begin


def _call_map_location(fn, saved):
    """The device a ``map_location`` callable picks for a storage saved on ``saved``.

    Ember's form takes the location and returns a device (or None); PyTorch's takes
    ``(storage, location)`` and returns the storage moved where it belongs. The second is
    called with an empty CPU tensor for the storage (it has ``.cpu()``, ``.cuda()``,
    ``.to()``), and the returned tensor's device is the answer.
    """
    try:
        two_arguments = len(inspect.signature(fn).parameters) >= 2
    except (TypeError, ValueError):  # a callable whose signature can't be read: ember's form
        two_arguments = False
    if not two_arguments:
        return fn(saved)
    moved = fn(Tensor._make(np.empty(0, np.uint8), _CPU), saved)
    if moved is None:
        return None
    if not isinstance(moved, Tensor):
        raise TypeError(
            "ember.load: map_location(storage, location) must return the storage (a tensor), "
            f"not {type(moved).__name__}"
        )
    return moved.device


class _Reader:
    """Reads and validates one saved object from an open binary file."""

    def __init__(self, fh, label, remaining, *, exact):
        self.fh = fh
        self.label = label
        self.remaining = remaining  # bytes available from the start position, None if unknown
        self.exact = exact  # a whole file: no bytes may follow the data

    def error(self, what):
        return SerializationError(f"ember.load: {self.label}: {what}")

    # -- reading bytes ----------------------------------------------------------

    def read_bytes(self, n, what):
        """Exactly ``n`` bytes; memory grows only with bytes actually read."""
        parts, got = [], 0
        while got < n:
            chunk = self.fh.read(min(n - got, _CHUNK))
            if not chunk:
                raise self.error(f"file is truncated: expected {n} bytes of {what}, found {got}")
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    def read_into(self, array, what):
        """Fill the uint8 numpy ``array`` from the file."""
        view = memoryview(array).cast("B")
        got, n = 0, len(view)
        readinto = getattr(self.fh, "readinto", None)
        while got < n:
            if readinto is not None:
                count = readinto(view[got : got + _CHUNK])
            else:
                chunk = self.fh.read(min(n - got, _CHUNK))
                count = len(chunk)
                view[got : got + count] = chunk
            if not count:
                raise self.error(f"file is truncated: expected {n} bytes of {what}, found {got}")
            got += count

    def skip(self, n, what):
        if n == 0:
            return
        try:
            seekable = self.fh.seekable()
        except (AttributeError, OSError, ValueError):
            seekable = False
        if seekable:
            self.fh.seek(n, os.SEEK_CUR)
            return
        left = n
        while left:
            chunk = self.fh.read(min(left, _CHUNK))
            if not chunk:
                raise self.error(f"file is truncated: expected {n} bytes of {what}, found {n - left}")
            left -= len(chunk)

    # -- the header -------------------------------------------------------------

    def read_header(self):
        if self.remaining is not None and self.remaining < 8:
            raise self.error(f"file is truncated: {self.remaining} bytes, too short for the 8-byte header length")
        first = self.read_bytes(8, "header length")
        n = int.from_bytes(first, "little")
        too_long = n > MAX_HEADER_BYTES or (self.remaining is not None and n > self.remaining - 8)
        if too_long and (first[:4] == b"PK\x03\x04" or first[:1] == b"\x80"):  # a zip archive, or a pickle
            raise self.error(
                "this is a PyTorch checkpoint (torch.save's zip archive or pickle), which ember never loads, since "
                "unpickling runs code from the file. Convert it once with PyTorch: safetensors.torch.save_file("
                "torch.load(path), 'model.safetensors') for a flat dict of tensors, then "
                "ember.load('model.safetensors')"
            )
        if n < 2:
            raise self.error(f"header length {n} is too small for a JSON header")
        if n > MAX_HEADER_BYTES:
            raise self.error(
                f"not an ember/safetensors file: its first 8 bytes give a header length of {n}, over the limit of "
                f"{MAX_HEADER_BYTES} bytes (a PyTorch .pt pickle or a corrupted file? ember never unpickles; convert "
                "PyTorch checkpoints to safetensors first)"
            )
        if self.remaining is not None and n > self.remaining - 8:
            raise self.error(
                f"header length {n} is larger than the rest of the file ({self.remaining - 8} bytes): truncated"
            )
        raw = self.read_bytes(n, "header")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(f"header is not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
        del raw  # up to MAX_HEADER_BYTES: not kept alive while the JSON is parsed
        if not text.startswith("{"):
            raise self.error("header does not start with '{': not a safetensors file")
        try:
            header = json.loads(text, object_pairs_hook=_reject_duplicate_keys, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:
            raise self.error(f"header is not valid JSON: {exc}") from None
        if type(header) is not dict:
            raise self.error("header is not a JSON object")
        return n, header

    def parse_metadata(self, header):
        """The ``"__metadata__"`` map of ``header`` (strings to strings), validated."""
        metadata = header.get(_METADATA, {})
        if type(metadata) is not dict or not all(type(k) is str and type(v) is str for k, v in metadata.items()):
            raise self.error(f"header field {_METADATA!r} must map strings to strings")
        return metadata

    def parse_entries(self, header):
        """The data entries of ``header``, validated, in the header's order, and the data size.

        Empties ``header`` as it goes, so that each entry's parsed JSON is freed once validated:
        a header of a million entries is never held twice.
        """
        header.pop(_METADATA, None)
        entries = []
        while header:
            name, info = header.popitem()  # the last entry: the list is reversed below
            if type(info) is not dict or info.keys() != _ENTRY_FIELDS:
                raise self.error(f"header entry {name!r} must have exactly the fields dtype, shape and data_offsets")
            code = info["dtype"]
            dt = _BY_CODE.get(code) if type(code) is str else None
            if dt is None:
                raise self.error(
                    f"header entry {name!r} has unknown dtype code {_short(code)}; known: {', '.join(_BY_CODE)}"
                )
            shape = self.int_list(info["shape"], "shape of header entry {!r}", name)
            offsets = self.int_list(info["data_offsets"], "data_offsets of header entry {!r}", name)
            if len(offsets) != 2 or offsets[0] > offsets[1]:
                raise self.error(
                    f"header entry {name!r} has data_offsets {offsets}; expected [begin, end] with begin <= end"
                )
            expected = math.prod(shape) * dt.itemsize
            if expected != offsets[1] - offsets[0]:
                raise self.error(
                    f"header entry {name!r}: shape {shape} of {code} needs {expected} bytes but data_offsets "
                    f"{offsets} span {offsets[1] - offsets[0]}"
                )
            entries.append(_StorageEntry(name, dt, shape, offsets[0], offsets[1]))
        entries.reverse()
        position = 0
        for entry in sorted(entries, key=_file_order):
            if entry.begin != position:
                problem = "overlaps the previous entry" if entry.begin < position else "leaves a gap before it"
                raise self.error(
                    f"header entry {entry.name!r} starts at data offset {entry.begin} but the previous entry ends at "
                    f"{position}: it {problem}"
                )
            position = entry.end
        return entries, position

    def int_list(self, value, what, *args):
        """``value`` if it is a list of at most 64 integers in [0, 2**63 - 1]; ``what.format(*args)`` names it.

        (The name is formatted only for the message: this runs for every entry of a header.)
        """
        if type(value) is not list or len(value) > _MAX_NDIM:
            what = what.format(*args)
            raise self.error(f"{what} must be a list of at most {_MAX_NDIM} integers, got {_short(value)}")
        for v in value:
            if type(v) is not int or not 0 <= v <= _MAX_INT:
                raise self.error(f"{what.format(*args)} must hold integers in [0, 2**63 - 1], got {_short(value)}")
        return value

    def check_data_size(self, header_length, data_size):
        if self.remaining is None:
            return
        available = self.remaining - 8 - header_length
        if data_size > available:
            raise self.error(
                f"file is truncated: the header describes {data_size} bytes of data, the file has {available}"
            )
        if self.exact and data_size < available:
            raise self.error(
                f"file has {available - data_size} unexpected bytes after the {data_size} bytes of data "
                "the header describes"
            )

    # -- the whole file -----------------------------------------------------------

    def load(self, map_location):
        # Loading builds up to millions of small acyclic objects (parsed JSON, records, tensors):
        # the cyclic garbage collector, triggered again and again by their allocation, would
        # rescan them all each time and take a third of the time, for nothing to collect.
        with _gc_paused():
            header_length, header = self.read_header()
            metadata = self.parse_metadata(header)
            ember_format = any(k.startswith("ember.") for k in metadata)
            if ember_format:
                self.check_ember_metadata(header, metadata)  # before parse_entries empties the header
            entries, data_size = self.parse_entries(header)
            del header
            self.check_data_size(header_length, data_size)
            if self.remaining is None:
                # A stream of unknown length: buffer the data first, so memory grows with the bytes
                # actually present, never with what the header claims.
                self.fh = io.BytesIO(self.read_bytes(data_size, "data"))
            if ember_format:
                return self.load_ember(entries, metadata, map_location)
            return self.load_plain(entries, map_location)

    def load_plain(self, entries, map_location):
        """A safetensors file from elsewhere: a dict of tensors, each its own storage."""
        target = self.target_device(map_location, "cpu")
        storages = self.read_storages(entries, target)
        return {
            e.name: self.make_tensor((e.name, e.dtype, e.shape, _contiguous_strides(e.shape), 0, False), storages)
            for e in entries
        }

    def check_ember_metadata(self, header, metadata):
        """Check the format version, the metadata entries and the header checksum of an ember file."""
        version = metadata.get(_META_VERSION)
        if version != FORMAT_VERSION:
            raise self.error(
                f"unsupported ember format version {_short(version)}; this ember reads version {FORMAT_VERSION!r}"
            )
        for key in (_META_STRUCTURE, _META_CHECKSUM):
            if key not in metadata:
                raise self.error(f"metadata lacks {key!r}: corrupted file")
        try:
            checksum = _header_checksum(header)
        except (ValueError, TypeError, RecursionError):  # e.g. 1e999 parses as inf, which canonical JSON lacks
            checksum = None
        if checksum != metadata[_META_CHECKSUM]:
            raise self.error("header checksum mismatch: the header is corrupted")

    def load_ember(self, entries, metadata, map_location):
        text = metadata.pop(_META_STRUCTURE)  # (the header is checked; its text is not needed after parsing)
        # Only a structure that mentions them (or escapes characters, which could spell them) can hold
        # numpy arrays or bytes: the common state dict skips the walk that looks for them.
        host_nodes = any(word in text for word in ('"ndarray"', '"bytes"', "\\u"))
        try:
            structure = json.loads(text, object_pairs_hook=_SharedSmallObjects(), parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:
            raise self.error(f"the structure in the metadata is not valid JSON: {exc}") from None
        del text
        if type(structure) is not dict or set(structure) != {"storages", "tensors", "root"}:
            raise self.error("the structure must be an object with exactly the fields storages, tensors and root")
        by_name = {e.name: e for e in entries}
        devices = self.parse_storage_table(structure["storages"], by_name)
        records = self.parse_tensor_records(structure["tensors"], by_name)
        targets = {name: self.target_device(map_location, saved) for name, saved in devices.items()}
        for name in _host_storages(structure["root"], records) if host_nodes else ():
            targets[name] = _CPU  # numpy arrays and bytes live in host memory whatever map_location says
        storages = self.read_storages(entries, targets)
        try:
            return _Decoder(self, records, storages).decode(structure["root"], "root")
        except RecursionError:
            raise self.error("the structure is nested too deeply") from None

    def parse_storage_table(self, table, by_name):
        if type(table) is not dict:
            raise self.error("structure field 'storages' must be an object")
        if set(table) != set(by_name):
            missing = sorted(set(table) - set(by_name))
            extra = sorted(set(by_name) - set(table))
            raise self.error(
                "the structure's storages and the header's entries differ"
                + (f"; missing from the header: {missing[:5]}" if missing else "")
                + (f"; not described by the structure: {extra[:5]}" if extra else "")
            )
        devices = {}
        for name, info in table.items():
            if type(info) is not dict or set(info) != {"device", "nbytes"}:
                raise self.error(f"storage {name!r} must have exactly the fields device and nbytes")
            if info["nbytes"] != by_name[name].nbytes or type(info["nbytes"]) is not int:
                raise self.error(
                    f"storage {name!r} claims {_short(info['nbytes'])} bytes but its header entry holds "
                    f"{by_name[name].nbytes}"
                )
            saved = info["device"]
            if type(saved) is not str:
                raise self.error(f"storage {name!r} has a device that is not a string: {_short(saved)}")
            devices[name] = saved
        return devices

    def parse_tensor_records(self, records, by_name):
        if type(records) is not list:
            raise self.error("structure field 'tensors' must be a list")
        parsed = []
        for i, r in enumerate(records):
            what = _Lazy("tensor record {}", i)  # formatted only in messages
            if type(r) is not dict or r.keys() != _RECORD_FIELDS:
                raise self.error(f"{what} must have exactly the fields {', '.join(sorted(_RECORD_FIELDS))}")
            dt = BY_NAME.get(r["dtype"]) if type(r["dtype"]) is str else None
            if dt is None:
                raise self.error(f"{what} has unknown dtype {_short(r['dtype'])}")
            shape = self.int_list(r["shape"], "shape of tensor record {}", i)
            stride = self.int_list(r["stride"], "stride of tensor record {}", i)
            if len(stride) != len(shape):
                raise self.error(f"{what} has shape {shape} but stride {stride}: their lengths differ")
            offset = r["storage_offset"]
            if type(offset) is not int or not 0 <= offset <= _MAX_INT:
                raise self.error(f"{what} has storage_offset {_short(offset)}; expected an integer >= 0")
            if type(r["requires_grad"]) is not bool:
                raise self.error(f"{what} has requires_grad {_short(r['requires_grad'])}; expected true or false")
            if r["requires_grad"] and not (dt.is_floating_point or dt.is_complex):
                raise self.error(f"{what} requires grad but has dtype {dt.name}, which cannot")
            name = r["storage"]
            numel = math.prod(shape)
            if name is None:  # a meta tensor: no data to bound it but PyTorch's int64 limits
                if numel > _MAX_INT:
                    raise self.error(f"{what} has shape {_short(shape)}: {numel} elements, more than 2**63 - 1")
                if numel and (offset + 1 + sum((n - 1) * s for n, s in zip(shape, stride))) * dt.itemsize > _MAX_INT:
                    raise self.error(
                        f"{what} (shape {_short(shape)}, stride {_short(stride)}, storage_offset {offset}) spans "
                        "more than 2**63 - 1 bytes"
                    )
            elif type(name) is not str or name not in by_name:
                raise self.error(f"{what} refers to storage {_short(name)}, which the file does not contain")
            else:
                nbytes = by_name[name].nbytes
                if numel == 0:
                    if offset * dt.itemsize > nbytes:
                        raise self.error(
                            f"{what} starts at element {offset}, past the end of its {nbytes}-byte storage {name!r}"
                        )
                else:
                    last = offset + sum((n - 1) * s for n, s in zip(shape, stride))
                    if (last + 1) * dt.itemsize > nbytes:
                        raise self.error(
                            f"{what} (shape {shape}, stride {stride}, storage_offset {offset}, {dt.name}) reaches byte "
                            f"{(last + 1) * dt.itemsize} of its {nbytes}-byte storage {name!r}"
                        )
            parsed.append((name, dt, shape, stride, offset, r["requires_grad"]))
            records[i] = None  # its JSON is no longer needed
        return parsed

    def target_device(self, map_location, saved):
        """The device a storage saved on ``saved`` (a string) loads to."""
        if map_location is None:
            target = saved
        elif isinstance(map_location, (str, _device_cls)):
            target = map_location
        elif isinstance(map_location, dict):
            target = saved
            for key, value in map_location.items():
                if str(key) == saved:
                    target = value
        elif callable(map_location):
            target = _call_map_location(map_location, saved)
            if target is None:
                target = saved
        else:
            raise TypeError(
                "ember.load: map_location must be None, a device, a string, a dict or a callable, "
                f"not {type(map_location).__name__}"
            )
        try:
            if saved == "meta":
                return _META_DEVICE
            return canonical_device(target)
        except (RuntimeError, TypeError, ValueError) as exc:
            raise self.error(
                f"cannot load a storage saved on {saved!r} to {_short(target)}: {exc}. "
                "Pass map_location (for example map_location='cpu') to load it elsewhere"
            ) from None

    def read_storages(self, entries, targets):
        """Each storage's bytes, read in file order and placed on its target device.

        ``targets`` is one device for all, or a dict from storage names to devices.
        """
        result = {}
        empty = np.empty(0, dtype=np.uint8)  # one for every empty CPU storage: nothing can be written to it
        for e in sorted(entries, key=_file_order):
            target = targets if type(targets) is _device_cls else targets[e.name]
            if e.nbytes == 0 and target is _CPU:
                result[e.name] = Storage(empty, 0, target)
                continue
            if target.type == "meta":
                self.skip(e.nbytes, f"storage {e.name!r}")
                result[e.name] = Storage(None, e.nbytes, target)
                continue
            data = np.empty(e.nbytes, dtype=np.uint8)
            self.read_into(data, f"storage {e.name!r}")
            if target.type != "cpu":
                data = get_backend(target.type).from_numpy(data, target.index)
            result[e.name] = Storage(data, e.nbytes, target)
        return result

    def make_tensor(self, record, storages):
        """The tensor of a validated record ``(storage name, dtype, shape, stride, offset, requires_grad)``."""
        name, dt, shape, stride, offset, requires_grad = record
        storage = storages.get(name) if name is not None else None
        if storage is None or storage.device.type == "meta":
            array = MetaArray(shape, dt.numpy_dtype, stride, offset)
            t = Tensor._make(array, _META_DEVICE)
            if storage is not None:
                t._storage = storage
        else:
            try:
                array = get_backend(storage.device.type).strided_view(
                    storage, tuple(shape), tuple(stride), offset, dt.numpy_dtype
                )
            except (ValueError, TypeError, MemoryError, RuntimeError) as exc:
                raise self.error(f"cannot view storage {name!r} as shape {shape}, stride {stride}: {exc}") from None
            t = Tensor._make(array, storage.device)
            t._storage = storage  # shared by every tensor of this storage: views see each other's writes
            t._strides, t._offset = tuple(stride), offset
        if requires_grad:
            t.requires_grad_(True)
        return t


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
            return np_dtype.type(value)
        except OverflowError:  # an integer beyond the float range, for a float or complex dtype
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


def _host_storages(root, records):
    """Names of the storages that ``"ndarray"`` and ``"bytes"`` nodes under ``root`` refer to.

    Walks the (not yet validated) structure iteratively, so deep nesting cannot overflow the
    stack; malformed nodes are skipped here and reported by the decoder.
    """
    names, stack = set(), [root]
    while stack:
        node = stack.pop()
        if type(node) is dict:
            i = node.get("i")
            if node.get("t") in ("ndarray", "bytes") and type(i) is int and 0 <= i < len(records):
                if records[i][0] is not None:
                    names.add(records[i][0])
            node = node.values()
        elif type(node) is not list:
            continue
        stack += [v for v in node if type(v) is list or type(v) is dict]  # (scalars are most of a big list)
    return names


def _host_numpy(t):
    """The values of a loaded tensor as a numpy array in host memory (its storage's view on CPU)."""
    return t._data if t.device.type == "cpu" else t._host_array()


def _reject_duplicate_keys(pairs):
    result = dict(pairs)  # (called for every JSON object: the check is one length comparison)
    if len(result) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {_short(key)}")
            seen.add(key)
    return result


class _SharedSmallObjects:
    """``object_pairs_hook`` for the structure: rejects duplicate keys, and parses repeated small nodes once.

    A list of a million ``{"t": "tensor", "i": 0}`` (or ``{"t": "dtype", "v": "float32"}``) then
    holds one dict a million times instead of a million dicts. Only two-field objects of
    scalar values are shared (the tagged nodes that get repeated), floats excepted (0.0 and -0.0
    are equal keys); nothing mutates them (the decoder changes lists in place, never objects);
    and only the first few thousand distinct ones are remembered, so distinct nodes cost nothing.
    """

    _LIMIT = 4096

    def __init__(self):
        self.seen = {}

    def __call__(self, pairs):
        if len(pairs) == 2:  # (unrolled: this runs for every object of the structure)
            (k0, v0), (k1, v1) = pairs
            t0, t1 = type(v0), type(v1)
            if t0 in _SHAREABLE and t1 in _SHAREABLE and k0 != k1:
                key = (k0, t0, v0, k1, t1, v1)  # (the types too: 1 and true are equal keys)
                shared = self.seen.get(key)
                if shared is None:
                    shared = {k0: v0, k1: v1}
                    if len(self.seen) < self._LIMIT:
                        self.seen[key] = shared
                return shared
        return _reject_duplicate_keys(pairs)


@contextlib.contextmanager
def _gc_paused():
    """Disable the cyclic garbage collector inside the block (if it was enabled)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class _Lazy:
    """A message fragment formatted only when it is printed (it names one of a million entries)."""

    __slots__ = ("template", "args")

    def __init__(self, template, *args):
        self.template, self.args = template, args

    def __str__(self):
        return self.template.format(*self.args)


def _file_order(entry):
    return entry.begin, entry.end


def _reject_constant(name):
    raise ValueError(f"{name} is not valid JSON")


_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxlevel, _SHORT_REPR.maxlist, _SHORT_REPR.maxdict, _SHORT_REPR.maxtuple = 3, 6, 4, 6
_SHORT_REPR.maxstring = _SHORT_REPR.maxlong = _SHORT_REPR.maxother = 40


def _short(value, limit=60):
    """``repr(value)``, shortened for error messages about hostile input.

    Bounded work whatever the value (reprlib looks at a few elements and levels only), so a
    message about a list of a million items or a 4000-digit integer costs nothing.
    """
    text = _SHORT_REPR.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
