"""Every differentiable op's gradients against PyTorch's (the CPU wheel), over the op_db samples.

For each sample (float64, and complex128 where the op supports it), the same
inputs go to ember and to PyTorch, both outputs get the same seeded random
gradients, and ``ember.autograd.grad`` must equal ``torch.autograd.grad``:
the same inputs differentiated (the rule of :mod:`_grad_samples`), the same
outputs requiring grad, and the same values (including PyTorch's choices at
non-differentiable points: ties, kinks, boundaries).

An op differs from PyTorch only where :data:`KNOWN_DIFFERENCES` says so, with
a reason; those are strict xfails. Samples are left out of the comparison only
where PyTorch is no reference, each case listed with its reason (ember's
gradients there are still gradchecked by ``test_ops_grad.py``):

* :data:`TORCH_CANNOT`: PyTorch raises (no complex autograd, no derivative, a
  bug of its backward); at least one sample must still make it raise;
* :data:`UNDEFINED_IN_PYTORCH`: inputs PyTorch documents as undefined;
* samples that draw random numbers (PyTorch's generator is not ember's).

``test_refuses_grad_where_pytorch_does``: where PyTorch refuses an argument
that requires grad (``_grad_samples.NONDIFF_ARGS``), ember raises too.

The gradients are computed on the backend's device (``_parity_device`` in ember-core's
``tests/parity``): with the cuda backend, ember's CUDA gradients against PyTorch's CUDA
gradients. PyTorch runs each case on the CPU first and on CUDA only when the CPU accepts it
(an invalid index would be a device-side assert, fatal to the process's CUDA context); it stays
on the CPU for the ops of :data:`TORCH_CANNOT` and where its CUDA build has no kernel. Under a PyTorch other than the pinned one, :data:`VERSION_TORCH_CANNOT` and
:data:`VERSION_DIFFERENCES` describe what that release does differently.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the shared helpers of tests/

from _grad_samples import NONDIFF_ARGS, GradCase, grad_cases, grad_dtypes  # noqa: E402

# the parity helpers of ember-core's tests: the device under test, the pinned torch version
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tensor-core" / "tests" / "parity"))
from _parity_device import EMBER_DEVICE, IS_PINNED_TORCH, ON_GPU, PINNED_TORCH, TORCH_DEVICE  # noqa: E402
from _parity_device import to_torch as _to_torch_on  # noqa: E402

import ember  # noqa: E402
from ember.testing import op_db  # noqa: E402
from ember.testing._torch_oracle import to_torch, torch_counterpart  # noqa: E402

#: (op name, dtype name or None for all) -> why ember's gradient differs from PyTorch's there.
KNOWN_DIFFERENCES: dict[tuple[str, str | None], str] = {
    ("ctc_loss", None): (
        "PyTorch's gradient with respect to log_probs is not the derivative: it adds exp(log_probs) times a "
        "constant per (time, batch), which the backward of the log_softmax that produces log_probs cancels. "
        "ember's is the derivative (gradchecked); through log_softmax both agree "
        "(test_ctc_loss_through_log_softmax_matches_pytorch)"
    ),
}

_NO_COMPLEX = "PyTorch has no complex autograd for this op"

#: (op name, dtype name or None for all) -> (what PyTorch raises, a regex; why): samples on which
#: PyTorch cannot compute the gradient at all are not compared (ember's are gradchecked by
#: test_ops_grad.py). The other samples of the op still are, and at least one sample must still
#: make PyTorch raise (so an entry that no longer applies is noticed).
TORCH_CANNOT: dict[tuple[str, str | None], tuple[str, str]] = {
    ("linalg_cond", None): (
        "modified by an inplace operation",
        "torch.linalg.cond's backward for the orders through the inverse ('fro', 'nuc', 1, inf) fails: it "
        "writes into linalg_inv_ex's saved output",
    ),
    ("vander", None): (
        "modified by an inplace operation", "torch.vander's backward fails: it writes into a saved output"
    ),
    ("bilinear", "complex128"): ("_trilinear does not support automatic differentiation", _NO_COMPLEX),
    ("embedding", "complex128"): ("does not support automatic differentiation", _NO_COMPLEX),
    ("index_reduce", "complex128"): ("does not support automatic differentiation", _NO_COMPLEX),
    ("nan_to_num", "complex128"): ("does not support automatic differentiation", _NO_COMPLEX),
    ("scatter_reduce", "complex128"): ("does not support automatic differentiation", _NO_COMPLEX),
    ("silu", "complex128"): ("does not support automatic differentiation", _NO_COMPLEX),
    ("soft_margin_loss", "complex128"): ("does not support automatic differentiation", _NO_COMPLEX),
    ("scatter", None): (
        "ScatterBackward0 returned an invalid gradient|derivative for aten::scatter is not implemented",
        "PyTorch's backward shapes src's gradient like index, which fails when src is larger than index; "
        "and PyTorch has no derivative of scatter with reduce= (ember has one for 'add')",
    ),
    ("scatter_add", None): (
        "ScatterAddBackward0 returned an invalid gradient",
        "PyTorch's backward shapes src's gradient like index, which fails when src is larger than index",
    ),
    ("heaviside", None): ("derivative for aten::heaviside is not implemented", "PyTorch has no heaviside derivative"),
    ("floor_divide", None): (
        "derivative for aten::floor_divide is not implemented",
        "PyTorch has no floor_divide derivative (ember: zero, as for floor)",
    ),
    ("remainder", None): (
        "derivative for aten::remainder is not implemented",
        "PyTorch has no derivative of remainder(number, tensor) with respect to the tensor",
    ),
    ("where", "complex128"): (
        "input_is_complex == grad_is_complex",
        "PyTorch's where backward fails when one branch is complex and the other real",
    ),
    ("index_fill", None): (
        "INDICES element is out of DATA bounds",
        "PyTorch's index_fill backward fails on a negative index with a tensor value",
    ),
    ("addr", None): (
        "addmv input tensors must have the same dtype",
        "PyTorch's addr backward fails when the vectors' dtypes differ (type promotion)",
    ),
}

#: What PyTorch releases before the pinned one cannot differentiate, in the form of :data:`TORCH_CANNOT`
#: (used instead of its entry when the installed torch is not ``PINNED_TORCH``).
VERSION_TORCH_CANNOT: dict[tuple[str, str | None], tuple[str, str]] = {
    ("aminmax", None): ("derivative for aten::aminmax is not implemented", "no aminmax derivative before torch 2.13"),
    ("addr", None): (
        "addmv input tensors must have the same dtype|expected scalar type",
        "PyTorch's addr backward fails when the vectors' dtypes differ (type promotion)",
    ),
}

#: op name -> why gradients on CUDA differ from PyTorch's CUDA ones (with the cuda backend; those cases skip).
GPU_DIFFERENCES = {
    "msort": "PyTorch's CUDA sort is not stable, so tied elements' gradients go to other positions than ember's",
    "lu": "for a batch of small square complex matrices PyTorch's CUDA LU picks pivots by |z|, ember (cuSOLVER) and "
    "LAPACK by |re| + |im|: other factors, so other gradients (real dtypes agree; gradchecked in test_ops_grad.py)",
}

#: (op name, dtype name or None) -> how releases before the pinned one differ (those cases skip there).
VERSION_DIFFERENCES: dict[tuple[str, str | None], str] = {
    ("lp_pool2d", None): "lp_pool values (and so gradients) differ from torch 2.13's",
    ("lp_pool3d", None): "lp_pool values (and so gradients) differ from torch 2.13's",
}

#: op name -> (predicate of a sample, why): samples where PyTorch documents the result as undefined, so
#: its gradient is no reference (test_ops_grad.py gradchecks ember's there).
UNDEFINED_IN_PYTORCH = {
    "polar": (
        lambda sample: bool((sample.input < 0).any()),
        "polar with a negative abs is undefined in PyTorch (its backward then flips the sign of abs's gradient)",
    ),
}

#: At most this many samples per op and dtype are compared.
MAX_SAMPLES = 16

_NO_COUNTERPART: dict[str, str] = {}

OPS = sorted(name for name, info in op_db.items() if info.supports_autograd and grad_dtypes(info))


_to_torch = to_torch


def _torch_callable(info):
    """The PyTorch function matching ``info``, or None with the reason recorded."""
    fn, reason = torch_counterpart(info)
    if fn is None:
        _NO_COUNTERPART[info.name] = reason
    return fn


def _torch_outputs(result):
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)):
        return [t for r in result for t in _torch_outputs(r)]
    return []


def _cases():
    for name in OPS:
        info = op_db[name]
        for dtype in grad_dtypes(info):
            reason = KNOWN_DIFFERENCES.get((name, dtype.name)) or KNOWN_DIFFERENCES.get((name, None))
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
            yield pytest.param(info, dtype, id=f"{name}-{dtype.name}", marks=marks)


def _draws_random_numbers(case):
    """Whether the sample's result depends on the random seed (dropout in training mode, rrelu)."""
    if "random" not in case.info.op.tags:
        return False
    with ember.no_grad():
        case.seed = 1
        first = case.fn(*case.leaves)
        case.seed = 2
        second = case.fn(*case.leaves)
    return any(not np.array_equal(a._host_array(), b._host_array()) for a, b in zip(first, second))


def _ember_grads(case):
    outputs = case.fn(*case.leaves)
    grad_outputs = case.grad_outputs(outputs)
    used = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not used:
        return outputs, grad_outputs, [None] * len(case.leaves)
    grads = ember.autograd.grad(
        [o for o, _ in used], case.leaves, [g for _, g in used], allow_unused=True, materialize_grads=True
    )
    return outputs, grad_outputs, grads


def _torch_grads(fn, case, grad_outputs, device="cpu"):
    def convert(value):
        return _to_torch_on(value, device)

    leaves = [convert(t).requires_grad_(True) for t in case.leaves]
    input, args, kwargs = case.arguments(leaves, convert=convert)
    wrapper = case.info.gradcheck_wrapper  # the same wrapper ember's side ran (GradCase.call)
    result = fn(input, *args, **kwargs) if wrapper is None else wrapper(fn, input, *args, **kwargs)
    outputs = [o for o in _torch_outputs(result) if o.is_floating_point() or o.is_complex()]
    used = [(o, convert(g)) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not used:
        return outputs, [None] * len(leaves)
    grads = torch.autograd.grad(
        [o for o, _ in used], leaves, [g for _, g in used], allow_unused=True, materialize_grads=True
    )
    return outputs, grads


@pytest.mark.parametrize("info, dtype", list(_cases()))
def test_grads_match_pytorch(info, dtype):
    reason = info.skip_reason("test_grads_match_pytorch", dtype)
    if reason:
        pytest.skip(reason)
    fn = _torch_callable(info)
    if fn is None:
        pytest.skip(_NO_COUNTERPART[info.name])
    cannot = TORCH_CANNOT.get((info.name, dtype.name)) or TORCH_CANNOT.get((info.name, None))
    # PyTorch on the CPU only where its known failures could be CUDA device-side asserts
    torch_device = TORCH_DEVICE if cannot is None else "cpu"
    if ON_GPU and info.name in GPU_DIFFERENCES:
        pytest.skip(GPU_DIFFERENCES[info.name])
    if not IS_PINNED_TORCH:
        why = VERSION_DIFFERENCES.get((info.name, dtype.name)) or VERSION_DIFFERENCES.get((info.name, None))
        if why:
            pytest.skip(f"{why} (torch {torch.__version__}; the parity suite pins {PINNED_TORCH})")
        cannot = VERSION_TORCH_CANNOT.get((info.name, dtype.name)) or VERSION_TORCH_CANNOT.get(
            (info.name, None), cannot
        )
    compared = torch_refused = 0
    for case in grad_cases(info, dtype, EMBER_DEVICE, limit=MAX_SAMPLES):
        if _draws_random_numbers(case):
            continue
        undefined = UNDEFINED_IN_PYTORCH.get(info.name)
        if undefined is not None and undefined[0](case.sample):
            continue
        case.seed = 0
        try:
            ours, grad_outputs, our_grads = _ember_grads(case)
        except Exception as exc:  # noqa: BLE001 - reported with the sample
            raise AssertionError(f"{case}: ember raised {type(exc).__name__}: {exc}") from exc
        try:
            # the CPU first: only what it accepts goes to the GPU (an invalid index would be a CUDA assert)
            theirs, their_grads = _torch_grads(fn, case, grad_outputs, "cpu")
            if torch_device != "cpu":
                try:
                    theirs, their_grads = _torch_grads(fn, case, grad_outputs, torch_device)
                except Exception:  # noqa: BLE001, S110 - PyTorch's CUDA build lacks the kernel: the CPU answers
                    pass
        except Exception as exc:  # noqa: BLE001 - reported with the sample
            if cannot is not None and re.search(cannot[0], str(exc)):
                torch_refused += 1
                continue
            raise AssertionError(f"{case}: torch raised {type(exc).__name__}: {exc}") from exc
        assert len(ours) == len(theirs), f"{case}: {len(ours)} differentiable outputs, torch has {len(theirs)}"
        for i, (o, t) in enumerate(zip(ours, theirs)):
            assert tuple(o.shape) == tuple(t.shape), f"{case}: output {i} shape {tuple(o.shape)} vs torch {t.shape}"
            assert o.requires_grad == t.requires_grad, (
                f"{case}: output {i} requires_grad={o.requires_grad}, torch's {t.requires_grad}"
            )
        tol = info.tolerance(dtype)
        rtol, atol = tol if tol is not None else (None, None)
        for label, g, tg in zip(case.labels, our_grads, their_grads):
            if g is None or tg is None:
                assert g is None and tg is None, f"{case}: gradient of {label}: ember {g!r}, torch {tg!r}"
                continue
            try:
                ember.testing.assert_close(
                    g, tg.detach().numpy(force=True), rtol=rtol, atol=atol, equal_nan=True, check_dtype=False
                )
            except AssertionError as exc:
                raise AssertionError(f"{case}: gradient of {label} differs from torch's: {exc}") from None
        compared += 1
    if cannot is not None:
        assert torch_refused, f"TORCH_CANNOT lists {info.name} ({cannot[1]}), but PyTorch raised on no sample"
    if compared == 0 and torch_refused == 0:
        pytest.skip(
            f"no {dtype.name} sample of {info.name} can be compared: each draws random numbers (torch's generator "
            "differs) or is undefined in PyTorch"
        )


def test_ctc_loss_through_log_softmax_matches_pytorch():
    """ctc_loss as it is used, on log_softmax outputs: the gradients of the logits equal PyTorch's."""
    info = op_db["ctc_loss"]
    fn = _torch_callable(info)
    cases = grad_cases(info, ember.float64)
    assert cases
    for case in cases:
        assert case.labels == ["log_probs"], case
        (logits,) = case.leaves
        (ours,) = case.fn(ember.log_softmax(logits, -1))
        (grad_output,) = case.grad_outputs([ours])
        (expected,) = ember.autograd.grad(ours, logits, grad_output)
        torch_logits = _to_torch(logits).requires_grad_(True)
        input, args, kwargs = case.arguments([torch_logits.log_softmax(-1)], convert=_to_torch)
        theirs = fn(input, *args, **kwargs)
        (their_grad,) = torch.autograd.grad(theirs, torch_logits, _to_torch(grad_output))
        ember.testing.assert_close(expected, their_grad.numpy(), check_dtype=False, msg=None)


@pytest.mark.parametrize("op_name, argument", sorted(NONDIFF_ARGS))
def test_refuses_grad_where_pytorch_does(op_name, argument):
    """Where PyTorch refuses an argument that requires grad, ember raises too (forward or backward)."""
    info = op_db[op_name]
    for sample in info.sample_inputs(info, "cpu", ember.float64, False):
        bound = info.op._call_signature.bind(sample.input, *sample.args, **sample.kwargs)
        value = bound.arguments.get(argument)
        if isinstance(value, ember.Tensor) and value.dtype.is_floating_point:
            break
    else:
        pytest.fail(f"no float64 sample of {op_name} passes a tensor as {argument}")
    case = GradCase(info, sample)
    value.requires_grad_(True)
    with pytest.raises((RuntimeError, NotImplementedError)):
        outputs = case.fn(*case.leaves)
        ember.autograd.grad(outputs, [value], [ember.ones_like(o) for o in outputs])


def test_known_differences_name_ops_and_say_why(capsys):
    # every entry names an op of op_db (and a dtype it has) and gives a reason; the lists are then printed
    tables = {"KNOWN_DIFFERENCES": KNOWN_DIFFERENCES, "VERSION_DIFFERENCES": VERSION_DIFFERENCES,
              "TORCH_CANNOT": {k: why for k, (_, why) in TORCH_CANNOT.items()},
              "VERSION_TORCH_CANNOT": {k: why for k, (_, why) in VERSION_TORCH_CANNOT.items()},
              "GPU_DIFFERENCES": {(op, None): why for op, why in GPU_DIFFERENCES.items()}}
    for table, entries in tables.items():
        for (op, dtype), why in entries.items():
            assert op in op_db, f"{table}: {op} is not an op of op_db"
            assert dtype is None or dtype in {d.name for d in op_db[op].dtypes}, f"{table}: {op} has no {dtype}"
            assert isinstance(why, str) and why.strip(), f"{table}: {op} gives no reason"
    lines = ["", "gradients: known differences from PyTorch:"]
    lines += [
        f"  {op} [{dt or 'all dtypes'}]: {why}" for (op, dt), why in sorted(KNOWN_DIFFERENCES.items(), key=str)
    ] or ["  (none)"]
    lines += ["gradients PyTorch cannot compute (those samples are not compared):"]
    lines += [f"  {op} [{dt or 'all dtypes'}]: {why}" for (op, dt), (_, why) in sorted(TORCH_CANNOT.items(), key=str)]
    with capsys.disabled():
        print("\n".join(lines))
