"""The compiler's debug output: one text file per pipeline stage, in pipeline order.

With ``EMBER_COMPILE_DEBUG=1`` (or ``config.debug = True``) every stage of a
compilation writes what it produced, readable, into the folder of the function
being compiled::

    ember_compile_debug/            (EMBER_COMPILE_DEBUG_DIR, config.debug_dir)
        forward/                    (one folder per compiled function)
            01_fx_graph.txt         the graph compile_fx received
            02_joint_graph.txt      forward+backward traced together (aot)
            03_forward_graph.txt    ...the partitioner's two halves, the loop IR,
            ...                     the scheduled kernels, the C++ source (cpu) or
            NN_triton.txt           the Triton module of every kernel (cuda graphs,
                                    or cpu ones under ``config.triton_on_cpu``)

The numbers give the order in which the stages ran. Nothing is written, and
:func:`stage` costs one check, when debugging is off.

A compilation sets the folder with :func:`compiling` (``compile_fx`` does this);
the stages call :func:`stage`::

    with debug.compiling("my_fn"):
        debug.stage("fx_graph", str(gm.graph))
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import threading
from pathlib import Path

from . import config

__all__ = ["enabled", "compiling", "stage", "current_folder", "current_handle", "resume"]

_ANONYMOUS = "anonymous"
# Per context (threads, asyncio tasks): the folder being written and its next file number.
_current: contextvars.ContextVar[_Folder | None] = contextvars.ContextVar("ember_inductor_debug", default=None)
_names_lock = threading.Lock()
_names_used: dict[str, int] = {}  # folder name -> compilations of that name in this process
_anonymous_folder: _Folder | None = None


class _Folder:
    """One compiled function's debug folder and the number of the next file in it."""

    def __init__(self, path: Path):
        self.path = path
        self.next_number = 1
        self._lock = threading.Lock()

    def take_number(self) -> int:
        with self._lock:
            number = self.next_number
            self.next_number += 1
            return number


def enabled() -> bool:
    """Whether debug output is on (``config.debug``, else ``EMBER_COMPILE_DEBUG=1``)."""
    return config.resolved_debug()


def _safe(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(name)).strip("._")
    return cleaned or _ANONYMOUS


def _new_folder(fn_name: str) -> _Folder:
    """A fresh folder for one compilation of ``fn_name``: ``name``, then ``name_1``, ``name_2``, ..."""
    base = _safe(fn_name)
    root = config.resolved_debug_dir()
    with _names_lock:
        seen = _names_used.get(str(root / base), 0)
        _names_used[str(root / base)] = seen + 1
    path = root / (base if seen == 0 else f"{base}_{seen}")
    path.mkdir(parents=True, exist_ok=True)
    # Files of an earlier run of the same program would interleave with this run's numbers.
    for old in path.glob("[0-9][0-9]_*.txt"):
        with contextlib.suppress(OSError):
            old.unlink()
    return _Folder(path)


@contextlib.contextmanager
def compiling(fn_name: str):
    """Send the :func:`stage` output of the block to ``fn_name``'s debug folder.

    Nested blocks (a backward compiled inside its forward's compilation) write into
    the innermost one. When debugging is off this does nothing.

    Args:
        fn_name (str): the compiled function's name (made safe for a file name).

    Yields:
        pathlib.Path or None: the folder, or None when debugging is off.
    """
    if not enabled():
        yield None
        return
    folder = _new_folder(fn_name)
    token = _current.set(folder)
    try:
        yield folder.path
    finally:
        _current.reset(token)


def current_folder() -> Path | None:
    """The folder :func:`stage` writes into now (None outside :func:`compiling` or when off)."""
    folder = _current.get()
    return folder.path if folder is not None and enabled() else None


def current_handle():
    """An opaque handle on the folder being written now (None when none), for :func:`resume`."""
    return _current.get()


@contextlib.contextmanager
def resume(handle):
    """Write into the folder of ``handle`` again (a backward graph compiled after its forward).

    Numbering continues where it stopped, so the files stay in pipeline order.
    ``resume(None)`` does nothing.
    """
    if handle is None:
        yield
        return
    token = _current.set(handle)
    try:
        yield
    finally:
        _current.reset(token)


def stage(name: str, text) -> Path | None:
    """Write one pipeline stage's output to ``NN_<name>.txt`` when debugging is on.

    Args:
        name (str): the stage, e.g. ``"joint_graph"``, ``"loop_ir"``, ``"cpp"``.
        text (str, object or callable): what the stage produced; non-strings are written as
            ``str(text)``. A zero-argument callable is called only when debugging is on, so a
            stage whose text is costly to build (``lambda: str(graph)``) costs nothing otherwise.

    Returns:
        pathlib.Path or None: the file written, or None when debugging is off.

    Outside a :func:`compiling` block the files go to the folder ``anonymous``.
    """
    if not enabled():
        return None
    global _anonymous_folder
    folder = _current.get()
    if folder is None:
        with _names_lock:
            root = config.resolved_debug_dir()
            if _anonymous_folder is None or _anonymous_folder.path.parent != root:
                _anonymous_folder = _Folder(root / _ANONYMOUS)
                _anonymous_folder.path.mkdir(parents=True, exist_ok=True)
            folder = _anonymous_folder
    path = folder.path / f"{folder.take_number():02d}_{_safe(name)}.txt"
    if callable(text) and not isinstance(text, str):
        text = text()
    content = text if isinstance(text, str) else str(text)
    path.write_text(content if content.endswith("\n") else content + "\n", encoding="utf-8")
    return path
