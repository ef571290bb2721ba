"""Small helpers the example programs share: atomic file writes, thread limits and the ``--device`` check."""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import ember


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` with each option's default, except options whose default is ``None`` (their help says
    what happens without them)."""

    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)


def atomic_write(path: Path, write: Callable[[str], object]) -> None:
    """Call ``write(tmp_path)`` on a temporary file beside ``path``, then ``os.replace`` it over ``path``.

    A crash or error mid-write leaves any previous ``path`` intact and no temporary file behind.
    (``ember.save`` to a path already works this way.)
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes the file private; give it the usual permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


@contextlib.contextmanager
def thread_limits(threads: int | None) -> Iterator[None]:
    """Run the body with ``threads`` intra-op threads, or with the libraries' defaults when ``None``.

    ``ember.set_num_threads`` sizes ember's own (OpenMP) kernels; numpy's BLAS keeps a
    pool of its own, which ``threadpoolctl`` (a scikit-learn dependency) resizes, as
    ``ember.set_num_threads``'s documentation advises. Both are restored on exit.
    """
    if threads is None:
        yield
        return
    previous = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        with contextlib.ExitStack() as stack:
            try:
                from threadpoolctl import threadpool_limits
            except ImportError:  # BLAS keeps its default pool
                pass
            else:
                stack.enter_context(threadpool_limits(limits=threads, user_api="blas"))
            yield
    finally:
        ember.set_num_threads(previous)


def pick_device(name: str) -> ember.device:
    """The examples' ``--device``: ``ember.device(name)`` for ``cpu``, ``cuda`` or ``cuda:N``.

    Raises:
        SystemExit: with a message naming the flag, for another device type, a malformed name, or
            ``cuda`` where no GPU (or no CuPy) is available.
    """
    try:
        device = ember.device(name)
    except (RuntimeError, ValueError) as exc:
        raise SystemExit(f"--device {name}: {exc}") from exc
    if device.type == "cuda":
        cuda = getattr(ember, "cuda", None)
        if cuda is None:
            raise SystemExit("--device cuda: ember has no CUDA backend yet (the CUDA issue adds it); use --device cpu")
        if not cuda.is_available():
            raise SystemExit("--device cuda: no CUDA device is available here; use --device cpu")
    elif device.type != "cpu":
        raise SystemExit(f"--device {name}: this demo runs on cpu or cuda, not {device.type}")
    return device
