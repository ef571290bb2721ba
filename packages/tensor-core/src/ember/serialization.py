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

import io
import os

from ._safe_globals import (  # noqa: F401 - PyTorch's torch.serialization names; no-ops (ember never unpickles)
    add_safe_globals,
    clear_safe_globals,
    get_safe_globals,
    get_unsafe_globals_in_checkpoint,
    safe_globals,
)
from ._serialization_encode import _Encoder
from ._serialization_format import (  # noqa: F401 - the format's constants are public here; tests read the checksum
    _EXTENSIONS_BY_NAME,
    _EXTENSIONS_BY_TYPE,
    FORMAT_VERSION,
    MAX_HEADER_BYTES,
    SerializationError,
    _ExtensionType,
    _header_checksum,
)
from ._serialization_read import _Reader

# register_serializable_type is public too (ember.serialization.register_serializable_type), for
# distributions; it stays out of __all__, which lists what `ember` itself re-exports.
__all__ = ["save", "load", "SerializationError"]

_CHUNK = 64 * 1024 * 1024  # bytes per read/write call on streams


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
            return _Reader(fh, repr(name), size, exact=True, chunk=_CHUNK).load(map_location)
    if hasattr(f, "read"):
        if isinstance(f, io.TextIOBase):
            raise TypeError("ember.load: f is a text-mode file; open it in binary mode ('rb')")
        label = getattr(f, "name", None)
        label = repr(label) if isinstance(label, (str, bytes)) else f"<{type(f).__name__} object>"
        return _Reader(f, label, _remaining_bytes(f), exact=False, chunk=_CHUNK).load(map_location)
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
