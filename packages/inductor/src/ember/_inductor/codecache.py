"""Compiled C++ kernels on disk, keyed by the hash of everything that shapes them.

:meth:`CppCodeCache.load` turns a C++17 source with ``extern "C"`` entry points
into a loaded shared library::

    lib = CppCodeCache.load(source)          # compiles once, then reuses
    lib.kernel.argtypes = [...]

Where the files go: ``<cache_dir>/<key>/<name>.cpp`` and ``<name>.so``, with
``cache_dir()`` from :mod:`ember._inductor.config` (``EMBER_INDUCTOR_CACHE_DIR``)
and ``key`` the sha256 of the source, the compiler command and flags, the
compiler's version string, the CPU it compiles for (``-march=native``) and the
version of the cache's layout (:data:`_LAYOUT`). Whatever changes one of these gets
a new folder, so a cache is never stale; deleting the folder is always safe.

Three levels of reuse, fastest first:

1. a dict in this process (key -> loaded library);
2. the ``.so`` on disk (another process, an earlier run) - loaded without compiling;
3. compiling, under a per-key file lock (``fcntl.flock``) so that two processes
   that miss at once build it once: the second waits, then finds the ``.so``.

Files are written atomically: into a temporary name in the same folder, then
``os.replace`` onto the final name, so a reader never sees half a file.

Flags: ``-O3 -march=native -fopenmp -shared -fPIC -std=c++17`` plus
``-fno-math-errno`` (lets ``sqrt`` and friends compile to one instruction; it
changes no value) and ``-ffp-contract=off`` (no fused multiply-add: ``a*b+c``
rounds twice, as eager's separate kernels do). ``-ffast-math`` is NOT used:
it reorders reductions and assumes no NaN/inf, and compiled code must give
eager's answers, NaN and inf included.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from . import config
from .exc import CppCompileError

try:  # POSIX; elsewhere two processes may both compile a key (the result is still correct)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

__all__ = ["CppCodeCache", "cache_dir", "cpp_compiler", "compiler_version", "cpp_flags", "cache_key"]

BASE_FLAGS = (
    "-O3",
    "-march=native",
    "-fopenmp",
    "-shared",
    "-fPIC",
    "-std=c++17",
    "-fno-math-errno",
    "-ffp-contract=off",
)


def cache_dir() -> Path:
    """The root folder of compiled kernels (``config.cache_dir``, ``EMBER_INDUCTOR_CACHE_DIR``).

    Returns:
        Path: the folder (created when a kernel is first written, not here).
    """
    return config.resolved_cache_dir()


def cpp_compiler() -> list[str]:
    """The C++ compiler command: ``config.cxx``, else ``$CXX``, else g++/clang++/c++ on PATH.

    Returns:
        list[str]: the program and any arguments the setting carried (``CXX="ccache g++"``).

    Raises:
        CppCompileError: no C++ compiler is found.
    """
    setting = config.cxx or os.environ.get("CXX")
    if setting:
        return shlex.split(setting)
    for name in ("g++", "clang++", "c++"):
        path = shutil.which(name)
        if path:
            return [path]
    raise CppCompileError(
        "<no source>", ["g++"], "no C++ compiler found: install g++ or clang++, or set CXX (or config.cxx)"
    )


@functools.cache
def compiler_version(command: tuple[str, ...]) -> str:
    """The first line of ``<command> --version`` (part of the cache key), computed once per command."""
    try:
        result = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise CppCompileError("<no source>", [*command, "--version"], f"cannot run the C++ compiler: {exc}") from exc
    lines = (result.stdout or result.stderr).strip().splitlines()
    return lines[0] if lines else "unknown"


@functools.cache
def _cpu_signature() -> str:
    """What ``-march=native`` depends on: the machine and, on Linux, the CPU's model and flags."""
    parts = [platform.machine()]
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith(("model name", "flags", "Features")):
                parts.append(line)
            if len(parts) >= 3:
                break
    return "\n".join(parts)


def cpp_flags(extra_flags=()) -> list[str]:
    """The full flag list: :data:`BASE_FLAGS`, ``config.extra_cflags``, then ``extra_flags``."""
    return [*BASE_FLAGS, *config.extra_cflags, *extra_flags]


#: The version of this cache's layout (what a key folder holds and how a library in it is loaded). A
#: library is a function of its source, command, flags, compiler and CPU alone (the sources include
#: system headers only), so the package's version is not in the key: reading it imported
#: importlib.metadata, a fifth of a warm start. Bump this when the folder's contents change meaning.
_LAYOUT = "ember-inductor C++ cache v1"


def cache_key(source: str, command, flags) -> str:
    """The sha256 hex digest naming a kernel's folder.

    Args:
        source (str): the C++ source.
        command (list[str]): the compiler command.
        flags (list[str]): the compile flags.

    Returns:
        str: 64 hex digits.
    """
    digest = hashlib.sha256()
    for part in (
        source,
        "\0".join(command),
        "\0".join(flags),
        compiler_version(tuple(command)),
        _cpu_signature(),
        _LAYOUT,
    ):
        digest.update(part.encode())
        digest.update(b"\x00\x01")  # a separator no part contains, so parts can't run together
    return digest.hexdigest()


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def _file_lock(path: Path):
    """An exclusive lock between processes on ``path`` (created if absent), held for the block."""
    with open(path, "a+b") as handle:
        if fcntl is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


class CppCodeCache:
    """Compile-once, load-many for generated C++ (see the module docstring).

    Attributes:
        compile_count (int): compiler runs this process made (the tests read it).
    """

    _loaded: dict[str, ctypes.CDLL] = {}
    _lock = threading.Lock()  # threads of one process: the flock is per open file, not per thread
    compile_count = 0

    @classmethod
    def load(cls, source: str, *, name: str = "kernel", extra_flags=()) -> ctypes.CDLL:
        """Compile ``source`` (or reuse an earlier build) and load it.

        Args:
            source (str): a C++17 translation unit; its entry points are ``extern "C"``.
            name (str): the file name of the ``.cpp``/``.so`` in the key's folder.
            extra_flags (sequence of str): more compiler flags (part of the key).

        Returns:
            ctypes.CDLL: the loaded library.

        Raises:
            CppCompileError: the compiler failed; it carries the kept ``.cpp`` path, the
                command and the compiler's output.
            ValueError: ``name`` is not a plain file name.
        """
        if not name or os.sep in name or name.startswith("."):
            raise ValueError(f"CppCodeCache.load: name must be a plain file name, got {name!r}")
        command = cpp_compiler()
        flags = cpp_flags(extra_flags)
        key = cache_key(source, command, flags)
        with cls._lock:
            lib = cls._loaded.get(key + "/" + name)
            if lib is None:
                lib = ctypes.CDLL(str(cls._build(source, name, key, command, flags)))
                cls._loaded[key + "/" + name] = lib
            return lib

    @classmethod
    def path_of(cls, source: str, *, name: str = "kernel", extra_flags=()) -> Path:
        """Where ``load`` keeps (or would keep) the ``.so`` of ``source``."""
        command = cpp_compiler()
        return cache_dir() / cache_key(source, command, cpp_flags(extra_flags)) / f"{name}.so"

    @classmethod
    def clear(cls) -> None:
        """Forget the libraries loaded in this process (the files on disk stay)."""
        with cls._lock:
            cls._loaded.clear()

    @classmethod
    def _build(cls, source, name, key, command, flags) -> Path:
        folder = cache_dir() / key
        so_path = folder / f"{name}.so"
        if so_path.is_file():  # complete: it only ever appears through os.replace
            return so_path
        folder.mkdir(parents=True, exist_ok=True)
        with _file_lock(folder / f"{name}.lock"):
            if so_path.is_file():  # another process built it while we waited
                return so_path
            cpp_path = folder / f"{name}.cpp"
            _write_atomic(cpp_path, source)
            fd, tmp_so = tempfile.mkstemp(dir=folder, prefix=f"{name}.so.", suffix=".tmp")
            os.close(fd)
            full = [*command, *flags, str(cpp_path), "-o", tmp_so]
            try:
                cls.compile_count += 1
                try:
                    result = subprocess.run(full, capture_output=True, text=True)
                except OSError as exc:
                    raise CppCompileError(cpp_path, full, f"cannot run the C++ compiler: {exc}") from exc
                if result.returncode != 0:
                    raise CppCompileError(cpp_path, full, (result.stdout + result.stderr).strip())
                os.replace(tmp_so, so_path)
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(tmp_so)
        return so_path
