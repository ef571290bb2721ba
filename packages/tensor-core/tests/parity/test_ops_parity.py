"""Every op over every sample against PyTorch: values, shapes and dtypes.

Driven by ``ember.testing.op_db``. An op differs from PyTorch only where
:data:`KNOWN_DIFFERENCES` says so, with a reason; those cases are strict
xfails, so a difference that goes away is noticed too. The session prints a
table of the ops that differ and of the ops without a PyTorch counterpart.

Values run on the backend's device (``_parity_device``): with the cuda backend,
ember's CUDA results against PyTorch's CUDA results. Error types are compared on
the CPU (a CUDA kernel's index check is a device-side assert in PyTorch, which
would end the process's CUDA context). Under a PyTorch other than the pinned
one, :data:`VERSION_DIFFERENCES` and differing error types skip, with the reason.
"""

from __future__ import annotations

import pytest
import torch
from _parity_device import (
    EMBER_DEVICE,
    IS_PINNED_TORCH,
    ON_GPU,
    PINNED_TORCH,
    device_holds,
    torch_call,
    torch_numpy,
)

import ember
from ember.testing import op_db
from ember.testing._torch_oracle import to_torch, torch_counterpart

#: (op name, dtype name or None for all) -> why ember differs from PyTorch there.
KNOWN_DIFFERENCES: dict[tuple[str, str | None], str] = {}

#: (op name, dtype name or None for all) -> why ember's CUDA results differ from PyTorch's CUDA results there
#: (with the cuda backend only; those cases skip).
GPU_DIFFERENCES: dict[tuple[str, str | None], str] = {
    ("index_put", None): "with repeated indices (accumulate=False) which write wins is undefined on CUDA; "
    "ember keeps the last one, as on CPU, PyTorch's CUDA kernel another",
    ("group_norm", "bfloat16"): "PyTorch's CUDA kernel normalises in bfloat16 steps; ember in float32, rounded once "
    "(a near-constant group amplifies the difference)",
    ("addr", "float16"): "PyTorch's CUDA kernel rounds the float16 outer product before adding; ember rounds once",
    ("round", "float16"): "PyTorch's CUDA kernel scales by 10**decimals in float16; ember in float32",
    ("lu", "complex64"): "for a batch of small square complex matrices PyTorch's CUDA LU picks pivots by |z|; "
    "ember (cuSOLVER getrf) by |re| + |im|, as LAPACK and PyTorch's CPU do (same pivots as on CPU)",
    ("lu", "complex128"): "for a batch of small square complex matrices PyTorch's CUDA LU picks pivots by |z|; "
    "ember (cuSOLVER getrf) by |re| + |im|, as LAPACK and PyTorch's CPU do (same pivots as on CPU)",
    ("linalg_lstsq", None): "PyTorch's CUDA lstsq has only the 'gels' driver (its default there: residuals, no "
    "rank) and refuses the others; ember runs the LAPACK drivers on a host copy, with the CPU's default 'gelsy'",
}

#: (op name, dtype name or None for all) -> how PyTorch releases before the pinned one differ there.
#: Applied only when the installed torch is not :data:`PINNED_TORCH` (those cases skip).
VERSION_DIFFERENCES: dict[tuple[str, str | None], str] = {
    ("clamp", None): "clamping to a nan bound gives the bound, not nan, in torch before 2.13",
    ("clip", None): "clamping to a nan bound gives the bound, not nan, in torch before 2.13",
    ("lp_pool2d", None): "lp_pool values differ from torch 2.13's",
    ("lp_pool3d", None): "lp_pool values differ from torch 2.13's",
    ("trace", "float16"): "trace has no float16 CPU kernel in torch before 2.13",
    ("trace", "bfloat16"): "trace has no bfloat16 CPU kernel in torch before 2.13",
    ("aminmax", None): "aminmax(keepdim=True) of a full reduction gives 0-dim results in torch 2.11 (CUDA)",
}

_NO_COUNTERPART: dict[str, str] = {}
_DIFFERENT: list[tuple[str, str, str]] = []


_to_torch = to_torch


def _torch_callable(info):
    """The PyTorch function matching ``info``, or None with the reason recorded."""
    fn, reason = torch_counterpart(info)
    if fn is None:
        _NO_COUNTERPART[info.name] = reason
    return fn


def _cases():
    for name in sorted(op_db):
        info = op_db[name]
        if "random" in info.op.tags:
            continue
        for dtype in info.dtypes:
            marks = []
            reason = KNOWN_DIFFERENCES.get((name, dtype.name)) or KNOWN_DIFFERENCES.get((name, None))
            if reason:
                marks.append(pytest.mark.xfail(reason=reason, strict=True))
            yield pytest.param(info, dtype, id=f"{name}-{dtype.name}", marks=marks)


_torch_values = torch_numpy


def _skip_if_version_differs(info, dtype):
    if ON_GPU:
        why = GPU_DIFFERENCES.get((info.name, dtype.name)) or GPU_DIFFERENCES.get((info.name, None))
        if why:
            pytest.skip(why)
    if IS_PINNED_TORCH:
        return
    why = VERSION_DIFFERENCES.get((info.name, dtype.name)) or VERSION_DIFFERENCES.get((info.name, None))
    if why:
        pytest.skip(f"{why} (torch {torch.__version__}; the parity suite pins {PINNED_TORCH})")


def _compare(ours, theirs, info, dtype, sample):
    if isinstance(theirs, (tuple, list)) and not isinstance(theirs, torch.Tensor):
        assert isinstance(ours, tuple) and len(ours) == len(theirs), f"{sample}: {len(theirs)} outputs in torch"
        for o, t in zip(ours, theirs):
            _compare(o, t, info, dtype, sample)
        return
    if not isinstance(theirs, torch.Tensor):
        assert ours == theirs, sample
        return
    assert tuple(ours.shape) == tuple(theirs.shape), (
        f"{sample}: shape {tuple(ours.shape)} vs torch {tuple(theirs.shape)}"
    )
    assert ours.dtype.name == str(theirs.dtype).replace("torch.", ""), (
        f"{sample}: dtype {ours.dtype} vs torch {theirs.dtype}"
    )
    if info.name in ("empty", "empty_like", "empty_strided"):
        return
    tol = info.tolerance(dtype) or ({"float16": (1e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2)}.get(ours.dtype.name))
    rtol, atol = tol if tol is not None else (None, None)
    ember.testing.assert_close(
        ours, _torch_values(theirs), rtol=rtol, atol=atol, equal_nan=True, check_dtype=False, msg=None
    )


@pytest.mark.parametrize("info, dtype", list(_cases()))
def test_matches_pytorch(info, dtype):
    reason = info.skip_reason("test_matches_pytorch", dtype)
    if reason:  # (eigen- and singular vectors: unique up to a phase; compared through reconstructions instead)
        pytest.skip(reason)
    fn = _torch_callable(info)
    if fn is None:
        pytest.skip(_NO_COUNTERPART[info.name])
    _skip_if_version_differs(info, dtype)
    if not device_holds(dtype):
        pytest.skip(f"{dtype.name} tensors are not supported on the {EMBER_DEVICE} device")
    for sample in info.sample_inputs(info, EMBER_DEVICE, dtype, False):
        try:
            theirs = torch_call(fn, sample.input, *sample.args, **sample.kwargs)
        except Exception as exc:  # noqa: BLE001 - torch refusing is a difference too
            with pytest.raises(
                type(exc) if isinstance(exc, (RuntimeError, TypeError, ValueError, IndexError)) else Exception
            ):
                sample.call(info.op)
            continue
        ours = sample.call(info.op)
        try:
            _compare(ours, theirs, info, dtype, sample)
        except AssertionError as exc:
            if _closer_to_float64(fn, sample, ours, theirs):
                continue
            _DIFFERENT.append((info.name, dtype.name, str(exc).splitlines()[0]))
            raise


def _upcast(value):
    """``value`` with its float16/bfloat16 tensors (also inside lists and tuples) as float64."""
    if isinstance(value, ember.Tensor) and value.dtype in (ember.float16, ember.bfloat16):
        return value.double()
    if isinstance(value, (list, tuple)):
        return type(value)(_upcast(v) for v in value)
    return value


def _closer_to_float64(fn, sample, ours, theirs):
    """Whether ``ours`` (a float16/bfloat16 tensor result) is at least as close as PyTorch's ``theirs``
    to PyTorch's float64 result for the same (exactly upcast) inputs, in the largest error.

    Low-precision kernels may round at different points: PyTorch's CPU ``conv_transpose3d`` in
    bfloat16 rounds partial sums, ember rounds once from float32, and the two then differ by more
    than the dtype's tolerance at a few elements. A difference in ember's favour is not a defect.
    """
    if not (isinstance(ours, ember.Tensor) and isinstance(theirs, torch.Tensor)):
        return False
    if ours.dtype not in (ember.float16, ember.bfloat16) or ours.shape != tuple(theirs.shape):
        return False
    args = [_upcast(a) for a in sample.args]
    kwargs = {k: _upcast(v) for k, v in sample.kwargs.items()}
    try:
        reference = torch_call(fn, _upcast(sample.input), *args, **kwargs)
    except Exception:  # noqa: BLE001 - no float64 reference: the plain comparison's verdict stands
        return False
    if not isinstance(reference, torch.Tensor) or reference.dtype != torch.float64:
        return False
    exact = _torch_values(reference).astype("float64")
    our_error = abs(ours.double().cpu().numpy() - exact)
    their_error = abs(_torch_values(theirs.double()).astype("float64") - exact)
    return bool(our_error.max() <= their_error.max())


@pytest.mark.parametrize("info", [op_db[n] for n in sorted(op_db)], ids=sorted(op_db))
def test_errors_match_pytorch_types(info):
    fn = _torch_callable(info)
    if fn is None:
        pytest.skip(_NO_COUNTERPART[info.name])
    for error in info.error_inputs(info, "cpu"):
        with pytest.raises(error.error_type):
            error.sample.call(info.op)
        sample = error.sample
        try:
            fn(_to_torch(sample.input), *_to_torch(sample.args), **_to_torch(sample.kwargs))
        except Exception as exc:  # noqa: BLE001 - which type is the point of the next assert
            raised = exc
        else:
            raised = None
        if not IS_PINNED_TORCH and not isinstance(raised, error.error_type):
            pytest.skip(
                f"{sample}: torch {torch.__version__} raises {type(raised).__name__ if raised else 'nothing'}; "
                f"the expected {error.error_type.__name__} is torch {PINNED_TORCH}'s"
            )
        assert raised is not None, f"{sample}: torch raises nothing, ember raises {error.error_type.__name__}"
        assert isinstance(raised, error.error_type), (
            f"{sample}: ember raises {error.error_type.__name__}, torch raises {type(raised).__name__}"
        )


def test_print_difference_table(capsys):
    """Runs last in the file: prints what differs (when run in one process) and what has no counterpart."""
    lines = ["", "ops without a PyTorch counterpart:"]
    lines += [f"  {name}: {why}" for name, why in sorted(_NO_COUNTERPART.items())] or ["  (none)"]
    lines += ["known differences from PyTorch:"]
    lines += [
        f"  {op} [{dt or 'all dtypes'}]: {why}" for (op, dt), why in sorted(KNOWN_DIFFERENCES.items(), key=str)
    ] or ["  (none)"]
    if _DIFFERENT:
        lines += ["unlisted differences found in this process:"]
        lines += [f"  {op} [{dt}]: {msg}" for op, dt, msg in _DIFFERENT]
    with capsys.disabled():
        print("\n".join(lines))
    for table in (KNOWN_DIFFERENCES, VERSION_DIFFERENCES, GPU_DIFFERENCES):  # real ops and dtypes, with reasons
        for (op, dtype), why in table.items():
            assert op in op_db and (dtype is None or dtype in {d.name for d in op_db[op].dtypes}), (op, dtype)
            assert isinstance(why, str) and why.strip(), op
