"""Debug output: one numbered file per stage, in the compiled function's folder, only when on."""

from __future__ import annotations

import pytest

from ember._inductor import config, debug


@pytest.fixture
def debug_root(tmp_path, monkeypatch):
    root = tmp_path / "dbg"
    monkeypatch.setenv("EMBER_COMPILE_DEBUG_DIR", str(root))
    return root


def test_files_in_pipeline_order(debug_root, monkeypatch):
    monkeypatch.setenv("EMBER_COMPILE_DEBUG", "1")
    with debug.compiling("my_fn") as folder:
        assert folder == debug_root / "my_fn" == debug.current_folder()
        debug.stage("fx_graph", "graph text")
        debug.stage("joint_graph", "joint")
        debug.stage("cpp", 'extern "C" void k() {}')
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["01_fx_graph.txt", "02_joint_graph.txt", "03_cpp.txt"]
    assert (folder / "01_fx_graph.txt").read_text() == "graph text\n"
    assert (folder / "03_cpp.txt").read_text() == 'extern "C" void k() {}\n'
    assert debug.current_folder() is None


def test_nothing_written_when_off(debug_root, monkeypatch):
    monkeypatch.delenv("EMBER_COMPILE_DEBUG", raising=False)
    with debug.compiling("my_fn") as folder:
        assert folder is None
        assert debug.stage("fx_graph", "x") is None
    assert debug.stage("loose", "x") is None
    assert not debug_root.exists()
    monkeypatch.setenv("EMBER_COMPILE_DEBUG", "0")
    with debug.compiling("my_fn"):
        debug.stage("fx_graph", "x")
    assert not debug_root.exists()


def test_config_overrides_environment(debug_root, monkeypatch, tmp_path):
    monkeypatch.setenv("EMBER_COMPILE_DEBUG", "1")
    with config.patch(debug=False):
        with debug.compiling("f"):
            debug.stage("a", "x")
    assert not debug_root.exists()
    monkeypatch.delenv("EMBER_COMPILE_DEBUG")
    with config.patch(debug=True, debug_dir=str(tmp_path / "other")):
        with debug.compiling("f") as folder:
            written = debug.stage("a", 123)
    assert folder.parent == tmp_path / "other"
    assert written.read_text() == "123\n"


def test_nested_and_repeated_compilations(debug_root, monkeypatch):
    monkeypatch.setenv("EMBER_COMPILE_DEBUG", "1")
    with debug.compiling("outer") as outer:
        debug.stage("first", "1")
        with debug.compiling("inner") as inner:
            debug.stage("inside", "2")
        debug.stage("second", "3")
    assert sorted(p.name for p in outer.iterdir()) == ["01_first.txt", "02_second.txt"]
    assert sorted(p.name for p in inner.iterdir()) == ["01_inside.txt"]
    # compiling the same name again gets its own folder, numbered from 01
    with debug.compiling("outer") as again:
        debug.stage("first", "x")
    assert again == debug_root / "outer_1"
    assert sorted(p.name for p in again.iterdir()) == ["01_first.txt"]


def test_unsafe_names_and_stage_outside_compiling(debug_root, monkeypatch):
    monkeypatch.setenv("EMBER_COMPILE_DEBUG", "1")
    with debug.compiling("<lambda>") as folder:
        path = debug.stage("loop ir/1", "x")
    assert folder.parent == debug_root and "/" not in folder.name and "<" not in folder.name
    assert path.name == "01_loop_ir_1.txt"
    loose = debug.stage("graph", "y")
    assert loose.parent == debug_root / "anonymous"


def test_resume_continues_numbering(debug_root, monkeypatch):
    monkeypatch.setenv("EMBER_COMPILE_DEBUG", "1")
    with debug.compiling("fn") as folder:
        debug.stage("forward_graph", "f")
        handle = debug.current_handle()
    with debug.resume(handle):  # e.g. the backward, compiled on the first backward call
        debug.stage("backward_graph", "b")
    with debug.resume(None):
        assert debug.current_folder() is None
    assert sorted(p.name for p in folder.iterdir()) == ["01_forward_graph.txt", "02_backward_graph.txt"]


def test_callable_text_is_built_only_when_on(debug_root, monkeypatch):
    calls = []

    def costly():
        calls.append(1)
        return "big graph"

    monkeypatch.delenv("EMBER_COMPILE_DEBUG", raising=False)
    with debug.compiling("f"):
        debug.stage("graph", costly)
    assert calls == []
    monkeypatch.setenv("EMBER_COMPILE_DEBUG", "1")
    with debug.compiling("f"):
        path = debug.stage("graph", costly)
    assert calls == [1] and path.read_text() == "big graph\n"
