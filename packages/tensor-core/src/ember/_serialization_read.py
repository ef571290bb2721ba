"""How :func:`ember.load` reads a file: the header parsed and validated against the file, the storages
read, the tensors made (see :mod:`ember.serialization` for the format). Every claim of the file is
checked before it is used; :mod:`ember._serialization_decode` rebuilds the saved object.
"""

from __future__ import annotations

import inspect
import io
import json
import math
import os

import numpy as np

from ._device import canonical_device, get_backend
from ._device import device as _device_cls
from ._dtype import ALL_DTYPES, BY_NAME
from ._gc import paused as gc_paused
from ._meta import MetaArray
from ._serialization_decode import _Decoder
from ._serialization_format import (
    _MAX_INT,
    _MAX_NDIM,
    _META_CHECKSUM,
    _META_STRUCTURE,
    _META_VERSION,
    _METADATA,
    FORMAT_VERSION,
    MAX_HEADER_BYTES,
    SerializationError,
    _contiguous_strides,
    _header_checksum,
    _Lazy,
    _short,
)
from ._storage import Storage
from ._tensor import Tensor

_BY_CODE = {d._safetensors_code: d for d in ALL_DTYPES}
_SHAREABLE = frozenset((type(None), bool, int, str))
_ENTRY_FIELDS = frozenset(("dtype", "shape", "data_offsets"))
_RECORD_FIELDS = frozenset(("storage", "dtype", "shape", "stride", "storage_offset", "requires_grad"))
_META_DEVICE = _device_cls("meta")
_CPU = _device_cls("cpu")


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

    def __init__(self, fh, label, remaining, *, exact, chunk):
        self.fh = fh
        self.label = label
        self.remaining = remaining  # bytes available from the start position, None if unknown
        self.exact = exact  # a whole file: no bytes may follow the data
        self.chunk = chunk  # bytes per read call

    def error(self, what):
        return SerializationError(f"ember.load: {self.label}: {what}")

    # -- reading bytes ----------------------------------------------------------

    def read_bytes(self, n, what):
        """Exactly ``n`` bytes; memory grows only with bytes actually read."""
        parts, got = [], 0
        while got < n:
            chunk = self.fh.read(min(n - got, self.chunk))
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
                count = readinto(view[got : got + self.chunk])
            else:
                chunk = self.fh.read(min(n - got, self.chunk))
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
            chunk = self.fh.read(min(left, self.chunk))
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
        with gc_paused():
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


def _file_order(entry):
    return entry.begin, entry.end


def _reject_constant(name):
    raise ValueError(f"{name} is not valid JSON")
