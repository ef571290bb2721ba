"""Test wiring of ember-inductor: one compiled-kernel cache for the whole test run.

Every test process (pytest itself and each xdist worker, which imports this file
too) points ``EMBER_INDUCTOR_CACHE_DIR`` at the same folder, so a kernel one test
compiles is loaded, not recompiled, by every later test and worker, and by the
next run: keys hash the source, flags and compiler, so a kept cache is never
stale. The folder is ``<tmp>/ember-inductor-tests-<uid>`` (outside the checkout, so
git never sees it); a cache set by the caller's environment wins. Tests of the cache itself use
their own empty folders (the ``fresh_cache`` fixture).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

SHARED_CACHE = Path(tempfile.gettempdir()) / f"ember-inductor-tests-{os.getuid() if hasattr(os, 'getuid') else 0}"

os.environ.setdefault("EMBER_INDUCTOR_CACHE_DIR", str(SHARED_CACHE))


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty cache folder for this test, and a code cache that forgot what it loaded."""
    from ember._inductor import codecache

    folder = tmp_path / "cache"
    monkeypatch.setenv("EMBER_INDUCTOR_CACHE_DIR", str(folder))
    codecache.CppCodeCache.clear()
    yield folder
    codecache.CppCodeCache.clear()
