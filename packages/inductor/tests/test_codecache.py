"""The compiled-kernel cache: compile once per key, across loads, processes and races."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ember._inductor import codecache, config
from ember._inductor.codecache import CppCodeCache
from ember._inductor.exc import CppCompileError

ADD_SOURCE = textwrap.dedent(
    """
    extern "C" double add_scaled(double a, double b) { return a + 2.0 * b; }
    """
)


def _add(lib):
    fn = lib.add_scaled
    fn.argtypes = [ctypes.c_double, ctypes.c_double]
    fn.restype = ctypes.c_double
    return fn


def test_load_compiles_and_runs(fresh_cache):
    before = CppCodeCache.compile_count
    lib = CppCodeCache.load(ADD_SOURCE, name="adder")
    assert _add(lib)(1.5, 2.0) == 5.5
    assert CppCodeCache.compile_count == before + 1
    so_path = CppCodeCache.path_of(ADD_SOURCE, name="adder")
    assert so_path.is_file() and so_path.parent.parent == fresh_cache
    assert (so_path.parent / "adder.cpp").read_text() == ADD_SOURCE
    # no temporary file is left behind
    assert not [p for p in so_path.parent.iterdir() if p.name.endswith(".tmp")]


def test_second_load_does_not_compile(fresh_cache):
    CppCodeCache.load(ADD_SOURCE)
    count = CppCodeCache.compile_count
    lib = CppCodeCache.load(ADD_SOURCE)
    assert CppCodeCache.compile_count == count
    # after forgetting the in-process dict, the .so on disk is loaded, still no compile
    CppCodeCache.clear()
    lib = CppCodeCache.load(ADD_SOURCE)
    assert CppCodeCache.compile_count == count
    assert _add(lib)(1.0, 1.0) == 3.0


_CHILD = textwrap.dedent(
    """
    import ctypes, sys
    from ember._inductor.codecache import CppCodeCache
    lib = CppCodeCache.load(sys.argv[1], name="adder")
    fn = lib.add_scaled
    fn.argtypes = [ctypes.c_double, ctypes.c_double]
    fn.restype = ctypes.c_double
    print(CppCodeCache.compile_count, fn(1.0, 3.0))
    """
)


def _run_child(cache, source, **popen):
    env = {**os.environ, "EMBER_INDUCTOR_CACHE_DIR": str(cache)}
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, source], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _finish(proc):
    try:
        out, err = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        proc.kill()  # never leave a hung child behind
        proc.communicate()
        raise
    assert proc.returncode == 0, err
    count, value = out.split()
    return int(count), float(value)


def test_second_process_does_not_compile(fresh_cache):
    CppCodeCache.load(ADD_SOURCE, name="adder")
    assert _finish(_run_child(fresh_cache, ADD_SOURCE)) == (0, 7.0)


def test_concurrent_processes_compile_once(fresh_cache):
    source = ADD_SOURCE + "\n// concurrent\n"
    children = [_run_child(fresh_cache, source) for _ in range(3)]
    results = [_finish(child) for child in children]
    assert [value for _, value in results] == [7.0] * 3
    # the lock lets exactly one of them build; the others load its .so
    assert sorted(count for count, _ in results) == [0, 0, 1]


def test_syntax_error_raises_with_file_and_message(fresh_cache):
    bad = 'extern "C" int broken( { return 1; }\n'
    with pytest.raises(CppCompileError) as info:
        CppCodeCache.load(bad, name="broken")
    err = info.value
    assert Path(err.source_path).name == "broken.cpp"
    assert Path(err.source_path).read_text() == bad  # kept for the user to read
    assert "error" in err.output.lower()
    assert err.source_path in str(err)
    assert err.command[-2:] == ["-o", err.command[-1]] and err.source_path in err.command
    # a failed build leaves no .so, and the next load tries again (and fails again)
    assert not CppCodeCache.path_of(bad, name="broken").exists()
    with pytest.raises(CppCompileError):
        CppCodeCache.load(bad, name="broken")


def test_key_depends_on_source_and_flags():
    command = codecache.cpp_compiler()
    flags = codecache.cpp_flags()
    base = codecache.cache_key(ADD_SOURCE, command, flags)
    assert base == codecache.cache_key(ADD_SOURCE, command, flags)
    assert base != codecache.cache_key(ADD_SOURCE + " ", command, flags)
    assert base != codecache.cache_key(ADD_SOURCE, command, [*flags, "-DX=1"])
    with config.patch(extra_cflags=("-DEMBER_TEST=1",)):
        assert codecache.cpp_flags() == [*flags, "-DEMBER_TEST=1"]


def test_extra_flags_make_a_new_build(fresh_cache):
    source = '#ifndef SCALE\n#define SCALE 1\n#endif\nextern "C" int scale() { return SCALE; }\n'
    one = CppCodeCache.load(source, name="scale")
    three = CppCodeCache.load(source, name="scale", extra_flags=("-DSCALE=3",))
    one.scale.restype = three.scale.restype = ctypes.c_int
    assert (one.scale(), three.scale()) == (1, 3)


def test_flags_keep_ieee_semantics():
    flags = codecache.cpp_flags()
    assert "-ffast-math" not in flags and "-ffp-contract=off" in flags
    assert {"-O3", "-fopenmp", "-shared", "-fPIC", "-std=c++17"} <= set(flags)


def test_cache_dir_follows_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("EMBER_INDUCTOR_CACHE_DIR", str(tmp_path / "x"))
    assert codecache.cache_dir() == tmp_path / "x"
    with config.patch(cache_dir=str(tmp_path / "y")):
        assert codecache.cache_dir() == tmp_path / "y"


def test_compiler_from_cxx(monkeypatch, fresh_cache):
    monkeypatch.setenv("CXX", "definitely-not-a-compiler-ember")
    assert codecache.cpp_compiler() == ["definitely-not-a-compiler-ember"]
    with pytest.raises(CppCompileError, match="cannot run the C\\+\\+ compiler"):
        CppCodeCache.load(ADD_SOURCE)


def test_openmp_is_linked(fresh_cache):
    source = textwrap.dedent(
        """
        #include <omp.h>
        extern "C" long sum_to(long n) {
            long total = 0;
            #pragma omp parallel for reduction(+:total)
            for (long i = 0; i < n; ++i) total += i;
            return total;
        }
        """
    )
    lib = CppCodeCache.load(source, name="omp")
    lib.sum_to.argtypes = [ctypes.c_long]
    lib.sum_to.restype = ctypes.c_long
    assert lib.sum_to(1000) == 999 * 1000 // 2


def test_bad_name_rejected():
    with pytest.raises(ValueError, match="name"):
        CppCodeCache.load(ADD_SOURCE, name="a/b")


def _conftest():
    """The tests' conftest module (loaded by path: several packages have a ``conftest``)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_inductor_conftest", Path(__file__).with_name("conftest.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners and modes")
def test_shared_test_cache_folder_is_private_and_refuses_a_planted_one(tmp_path):
    private_folder = _conftest().private_folder
    made = private_folder(tmp_path / "new")
    assert made.is_dir()
    assert made.stat().st_mode & 0o777 == 0o700
    assert private_folder(made) == made  # an existing private folder is used as it is
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    open_folder.chmod(0o777)
    with pytest.raises(RuntimeError, match="writable by group or others"):
        private_folder(open_folder)
    link = tmp_path / "link"
    link.symlink_to(made)
    with pytest.raises(RuntimeError, match="not a directory"):
        private_folder(link)
    if os.getuid() == 0:  # root can make a folder someone else owns
        other = tmp_path / "other"
        other.mkdir(mode=0o700)
        os.chown(other, 12345, -1)
        with pytest.raises(RuntimeError, match="owned by uid 12345"):
            private_folder(other)
