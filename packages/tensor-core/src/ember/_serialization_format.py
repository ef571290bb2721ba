"""The saved file format's shared parts: its constants, :class:`SerializationError`, the registry of
extension types, numpy dtype names and the header checksum.

The format itself is described in :mod:`ember.serialization`; :mod:`ember._serialization_encode` writes
it, :mod:`ember._serialization_read` and :mod:`ember._serialization_decode` read it.
"""

from __future__ import annotations

import json
import reprlib

import numpy as np

from ._dtype import BY_NAME

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


class SerializationError(RuntimeError):
    """A file that :func:`ember.load` cannot read: truncated, corrupted, hostile or not an ember/safetensors file.

    The message names the file and what is wrong with it.
    """

    __module__ = "ember.serialization"  # its public home, as before the format's code was split into modules


class _ExtensionType:
    """A type registered with :func:`ember.serialization.register_serializable_type`."""

    __slots__ = ("cls", "name", "encode", "decode")

    def __init__(self, cls, name, encode, decode):
        self.cls, self.name, self.encode, self.decode = cls, name, encode, decode


_EXTENSIONS_BY_TYPE: dict[type, _ExtensionType] = {}
_EXTENSIONS_BY_NAME: dict[str, _ExtensionType] = {}


def _extension_for(kind):
    """The registration covering type ``kind`` (its own or a base class's), or None."""
    for base in kind.__mro__:
        entry = _EXTENSIONS_BY_TYPE.get(base)
        if entry is not None:
            return entry
    return None


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


def _header_checksum(header):
    """SHA-256 (hex) of ``header`` in canonical JSON, without the checksum entry itself."""
    metadata = {k: v for k, v in header.get(_METADATA, {}).items() if k != _META_CHECKSUM}
    canonical = {**header, _METADATA: metadata}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    import hashlib  # here, not at the top: hashlib and tempfile are ~6 ms of `import ember`

    return hashlib.sha256(text.encode("ascii")).hexdigest()


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


class _Lazy:
    """A message fragment formatted only when it is printed (it names one of a million entries)."""

    __slots__ = ("template", "args")

    def __init__(self, template, *args):
        self.template, self.args = template, args

    def __str__(self):
        return self.template.format(*self.args)


def _contiguous_strides(shape):
    """The C-contiguous strides (in elements) of ``shape``."""
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return strides[::-1]
