"""Ember's one task runner.

Every session builds its own virtual environment from the packages' own
metadata (``packages/*/pyproject.toml``), so a fresh machine needs only
Python 3.11+ and ``python -m pip install nox``.

Sessions:

* ``tests``: the test suites of every package, once per backend
  (``tests(backend='cpu')``, ``tests(backend='cuda')``, ``tests(backend='rocm')``).
  A backend whose device is absent is skipped with a one-line reason.
* ``parity``: the tests that compare ember with PyTorch (``-m parity``).
* ``lint``: ruff.
* ``docs``: Sphinx HTML with warnings as errors, then the doctests.
* ``bench``: ``benchmarks/run.py``; writes ``BENCHMARKS.md`` and ``benchmarks/ratios.png``.
* ``demo``: the demo in ``examples/``: a CNN trained on the UCI handwritten digits
  (``-- --task text``: a character-level transformer; ``-- --task tour``: the tensor tour).

Arguments after ``--`` go to the tool a session runs, e.g.
``nox -s tests -- -k promotion -x`` or ``nox -s bench -- -k add_1elem``.

Run ``nox`` with ``--no-venv`` to use the current environment instead (installs are
then skipped; you install the packages yourself, e.g. on a machine without network).
"""

from __future__ import annotations

import json
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
# `nox -s demo -- --task NAME`: the example each task runs.
DEMO_TASKS = {
    "digits": "examples/digits_cnn.py",
    "text": "examples/char_transformer.py",
    "tour": "examples/quickstart.py",
}

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


def _install(session: nox.Session, *args: str, env: dict[str, str] | None = None) -> None:
    """``pip install`` into the session's venv; a no-op under ``nox --no-venv``."""
    if not _has_venv(session):
        session.log(f"--no-venv: not installing {' '.join(args)}; using the current environment")
        return
    session.install(*args, env=env)


def _install_packages(session: nox.Session, extras: str | None = "test", also: tuple[str, ...] = ()) -> None:
    """Install every package of the monorepo (not editable) with ``extras``, plus ``also``.

    ember-core's C++ extension is built with scikit-build-core in a build folder
    private to the session, so it never shares CMake state with a developer's
    editable build under ``packages/tensor-core/build``.
    """
    packages = _packages()
    if not packages:
        session.error("no packages found under packages/*/pyproject.toml")
    suffix = f"[{extras}]" if extras else ""
    specs = [f"{pkg}{suffix}" for pkg in packages]
    env = None
    if _has_venv(session):
        build_dir = Path(session.create_tmp()).resolve() / "skbuild" / "{wheel_tag}"
        env = {"SKBUILD_BUILD_DIR": str(build_dir)}
    _install(session, *specs, *also, env=env)


def _try_install_torch(session: nox.Session) -> str | None:
    """Install the pinned PyTorch; return why it failed, or ``None`` on success."""
    if not _has_venv(session):
        probe = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True)
        return None if probe.returncode == 0 else "torch is not importable in the current environment"
    try:
        session.install(TORCH_SPEC)
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
    """The test folders (the packages' and the examples'), unless the user named test paths after ``--``."""
    for arg in session.posargs:
        candidate = arg.split("::", 1)[0]
        if not arg.startswith("-") and (ROOT / candidate).exists():
            return []
    targets = _test_dirs()
    if not targets:
        session.error("no packages/*/tests folders found: refusing to report success on zero tests")
    if (ROOT / EXAMPLE_TESTS).is_dir():
        targets.append(EXAMPLE_TESTS)
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
    _install_packages(session, extras=extras, also=(*also, *EXAMPLE_REQUIREMENTS))
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
    _install_packages(session, extras=None, also=("matplotlib", "tqdm", "threadpoolctl"))
    problem = _try_install_torch(session)
    if problem is not None:
        session.warn(f"{problem}; benchmarking ember alone")
    session.run("python", "benchmarks/run.py", *session.posargs)


_HAS_EMBER = "import importlib.util as u; print(all(u.find_spec(m) is not None for m in ('ember', 'ember.optim')))"


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
    in the repository (ignored by git; outside ``.nox/``, which nox recreates on each run,
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
