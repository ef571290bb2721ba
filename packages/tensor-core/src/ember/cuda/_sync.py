"""Host synchronisation on the cuda device: the one place that knows when the host waits for the GPU.

A CUDA program runs ahead of the GPU: each op queues a kernel and returns. The host waits for the GPU only
when it needs a value (a device-to-host copy: ``Tensor.item()``, ``.tolist()``, ``.cpu()``, ``bool(t)``, a
data-dependent shape such as ``nonzero``) or is told to (``ember.cuda.synchronize()``, ``Stream.synchronize()``).
Such a wait inside a training step stalls it: the host can't queue the next kernels before the GPU has run
the previous ones.

Every such wait goes through :func:`host_sync`:

* ember's own synchronising calls name themselves (``host_sync("Tensor.item()", wait)``);
* CuPy's own waits (``ndarray.get()``, and through it ``int()``, ``bool()``, ``float()`` of a CuPy array,
  ``cupy.asnumpy``, ``Stream``/``Device.synchronize()``) are reported through CuPy's synchronisation
  detector, whose declaration :func:`install_cupy_hook` points here (``cupy._core.syncdetect``), so a
  kernel that reads a value back without saying so is found too.

:func:`set_sync_debug_mode` is PyTorch's ``torch.cuda.set_sync_debug_mode``: ``"default"`` (0) does nothing,
``"warn"`` (1) issues a ``UserWarning`` naming the synchronising call, ``"error"`` (2) raises ``RuntimeError``
before the wait. In the default mode with nothing recording, :func:`host_sync` costs one global read.

:func:`record` collects the reasons instead (tests and the benchmark's sync report use it).
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings

__all__ = ["set_sync_debug_mode", "get_sync_debug_mode", "host_sync", "record", "install_cupy_hook"]

_MODES = {"default": 0, "warn": 1, "error": 2}

_mode = 0
_recorders = []  # lists that record() hands out; each gets every reason
_active = False  # _mode != 0 or a recorder is open: the only thing host_sync reads in the default mode
_muted = 0  # > 0 while a wait that host_sync has reported runs (CuPy's own declaration inside it is the same wait)


def set_sync_debug_mode(debug_mode):
    """Set what happens when the host waits for a cuda device (PyTorch's ``torch.cuda.set_sync_debug_mode``).

    Args:
        debug_mode (str or int): ``"default"`` or ``0``: nothing; ``"warn"`` or ``1``: a ``UserWarning`` naming
            the synchronising call; ``"error"`` or ``2``: a ``RuntimeError`` naming it, raised before the wait.

    Raises:
        RuntimeError: for any other value.

    Example:
        >>> import ember
        >>> ember.cuda.set_sync_debug_mode("warn")
        >>> ember.cuda.get_sync_debug_mode()
        1
        >>> ember.cuda.set_sync_debug_mode(0)
    """
    global _mode
    if isinstance(debug_mode, str):
        mode = _MODES.get(debug_mode)
        if mode is None:
            raise RuntimeError(
                f"invalid value of debug_mode {debug_mode!r}, expected one of `default`, `warn`, `error`"
            )
    elif isinstance(debug_mode, int) and not isinstance(debug_mode, bool) and debug_mode in (0, 1, 2):
        mode = debug_mode
    else:
        raise RuntimeError(f"invalid value of debug_mode {debug_mode!r}, expected one of 0, 1, 2 "
                           "(or `default`, `warn`, `error`)")
    _mode = mode
    _update()


def get_sync_debug_mode():
    """The current mode of :func:`set_sync_debug_mode` as an int: 0 (default), 1 (warn) or 2 (error)."""
    return _mode


def _update():
    global _active
    _active = bool(_mode or _recorders)


@contextlib.contextmanager
def record():
    """Collect the reason of every host synchronisation inside the block in a list (whatever the mode).

    Example:
        >>> from ember.cuda import _sync
        >>> with _sync.record() as reasons:
        ...     _sync.host_sync("Tensor.item()")
        >>> reasons[0].startswith("Tensor.item()")
        True
    """
    reasons = []
    _recorders.append(reasons)
    _update()
    try:
        yield reasons
    finally:
        _recorders.remove(reasons)
        _update()


def host_sync(reason, wait=None):
    """Declare that the host waits for the GPU because of ``reason``, then run ``wait()`` (the waiting call).

    Args:
        reason (str): the synchronising call, as the user would name it (``"Tensor.item()"``).
        wait (callable, optional): the call that waits; run after the declaration, with CuPy's own
            declaration of the same wait muted. Its result is returned.

    Returns:
        ``wait()``'s result (None without ``wait``).

    Raises:
        RuntimeError: in the ``"error"`` mode, before ``wait`` runs.
    """
    global _muted
    if not _active:
        return None if wait is None else wait()
    _report(reason)
    if wait is None:
        return None
    _muted += 1
    try:
        return wait()
    finally:
        _muted -= 1


def _report(reason):
    text = f"{reason} (at {_where()})"
    for reasons in _recorders:
        reasons.append(text)
    if _mode == 1:
        warnings.warn(f"called a synchronizing CUDA operation: {text}", UserWarning, stacklevel=_user_stacklevel())
    elif _mode == 2:
        raise RuntimeError(f"called a synchronizing CUDA operation: {text}")


_roots = []  # the ember package's directories (ember-core's and the other distributions' ember/ folders)


def _frames():
    frame = sys._getframe(0)
    while frame is not None:
        yield frame
        frame = frame.f_back


_CUPY_FOLDERS = tuple(f"{os.sep}{name}{os.sep}" for name in ("cupy", "cupyx", "cupy_backends"))


def _is_cupy(path):
    return any(folder in path for folder in _CUPY_FOLDERS)


def _is_ember(path):
    if not _roots:
        package = sys.modules.get("ember")
        folders = getattr(package, "__path__", None) or [os.path.dirname(os.path.dirname(__file__))]
        _roots.extend(os.path.join(os.path.abspath(f), "") for f in folders)
    return path.startswith(tuple(_roots))


def _where():
    """Where the synchronisation comes from: the innermost ember function (past this module and CuPy), the
    outermost ember function the program called, and the program's line, as ``name (file:line)``."""
    inner = outer = user = None
    for frame in _frames():
        path = frame.f_code.co_filename
        if path == __file__ or _is_cupy(path):
            continue
        if _is_ember(path):
            inner = inner or frame
            outer = frame
            continue
        user = frame
        break
    parts = []
    for frame in (inner, outer, user):
        if frame is not None and _describe(frame) not in parts:
            parts.append(_describe(frame))
    return " <- ".join(parts) or "unknown"


def _describe(frame):
    code = frame.f_code
    name = getattr(code, "co_qualname", code.co_name)
    return f"{name} ({os.path.basename(code.co_filename)}:{frame.f_lineno})"


def _user_stacklevel():
    # warnings.warn counts from _report's caller: point at the first frame outside ember and CuPy
    level = 1
    frame = sys._getframe(1)
    while frame is not None:
        path = frame.f_code.co_filename
        if not (_is_ember(path) or _is_cupy(path)):
            return level
        frame = frame.f_back
        level += 1
    return 1


# -- CuPy's synchronisation detector -------------------------------------------------------------------------


def _cupy_declared():
    # CuPy calls this (as cupy._core.syncdetect._declare_synchronize) before each of its device-to-host copies
    # and synchronize() calls; a wait that host_sync already reported is muted
    if _active and not _muted:
        _report("a device-to-host copy or wait inside CuPy")
    if _cupy_original is not None:
        _cupy_original()


_cupy_original = None


def install_cupy_hook(syncdetect=None):
    """Route CuPy's synchronisation declarations (``cupy._core.syncdetect._declare_synchronize``, which CuPy calls
    before ``ndarray.get()`` and each ``synchronize()``) through :func:`host_sync`. Done once, when the cuda backend
    starts; a CuPy without that module is left alone (ember's own synchronising calls are still reported).

    Args:
        syncdetect (module, optional): the module to patch (tests pass a stand-in); CuPy's by default.

    Returns:
        bool: whether the hook is in place.
    """
    global _cupy_original
    if syncdetect is None:
        try:
            from cupy._core import syncdetect
        except ImportError:
            return False
    current = getattr(syncdetect, "_declare_synchronize", None)
    if current is None:
        return False
    if current is not _cupy_declared:
        _cupy_original = current  # CuPy's own check (cupyx.allow_synchronize) keeps working
        syncdetect._declare_synchronize = _cupy_declared
    return True
