"""Test-suite wiring shared by the tests of every package: backend choice and markers.

The backend comes from the environment variable ``EMBER_TEST_BACKEND`` (``cpu``,
``cuda`` or ``rocm``; default ``cpu``), which ``nox -s tests`` sets for each of its
parametrized runs. The same tests run unchanged on every backend:

* the ``device`` fixture gives the backend's ember device string (``"cpu"``, or
  ``"cuda"`` for both CUDA and ROCm, which share a device type as in PyTorch);
* ``@pytest.mark.cuda`` marks a test that needs a GPU; it is skipped, with the
  reason, unless the backend is ``cuda``/``rocm`` and CuPy sees a device;
* ``@pytest.mark.parity`` marks a test that compares with PyTorch; it is skipped
  unless ``torch`` is importable. Every test under a ``tests/parity/`` directory
  gets this marker automatically (``nox -s parity`` runs them), and without
  ``torch`` those directories are not collected at all, so their modules may
  ``import torch`` at the top. A parity test elsewhere must import torch lazily.
* the ``threads`` fixture runs a test on 1 and on 2 ember CPU threads.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path

import pytest

BACKENDS = ("cpu", "cuda", "rocm")
BACKEND_ENV_VAR = "EMBER_TEST_BACKEND"


def selected_backend() -> str:
    """The backend named by ``EMBER_TEST_BACKEND`` (``cpu`` when unset)."""
    return os.environ.get(BACKEND_ENV_VAR, "cpu").strip().lower() or "cpu"


@functools.cache
def gpu_unavailable_reason(backend: str) -> str | None:
    """Why ``backend`` has no usable device here, or ``None`` when it has one."""
    if backend == "cpu":
        return None
    try:
        import cupy
    except Exception as exc:  # ImportError, or a CuPy build that fails to load its libraries
        return f"backend {backend!r} needs CuPy, which failed to import ({type(exc).__name__}: {exc})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # cupy's CUDARuntimeError when no driver is present
        return f"backend {backend!r}: CuPy found no GPU driver ({exc})"
    if count < 1:
        return f"backend {backend!r}: CuPy sees no GPU"
    is_hip = bool(getattr(cupy.cuda.runtime, "is_hip", False))
    if backend == "rocm" and not is_hip:
        return "backend 'rocm': this CuPy is a CUDA build, not a ROCm one"
    if backend == "cuda" and is_hip:
        return "backend 'cuda': this CuPy is a ROCm build; use EMBER_TEST_BACKEND=rocm"
    return None


def torch_unavailable_reason() -> str | None:
    """Why parity tests cannot run here, or ``None`` when ``torch`` is importable."""
    if importlib.util.find_spec("torch") is None:
        return "parity test needs PyTorch, which is not installed (run `nox -s parity`)"
    return None


def _in_parity_dir(path: Path) -> bool:
    """Whether ``path`` lies under a ``tests/parity/`` directory."""
    parts = path.parts
    return any(parts[i] == "tests" and parts[i + 1] == "parity" for i in range(len(parts) - 1))


def pytest_configure(config: pytest.Config) -> None:
    backend = selected_backend()
    if backend not in BACKENDS:
        raise pytest.UsageError(f"{BACKEND_ENV_VAR}={backend!r} is not a known backend; expected one of {BACKENDS}")
    # The markers are declared in the root pytest.ini too; declaring them here keeps
    # `--strict-markers` happy when pytest is run with another configuration file.
    config.addinivalue_line("markers", "cuda: needs a GPU (CUDA or ROCm through CuPy)")
    config.addinivalue_line("markers", "parity: compares with PyTorch; needs torch")


def pytest_report_header(config: pytest.Config) -> list[str]:
    backend = selected_backend()
    reason = gpu_unavailable_reason(backend)
    status = "device available" if reason is None else f"no device: {reason}"
    lines = [f"ember test backend: {backend} ({status})"]
    torch_reason = torch_unavailable_reason()
    if torch_reason is not None:
        lines.append(f"tests/parity/ not collected: {torch_reason}")
    return lines


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    # Without torch, parity modules (which may import torch at the top) would fail to import.
    if _in_parity_dir(collection_path) and torch_unavailable_reason() is not None:
        return True
    return None  # let pytest decide


@pytest.hookimpl(tryfirst=True)  # mark before `-m parity` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    backend = selected_backend()
    gpu_reason = gpu_unavailable_reason(backend) if backend != "cpu" else "test needs a GPU; backend is 'cpu'"
    torch_reason = torch_unavailable_reason()
    for item in items:
        if _in_parity_dir(Path(item.path)):
            item.add_marker(pytest.mark.parity)
        if gpu_reason is not None and item.get_closest_marker("cuda") is not None:
            item.add_marker(pytest.mark.skip(reason=gpu_reason))
        if torch_reason is not None and item.get_closest_marker("parity") is not None:
            item.add_marker(pytest.mark.skip(reason=torch_reason))


@pytest.fixture(scope="session")
def backend() -> str:
    """The backend under test: ``"cpu"``, ``"cuda"`` or ``"rocm"``."""
    return selected_backend()


@pytest.fixture(scope="session")
def device(backend: str) -> str:
    """The ember device string for the backend under test (ROCm is device type ``"cuda"``)."""
    reason = gpu_unavailable_reason(backend)
    if reason is not None:
        pytest.skip(reason)
    return "cpu" if backend == "cpu" else "cuda"


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request: pytest.FixtureRequest):
    """Runs the test with ember's CPU kernels on 1, then 2 threads; restores the previous count."""
    from ember import _C  # lazily: the fx and autograd suites need no compiled module

    previous = _C.get_num_threads()
    _C.set_num_threads(request.param)
    yield request.param
    _C.set_num_threads(previous)
