"""The one-kernel cuda dropout (``ember.cuda.kernels.dropout``) on the GPU.

The kernels against the numpy reference of the same Philox stream, bit for bit; ``F.dropout`` on cuda against
the decomposition it replaced (``ember.bernoulli``'s mask times the input, then the scale, or autograd's
``x * (mask / keep)``) for the same seed: the output, the gradient and the generator's next state. The same
kernels compiled for the CPU are tested in ``test_cuda_dropout_host.py``.
"""

import ml_dtypes
import numpy as np
import pytest

import ember
from ember._ops import nn_dropout

F = ember.nn.functional

pytestmark = pytest.mark.cuda

FLOATS = [ember.float32, ember.float16, ember.bfloat16, ember.float64]


@pytest.fixture
def cp():
    ember.cuda.init()
    from ember.cuda._runtime import cupy_module

    return cupy_module()


def _values(shape, dtype, seed=0):
    """A cuda tensor of normal values times 10 of ``dtype``, with zeros of both signs and infinities first."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 10
    x.reshape(-1)[:4] = [0.0, -0.0, np.inf, -np.inf]
    return ember.tensor(x).to(dtype).to("cuda")


def _bits_equal(got, expected):
    """Equal bit for bit (NaNs: at the same places)."""
    a, b = got.detach().cpu(), expected.detach().cpu()
    assert a.dtype is b.dtype and a.shape == b.shape
    a, b = a.numpy(), b.numpy()
    nan = np.isnan(b.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(a.astype(np.float64)), nan)
    word = f"u{b.dtype.itemsize}"
    np.testing.assert_array_equal(a.view(word)[~nan], b.view(word)[~nan])


def _old_unrecorded(x, keep):
    """The decomposition's values without autograd (before the kernel): ``(x * bool_mask) * scale``."""
    mask = ember.bernoulli(ember.empty(tuple(x.shape), dtype=ember.bool, device=x.device), keep)
    return (x * mask) * nn_dropout._dropout_scale(x.dtype, keep)


def _old_scaled_mask(x, keep):
    """The decomposition's ``mask / keep`` when autograd records (the gradient's factor)."""
    return ember.bernoulli(ember.empty(tuple(x.shape), dtype=x.dtype, device=x.device), keep) / keep


def _same_state(a, b):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.float64],
                         ids=lambda d: np.dtype(d).name)
def test_kernels_match_the_reference(cp, dtype):
    from ember.cuda.kernels import dropout

    rng = np.random.default_rng(1)
    for size in (1, 3, 4, 5, 1023, 1025, (129, 257)):
        x = (rng.standard_normal(size) * 10).astype(dtype)
        for key in (0, 0xDEADBEEF, 2**63 - 1):
            keep = 0.9
            scale = float(np.asarray(1, dtype) / np.asarray(keep, dtype))
            expected, expected_mask = dropout.reference(x, keep, scale, key)
            device = cp.asarray(x)
            out, mask = dropout.forward(device, keep, scale, key, with_mask=True)
            np.testing.assert_array_equal(cp.asnumpy(out).view(np.uint8), expected.view(np.uint8))
            np.testing.assert_array_equal(cp.asnumpy(mask), expected_mask)
            # off the packs (one element in), and in place
            flat = cp.asarray(np.concatenate([x.reshape(-1)[:1], x.reshape(-1)]))[1:]
            out, _ = dropout.forward(flat, keep, scale, key)
            np.testing.assert_array_equal(cp.asnumpy(out).view(np.uint8), expected.reshape(-1).view(np.uint8))
            dropout.forward(device, keep, scale, key, out=device)
            np.testing.assert_array_equal(cp.asnumpy(device).view(np.uint8), expected.view(np.uint8))
            g = (rng.standard_normal(size)).astype(dtype)
            grad = dropout.backward(cp.asarray(g), cp.asarray(expected_mask), scale)
            with np.errstate(all="ignore"):
                acc = np.float64 if np.dtype(dtype) == np.float64 else np.float32
                want = ((g.astype(acc) * expected_mask.astype(acc)) * acc(scale)).astype(dtype)
            np.testing.assert_array_equal(cp.asnumpy(grad).view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("p", [0.1, 0.5, 0.97])
def test_dropout_equals_the_decomposition_for_the_same_seed(cp, dtype, p):
    x = _values((33, 1025), dtype)
    ember.manual_seed(7)
    y = F.dropout(x, p)
    after = ember.cuda.get_rng_state()
    ember.manual_seed(7)
    expected = _old_unrecorded(x, 1.0 - p)
    _same_state(ember.cuda.get_rng_state(), after)  # one key drawn, as ember.bernoulli draws
    _bits_equal(y, expected)
    assert y.grad_fn is None and y.dtype is dtype


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("p", [0.2, 0.12, 0.11])
def test_dropout_with_autograd_equals_the_decomposition(cp, dtype, p):
    # p = 0.12 (bfloat16) and 0.11 (float16): 1 / keep rounded to the dtype (the scale here, and on the CPU)
    # differs from 1 / keep rounded to float32 and then to the dtype, which the recorded decomposition's
    # ``mask / keep`` gave on the GPU before (its fast ``div`` takes the number in float32): now the
    # recorded values equal the unrecorded ones (docs/internals.rst, "dropout")
    keep = 1.0 - p
    x = _values((64, 513), dtype, seed=2)
    x[0, :4] = 1.0  # finite inputs: every gradient entry is defined
    g = _values((64, 513), dtype, seed=3)
    leaf = x.clone().requires_grad_(True)
    ember.manual_seed(11)
    y = F.dropout(leaf, p)
    assert type(y.grad_fn).__name__ == "FusedDropoutBackward"
    y.backward(g)
    ember.manual_seed(11)
    _bits_equal(y, _old_unrecorded(x, keep))
    ember.manual_seed(11)
    _bits_equal(leaf.grad, _old_unrecorded(g, keep))  # (g * mask) * scale, the same mask
    if dtype in (ember.float32, ember.float64):  # and the recorded decomposition's values, unchanged
        ember.manual_seed(11)
        factor = _old_scaled_mask(x, keep)
        _bits_equal(y, x * factor)
        _bits_equal(leaf.grad, g * factor)
    # create_graph: the backward runs ember ops, so the gradient is differentiable in the incoming gradient
    leaf2 = x.clone().requires_grad_(True)
    ember.manual_seed(11)
    y2 = F.dropout(leaf2, p)
    g2 = g.clone().requires_grad_(True)
    (dx,) = ember.autograd.grad(y2, leaf2, g2, create_graph=True)
    _bits_equal(dx, leaf.grad)
    (dg,) = ember.autograd.grad(dx.float().sum(), g2)
    ember.manual_seed(11)
    _bits_equal(dg, _old_unrecorded(ember.ones_like(g), keep))


def test_dropout_without_grad_mode_records_nothing_and_in_place(cp):
    x = _values((300, 301), ember.bfloat16, seed=4).requires_grad_(True)
    ember.manual_seed(5)
    with ember.no_grad():
        y = F.dropout(x, 0.25)
    assert y.grad_fn is None and not y.requires_grad
    ember.manual_seed(5)
    expected = _old_unrecorded(x.detach(), 0.75)
    _bits_equal(y, expected)
    # in place, without and with autograd (a non-leaf)
    z = x.detach().clone()
    version = z._version
    ember.manual_seed(5)
    assert F.dropout(z, 0.25, inplace=True) is z
    assert z._version > version
    _bits_equal(z, expected)
    w = x * 1
    ember.manual_seed(5)
    F.dropout(w, 0.25, inplace=True)
    _bits_equal(w, expected)
    w.float().sum().backward()
    ember.manual_seed(5)
    _bits_equal(x.grad, _old_unrecorded(ember.ones_like(x), 0.75))


def test_calls_the_kernel_does_not_take_keep_their_values(cp):
    # strided inputs and feature dropout run the decomposition: the values of before
    x = _values((40, 70), ember.float16, seed=6).t()
    ember.manual_seed(3)
    y = F.dropout(x, 0.3)
    ember.manual_seed(3)
    _bits_equal(y, _old_unrecorded(x, 0.7))
    assert F.dropout(ember.empty(3, 0, device="cuda"), 0.3).shape == (3, 0)
    feature = ember.rand(8, 16, 5, 5, device="cuda") + 0.5
    out = F.dropout2d(feature, 0.5).cpu().numpy().reshape(8, 16, 25)
    assert ((out == 0).all(axis=2) | (out != 0).all(axis=2)).all()


def test_statistics(cp):
    x = ember.ones(2000, 1001, device="cuda", dtype=ember.bfloat16)
    kept = (F.dropout(x, 0.1) != 0).float().mean().item()
    assert abs(kept - 0.9) < 6 * (0.09 / x.numel()) ** 0.5
