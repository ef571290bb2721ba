"""The meta device: the same calls on CPU and meta give the same metadata.

Each case runs once with CPU tensors and once with meta tensors (``x.to("meta")``,
``device="meta"``); shapes and dtypes must agree, and views must agree on
strides and storage offset too (meta views are built from the same meta
functions, so a difference is a bug in one of them). Meta tensors carry no
data, and bad arguments fail with the same exception type on both devices.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember


def _cpu(data, dtype=None):
    return ember.tensor(data, dtype=dtype)


def _arange(n, device, dtype=ember.float32):
    return ember.arange(n, dtype=dtype, device=device)


# name: fn(device) -> tensor or tuple of tensors. Inputs are built on ``device``
# directly or moved there with .to(device).
FUNCTION_CASES = {
    # creation
    "zeros": lambda d: ember.zeros(2, 3, device=d),
    "ones_int": lambda d: ember.ones((4,), dtype=ember.int32, device=d),
    "empty": lambda d: ember.empty(0, 5, device=d),
    "full_int": lambda d: ember.full((2, 2), 7, device=d),
    "full_float": lambda d: ember.full((3,), 1.5, device=d),
    "full_complex": lambda d: ember.full((1,), 1j, device=d),
    "eye": lambda d: ember.eye(3, 2, device=d),
    "arange_int": lambda d: ember.arange(10, device=d),
    "arange_float": lambda d: ember.arange(0, 1, 0.1, device=d),
    "arange_neg": lambda d: ember.arange(5, 0, -2, device=d),
    "linspace": lambda d: ember.linspace(0, 1, 7, device=d),
    "linspace_int": lambda d: ember.linspace(0, 10, 4, dtype=ember.int64, device=d),
    "logspace": lambda d: ember.logspace(0, 2, 3, device=d),
    "zeros_like": lambda d: ember.zeros_like(_arange(6, d).view(2, 3)),
    "full_like": lambda d: ember.full_like(_arange(4, d), 2, dtype=ember.int16),
    "new_ones": lambda d: _arange(3, d, ember.int8).new_ones(2, 2),
    "tensor": lambda d: ember.tensor([[1, 2], [3, 4]], device=d),
    "tensor_float": lambda d: ember.tensor([1.5, 2], device=d),
    "complex": lambda d: ember.complex(_arange(3, d), _arange(3, d)),
    "polar": lambda d: ember.polar(_arange(3, d, ember.float64), _arange(3, d, ember.float64)),
    "clone": lambda d: _arange(6, d).view(2, 3).clone(),
    "clone_transposed": lambda d: _arange(6, d).view(2, 3).t().clone(),
    "to_dtype": lambda d: _arange(6, d).view(2, 3).to(ember.int64),
    "to_dtype_transposed": lambda d: _arange(6, d).view(2, 3).t().to(ember.float64),
    "reshape_copy": lambda d: _arange(6, d).view(2, 3).t().reshape(6),
    "flatten_copy": lambda d: _arange(24, d).view(2, 3, 4).transpose(0, 2).flatten(1),
    # pointwise, with broadcasting and promotion
    "add": lambda d: _arange(6, d).view(2, 3) + _arange(3, d),
    "add_int_float": lambda d: _arange(3, d, ember.int32) + _arange(3, d, ember.float64).view(3, 1),
    "add_scalar": lambda d: _arange(3, d, ember.uint8) + 1000,
    "add_scalar_float": lambda d: _arange(3, d, ember.int64) + 1.5,
    "add_zero_dim": lambda d: _arange(3, d, ember.float16) + ember.tensor(2.0, dtype=ember.float64, device=d),
    "add_zero_dim_cpu": lambda d: _arange(3, d, ember.int32) + ember.tensor(2.5, dtype=ember.float64),
    "add_alpha": lambda d: ember.add(_arange(3, d), _arange(3, d), alpha=2),
    "mul_bool": lambda d: ember.ones(2, 1, dtype=ember.bool, device=d) * ember.ones(3, dtype=ember.bool, device=d),
    "mul_complex": lambda d: _arange(2, d).view(2, 1) * 1j,
    "div_int": lambda d: _arange(4, d, ember.int64).view(4, 1, 1) / _arange(2, d, ember.int64),
    "div_scalar": lambda d: 1 / _arange(3, d, ember.int8),
    "eq": lambda d: _arange(3, d) == _arange(3, d, ember.int64).view(3, 1),
    "lt_scalar": lambda d: _arange(3, d) < 1,
    "neg": lambda d: -_arange(3, d, ember.int16),
    "abs_complex": lambda d: ember.abs(ember.full((2,), 1 + 1j, device=d)),
    "add_": lambda d: _arange(6, d).view(2, 3).add_(_arange(3, d)),
    "mul_int_inplace": lambda d: _arange(3, d, ember.int32).mul_(2),
    # advanced indexing (results are new tensors)
    "index_list": lambda d: _arange(12, d).view(3, 4)[[0, 2]],
    "index_tensor": lambda d: _arange(24, d).view(2, 3, 4)[:, ember.tensor([[0], [2]]), ember.tensor([1, 3])],
    "index_int_slice_list": lambda d: _arange(24, d).view(2, 3, 4)[0, :, [0, 1]],
    "index_split": lambda d: _arange(24, d).view(2, 3, 4)[ember.tensor([1, 0]), :, ember.tensor([0, 3])],
    "index_put": lambda d: ember.index_put(_arange(4, d), [ember.tensor([1, 1], device=d)], ember.tensor(1.0)),
    "index_put_2d": lambda d: _arange(12, d).view(3, 4).index_put_(
        [None, ember.tensor([[0], [3]], device=d)], ember.ones(2, 1, device=d), accumulate=True
    ),
}

VIEW_CASES = {
    "view": lambda d: _arange(24, d).view(2, 3, 4).view(6, -1),
    "view_nontrivial": lambda d: _arange(24, d).view(2, 3, 4).transpose(0, 1).view(3, 2, 2, 2),
    "reshape_view": lambda d: _arange(24, d).view(2, 3, 4)[:, :, ::2].reshape(6, 2),
    "transpose": lambda d: _arange(24, d).view(2, 3, 4).transpose(0, 2),
    "permute": lambda d: _arange(24, d).view(2, 3, 4).permute(2, 0, 1),
    "t": lambda d: _arange(6, d).view(2, 3).t(),
    "T": lambda d: _arange(24, d).view(2, 3, 4).T,
    "mT": lambda d: _arange(24, d).view(2, 3, 4).mT,
    "expand": lambda d: _arange(3, d).view(3, 1).expand(2, 3, 4),
    "unsqueeze": lambda d: _arange(6, d).view(2, 3).unsqueeze(1),
    "squeeze": lambda d: _arange(6, d).view(1, 2, 1, 3).squeeze((0, 2)),
    "select": lambda d: _arange(24, d).view(2, 3, 4).select(1, -1),
    "narrow": lambda d: _arange(24, d).view(2, 3, 4).narrow(2, 1, 2),
    "slice": lambda d: _arange(24, d).view(2, 3, 4)[1:, ::2, 1:3],
    "getitem_basic": lambda d: _arange(24, d).view(2, 3, 4)[1, None, ..., ::3],
    "empty_slice": lambda d: _arange(12, d).view(3, 4)[:, 2:2],
    "diagonal": lambda d: _arange(24, d).view(2, 3, 4).diagonal(1, 1, 2),
    "unfold": lambda d: _arange(10, d).unfold(0, 3, 2),
    "as_strided": lambda d: _arange(10, d).as_strided((3, 3), (1, 2), 1),
    "flatten_view": lambda d: _arange(24, d).view(2, 3, 4)[1].flatten(),
    "detach": lambda d: _arange(4, d)[1:].detach(),
    "real": lambda d: ember.full((2, 3), 1 + 2j, device=d).real,
    "imag": lambda d: ember.full((2, 3), 1 + 2j, device=d)[:, 1:].imag,
    "view_as_real": lambda d: ember.view_as_real(ember.full((2, 3), 1j, device=d).t()),
    "view_as_complex": lambda d: ember.view_as_complex(_arange(12, d).view(3, 2, 2)[1:]),
    "split": lambda d: _arange(10, d).view(2, 5).split(2, dim=1),
    "split_sizes": lambda d: _arange(10, d).view(2, 5).split([1, 4], dim=1),
    "chunk": lambda d: _arange(10, d).view(5, 2).chunk(3),
    "unbind": lambda d: _arange(6, d).view(2, 3).unbind(1),
}


def _flat(result):
    return result if isinstance(result, tuple) else (result,)


@pytest.mark.parametrize("case", list(FUNCTION_CASES))
def test_function_metadata_matches_cpu(case):
    fn = FUNCTION_CASES[case]
    cpu, meta = _flat(fn("cpu")), _flat(fn("meta"))
    assert len(cpu) == len(meta)
    for c, m in zip(cpu, meta):
        assert c.device.type == "cpu" and m.device.type == "meta"
        assert m.shape == c.shape
        assert m.dtype is c.dtype
        if c.numel():
            # non-view results: both are dense with the same layout
            assert m.stride() == c.stride()


@pytest.mark.parametrize("fn", list(VIEW_CASES.values()), ids=list(VIEW_CASES))
def test_view_metadata_matches_cpu(fn):
    cpu, meta = _flat(fn("cpu")), _flat(fn("meta"))
    assert len(cpu) == len(meta)
    for c, m in zip(cpu, meta):
        assert m.device.type == "meta"
        assert (m.shape, m.dtype, m.stride(), m.storage_offset()) == (c.shape, c.dtype, c.stride(), c.storage_offset())
        assert m.is_contiguous() == c.is_contiguous()


def test_to_meta_keeps_layout():
    x = ember.arange(24.0).view(2, 3, 4)
    for v in (x, x.transpose(0, 2), x[:, 1:, ::2], x.permute(1, 2, 0)):
        m = v.to("meta")
        assert m.device == ember.device("meta") and m.is_meta
        assert m.shape == v.shape and m.dtype is v.dtype
        # a copy keeps a dense layout's strides (PyTorch's preserve_format)
        assert m.stride() == v.clone().stride()
        assert m.to(ember.float64).dtype is ember.float64


def test_meta_tensors_have_no_data():
    m = ember.ones(2, 3, device="meta")
    assert m.data_ptr() == 0
    with pytest.raises(TypeError):
        m.numpy()
    with pytest.raises((RuntimeError, NotImplementedError)):
        m.numpy(force=True)
    with pytest.raises((RuntimeError, NotImplementedError)):
        ember.ones(1, device="meta").item()
    with pytest.raises((RuntimeError, NotImplementedError)):
        m.tolist()
    with pytest.raises((RuntimeError, NotImplementedError)):
        m.to("cpu")
    with pytest.raises((RuntimeError, NotImplementedError)):
        np.asarray(m)
    with pytest.raises((RuntimeError, NotImplementedError)):
        bool(ember.ones(1, device="meta"))
    # a data-dependent shape cannot be computed
    with pytest.raises(NotImplementedError):
        m[ember.ones(2, 3, dtype=ember.bool, device="meta")]


def test_meta_in_place_ops_and_versions():
    m = ember.zeros(2, 3, device="meta")
    v = m[1]
    assert m.add_(1) is m
    v.mul_(2)
    m[0] = 5.0
    m.fill_(1.0)
    assert m._version == v._version == 4
    assert m.untyped_storage() is v.untyped_storage()


# fn(device) calls that must fail, with the exception type expected on both devices.
ERROR_CASES = {
    "add_shapes": (lambda d: _arange(3, d) + _arange(4, d), RuntimeError),
    "add_inplace_broadcast": (lambda d: _arange(3, d).add_(_arange(6, d).view(2, 3)), RuntimeError),
    "add_inplace_cast": (lambda d: _arange(3, d, ember.int64).add_(1.5), RuntimeError),
    "sub_bool": (lambda d: ember.ones(2, dtype=ember.bool, device=d) - ember.ones(2, dtype=ember.bool, device=d), RuntimeError),
    "neg_bool": (lambda d: -ember.ones(2, dtype=ember.bool, device=d), RuntimeError),
    "view_size": (lambda d: _arange(6, d).view(4, -1), RuntimeError),
    "view_stride": (lambda d: _arange(6, d).view(2, 3).t().view(6), RuntimeError),
    "reshape_size": (lambda d: _arange(6, d).reshape(4, 2), RuntimeError),
    "expand": (lambda d: _arange(3, d).expand(2, 4), RuntimeError),
    "transpose_dim": (lambda d: _arange(6, d).view(2, 3).transpose(0, 2), IndexError),
    "permute_dup": (lambda d: _arange(6, d).view(2, 3).permute(1, 1), RuntimeError),
    "t_3d": (lambda d: _arange(8, d).view(2, 2, 2).t(), RuntimeError),
    "select_index": (lambda d: _arange(6, d).view(2, 3).select(1, 3), IndexError),
    "narrow": (lambda d: _arange(6, d).narrow(0, 4, 3), RuntimeError),
    "split_sizes": (lambda d: _arange(6, d).split([2, 2]), RuntimeError),
    "chunk_zero": (lambda d: _arange(6, d).chunk(0), RuntimeError),
    "diagonal_dims": (lambda d: _arange(6, d).view(2, 3).diagonal(0, 1, 1), RuntimeError),
    "unfold_size": (lambda d: _arange(6, d).unfold(0, 7, 1), RuntimeError),
    "as_strided_bounds": (lambda d: _arange(6, d).as_strided((3, 3), (2, 2)), RuntimeError),
    "view_as_real_float": (lambda d: ember.view_as_real(_arange(3, d)), RuntimeError),
    "zeros_negative": (lambda d: ember.zeros(2, -1, device=d), RuntimeError),
    "zeros_float_size": (lambda d: ember.zeros(2.5, device=d), TypeError),
    "full_overflow": (lambda d: ember.full((2,), 300, dtype=ember.uint8, device=d), RuntimeError),
    "arange_step": (lambda d: ember.arange(0, 5, 0, device=d), RuntimeError),
    "arange_sign": (lambda d: ember.arange(0, 5, -1, device=d), RuntimeError),
    "linspace_steps": (lambda d: ember.linspace(0, 1, -1, device=d), RuntimeError),
    "eye_negative": (lambda d: ember.eye(-1, device=d), RuntimeError),
    "complex_ints": (lambda d: ember.complex(_arange(2, d, ember.int64), _arange(2, d, ember.int64)), RuntimeError),
    "requires_grad_int": (lambda d: ember.zeros(2, dtype=ember.int64, device=d, requires_grad=True), RuntimeError),
    "getitem_int": (lambda d: _arange(6, d).view(2, 3)[2], IndexError),
    "getitem_too_many": (lambda d: _arange(6, d).view(2, 3)[0, 0, 0], IndexError),
    "getitem_float_index": (lambda d: _arange(6, d)[ember.tensor([0.0], device=d)], IndexError),
    "getitem_mask_shape": (lambda d: _arange(6, d).view(2, 3)[ember.ones(3, dtype=ember.bool, device=d)], IndexError),
    "getitem_broadcast": (lambda d: _arange(6, d).view(2, 3)[[0, 1], [0, 1, 2]], IndexError),
    "setitem_shape": (lambda d: _arange(6, d).view(2, 3).__setitem__(slice(None), _arange(2, d)), RuntimeError),
    "setitem_dtype": (lambda d: _arange(3, d, ember.int64).__setitem__([0], _arange(1, d)), RuntimeError),
    "setitem_overflow": (lambda d: _arange(3, d, ember.uint8).__setitem__(0, 300), RuntimeError),
    "fill_dims": (lambda d: _arange(3, d).fill_(_arange(2, d)), RuntimeError),
}


@pytest.mark.parametrize("case", list(ERROR_CASES))
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_errors_are_the_same_on_meta(case, device):
    fn, exc = ERROR_CASES[case]
    with pytest.raises(exc):
        fn(device)


def test_meta_and_cpu_do_not_mix():
    with pytest.raises(RuntimeError, match="same device"):
        ember.ones(2, device="meta") + ember.ones(2)
    # a zero-dim CPU tensor may join, as in PyTorch
    assert (ember.ones(2, device="meta") + ember.tensor(1.0)).device.type == "meta"
