"""The helpers the examples share: atomic writes and thread limits."""

from __future__ import annotations

from pathlib import Path

import pytest
from example_utils import atomic_write, thread_limits  # a module in examples/, importable through conftest.py
from threadpoolctl import threadpool_info

import ember


def test_atomic_write_replaces_the_file(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text("old")
    atomic_write(path, lambda tmp: Path(tmp).write_text("new"))
    assert path.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "curves.png"
    path.write_bytes(b"old")

    def fail(tmp):
        Path(tmp).write_bytes(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(path, fail)
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["curves.png"]  # the temporary file is gone


def _blas_threads():
    return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}


def test_thread_limits_sets_and_restores_ember_and_blas():
    before_ember, before_blas = ember.get_num_threads(), _blas_threads()
    with thread_limits(1):
        assert ember.get_num_threads() == 1
        assert _blas_threads() <= {1}
    assert ember.get_num_threads() == before_ember
    assert _blas_threads() == before_blas


def test_thread_limits_none_changes_nothing():
    before = ember.get_num_threads()
    with thread_limits(None):
        assert ember.get_num_threads() == before
