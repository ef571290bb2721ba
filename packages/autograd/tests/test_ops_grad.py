"""The gradient of every differentiable op of ``ember.testing.op_db``, over its samples.

* ``test_gradcheck``: autograd's vector-Jacobian products against central finite
  differences (:func:`ember.autograd.gradcheck`) for every op with
  ``supports_autograd``, in float64 and, where the op supports it, complex128;
* ``test_gradgradcheck``: second derivatives (backward formulas are ember ops,
  so they are differentiable themselves) on the first samples of each op;
* ``test_nondifferentiable_outputs``: ops without gradients (comparisons,
  indices, counts) give outputs that do not require grad, and the integer
  outputs of differentiable ops (``max(dim)``'s indices) do not either;
* ``test_inplace_matches_functional``: ``x.clone().op_(...)`` gives the same
  gradients as ``op(x, ...)``, directly and written through a view;
  ``test_inplace_only_ops``: gradcheck of the in-place ops without an
  out-of-place op (``copy_``, ``fill_``, ``zero_``).

What is differentiated, and which samples are used, is the rule of
:mod:`_grad_samples` (float64/complex128 tensors; finite samples; at most
:data:`MAX_SAMPLES` per op). Every exception is listed here with its reason,
and nothing else is skipped:

* :data:`KNOWN_GAPS`: a broken op, as a strict xfail (so a fix is noticed);
* :data:`SAMPLE_SKIPS`: samples at points where finite differences are no
  reference (ties, kinks, domain edges, repeated writes); their gradients are
  compared with PyTorch's in ``parity/`` instead, and each entry must name a
  real sample;
* :data:`HELD_CONSTANT`: arguments gradcheck does not perturb (PyTorch's
  gradient there is a convention, e.g. zero for quantile's ``q``);
* :data:`NOT_GRADCHECKABLE`: ops no sample of which finite differences can
  check (``mode``);
* ``_grad_samples.NO_GRADIENT_SAMPLES``: samples PyTorch has no gradient for;
  ``test_no_gradient_samples_raise`` checks that ember's backward raises too.
"""

from __future__ import annotations

import numpy as np
import pytest
from _grad_samples import (
    BACKWARD_NOT_IMPLEMENTED,
    NO_GRADIENT_SAMPLES,
    GradCase,
    grad_cases,
    grad_dtypes,
    is_differentiable_dtype,
    is_factory,
)

import ember
from ember.autograd import gradcheck, gradgradcheck
from ember.testing import assert_close, make_tensor, op_db

#: At most this many samples per op and dtype are gradchecked (the first ones, which are the basic shapes).
MAX_SAMPLES = 10
#: Second derivatives are checked on this many samples per op and dtype.
GRADGRAD_SAMPLES = 2
#: Above this many input plus output elements, gradcheck checks a random direction (``fast_mode``)
#: instead of whole Jacobians: the slow mode costs a forward per input element and a backward per output element.
FAST_MODE_NUMEL = 64

#: (test name, op name, dtype name or None for all) -> reason: strict xfails.
KNOWN_GAPS: dict[tuple[str, str, str | None], str] = {}


_TIES = (
    "ties: the gradient goes where PyTorch sends it (checked against PyTorch in parity/), which is not "
    "what finite differences see at a tie"
)
_KINK = "a point where the op is not differentiable: finite differences see the jump or kink"
_EDGE = "inputs on the edge of the domain: a finite-difference step leaves it, and the op refuses the input"
_LAST_WRITE = (
    "repeated indices: the output keeps one of the written values, but the gradient (PyTorch's too, checked "
    "in parity/) goes to every one of them"
)

#: (op name, sample name) -> why that sample is left out of gradcheck and gradgradcheck. Each is a point
#: where finite differences are no reference; the gradient there is compared with PyTorch's instead.
SAMPLE_SKIPS: dict[tuple[str, str], str] = {
    ("amin", "ties"): _TIES,
    ("max", "ties: first index"): _TIES,
    ("min", "ties: first index"): _TIES,
    ("cummax", "ties: the latest index"): _TIES,
    ("cummin", "ties: the latest index"): _TIES,
    ("msort", "ties"): _TIES,
    ("sort", "stable, ties"): _TIES,
    ("sort", "stable, descending"): _TIES,
    ("sort", "stable, dim 0"): _TIES,
    ("median", "full, ties"): _TIES,
    ("nanmedian", "full, ties"): _TIES,
    ("round", "halves"): _KINK,
    ("cosine_similarity", "zero vectors"): _KINK,
    ("cosine_embedding_loss", "zero vectors"): _KINK,
    ("kl_div", "zero targets"): _KINK,
    ("gaussian_nll_loss", "clamped var"): _EDGE,
    ("binary_cross_entropy", "saturated (log clamped at -100)"): _EDGE,
    ("index_put", "rows, last write wins"): _LAST_WRITE,
    ("max_unpool2d", "unbatched, output_size"): _LAST_WRITE,
    ("max_unpool3d", "unbatched, output_size"): _LAST_WRITE,
    ("linalg_pinv", "rtol drops singular values"): (
        "PyTorch's pinv gradient is the Golub-Pereyra formula at A itself, not the derivative of the truncated map "
        "that finite differences see (parity/ compares it with PyTorch's)"
    ),
}


def _always(value):
    return True


_Q_ZERO = (
    "PyTorch's gradient with respect to q is zero (it does not differentiate the interpolation position), "
    "and ember's follows it (parity/ checks that): it is not the derivative finite differences see"
)

_GRID_KINKS = (
    "the samples' grids put points exactly on pixel centres and borders, where interpolation (and nearest's "
    "rounding) has kinks, so finite differences in grid are no reference there"
)

#: (op name, argument) -> (predicate of the argument's value, why): in the samples where the predicate
#: holds, gradcheck holds that argument constant (its gradient is still compared with PyTorch's in parity/).
HELD_CONSTANT = {
    ("quantile", "q"): (_always, _Q_ZERO),
    ("nanquantile", "q"): (_always, _Q_ZERO),
    ("grid_sample", "grid"): (_always, _GRID_KINKS),
}

#: op name -> why finite differences cannot check it at all (skipped with the reason; parity/ compares
#: its gradients with PyTorch's instead).
NOT_GRADCHECKABLE: dict[str, str] = {
    "mode": "the mode is a value that occurs several times, so every sample is at a tie of its inputs",
}

DIFF_OPS = sorted(name for name, info in op_db.items() if info.supports_autograd and grad_dtypes(info))
NONDIFF_OPS = sorted(
    name
    for name, info in op_db.items()
    if not info.supports_autograd and any(is_differentiable_dtype(d) for d in info.dtypes) and not is_factory(info.op)
)


def _cases(test, ops=DIFF_OPS):
    for name in ops:
        info = op_db[name]
        for dtype in grad_dtypes(info):
            reason = KNOWN_GAPS.get((test, name, dtype.name)) or KNOWN_GAPS.get((test, name, None))
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
            if test in ("test_gradcheck", "test_gradgradcheck") and name in NOT_GRADCHECKABLE:
                marks = [pytest.mark.skip(reason=NOT_GRADCHECKABLE[name])]
            yield pytest.param(info, dtype, id=f"{name}-{dtype.name}", marks=marks)


def _skip_if_listed(info, test, dtype):
    reason = info.skip_reason(test, dtype)
    if reason:
        pytest.skip(reason)


def _held_constant(info):
    rules = [(arg, test) for (name, arg), (test, _) in HELD_CONSTANT.items() if name == info.name]
    if not rules:
        return None

    def constant(sample):
        bound = info.op._call_signature.bind(sample.input, *sample.args, **sample.kwargs).arguments
        return [arg for arg, test in rules if arg in bound and test(bound[arg])]

    return constant


def _usable_cases(info, dtype, device, limit):
    cases = grad_cases(info, dtype, device, constant=_held_constant(info))
    cases = [c for c in cases if (info.name, c.sample.name) not in SAMPLE_SKIPS][:limit]
    assert cases, (
        f"{info.name} has no {dtype.name} sample with a differentiable input and finite values: "
        "add one to its OpInfo, or list the op in KNOWN_GAPS with the reason"
    )
    return cases


def test_sample_skips_name_real_samples():
    """Every SAMPLE_SKIPS entry names a sample that exists (so the list cannot go stale silently)."""
    for (name, sample_name), reason in SAMPLE_SKIPS.items():
        info = op_db[name]
        names = {s.name for d in grad_dtypes(info) for s in info.sample_inputs(info, "cpu", d, False)}
        assert sample_name in names, f"SAMPLE_SKIPS: {name} has no sample {sample_name!r} ({reason})"


@pytest.mark.parametrize("key", sorted(NO_GRADIENT_SAMPLES), ids=lambda k: f"{k[0]}-{k[1]}")
def test_no_gradient_samples_raise(key):
    """Where PyTorch has no gradient (its backward raises), ember's backward raises too."""
    name, sample_name = key
    info = op_db[name]
    sample = next(s for s in info.sample_inputs(info, "cpu", ember.float64, False) if s.name == sample_name)
    case = GradCase(info, sample)
    with pytest.raises((RuntimeError, NotImplementedError)):
        outputs = case.fn(*case.leaves)
        ember.autograd.grad(outputs, case.leaves, [ember.ones_like(o) for o in outputs], allow_unused=True)


def _fail(case, what, exc):
    raise AssertionError(f"{what} failed for {case}:\n{type(exc).__name__}: {exc}") from exc


def _check_outputs_flags(case):
    """Integer/bool outputs never require grad (which floating outputs do is compared with PyTorch in parity/)."""
    for i, o in enumerate(case.outputs()):
        if not is_differentiable_dtype(o.dtype):
            assert not o.requires_grad, f"{case}: output {i} ({o.dtype.name}) requires grad"


@pytest.mark.parametrize("info, dtype", list(_cases("test_gradcheck")))
def test_gradcheck(info, dtype, device):
    _skip_if_listed(info, "test_gradcheck", dtype)
    for case in _usable_cases(info, dtype, device, MAX_SAMPLES):
        _check_outputs_flags(case)
        outputs = case.fn(*case.leaves)
        fast = case.numel() + sum(o.numel() for o in outputs) > FAST_MODE_NUMEL
        try:
            gradcheck(case.fn, case.leaves, fast_mode=fast)
        except Exception as exc:  # noqa: BLE001 - reported with the sample
            _fail(case, "gradcheck", exc)


@pytest.mark.parametrize("info, dtype", list(_cases("test_gradgradcheck")))
def test_gradgradcheck(info, dtype, device):
    _skip_if_listed(info, "test_gradgradcheck", dtype)
    for case in _usable_cases(info, dtype, device, GRADGRAD_SAMPLES):
        outputs = case.fn(*case.leaves)
        if not any(o.requires_grad for o in outputs):
            continue
        fast = 2 * (case.numel() + sum(o.numel() for o in outputs)) > FAST_MODE_NUMEL
        try:
            gradgradcheck(case.fn, case.leaves, fast_mode=fast)
        except Exception as exc:  # noqa: BLE001 - reported with the sample
            _fail(case, "gradgradcheck", exc)


@pytest.mark.parametrize("info", [op_db[n] for n in NONDIFF_OPS], ids=NONDIFF_OPS)
def test_nondifferentiable_outputs(info, device):
    dtype = next(d for d in (ember.float64, ember.float32, ember.complex128) if d in info.dtypes)
    checked = 0
    for sample in info.sample_inputs(info, device, dtype, False):
        case = GradCase(info, sample)
        if not case.leaves:
            continue
        outputs = case.outputs()
        if info.name in BACKWARD_NOT_IMPLEMENTED:
            # as in PyTorch: the floating outputs require grad, and their backward says it is not implemented
            floats = [o for o in outputs if is_differentiable_dtype(o.dtype)]
            assert floats and all(o.requires_grad for o in floats), case
            with pytest.raises(NotImplementedError):
                ember.autograd.grad(floats, case.leaves, [ember.ones_like(o) for o in floats], allow_unused=True)
        else:
            for o in outputs:
                assert not o.requires_grad and o.grad_fn is None, f"{case}: the output requires grad"
        checked += 1
    if checked == 0:
        pytest.skip(f"{info.name}: no {dtype.name} sample has a floating-point tensor input")


INPLACE_OPS = [n for n in DIFF_OPS if op_db[n].op.inplace is not None]


def _inplace_cases(info, dtype, device):
    """Samples whose result can be written into the first argument (same shape and dtype)."""
    cases = []
    for case in grad_cases(info, dtype, device):
        index = case.input_leaf()
        if index is None:
            continue
        with ember.no_grad():
            result = case.call(*case.leaves)
        if isinstance(result, ember.Tensor) and result.shape == case.leaves[index].shape:
            if result.dtype is case.leaves[index].dtype:
                cases.append((case, index))
    if not cases:
        pytest.skip(f"no {dtype.name} sample of {info.name} has a result that fits its first argument")
    return cases


def _grads(output, leaves, grad_output):
    return ember.autograd.grad(output, leaves, grad_output, allow_unused=True, materialize_grads=True)


@pytest.mark.parametrize("info, dtype", list(_cases("test_inplace_matches_functional", INPLACE_OPS)))
@pytest.mark.parametrize("through_view", [False, True], ids=["direct", "view"])
def test_inplace_matches_functional(info, dtype, through_view, device):
    _skip_if_listed(info, "test_inplace_matches_functional", dtype)
    inplace = info.op.inplace
    for case, index in _inplace_cases(info, dtype, device):
        leaves = case.leaves
        expected_out = case.call(*leaves)
        (grad_output,) = case.grad_outputs([expected_out])
        expected = _grads(expected_out, leaves, grad_output)
        base = leaves[index].clone()
        if through_view:
            # written through a view of a non-leaf: the base's history is rewritten (CopySlices)
            base = ember.stack([base, base.detach()])
            target = base[0]
        else:
            target = base
        version = target._version
        returned = case.call(*leaves, op=inplace, first=target)
        assert returned is target
        assert target._version > version
        assert target.requires_grad and target.grad_fn is not None, f"{case}: {inplace.name} lost the history"
        assert_close(target.detach(), expected_out.detach(), equal_nan=True)
        out = base[0] if through_view else target
        try:
            got = _grads(out, leaves, grad_output)
        except Exception as exc:  # noqa: BLE001 - reported with the sample
            _fail(case, f"backward of {inplace.name}", exc)
        for label, g, e in zip(case.labels, got, expected):
            try:
                assert_close(g, e, equal_nan=True)
            except AssertionError as exc:
                raise AssertionError(f"{case}: gradient of {label} after {inplace.name}: {exc}") from None


def _copy_into_row(x, src):
    out = x.clone()
    out[1].copy_(src)  # through a view: the base's history is rewritten
    return out


#: In-place ops without an out-of-place op (they have entries of their own), as functions of leaves.
INPLACE_ONLY = {
    "copy_": (lambda x, src: x.clone().copy_(src), [(3, 4), (4,)]),
    "copy_ into a view": (_copy_into_row, [(3, 4), (4,)]),
    "fill_": (lambda x, value: x.clone().fill_(value), [(3, 4), ()]),
    "zero_": (lambda x: (x * 2).zero_() + x, [(3, 4)]),
}


def _inplace_only_cases():
    for name in sorted(INPLACE_ONLY):
        for check in ("gradcheck", "gradgradcheck"):
            yield pytest.param(name, check, id=f"{name}-{check}")


@pytest.mark.parametrize("name, check", list(_inplace_only_cases()))
@pytest.mark.parametrize("dtype", [ember.float64, ember.complex128], ids=lambda d: d.name)
def test_inplace_only_ops(name, check, dtype, device):
    fn, shapes = INPLACE_ONLY[name]
    rng = np.random.default_rng(0)
    leaves = [make_tensor(shape, dtype, device, rng=rng, low=-2, high=2, requires_grad=True) for shape in shapes]
    assert {"gradcheck": gradcheck, "gradgradcheck": gradgradcheck}[check](fn, leaves)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_grid_gradient(mode, padding_mode, align_corners, device):
    """grid's gradient at random points (off the kinks the op_db samples sit on, see HELD_CONSTANT)."""
    rng = np.random.default_rng(0)
    input = make_tensor((1, 2, 3, 4), ember.float64, device, rng=rng, low=-1, high=1, requires_grad=True)
    grid = make_tensor((1, 2, 3, 2), ember.float64, device, rng=rng, low=-1.1, high=1.1, requires_grad=True)

    def fn(input, grid):
        return ember.nn.functional.grid_sample(
            input, grid, mode=mode, padding_mode=padding_mode, align_corners=align_corners
        )

    assert gradcheck(fn, (input, grid))
