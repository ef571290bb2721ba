"""Padding, pixel shuffle, upsampling, distance, fold/unfold, channel shuffle, max-unpool, LP-pool
and Lazy modules against torch.nn: same outputs, input gradients, state_dict keys and repr; Lazy
modules materialize to the same shapes and state_dict and become the non-lazy class."""

import numpy as np
import pytest
import torch
from _parity_device import IS_PINNED_TORCH

import ember
import ember.nn as enn

pytestmark = pytest.mark.parity

# (class name, constructor args, constructor kwargs, input shape or list of shapes)
CASES = [
    ("ZeroPad1d", (2,), {}, (2, 3, 5)),
    ("ZeroPad2d", ((1, 0, 2, 1),), {}, (2, 3, 4, 5)),
    ("ZeroPad3d", (1,), {}, (1, 2, 3, 3, 3)),
    ("ConstantPad1d", ((1, 2), 3.5), {}, (2, 3, 5)),
    ("ConstantPad2d", (1, -1.0), {}, (3, 4, 5)),
    ("ConstantPad2d", ((2, -1, 0, 1), 0.5), {}, (2, 3, 4, 5)),
    ("ConstantPad3d", ((1, 0, 0, 1, 1, 1), 2.0), {}, (1, 2, 3, 3, 3)),
    ("ReflectionPad1d", ((3, 1),), {}, (2, 3, 5)),
    ("ReflectionPad2d", (2,), {}, (2, 3, 4, 5)),
    ("ReflectionPad2d", ((1, 0, 2, 1),), {}, (3, 4, 5)),
    ("ReflectionPad3d", (1,), {}, (1, 2, 3, 3, 3)),
    ("ReplicationPad1d", ((3, 1),), {}, (2, 3, 5)),
    ("ReplicationPad2d", ((1, 2, 3, 0),), {}, (2, 3, 4, 5)),
    ("ReplicationPad3d", (1,), {}, (1, 2, 3, 3, 3)),
    ("CircularPad1d", ((2, 1),), {}, (2, 3, 5)),
    ("CircularPad2d", (1,), {}, (2, 3, 4, 5)),
    ("CircularPad3d", ((1, 0, 1, 2, 0, 1),), {}, (1, 2, 3, 3, 3)),
    ("PixelShuffle", (2,), {}, (2, 8, 3, 4)),
    ("PixelShuffle", (3,), {}, (9, 2, 2)),
    ("PixelUnshuffle", (2,), {}, (2, 2, 4, 6)),
    ("Upsample", (), {"scale_factor": 2}, (2, 3, 4)),
    ("Upsample", (), {"size": (5, 7)}, (2, 3, 3, 4)),
    ("Upsample", (), {"scale_factor": 2, "mode": "bilinear"}, (2, 3, 3, 4)),
    ("Upsample", (), {"scale_factor": (2, 1.5), "mode": "bilinear", "align_corners": True}, (2, 3, 3, 4)),
    ("Upsample", (), {"size": 6, "mode": "linear"}, (2, 3, 4)),
    ("Upsample", (), {"scale_factor": 2, "mode": "bicubic"}, (1, 2, 3, 4)),
    ("Upsample", (), {"scale_factor": 2, "mode": "trilinear"}, (1, 2, 2, 3, 3)),
    ("Upsample", (), {"size": (5, 7), "mode": "nearest-exact"}, (2, 3, 3, 4)),
    ("UpsamplingNearest2d", (), {"scale_factor": 2}, (2, 3, 3, 4)),
    ("UpsamplingNearest2d", ((5, 6),), {}, (2, 3, 3, 4)),
    ("UpsamplingBilinear2d", (), {"scale_factor": 2}, (2, 3, 3, 4)),
    ("CosineSimilarity", (), {}, [(4, 5), (4, 5)]),
    ("CosineSimilarity", (), {"dim": 0, "eps": 1e-6}, [(4, 5), (1, 5)]),
    ("PairwiseDistance", (), {}, [(4, 5), (4, 5)]),
    ("PairwiseDistance", (), {"p": 1.0, "keepdim": True}, [(4, 5), (4, 5)]),
    ("PairwiseDistance", (), {"p": 3.0, "eps": 1e-3}, [(4, 5), (5,)]),
    ("Fold", (), {"output_size": (4, 5), "kernel_size": 2}, (2, 12, 12)),
    ("Fold", (), {"output_size": 5, "kernel_size": (2, 3), "stride": 2, "padding": 1, "dilation": 1}, (1, 6, 9)),
    ("Unfold", (), {"kernel_size": (2, 3)}, (2, 5, 3, 4)),
    ("Unfold", (), {"kernel_size": 2, "dilation": 2, "padding": 1, "stride": 2}, (2, 3, 5, 6)),
    ("ChannelShuffle", (2,), {}, (2, 6, 3, 3)),
    ("ChannelShuffle", (3,), {}, (2, 6, 4)),
    ("LPPool1d", (2, 3), {"stride": 2}, (2, 3, 9)),
    ("LPPool1d", (1.5, 2), {"ceil_mode": True}, (2, 3, 7)),
    ("LPPool2d", (2, 2), {}, (2, 3, 4, 6)),
    ("LPPool2d", (3, (2, 3)), {"stride": (1, 2)}, (2, 3, 4, 7)),
    ("LPPool3d", (2, 2), {}, (1, 2, 4, 4, 4)),
]


def _case_id(case):
    name, args, kwargs = case[:3]
    return f"{name}{args}{kwargs}"


def _arrays(shapes, rng):
    shapes = shapes if isinstance(shapes, list) else [shapes]
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def _check_forward_backward(tm, em, arrays, rng):
    t_in = [torch.from_numpy(a.copy()).requires_grad_() for a in arrays]
    e_in = [ember.from_numpy(a.copy()).requires_grad_() for a in arrays]
    t_out = tm(*t_in)
    e_out = em(*e_in)
    assert tuple(e_out.shape) == tuple(t_out.shape)
    np.testing.assert_allclose(e_out.detach().numpy(), t_out.detach().numpy(), rtol=1e-4, atol=1e-5)
    weights = rng.standard_normal(tuple(t_out.shape)).astype(np.float32)
    (t_out * torch.from_numpy(weights)).sum().backward()
    (e_out * ember.from_numpy(weights)).sum().backward()
    for ti, ei in zip(t_in, e_in):
        np.testing.assert_allclose(ei.grad.numpy(), ti.grad.numpy(), rtol=1e-4, atol=1e-4)
    return t_out, e_out


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_module_matches_torch(case):
    name, args, kwargs, shapes = case
    tm = getattr(torch.nn, name)(*args, **kwargs)
    em = getattr(enn, name)(*args, **kwargs)
    assert repr(em) == repr(tm)
    assert list(em.state_dict().keys()) == list(tm.state_dict().keys()) == []
    rng = np.random.default_rng(0)
    arrays = _arrays(shapes, rng)
    if name.startswith("LPPool"):
        arrays = [np.abs(a) + 0.1 for a in arrays]  # away from the non-differentiable 0
    _check_forward_backward(tm, em, arrays, rng)


@pytest.mark.parametrize(
    "dims, kwargs, shape, output_size",
    [
        (1, {"kernel_size": 2}, (2, 3, 8), None),
        (1, {"kernel_size": 3, "stride": 2, "padding": 1}, (2, 3, 9), None),
        (2, {"kernel_size": 2}, (2, 3, 4, 6), None),
        (2, {"kernel_size": (2, 3), "stride": (2, 1), "padding": (1, 1)}, (2, 3, 6, 6), None),
        # the pooling floored 5x7 to 2x3: output_size recovers the size (the default 4x6 is too small)
        (2, {"kernel_size": 2}, (2, 3, 5, 7), [5, 7]),
        (2, {"kernel_size": 2}, (3, 5, 7), [5, 7]),
        (3, {"kernel_size": 2}, (1, 2, 4, 4, 4), None),
    ],
)
def test_max_unpool_matches_torch(dims, kwargs, shape, output_size):
    x = np.random.default_rng(dims).standard_normal(shape).astype(np.float32)
    t_pool = getattr(torch.nn, f"MaxPool{dims}d")(return_indices=True, **kwargs)
    t_out, t_idx = t_pool(torch.from_numpy(x))
    e_idx = ember.from_numpy(t_idx.numpy().copy())
    tm = getattr(torch.nn, f"MaxUnpool{dims}d")(**kwargs)
    em = getattr(enn, f"MaxUnpool{dims}d")(**kwargs)
    assert repr(em) == repr(tm)
    assert list(em.state_dict().keys()) == []
    t_in = t_out.detach().clone().requires_grad_()
    e_in = ember.from_numpy(t_out.detach().numpy().copy()).requires_grad_()
    t_res = tm(t_in, t_idx, output_size=output_size)
    e_res = em(e_in, e_idx, output_size=output_size)
    assert tuple(e_res.shape) == tuple(t_res.shape) == tuple(shape)
    np.testing.assert_allclose(e_res.detach().numpy(), t_res.detach().numpy(), rtol=1e-6)
    g = np.random.default_rng(5).standard_normal(tuple(t_res.shape)).astype(np.float32)
    (t_res * torch.from_numpy(g)).sum().backward()
    (e_res * ember.from_numpy(g)).sum().backward()
    np.testing.assert_allclose(e_in.grad.numpy(), t_in.grad.numpy(), rtol=1e-6)


# (lazy name, non-lazy name, constructor args, constructor kwargs, input shape)
LAZY_CASES = [
    ("LazyLinear", "Linear", (4,), {}, (2, 3)),
    ("LazyLinear", "Linear", (4,), {"bias": False}, (2, 5, 3)),
    ("LazyConv1d", "Conv1d", (4, 3), {"padding": 1}, (2, 3, 7)),
    ("LazyConv2d", "Conv2d", (4, 3), {"stride": 2, "groups": 2}, (2, 4, 7, 7)),
    ("LazyConv2d", "Conv2d", (4, 3), {"padding": "same", "padding_mode": "reflect", "bias": False}, (3, 5, 5)),
    ("LazyConv3d", "Conv3d", (2, 2), {}, (1, 3, 4, 4, 4)),
    ("LazyConvTranspose1d", "ConvTranspose1d", (4, 3), {"stride": 2}, (2, 3, 5)),
    ("LazyConvTranspose2d", "ConvTranspose2d", (4, 3), {"stride": 2, "output_padding": 1}, (2, 3, 4, 4)),
    ("LazyConvTranspose3d", "ConvTranspose3d", (2, 2), {}, (1, 3, 3, 3, 3)),
    ("LazyBatchNorm1d", "BatchNorm1d", (), {}, (4, 3)),
    ("LazyBatchNorm1d", "BatchNorm1d", (), {"affine": False, "momentum": None}, (4, 3, 5)),
    ("LazyBatchNorm2d", "BatchNorm2d", (), {"eps": 1e-3}, (4, 3, 5, 5)),
    ("LazyBatchNorm2d", "BatchNorm2d", (), {"track_running_stats": False}, (4, 3, 5, 5)),
    ("LazyBatchNorm3d", "BatchNorm3d", (), {}, (2, 2, 3, 3, 3)),
]


@pytest.mark.parametrize("case", LAZY_CASES, ids=lambda c: f"{c[0]}{c[2]}{c[3]}")
def test_lazy_module_materializes_like_torch(case):
    lazy_name, name, args, kwargs, shape = case
    tm = getattr(torch.nn, lazy_name)(*args, **kwargs)
    em = getattr(enn, lazy_name)(*args, **kwargs)
    if IS_PINNED_TORCH:  # the repr names the options of the pinned release
        assert repr(em) == repr(tm)
    assert list(em.state_dict().keys()) == list(tm.state_dict().keys())
    assert [type(p).__name__ for p in em.parameters()] == [type(p).__name__ for p in tm.parameters()]
    assert em.has_uninitialized_params() == tm.has_uninitialized_params() == True  # noqa: E712

    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    tm(torch.from_numpy(x))
    em(ember.from_numpy(x))
    assert type(em) is getattr(enn, name)
    assert type(tm) is getattr(torch.nn, name)
    if IS_PINNED_TORCH:
        assert repr(em) == repr(tm)
    assert not hasattr(em, "_initialize_hook") and not em._forward_pre_hooks and not em._load_state_dict_pre_hooks
    assert [type(p) for p in em.parameters()] == [enn.Parameter] * len(list(tm.parameters()))
    e_sd, t_sd = em.state_dict(), tm.state_dict()
    assert list(e_sd.keys()) == list(t_sd.keys())
    for k in t_sd:
        assert tuple(e_sd[k].shape) == tuple(t_sd[k].shape), k
        assert e_sd[k].dtype.is_floating_point == t_sd[k].dtype.is_floating_point, k

    # With torch's weights, the materialized module computes what torch's does.
    em.load_state_dict({k: ember.from_numpy(v.detach().numpy().copy()) for k, v in t_sd.items()})
    tm.eval()
    em.eval()
    _check_forward_backward(tm, em, [x], np.random.default_rng(1))
    for (tn, tp), (en, ep) in zip(tm.named_parameters(), em.named_parameters()):
        assert tn == en
        np.testing.assert_allclose(ep.grad.numpy(), tp.grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=tn)


def test_lazy_linear_default_init_distribution():
    em = enn.LazyLinear(300)
    em(ember.randn(2, 400))
    w = em.weight.detach().numpy()
    bound = 1 / np.sqrt(400)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    assert np.abs(em.bias.detach().numpy()).max() <= bound


def test_lazy_module_loads_a_torch_state_dict_before_forward():
    torch.manual_seed(0)
    t_lin = torch.nn.Linear(3, 4)
    em = enn.LazyLinear(4)
    em.load_state_dict({k: ember.from_numpy(v.detach().numpy().copy()) for k, v in t_lin.state_dict().items()})
    np.testing.assert_array_equal(em.weight.detach().numpy(), t_lin.weight.detach().numpy())
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(
        em(ember.from_numpy(x)).detach().numpy(), t_lin(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-6
    )
    assert type(em) is enn.Linear and em.in_features == 3


def test_batchnorm_old_state_dict_without_num_batches_tracked_matches_torch():
    tm, em = torch.nn.BatchNorm2d(3), enn.BatchNorm2d(3)
    t_sd = tm.state_dict()
    del t_sd["num_batches_tracked"]
    t_sd._metadata[""]["version"] = 1
    e_sd = {k: ember.from_numpy(v.numpy().copy()) for k, v in t_sd.items()}
    t_res = tm.load_state_dict(t_sd)
    e_res = em.load_state_dict(e_sd)
    assert list(e_res.missing_keys) == list(t_res.missing_keys) == []
    assert em.num_batches_tracked.item() == tm.num_batches_tracked.item() == 0
