"""The task runner's own logic (``noxfile.py``): what makes a session rebuild or reinstall.

``nox -s tests`` runs these with the packages' tests; they build and install nothing.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("nox", reason="the noxfile imports nox (the tests session installs it)")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def noxfile():
    spec = importlib.util.spec_from_file_location("ember_noxfile", ROOT / "noxfile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Session:
    """What ``_install`` uses of a nox session, recording the installs and commands instead of running them."""

    venv_backend = "virtualenv"

    def __init__(self, venv: Path, fail: bool = False):
        self.virtualenv = SimpleNamespace(location=str(venv))
        self.installs, self.runs, self.logs, self.fail = [], [], [], fail

    def install(self, *args, env=None):
        self.installs.append(args)
        if self.fail:
            raise RuntimeError("pip failed")

    def run(self, *args, **kwargs):
        self.runs.append(args)

    def log(self, message):
        self.logs.append(message)


def _package(tmp_path: Path) -> Path:
    pkg = tmp_path / "pkg"
    for name, text in {
        "pyproject.toml": "[project]\nname = 'x'\n",
        "src/ember/a.py": "A = 1\n",
        "csrc/k.cpp": "int k;\n",
        "tests/test_a.py": "def test(): pass\n",
        "CHANGELOG.md": "- one\n",
    }.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    return pkg


def test_fingerprint_follows_what_goes_into_the_wheel(noxfile, tmp_path):
    pkg = _package(tmp_path)
    first = noxfile._fingerprint(pkg)
    assert noxfile._fingerprint(pkg) == first
    # tests, the changelog and build output never reach the wheel
    (pkg / "tests" / "test_a.py").write_text("def test(): assert 1\n")
    (pkg / "CHANGELOG.md").write_text("- one\n- two\n")
    (pkg / "build").mkdir()
    (pkg / "build" / "CMakeCache.txt").write_text("x")
    (pkg / "src" / "ember" / "__pycache__").mkdir()
    (pkg / "src" / "ember" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert noxfile._fingerprint(pkg) == first
    # a source edit, a C++ edit, a new file and a renamed file each give a new fingerprint
    seen = {first}
    for change in (
        lambda: (pkg / "src" / "ember" / "a.py").write_text("A = 2\n"),
        lambda: (pkg / "csrc" / "k.cpp").write_text("int k = 1;\n"),
        lambda: (pkg / "src" / "ember" / "b.py").write_text(""),
        lambda: (pkg / "src" / "ember" / "b.py").rename(pkg / "src" / "ember" / "c.py"),
    ):
        change()
        seen.add(noxfile._fingerprint(pkg))
    assert len(seen) == 5


def test_install_skips_what_this_environment_already_has(noxfile, tmp_path, monkeypatch):
    monkeypatch.setattr(noxfile, "ROOT", tmp_path)
    (tmp_path / "reqs.txt").write_text("sphinx\n")
    session = _Session(tmp_path / "venv")
    noxfile._install(session, "a.whl[test]", "-r", "reqs.txt", stamp="packages", replace=("ember-core",))
    assert session.installs == [("a.whl[test]", "-r", "reqs.txt")]
    assert session.runs == [("python", "-m", "pip", "uninstall", "-q", "-y", "ember-core")]
    noxfile._install(session, "a.whl[test]", "-r", "reqs.txt", stamp="packages", replace=("ember-core",))
    assert len(session.installs) == 1 and len(session.runs) == 1  # unchanged: nothing runs
    assert "not reinstalling" in session.logs[-1]
    (tmp_path / "reqs.txt").write_text("sphinx\nmyst\n")  # a requirements file's contents count
    noxfile._install(session, "a.whl[test]", "-r", "reqs.txt", stamp="packages", replace=("ember-core",))
    assert len(session.installs) == 2 and len(session.runs) == 2
    noxfile._install(session, "b.whl[test]", "-r", "reqs.txt", stamp="packages")  # a new wheel: reinstall
    assert len(session.installs) == 3
    noxfile._install(session, "ruff==1", stamp="lint")  # stamps of other kinds are separate
    assert len(session.installs) == 4


def test_a_failed_install_is_retried_next_time(noxfile, tmp_path, monkeypatch):
    monkeypatch.setattr(noxfile, "ROOT", tmp_path)
    venv = tmp_path / "venv"
    noxfile._install(_Session(venv), "a.whl", stamp="packages")
    with pytest.raises(RuntimeError, match="pip failed"):
        noxfile._install(_Session(venv, fail=True), "b.whl", stamp="packages")
    retry = _Session(venv)
    noxfile._install(retry, "b.whl", stamp="packages")
    assert retry.installs == [("b.whl",)]


def test_no_venv_installs_nothing(noxfile, tmp_path):
    session = _Session(tmp_path / "venv")
    session.venv_backend = "none"
    noxfile._install(session, "a.whl")
    assert session.installs == [] and "--no-venv" in session.logs[-1]


def test_sessions_reuse_their_environments(noxfile):
    import nox

    assert nox.options.reuse_venv == "yes"
    assert "wheels" in noxfile.__doc__ and "nox -N" in noxfile.__doc__


def test_each_python_gets_its_own_wheels(noxfile, tmp_path):
    # ember-core's extension is built for one interpreter: dynamo-3.12 must not install nox's own wheel
    pkg = _package(tmp_path)
    own = noxfile._fingerprint(pkg)
    assert noxfile._fingerprint(pkg, "cpython-312") != own != noxfile._fingerprint(pkg, "cpython-313")
    assert noxfile._fingerprint(pkg, noxfile.sys.implementation.cache_tag) == own
    assert [f"dynamo-{v}" for v in noxfile.DYNAMO_PYTHONS] == ["dynamo-3.11", "dynamo-3.12", "dynamo-3.13"]
