"""Settings of the compiler, as plain module attributes.

Read them as ``config.NAME`` at the moment they matter (never copy one into a
module-level constant), so that a test or a user can change them at run time::

    from ember._inductor import config
    config.fallback_on_compile_error = False

or for a block of code, restoring the old values afterwards::

    with config.patch(debug=True, threads=1):
        ...

A setting whose value is ``None`` takes its value from the environment when it
is read (through the ``resolved_*`` helpers below), so an environment variable
set after import still counts.

Random ops follow ``fallback_random`` (the two rules of :mod:`ember._inductor.aot.rng`).

Settings:

* ``debug`` (bool or None): write every pipeline stage's text (graphs, loop IR,
  kernels, C++) under ``debug_dir`` (see :mod:`ember._inductor.debug`). ``None``:
  on when the environment variable ``EMBER_COMPILE_DEBUG`` is ``1``.
* ``debug_dir`` (str or None): the root folder of the debug output. ``None``:
  ``EMBER_COMPILE_DEBUG_DIR``, else ``./ember_compile_debug``.
* ``cache_dir`` (str or None): where compiled kernels are kept
  (:mod:`ember._inductor.codecache`). ``None``: ``EMBER_INDUCTOR_CACHE_DIR``, else
  ``$XDG_CACHE_HOME/ember/inductor`` (``~/.cache/ember/inductor``).
* ``cxx`` (str or None): the C++ compiler command. ``None``: the ``CXX``
  environment variable, else the first of ``g++``, ``clang++``, ``c++`` on ``PATH``.
* ``extra_cflags`` (tuple of str): flags added to every compilation (they are part
  of the cache key).
* ``threads`` (int or None): OpenMP threads the generated kernels use. ``None``:
  ``ember.get_num_threads()`` when the kernel runs.
* ``fallback_on_compile_error`` (bool): when the compiler fails on a graph (a
  :class:`~ember._inductor.exc.LoweringException`, a failing C++ build, any other
  error of the compiler core), ``compile_fx`` logs a warning on the logger
  ``ember._inductor`` and runs that graph eagerly. ``False``: the error is raised
  (the test suite checks both). Default ``True``.
* ``max_autotune`` (bool or None): each matrix product of a graph compiled to Triton
  runs the faster of a Triton matmul template (its pointwise epilogue fused in) and
  the extern call, benchmarked on the first compile and cached on disk
  (:mod:`ember._inductor.select_algorithm`; ``ember.compile(mode="max-autotune")``
  turns it on). ``None``: the environment variable ``EMBER_INDUCTOR_MAX_AUTOTUNE == "1"``.
* ``fallback_random`` (bool): PyTorch's name. ``False`` (the default): ``bernoulli`` (dropout's mask),
  ``rand``/``rand_like`` and ``randn``/``randn_like`` without an explicit ``generator=`` are computed
  inside the kernels (Philox4x32-10, keyed by a seed drawn from the default generator at each call of
  the compiled forward; :mod:`ember._inductor.inkernel_random`), so they fuse with their consumers; the
  numbers differ from eager mode's (same distribution). ``True``: every random op is a call of the
  eager op on the default generator, in program order, so a compiled function draws exactly the numbers
  eager mode would (what tests comparing compiled with eager values turn on).
* ``cudagraphs`` (bool): run compiled cuda graphs under CUDA graphs (what
  ``mode="reduce-overhead"`` turns on; :mod:`ember._inductor.runtime.cudagraphs`). Also accepted
  under PyTorch's option name ``"triton.cudagraphs"`` and attribute ``config.triton.cudagraphs``.
  Default ``False``.
* ``cudagraph_warmup_runs`` (int): calls of each input signature that run normally before the
  CUDA graph is recorded. Default 1.
* ``cudagraph_max_recordings`` (int): CUDA graphs recorded per compiled graph (one per input
  signature); further signatures run without. Default 16.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

#: The names :func:`patch` accepts.
_SETTINGS = (
    "debug",
    "debug_dir",
    "cache_dir",
    "cxx",
    "extra_cflags",
    "threads",
    "fallback_on_compile_error",
    "triton_on_cpu",
    "max_autotune",
    "fallback_random",
    "cudagraphs",
    "cudagraph_warmup_runs",
    "cudagraph_max_recordings",
    "triton.cudagraphs",  # PyTorch's name of ``cudagraphs`` (an alias)
)

#: Option names PyTorch users write -> the setting they name here.
_ALIASES = {"triton.cudagraphs": "cudagraphs"}

#: The CUDA-graph settings each ``ember.compile`` mode implies (:func:`mode_options`).
_MODE_OPTIONS = {"reduce-overhead": {"cudagraphs": True}, "max-autotune": {"cudagraphs": True, "max_autotune": True},
                 "max-autotune-no-cudagraphs": {"max_autotune": True}}

__all__ = [*(n for n in _SETTINGS if n not in _ALIASES), "patch", "mode_options", "resolved_debug",
           "resolved_debug_dir", "resolved_cache_dir",
           "resolved_triton_on_cpu", "resolved_max_autotune"]

debug: bool | None = None
debug_dir: str | None = None
cache_dir: str | None = None
cxx: str | None = None
extra_cflags: tuple[str, ...] = ()
threads: int | None = None
fallback_on_compile_error: bool = True
triton_on_cpu: bool | None = None
max_autotune: bool | None = None
fallback_random: bool = False
cudagraphs: bool = False
cudagraph_warmup_runs: int = 1
cudagraph_max_recordings: int = 16


class _TritonSettings:
    """``config.triton.cudagraphs``: PyTorch's spelling (``torch._inductor.config.triton.cudagraphs``) of
    ``config.cudagraphs``, read and written through."""

    @property
    def cudagraphs(self) -> bool:
        return sys.modules[__name__].cudagraphs

    @cudagraphs.setter
    def cudagraphs(self, value):
        sys.modules[__name__].cudagraphs = value


triton = _TritonSettings()


@contextlib.contextmanager
def patch(**settings):
    """Set some settings for the duration of a ``with`` block, then restore them.

    Args:
        **settings: setting name -> value, e.g. ``patch(debug=True)``.

    Raises:
        AttributeError: a name that is not a setting of this module.
    """
    module = sys.modules[__name__]
    unknown = sorted(set(settings) - set(_SETTINGS))
    if unknown:
        raise AttributeError(f"config.patch: unknown setting(s) {unknown}; the settings are {list(_SETTINGS)}")
    settings = {_ALIASES.get(name, name): value for name, value in settings.items()}
    saved = {name: getattr(module, name) for name in settings}
    for name, value in settings.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def mode_options(mode) -> dict:
    """The CUDA-graph settings ``ember.compile(mode=mode)`` implies: ``"reduce-overhead"`` and
    ``"max-autotune"`` turn ``cudagraphs`` on (as PyTorch's modes do); other modes, none.
    ``"max-autotune"`` and ``"max-autotune-no-cudagraphs"`` also turn ``max_autotune`` on."""
    return dict(_MODE_OPTIONS.get(mode, {}))


def resolved_debug() -> bool:
    """``debug``, or the environment variable ``EMBER_COMPILE_DEBUG == "1"`` when it is None."""
    if debug is not None:
        return bool(debug)
    return os.environ.get("EMBER_COMPILE_DEBUG", "").strip() == "1"


def resolved_debug_dir() -> Path:
    """``debug_dir``, else ``EMBER_COMPILE_DEBUG_DIR``, else ``./ember_compile_debug``."""
    if debug_dir is not None:
        return Path(debug_dir)
    return Path(os.environ.get("EMBER_COMPILE_DEBUG_DIR") or "ember_compile_debug")


def resolved_cache_dir() -> Path:
    """``cache_dir``, else ``EMBER_INDUCTOR_CACHE_DIR``, else the user's cache folder."""
    if cache_dir is not None:
        return Path(cache_dir)
    env = os.environ.get("EMBER_INDUCTOR_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ember" / "inductor"


def resolved_triton_on_cpu() -> bool:
    """Whether cpu graphs go through the Triton codegen: ``triton_on_cpu`` (else
    ``EMBER_INDUCTOR_TRITON_CPU == "1"``) and Triton's interpreter on (``TRITON_INTERPRET=1``)."""
    wanted = triton_on_cpu if triton_on_cpu is not None else \
        os.environ.get("EMBER_INDUCTOR_TRITON_CPU", "").strip() == "1"
    return bool(wanted) and os.environ.get("TRITON_INTERPRET", "").strip() not in ("", "0")


def resolved_max_autotune() -> bool:
    """``max_autotune``, else the environment variable ``EMBER_INDUCTOR_MAX_AUTOTUNE == "1"``."""
    if max_autotune is not None:
        return bool(max_autotune)
    return os.environ.get("EMBER_INDUCTOR_MAX_AUTOTUNE", "").strip() == "1"
