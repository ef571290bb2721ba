"""Test wiring of ember-inductor: one compiled-kernel cache for the whole test run.

Every test process (pytest itself and each xdist worker, which imports this file
too) points ``EMBER_INDUCTOR_CACHE_DIR`` at the same folder, so a kernel one test
compiles is loaded, not recompiled, by every later test and worker, and by the
next run: keys hash the source, flags and compiler, so a kept cache is never
stale. The folder is ``<tmp>/ember-inductor-tests-<uid>`` (outside the checkout, so
git never sees it); a cache set by the caller's environment wins. Tests of the cache itself use
their own empty folders (the ``fresh_cache`` fixture).

The folder is shared by name in a world-writable place, so another user could create it first and
plant libraries the tests would load: it is made private (mode 0700), and an existing one that is a
link, not a directory, owned by another user, or writable by group or others is refused with an
error (set ``EMBER_INDUCTOR_CACHE_DIR`` to use another folder).
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

SHARED_CACHE = Path(tempfile.gettempdir()) / f"ember-inductor-tests-{os.getuid() if hasattr(os, 'getuid') else 0}"



def private_folder(path):
    """Creates ``path`` (mode 0700) if missing; raises RuntimeError unless it is this user's own
    directory, not a link, that no one else may write to."""
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    info = path.lstat()
    problem = None
    if not stat.S_ISDIR(info.st_mode):
        problem = "is not a directory (or is a link)"
    elif hasattr(os, "getuid") and info.st_uid != os.getuid():
        problem = f"is owned by uid {info.st_uid}, not by this user (uid {os.getuid()})"
    elif info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        problem = f"is writable by group or others (mode {stat.S_IMODE(info.st_mode):o})"
    if problem:
        raise RuntimeError(f"ember-inductor tests: the shared kernel cache {path} {problem}; compiled "
                           f"libraries in it could have been planted. Remove it, or set "
                           f"EMBER_INDUCTOR_CACHE_DIR to a private folder.")
    return path


if "EMBER_INDUCTOR_CACHE_DIR" not in os.environ:
    os.environ["EMBER_INDUCTOR_CACHE_DIR"] = str(private_folder(SHARED_CACHE))


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty cache folder for this test, and a code cache that forgot what it loaded."""
    from ember._inductor import codecache

    folder = tmp_path / "cache"
    monkeypatch.setenv("EMBER_INDUCTOR_CACHE_DIR", str(folder))
    codecache.CppCodeCache.clear()
    yield folder
    codecache.CppCodeCache.clear()
