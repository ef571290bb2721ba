"""Every op in ember.testing.op_db, over its samples: the op-library's generic checks.

* values against the numpy/scipy reference;
* meta shapes/dtypes (and strides of views) equal to the real ones;
* ``out=`` and in-place variants agree with the functional op;
* out-of-place ops leave their inputs untouched;
* error inputs raise the PyTorch error type with the expected message.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.testing import assert_close, op_db, to_numpy_args

OPS = sorted(op_db)


def _cases(ops=OPS):
    for name in ops:
        info = op_db[name]
        for dtype in info.dtypes:
            yield pytest.param(info, dtype, id=f"{name}-{dtype.name}")


def _skip_if_listed(info, test, dtype):
    reason = info.skip_reason(test, dtype)
    if reason:
        pytest.skip(reason)


def _tensors(value):
    if isinstance(value, ember.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def _to_meta(value):
    if isinstance(value, ember.Tensor):
        return value.to("meta")
    if isinstance(value, tuple):
        return tuple(_to_meta(v) for v in value)
    if isinstance(value, list):
        return [_to_meta(v) for v in value]
    if isinstance(value, dict):
        return {k: ("meta" if k == "device" else _to_meta(v)) for k, v in value.items()}
    return value


def _compare_to_ref(result, expected, info, dtype):
    if isinstance(result, tuple):
        assert isinstance(expected, tuple) and len(expected) == len(result)
        for r, e in zip(result, expected):
            _compare_to_ref(r, e, info, dtype)
        return
    expected = np.asarray(expected)
    assert tuple(result.shape) == expected.shape, f"shape {tuple(result.shape)} vs reference {expected.shape}"
    tol = info.tolerance(dtype)
    if tol is None and result.dtype in (ember.float16, ember.bfloat16):
        tol = (1e-2, 1e-2)
    rtol, atol = tol if tol is not None else (None, None)
    # the reference computes in numpy's dtypes; compare values at the op's result dtype
    assert_close(
        result, expected.astype(result.dtype.numpy_dtype), rtol=rtol, atol=atol, equal_nan=True, check_dtype=False
    )


@pytest.mark.parametrize("info, dtype", list(_cases(n for n in OPS if op_db[n].ref is not None)))
def test_reference_values(info, dtype, device):
    _skip_if_listed(info, "test_reference_values", dtype)
    count = 0
    for sample in info.sample_inputs(info, device, dtype, False):
        expected = info.ref(to_numpy_args(sample.input), *to_numpy_args(sample.args), **to_numpy_args(sample.kwargs))
        _compare_to_ref(sample.call(info.op), expected, info, dtype)
        count += 1
    assert count > 0 or info.name in ("arange", "linspace"), f"{info.name} has no samples for {dtype}"


@pytest.mark.parametrize("info, dtype", list(_cases()))
def test_meta_matches_real(info, dtype, device):
    _skip_if_listed(info, "test_meta_matches_real", dtype)
    checked = 0
    for sample in info.sample_inputs(info, device, dtype, False):
        if sample.data_dependent:
            with pytest.raises(NotImplementedError, match="data-dependent"):
                info.op(_to_meta(sample.input), *_to_meta(sample.args), **_to_meta(sample.kwargs))
            continue
        real = sample.call(info.op)
        # .to("meta") makes inputs contiguous, so strides only compare for contiguous inputs
        dense = all(t.is_contiguous() for t in _tensors((sample.input, sample.args)))
        checked += 1
        meta = info.op(_to_meta(sample.input), *_to_meta(sample.args), **_to_meta(sample.kwargs))
        reals, metas = (real, meta) if isinstance(real, tuple) else ((real,), (meta,))
        assert len(reals) == len(metas)
        for r, m in zip(reals, metas):
            assert m.device.type == "meta", sample
            assert tuple(m.shape) == tuple(r.shape), f"{sample}: meta {m.shape} vs real {r.shape}"
            assert m.dtype is r.dtype, f"{sample}: meta {m.dtype} vs real {r.dtype}"
            if info.op.kind == "view" and info.op.category == "prim" and dense:
                assert m.stride() == r.stride() and m.storage_offset() == r.storage_offset(), sample
    assert checked > 0 or info.name in ("arange", "linspace")


@pytest.mark.parametrize("info, dtype", list(_cases(n for n in OPS if op_db[n].op.has_out)))
def test_out_variant(info, dtype, device):
    _skip_if_listed(info, "test_out_variant", dtype)
    for sample in info.sample_inputs(info, device, dtype, False):
        expected = sample.call(info.op)
        if isinstance(expected, tuple):
            continue
        out = ember.empty(0, dtype=expected.dtype, device=expected.device)
        returned = info.op(sample.input, *sample.args, **sample.kwargs, out=out)
        assert returned is out
        assert_close(out, expected, equal_nan=True)


@pytest.mark.parametrize("info, dtype", list(_cases(n for n in OPS if op_db[n].op.inplace is not None)))
def test_inplace_variant(info, dtype, device):
    _skip_if_listed(info, "test_inplace_variant", dtype)
    inplace = info.op.inplace
    for sample in info.sample_inputs(info, device, dtype, False):
        target = sample.input
        if not isinstance(target, ember.Tensor):  # e.g. pow(2, t): nothing to write into
            continue
        expected = sample.call(info.op)
        if tuple(expected.shape) != tuple(target.shape) or not ember.can_cast(expected.dtype, target.dtype):
            # PyTorch refuses: the result would not fit the first argument
            with pytest.raises(RuntimeError, match="doesn't match the broadcast shape|can't be cast"):
                inplace(target.clone(), *sample.args, **sample.kwargs)
            continue
        copy = target.clone()
        version = copy._version
        assert inplace(copy, *sample.args, **sample.kwargs) is copy
        assert copy._version == version + 1
        assert_close(copy, expected.to(target.dtype), equal_nan=True)


@pytest.mark.parametrize("info, dtype", list(_cases()))
def test_inputs_not_modified(info, dtype, device):
    for sample in info.sample_inputs(info, device, dtype, False):
        tensors = _tensors((sample.input, sample.args, list(sample.kwargs.values())))
        before = [_raw_bytes(t) for t in tensors]
        sample.call(info.op)
        for t, b in zip(tensors, before):
            assert _raw_bytes(t) == b, f"{sample} modified an input"


def _raw_bytes(t):
    """The tensor's values as bytes: bitwise equality, so NaNs compare equal to themselves."""
    return np.ascontiguousarray(t._host_array()).tobytes()


@pytest.mark.parametrize("info", [op_db[n] for n in OPS], ids=OPS)
def test_error_inputs(info, device):
    for error in info.error_inputs(info, device):
        with pytest.raises(error.error_type, match=error.error_regex):
            error.sample.call(info.op)
            if device.startswith("cuda"):  # what a GPU kernel finds is reported at the next synchronizing call
                ember.cuda.synchronize()


def _is_method(name):
    return callable(getattr(ember.Tensor, name, None)) and not isinstance(getattr(ember.Tensor, name), property)


@pytest.mark.parametrize("info", [op_db[n] for n in OPS if _is_method(n)], ids=lambda i: i.name)
def test_method_variant(info, device):
    _skip_if_listed(info, "test_method_variant", None)
    dtype = ember.float32 if ember.float32 in info.dtypes else info.dtypes[0]
    for sample in info.sample_inputs(info, device, dtype, False):
        if not isinstance(sample.input, ember.Tensor):
            continue
        expected = sample.call(info.op)
        result = getattr(sample.input, info.name)(*sample.args, **sample.kwargs)
        assert_close(result, expected, equal_nan=True)


def test_every_public_op_has_an_opinfo():
    """The sample registry covers the op registry (a new op needs samples)."""
    missing = sorted(
        name
        for name, op in ember._ops.registry.items()
        if op.kind != "inplace" and name not in op_db and not name.startswith("_") and "random" not in op.tags
    )
    assert missing == [], f"ops without an OpInfo in ember.testing: {missing}"
