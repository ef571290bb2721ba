"""Ember's one task runner.

Every session builds its own virtual environment from the packages' own
metadata (``packages/*/pyproject.toml``), so a fresh machine needs only
Python 3.11+ and ``python -m pip install nox``.

Sessions:

* ``tests``: the test suites of every package, once per backend
  (``tests(backend='cpu')``, ``tests(backend='cuda')``, ``tests(backend='rocm')``).
  A backend whose device is absent is skipped with a one-line reason.
* ``dynamo-3.11``, ``dynamo-3.12``, ``dynamo-3.13``: ember-dynamo's tests on each CPython it
  supports (it reads bytecode, which differs between them); each Python gets its own wheels.
* ``parity``: the tests that compare ember with PyTorch (``-m parity``).
* ``lint``: ruff.
* ``docs``: Sphinx HTML with warnings as errors, then the doctests.
* ``bench``: ``benchmarks/run.py``; writes ``BENCHMARKS.md`` and ``benchmarks/ratios.png``.
* ``demo``: the demo in ``examples/``: a CNN trained on the UCI handwritten digits
  (``-- --task text``: a character-level transformer; ``-- --task tour``: the tensor tour).
* ``wheels``: a wheel of every distribution in ``packages/`` into ``dist/wheels/``, to
  install only the pieces one needs: ``pip install --find-links dist/wheels ember-fx``.
* ``fuzz``: ``fuzz/run.py`` feeds ``ember.load`` mutated state-dict and GraphModule files for
  120 s (``-- --seconds N``; ``-- --engine atheris`` for coverage-guided fuzzing); every input
  must load or raise ``SerializationError`` within the time and memory bounds
  (``fuzz/README.md``). ``tests`` runs it for a few seconds too.

Arguments after ``--`` go to the tool a session runs, e.g.
``nox -s tests -- -k promotion -x`` or ``nox -s bench -- -k add_1elem``.

Sessions install the packages from wheels that are built once per change of their
sources and kept in ``.nox/.cache/wheels/`` (ember-core's C++ build folder stays in
``.nox/.cache/skbuild/``, so a change recompiles only the changed C++ files). A session's
environment is reused from one run to the next, and its installs are skipped while the
packages' sources and the session's requirements are unchanged: a second
``nox -s demo -- --help`` starts at once. ``nox -N -s X`` recreates X's environment.

Run ``nox`` with ``--no-venv`` to use the current environment instead (installs are
then skipped; you install the packages yourself, e.g. on a machine without network).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import nox

nox.needs_version = ">=2024.3.2"
# pip, not uv: pip reads this machine's pip configuration (local wheel directories
# such as the CPU build of PyTorch); uv would download a multi-GB CUDA build instead.
nox.options.default_venv_backend = "virtualenv"
# Plain `nox` runs what CI runs.
nox.options.sessions = ["tests", "lint", "docs"]
# A second run reuses the session's environment; `_install` skips what it already installed.
nox.options.reuse_venv = "yes"

ROOT = Path(__file__).resolve().parent

# Distributions in dependency order (ARCHITECTURE.md section 1). Only those that
# exist in the checkout are installed, so adding a package is adding its folder.
PACKAGE_DIRS = (
    "tensor-core",
    "autograd",
    "fx",
    "dynamo",
    "inductor",
    "distributed",
    "mobile",
    "vision-audio-text/vision",
    "vision-audio-text/audio",
    "vision-audio-text/text",
    "vision-audio-text/csprng",
)

# The PyTorch release used as the parity oracle and benchmark baseline. Keep this
# exact pin: the project's machines carry this CPU wheel on local disk, and any
# looser spec lets pip download a multi-GB CUDA build.
TORCH_SPEC = "torch==2.13.0"

# What the example programs in examples/ (and their tests) need beyond the packages.
EXAMPLE_REQUIREMENTS = ("scikit-learn", "tqdm", "matplotlib")
EXAMPLE_TESTS = "examples/tests"
# Tests of this noxfile's own logic (tests/test_noxfile.py), which imports nox.
TOOLING_TESTS = "tests"
TOOLING_REQUIREMENTS = ("nox>=2024.3.2",)
# ember-inductor's Triton code generator: its kernels run in CI through Triton's interpreter
# (packages/inductor/tests/test_triton_interpret.py). Linux x86-64 wheels only; elsewhere those tests skip.
TRITON_REQUIREMENTS = ("triton==3.9.0; platform_system == 'Linux' and platform_machine == 'x86_64'",)
# `nox -s demo -- --task NAME`: the example each task runs.
DEMO_TASKS = {
    "digits": "examples/digits_cnn.py",
    "text": "examples/char_transformer.py",
    "tour": "examples/quickstart.py",
}

# `nox -s wheels` writes here (dist/ is ignored by git).
WHEEL_DIR = ROOT / "dist" / "wheels"

RUFF_SPEC = "ruff==0.17.6"  # bump deliberately: new ruff releases add rules
DOCS_REQUIREMENTS = "docs/requirements.txt"
BACKENDS = ["cpu", "cuda", "rocm"]


# --------------------------------------------------------------------------- helpers


def _packages() -> list[Path]:
    """The package folders present in this checkout, in dependency order."""
    return [
        ROOT / "packages" / name for name in PACKAGE_DIRS if (ROOT / "packages" / name / "pyproject.toml").is_file()
    ]


def _test_dirs() -> list[str]:
    """``packages/*/tests`` folders that exist, relative to the repository root."""
    return [str((pkg / "tests").relative_to(ROOT)) for pkg in _packages() if (pkg / "tests").is_dir()]


def _has_venv(session: nox.Session) -> bool:
    return session.venv_backend != "none"


def _install_skipped_by_nox(session: nox.Session) -> bool:
    """Whether nox skips installs in this run (``-R``/``--no-install`` on a reused environment)."""
    config = getattr(getattr(session, "_runner", None), "global_config", None)
    return bool(getattr(config, "no_install", False)) and bool(getattr(session.virtualenv, "_reused", False))


def _digest(*parts: object) -> str:
    return hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()


def _install(
    session: nox.Session,
    *args: str,
    env: dict[str, str] | None = None,
    stamp: str = "requirements",
    replace: tuple[str, ...] = (),
) -> None:
    """``pip install args`` into the session's venv, unless this venv already got exactly these.

    A reused environment (``nox.options.reuse_venv``) keeps a stamp per kind of install
    (``stamp``) in its folder: the digest of ``args`` and of the files they name (a wheel
    path holds its sources' fingerprint, ``-r FILE`` its contents). An unchanged digest
    skips pip, which takes seconds even when there is nothing to do. The distributions in
    ``replace`` are uninstalled first when it differs. A no-op under ``nox --no-venv``
    and ``nox -R``.
    """
    if not _has_venv(session) or _install_skipped_by_nox(session):
        session.log(f"--no-venv or -R: not installing {' '.join(args)}; using the environment as it is")
        return
    files = [ROOT / arg for arg in args if (ROOT / arg).is_file()]
    key = _digest(*args, *(hashlib.sha256(path.read_bytes()).hexdigest() for path in files))
    stamp_file = Path(session.virtualenv.location) / "ember-stamps" / stamp
    if stamp_file.is_file() and stamp_file.read_text(encoding="utf-8") == key:
        session.log(f"{stamp}: unchanged since this environment installed them, not reinstalling")
        return
    if replace:  # also without a stamp: an environment made by an older noxfile has no stamps
        session.run("python", "-m", "pip", "uninstall", "-q", "-y", *replace, silent=True)
    stamp_file.unlink(missing_ok=True)  # a failed install must not look finished next time
    session.install(*args, env=env)
    stamp_file.parent.mkdir(parents=True, exist_ok=True)
    stamp_file.write_text(key, encoding="utf-8")


# ------------------------------------------------------------------ wheels of the packages

# What never reaches a package's wheel, so that changing it rebuilds nothing: these entries of
# the package's folder, these folders anywhere in it, and files or folders with these suffixes.
_NOT_IN_WHEEL_TOP = {"tests", "build", "dist", "CHANGELOG.md"}
_NOT_IN_WHEEL = {"__pycache__", ".pytest_cache", ".hypothesis"}
_NOT_IN_WHEEL_SUFFIXES = (".pyc", ".so", ".pyd", ".egg-info")


def _fingerprint(package: Path, tag: str | None = None) -> str:
    """A digest of what goes into ``package``'s wheel: every file but tests, build output and the changelog.

    Paths and contents both count, and so do the interpreter (``tag``, a ``sys.implementation.cache_tag``
    such as ``cpython-312``; default: nox's own) and platform the wheel is for.
    """
    tag = tag or sys.implementation.cache_tag
    digest = hashlib.sha256(f"{tag} {sys.platform} {platform.machine()}".encode())
    for path in sorted(package.rglob("*")):
        rel = path.relative_to(package)
        if rel.parts[0] in _NOT_IN_WHEEL_TOP:
            continue
        if any(part in _NOT_IN_WHEEL or part.endswith(_NOT_IN_WHEEL_SUFFIXES) for part in rel.parts):
            continue
        if path.is_file():
            digest.update(rel.as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:20]


def _read_toml(path: Path) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: nox itself depends on tomli there
        import tomli as tomllib
    return tomllib.loads(path.read_text(encoding="utf-8"))


# Printed as one JSON line in a package's folder: the build backend's extra requirements
# (scikit-build-core asks for the cmake/ninja wheels when the machine lacks those programs).
_DYNAMIC_BUILD_REQUIRES = r"""
import importlib, json, sys
hook = getattr(importlib.import_module(sys.argv[1]), "get_requires_for_build_wheel", None)
print(json.dumps(hook() if hook else []))
"""


@contextlib.contextmanager
def _build_lock(cache: Path):
    """Serialize builds of two nox runs at once: they share the builder and the C++ build folder."""
    with open(cache / "build.lock", "w") as handle:
        try:
            import fcntl
        except ImportError:  # Windows: no lock; run one nox at a time there
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# Printed by a session's interpreter: its base interpreter and its cache tag (which Python the wheels are for).
_INTERPRETER_PROBE = "import sys; print(sys._base_executable, sys.implementation.cache_tag)"


def _session_interpreter(session: nox.Session) -> tuple[str, str]:
    """``(base interpreter, cache tag)`` of the Python the session's environment runs (nox's own without one).

    Sessions on another Python (``dynamo-3.12``) need wheels built by that Python: ember-core's
    C++ extension is compiled for one interpreter.
    """
    if not _has_venv(session):
        return sys.executable, sys.implementation.cache_tag
    out = session.run("python", "-c", _INTERPRETER_PROBE, silent=True) or ""
    base, tag = out.strip().splitlines()[-1].rsplit(" ", 1)
    if tag == sys.implementation.cache_tag:  # nox's own Python: build with it, as always (the builder is unchanged)
        return sys.executable, tag
    return base, tag


def _builder_python(
    session: nox.Session, cache: Path, packages: list[Path], base: str | None = None, tag: str | None = None
) -> str:
    """A virtualenv in nox's cache holding every package's build requirements; returns its python.

    Wheels are built there without pip's build isolation so that the paths CMake sees
    (pybind11's headers) stay the same from one build to the next: with isolation each
    build gets a fresh temporary environment and CMake recompiles every C++ file.
    One builder per interpreter (``base``, whose cache tag is ``tag``; default: nox's own).
    """
    base, tag = base or sys.executable, tag or sys.implementation.cache_tag
    builder = cache / ("builder" if tag == sys.implementation.cache_tag else f"builder-{tag}")
    python = builder / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    tables = [_read_toml(pkg / "pyproject.toml")["build-system"] for pkg in packages]
    static = sorted({req for table in tables for req in table.get("requires", [])})
    key = _digest(base, *static)
    stamp = builder / "ember-builder-stamp"
    if python.is_file() and stamp.is_file() and stamp.read_text(encoding="utf-8") == key:
        return str(python)
    shutil.rmtree(builder, ignore_errors=True)
    session.log(f"creating the build environment {builder} ({', '.join(static)})")
    session.run(sys.executable, "-m", "virtualenv", "-q", "-p", base, str(builder), external=True, silent=True)
    session.run(str(python), "-m", "pip", "install", "-q", *static, external=True, silent=True)
    dynamic = set()
    for pkg, table in zip(packages, tables):
        with session.chdir(pkg):
            out = session.run(
                str(python), "-c", _DYNAMIC_BUILD_REQUIRES, table["build-backend"], external=True, silent=True
            )
        dynamic.update(json.loads(out.strip().splitlines()[-1]))
    extra = sorted(dynamic - set(static))
    if extra:
        session.run(str(python), "-m", "pip", "install", "-q", *extra, external=True, silent=True)
    stamp.write_text(key, encoding="utf-8")
    return str(python)


def _package_wheels(session: nox.Session) -> list[Path]:
    """A wheel of every package of the checkout, in dependency order, built only when its sources changed.

    Wheels live in nox's cache (``.nox/.cache/wheels/<folder>/<fingerprint>/``), shared by
    every session, so ``nox -s demo`` after ``nox -s tests`` builds nothing; a session on
    another Python than nox's gets its own (``.nox/.cache/wheels/<cache tag>/<folder>/...``). ember-core's
    C++ extension is built by scikit-build-core in one persistent folder
    (``.nox/.cache/skbuild/<wheel tag>``), never in a developer's editable build under
    ``packages/tensor-core/build``: after a change only the changed C++ files recompile.
    """
    packages = _packages()
    if not packages:
        session.error("no packages found under packages/*/pyproject.toml")
    cache = Path(session.cache_dir).resolve()
    wheels = []
    base, tag = _session_interpreter(session)
    wheels_dir = cache / "wheels" if tag == sys.implementation.cache_tag else cache / "wheels" / tag
    with _build_lock(cache):
        python = None
        for pkg in packages:
            slot = wheels_dir / pkg.relative_to(ROOT / "packages").as_posix().replace("/", "-")
            target = slot / _fingerprint(pkg, tag)
            found = sorted(target.glob("*.whl"))
            if not found:
                python = python or _builder_python(session, cache, packages, base, tag)
                shutil.rmtree(slot, ignore_errors=True)  # older fingerprints: never used again
                session.log(f"building the wheel of {pkg.relative_to(ROOT)}")
                env = {"SKBUILD_BUILD_DIR": str(cache / "skbuild" / "{wheel_tag}")}
                pip_wheel = ("-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(target))
                session.run(python, *pip_wheel, str(pkg), env=env, external=True)
                found = sorted(target.glob("*.whl"))
                if len(found) != 1:
                    session.error(f"expected one wheel from {pkg}, found {[w.name for w in found]}")
            wheels.append(found[0])
    return wheels


def _install_packages(session: nox.Session, extras: str | None = "test", also: tuple[str, ...] = ()) -> None:
    """Install every package of the monorepo from its wheel (:func:`_package_wheels`) with ``extras``, plus ``also``.

    Nothing happens when this reused environment already holds exactly these wheels and
    requirements. Otherwise the installed ember distributions are removed first: their
    wheels keep version 0.1.0 when their sources change, and pip leaves an installed
    version in place.
    """
    if not _has_venv(session) or _install_skipped_by_nox(session):
        session.log("--no-venv or -R: not installing ember's packages; using the environment as it is")
        return
    suffix = f"[{extras}]" if extras else ""
    specs = [f"{wheel}{suffix}" for wheel in _package_wheels(session)]
    names = tuple(_read_toml(pkg / "pyproject.toml")["project"]["name"] for pkg in _packages())
    _install(session, *specs, *also, stamp="packages", replace=names)


def _try_install_torch(session: nox.Session) -> str | None:
    """Install the pinned PyTorch; return why it failed, or ``None`` on success."""
    if not _has_venv(session):
        probe = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True)
        return None if probe.returncode == 0 else "torch is not importable in the current environment"
    try:
        _install(session, TORCH_SPEC, stamp="torch")
    except nox.command.CommandFailed:
        return f"could not install {TORCH_SPEC} (it is a local CPU wheel on the project's machines)"
    return None


# Printed as one JSON line by the interpreter it runs in.
_GPU_PROBE = r"""
import json
info = {"cupy": False, "error": None, "count": 0, "is_hip": False, "dist": None}
try:
    import cupy
    info["cupy"] = True
    info["is_hip"] = bool(getattr(cupy.cuda.runtime, "is_hip", False))
    from importlib import metadata
    names = metadata.packages_distributions().get("cupy", [])
    if names:
        info["dist"] = f"{names[0]}=={metadata.version(names[0])}"
    info["count"] = int(cupy.cuda.runtime.getDeviceCount())
except Exception as exc:
    info["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
print(json.dumps(info))
"""


def _parse_probe(output: str) -> dict:
    for line in reversed(output.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return {"cupy": False, "error": "the GPU probe printed nothing", "count": 0, "is_hip": False, "dist": None}


def _gpu_problem(backend: str, info: dict) -> str | None:
    """Why ``info`` (a probe result) shows no usable ``backend`` device, or ``None``."""
    label = "CUDA" if backend == "cuda" else "ROCm"
    if not info["cupy"]:
        return f"no {label} device: CuPy is not importable ({info['error']})"
    if info["error"] is not None:
        return f"no {label} device: CuPy could not query devices ({info['error']})"
    if info["count"] < 1:
        return f"no {label} device: CuPy sees 0 GPUs"
    if backend == "rocm" and not info["is_hip"]:
        return "no ROCm device: the installed CuPy is a CUDA build"
    if backend == "cuda" and info["is_hip"]:
        return "no CUDA device: the installed CuPy is a ROCm build (use tests(backend='rocm'))"
    return None


def _gpu_requirements(session: nox.Session, backend: str, *, required: bool = False) -> tuple[str, tuple[str, ...]]:
    """Extras and extra requirements for a GPU backend; skips the session when there is no device
    (stops it with an error instead when the GPU is ``required``, as by ``nox -s demo -- --device cuda``).

    CuPy is first looked for in nox's own interpreter (a GPU machine usually has a
    working CuPy); its exact distribution is then installed into the session.
    Without one, a CUDA machine (``nvidia-smi`` present) gets ember-core's ``cuda``
    extra; a ROCm machine needs a CuPy ROCm build installed first.
    """
    stop = session.error if required else session.skip
    probe = subprocess.run([sys.executable, "-c", _GPU_PROBE], capture_output=True, text=True, timeout=300)
    host = _parse_probe(probe.stdout)
    if host["cupy"]:
        problem = _gpu_problem(backend, host)
        if problem is not None:
            stop(problem)
        return "test", ((host["dist"],) if host["dist"] else ())
    if backend == "cuda" and (shutil.which("nvidia-smi") or Path("/dev/nvidiactl").exists()):
        return "test,cuda", ()
    if backend == "rocm" and Path("/dev/kfd").exists():
        stop("ROCm driver found, but nox's Python has no CuPy ROCm build to install; install one and rerun")
    stop(f"no {'CUDA' if backend == 'cuda' else 'ROCm'} device: no CuPy and no GPU driver on this machine")


def _pytest_targets(session: nox.Session) -> list[str]:
    """The test folders (packages', examples', the noxfile's), unless the user named test paths after ``--``."""
    for arg in session.posargs:
        candidate = arg.split("::", 1)[0]
        if not arg.startswith("-") and (ROOT / candidate).exists():
            return []
    targets = _test_dirs()
    if not targets:
        session.error("no packages/*/tests folders found: refusing to report success on zero tests")
    if (ROOT / EXAMPLE_TESTS).is_dir():
        targets.append(EXAMPLE_TESTS)
    if (ROOT / TOOLING_TESTS).is_dir():
        targets.append(TOOLING_TESTS)
    return targets


def _demo_task(posargs: list[str]) -> tuple[str, list[str]]:
    """Split ``--task NAME`` (or ``--task=NAME``; default ``digits``) from the arguments meant for the example."""
    task, rest, args = "digits", [], iter(posargs)
    for arg in args:
        if arg == "--task":
            task = next(args, "")
        elif arg.startswith("--task="):
            task = arg.split("=", 1)[1]
        else:
            rest.append(arg)
    if task not in DEMO_TASKS:
        raise ValueError(f"--task must be one of {', '.join(DEMO_TASKS)}, got {task!r}")
    return task, rest


# --------------------------------------------------------------------------- sessions


@nox.session
@nox.parametrize("backend", BACKENDS)
def tests(session: nox.Session, backend: str) -> None:
    """Run every package's tests on one backend (EMBER_TEST_BACKEND), in parallel with xdist."""
    extras, also = "test", ()
    if backend != "cpu":
        extras, also = _gpu_requirements(session, backend)
    _install_packages(session, extras=extras,
                      also=(*also, *EXAMPLE_REQUIREMENTS, *TOOLING_REQUIREMENTS, *TRITON_REQUIREMENTS))
    if backend != "cpu" and _has_venv(session):
        problem = _gpu_problem(backend, _parse_probe(session.run("python", "-c", _GPU_PROBE, silent=True) or ""))
        if problem is not None:
            session.skip(problem)
    # success_codes=[0]: pytest's exit code 5 ("no tests collected") fails the session.
    session.run(
        "pytest",
        "-n",
        "auto",
        *_pytest_targets(session),
        *session.posargs,
        env={"EMBER_TEST_BACKEND": backend},
        success_codes=[0],
    )


# ember-dynamo reads CPython bytecode, whose instruction set changes with every minor version:
# its tests run on each version it supports (`tests` covers nox's own Python for every package).
# pyenv users: make the interpreters visible first, e.g. `PYENV_VERSION=3.11.7:3.12.1:3.13.0`.
DYNAMO_PYTHONS = ["3.11", "3.12", "3.13"]


@nox.session(python=DYNAMO_PYTHONS)
def dynamo(session: nox.Session) -> None:
    """ember-dynamo's tests on one CPython version (``nox -s dynamo-3.12``; ``-s dynamo`` runs all three)."""
    # no test extras: they pull in onnxruntime and tensorboard, which the dynamo tests do not use and
    # which may lag behind a new CPython
    _install_packages(session, extras=None, also=("pytest>=8", "pytest-xdist>=3"))
    targets = ["packages/dynamo/tests"] if (ROOT / "packages" / "dynamo" / "tests").is_dir() else []
    if not targets:
        session.error("packages/dynamo/tests not found: refusing to report success on zero tests")
    has_args = any(not a.startswith("-") and (ROOT / a.split("::", 1)[0]).exists() for a in session.posargs)
    session.run("pytest", "-n", "auto", *([] if has_args else targets), *session.posargs, success_codes=[0])


# Counts the parity tests that `-m parity` selects, without running them.
_COUNT_PARITY = r"""
import sys
import pytest

class _Count:
    n = 0
    def pytest_collection_finish(self, session):
        _Count.n = len(session.items)

rc = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-m", "parity", *sys.argv[1:]], plugins=[_Count()])
print(f"ember-parity-tests={_Count.n}")
sys.exit(0 if rc in (0, pytest.ExitCode.NO_TESTS_COLLECTED) else int(rc))
"""


@nox.session
def parity(session: nox.Session) -> None:
    """Compare ember with PyTorch (tests marked ``parity`` or under ``packages/*/tests/parity/``)."""
    _install_packages(session, extras="test", also=EXAMPLE_REQUIREMENTS)
    problem = _try_install_torch(session)
    if problem is not None:
        session.skip(problem)
    targets = _test_dirs()
    if (ROOT / EXAMPLE_TESTS).is_dir():
        targets.append(EXAMPLE_TESTS)  # the demo against its PyTorch twin
    counter = Path(session.create_tmp()) / "count_parity_tests.py"
    counter.write_text(_COUNT_PARITY, encoding="utf-8")
    output = session.run("python", str(counter), *targets, silent=True) or ""
    counts = [line for line in output.splitlines() if line.startswith("ember-parity-tests=")]
    if not counts:
        session.error(f"could not count parity tests; pytest said:\n{output}")
    count = int(counts[-1].split("=", 1)[1])
    if count == 0:
        # Deliberately not a failure: the op-library issue adds the first parity tests.
        # Once any exist, zero collected is impossible and pytest's exit code 5 fails below.
        session.log(
            "No parity tests exist yet (none marked `parity`, no packages/*/tests/parity/): nothing to compare."
        )
        return
    session.log(f"{count} parity tests")
    session.run("pytest", "-n", "auto", "-m", "parity", *targets, *session.posargs, success_codes=[0])


@nox.session
def lint(session: nox.Session) -> None:
    """Lint the whole repository with ruff (settings in ruff.toml)."""
    _install(session, RUFF_SPEC)
    session.run("ruff", "check", ".", *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """Build the Sphinx docs (HTML, warnings are errors) and run the doctests they contain."""
    _install_packages(session, extras=None, also=("-r", DOCS_REQUIREMENTS))
    build = ROOT / "docs" / "_build"
    common = ["-W", "--keep-going", "-E", "-q"]
    session.run("sphinx-build", *common, "-b", "html", "docs", str(build / "html"), *session.posargs)
    session.run("sphinx-build", *common, "-b", "doctest", "docs", str(build / "doctest"))
    session.log(f"HTML docs: {build / 'html' / 'index.html'}")


@nox.session
def bench(session: nox.Session) -> None:
    """Time ember against PyTorch; writes BENCHMARKS.md and benchmarks/ratios.png (``-- -k NAME`` for one)."""
    # ducc0: ember.fft's faster CPU path (the optional extra ember-core[fft]), as a user who wants speed installs it
    _install_packages(session, extras=None, also=("matplotlib", "tqdm", "threadpoolctl", "ducc0>=0.34"))
    problem = _try_install_torch(session)
    if problem is not None:
        session.warn(f"{problem}; benchmarking ember alone")
    session.run("python", "benchmarks/run.py", *session.posargs)


@nox.session
def models(session: nox.Session) -> None:
    """The ember.compile model suite next to torch.compile; writes BENCHMARKS_MODELS.md
    (``-- --device cpu --mode training -k NAME``; see benchmarks/models/README.md)."""
    _install_packages(session, extras=None, also=("matplotlib",))
    problem = _try_install_torch(session)
    if problem is not None:
        session.warn(f"{problem}; running ember alone")
    session.run("python", "benchmarks/models/run.py", *session.posargs)


# (find_spec of ember.optim raises MissingDistributionError, an ImportError, without ember-autograd)
_HAS_EMBER = """
import importlib.util
try:
    print(all(importlib.util.find_spec(m) is not None for m in ("ember", "ember.optim")))
except ImportError:
    print(False)
"""


def _demo_device(args: list[str]) -> str:
    """The value of the demo's ``--device X`` / ``--device=X`` argument (``"cpu"`` when absent)."""
    for i, arg in enumerate(args):
        if arg == "--device" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--device="):
            return arg.split("=", 1)[1]
    return "cpu"


@nox.session
def demo(session: nox.Session) -> None:
    """Train a CNN on the UCI handwritten digits (``-- --task text``: a char transformer; ``--task tour``: tensors).

    Arguments after ``--`` other than ``--task`` go to the example (``nox -s demo -- --help``).
    The default task first runs the tensor tour (``examples/quickstart.py``, a few
    seconds of self-checks) quietly, then the training. Outputs go to ``runs/<example>/``
    in the repository (ignored by git; outside ``.nox/``, which ``nox -N`` recreates,
    so ``--resume runs/digits_cnn/checkpoint.ember`` works from one session to the next)
    unless ``--output DIR`` is given.
    """
    try:
        task, args = _demo_task(session.posargs)
    except ValueError as exc:
        session.error(str(exc))
    extras, also = None, ()
    if _demo_device(args).startswith("cuda"):  # `-- --device cuda`: CuPy too (an error without a GPU)
        extras, also = _gpu_requirements(session, "cuda", required=True)
    _install_packages(session, extras=extras, also=(*also, *EXAMPLE_REQUIREMENTS))
    if _has_venv(session) and "True" not in (session.run("python", "-c", _HAS_EMBER, silent=True) or ""):
        # `nox -R` reuses the environment without installing: one left empty by a run that stopped early
        session.error("this session's environment has no complete ember install: run `nox -s demo` once without -R")
    if task == "digits" and "--help" not in args and "-h" not in args:
        session.run("python", DEMO_TASKS["tour"], silent=True)  # its output is shown if a check fails
        session.log("tensor tour (examples/quickstart.py): all checks passed")
    session.run("python", DEMO_TASKS[task], *args)


FUZZ_DEFAULT_SECONDS = "120"


@nox.session
def fuzz(session: nox.Session) -> None:
    """Fuzz ``ember.load`` (``fuzz/run.py``) for 120 s; ``-- --seconds N`` and the runner's other options.

    The runner's deterministic mutation loop by default (a seed reproduces a run, and its
    workers are bounded in CPU time and memory); ``-- --engine atheris`` (or ``auto``) installs
    atheris and runs its coverage-guided search instead, falling back to the loop when atheris
    does not install.
    """
    _install_packages(session, extras=None)
    args = list(session.posargs)
    wants_atheris = any(arg in ("atheris", "auto", "--engine=atheris", "--engine=auto") for arg in args)
    if wants_atheris and _has_venv(session):
        try:
            _install(session, "atheris", stamp="atheris")
        except nox.command.CommandFailed:
            session.warn("atheris did not install: fuzzing with the mutation loop")
            args = [a for a in args if a not in ("atheris", "auto", "--engine=atheris", "--engine=auto")]
            args = [a for a in args if a != "--engine"] + ["--engine", "loop"]
    if not any(arg == "--seconds" or arg.startswith("--seconds=") for arg in args):
        args += ["--seconds", FUZZ_DEFAULT_SECONDS]
    session.run("python", "fuzz/run.py", *args)


@nox.session(venv_backend="none")
def wheels(session: nox.Session) -> None:
    """Build a wheel of every distribution in ``packages/`` into ``dist/wheels/`` (ember-core's with its C++ extension).

    Install only the pieces you need from there, e.g. ``pip install --find-links
    dist/wheels ember-fx``: pip takes ember-core and ember-autograd from the folder and
    numpy, scipy and ml_dtypes from the index. Wheels come from the cache that every
    session shares (built only when a package's sources changed); the wheels of
    these distributions already in ``dist/wheels/`` are replaced.
    """
    built = _package_wheels(session)
    WHEEL_DIR.mkdir(parents=True, exist_ok=True)
    for wheel in built:
        distribution = wheel.name.split("-", 1)[0]  # the normalized name, e.g. ember_core
        for old in WHEEL_DIR.glob(f"{distribution}-*.whl"):
            old.unlink()
        shutil.copy2(wheel, WHEEL_DIR / wheel.name)
        session.log(f"{WHEEL_DIR.relative_to(ROOT) / wheel.name}")
    session.log(f"install what you need with: pip install --find-links {WHEEL_DIR.relative_to(ROOT)} ember-fx")
