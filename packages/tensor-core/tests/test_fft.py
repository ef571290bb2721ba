"""ember.fft against numpy.fft / scipy.fft: every transform, norm and argument form; dtypes, errors, meta,
out=, round trips, fftfreq/fftshift, and the CPU kernels' thread count.

(The op_db samples in ember.testing._samples.fft cover the same ops in tests/test_ops.py; these tests add
the cases that need their own oracle: empty batches, long prime sizes, round trips, the helpers.)
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.fft

import ember
import ember.fft as F
from ember.testing import assert_close

RNG = np.random.default_rng(0)
FFT_OPS = ember._ops.fft  # the op module (ember.fft is the public namespace)
NORMS = (None, "backward", "ortho", "forward")
C2C = ("fft", "ifft", "fft2", "ifft2", "fftn", "ifftn")
R2C = ("rfft", "ihfft", "rfft2", "ihfft2", "rfftn", "ihfftn")
C2R = ("irfft", "hfft", "irfft2", "hfft2", "irfftn", "hfftn")
ALL = C2C + R2C + C2R


@pytest.fixture(params=["scipy", "ducc0"])
def cpu_backend(request, monkeypatch):
    """Each CPU implementation in turn: scipy.fft, and ducc0.fft where that optional package is installed."""
    if request.param == "ducc0":
        ducc0 = pytest.importorskip("ducc0", reason="ducc0 (the optional faster CPU FFT) is not installed")
        monkeypatch.setattr(FFT_OPS, "_ducc", ducc0)
    else:
        monkeypatch.setattr(FFT_OPS, "_ducc", False)
    return request.param


def _real(*shape):
    return RNG.standard_normal(shape)


def _complex(*shape):
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


def _check(name, x, rtol=1e-10, atol=1e-10, **kwargs):
    """``ember.fft.<name>(x, **kwargs)`` against ``scipy.fft.<name>`` in double precision (same kwargs)."""
    ours = getattr(F, name)(ember.tensor(x), **kwargs)
    scipy_kwargs = dict(kwargs)
    if "dim" in scipy_kwargs:
        scipy_kwargs["axis" if name[-1] not in "2n" else "axes"] = scipy_kwargs.pop("dim")
    expected = getattr(scipy.fft, name)(x, **scipy_kwargs)
    assert tuple(ours.shape) == expected.shape
    assert_close(ours, expected, rtol=rtol, atol=atol, check_dtype=False)
    return ours


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", ALL)
def test_every_transform_and_norm_matches_scipy(name, norm, cpu_backend):
    x = _complex(3, 5, 6) if name in C2C + C2R else _real(3, 5, 6)
    _check(name, x, norm=norm)


@pytest.mark.parametrize("n", [1, 2, 7, 13, 97, 127, 1000, 1009])  # primes and composites, odd and even
def test_one_dimensional_sizes(n, cpu_backend):
    _check("fft", _complex(2, n))
    _check("rfft", _real(2, n))
    _check("irfft", _complex(2, n // 2 + 1), n=n)
    _check("hfft", _complex(n // 2 + 1), n=n)
    _check("ihfft", _real(n))


def test_batched_and_middle_dims(cpu_backend):
    x = _complex(2, 3, 4, 5)
    _check("fft", x, dim=1)
    _check("fft2", x, dim=(0, 2))
    _check("fftn", x, dim=(3, 0, 1))
    _check("rfftn", x.real.copy(), dim=(1, 3))
    _check("irfftn", x, dim=(2, 1))


def test_sizes_trim_and_pad(cpu_backend):
    x = _complex(4, 6)
    _check("fft", x, n=3)
    _check("fft", x, n=11, dim=0)
    _check("ifft2", x, s=(5, 9))
    _check("fftn", x, s=(2, 3))
    _check("rfft2", x.real.copy(), s=(7, 5))
    _check("irfft2", x, s=(3, 9))
    _check("hfftn", x, s=(5, 4))
    # -1 keeps a dim's size (PyTorch), which scipy spells as the size itself
    assert_close(F.fftn(ember.tensor(x), s=(-1, 8)), np.fft.fftn(x, s=(4, 8), axes=(0, 1)), check_dtype=False)


def test_default_dims_of_fftn_with_s_are_the_last_len_s():
    x = _complex(2, 3, 4)
    assert_close(F.fftn(ember.tensor(x), s=(5,)), np.fft.fftn(x, s=(5,), axes=(2,)), check_dtype=False)
    assert_close(F.irfftn(ember.tensor(x), s=(3, 6)), np.fft.irfftn(x, s=(3, 6), axes=(1, 2)), check_dtype=False)


def test_noncontiguous_and_negative_stride_inputs(cpu_backend):
    x = _complex(6, 8)
    t = ember.tensor(x)
    assert_close(F.fft(t.t()), np.fft.fft(x.T), check_dtype=False)
    assert_close(F.fft2(t[::2, 1::3]), np.fft.fft2(x[::2, 1::3]), check_dtype=False)
    assert_close(F.rfft(ember.tensor(x.real).flip(1)), np.fft.rfft(x.real[:, ::-1]), check_dtype=False)


def test_empty_batches_give_empty_results():
    # numpy's answer; PyTorch's MKL transforms raise on these
    for name, x, shape in (("fft", _complex(0, 4), (0, 4)), ("rfft", _real(0, 4), (0, 3)),
                           ("irfft", _complex(0, 3), (0, 4)), ("fft2", _complex(0, 2, 3), (0, 2, 3))):
        out = getattr(F, name)(ember.tensor(x))
        assert tuple(out.shape) == shape and out.numel() == 0


def test_zero_dim_and_no_dims():
    x = ember.tensor(2.5)
    out = F.fftn(x)  # no dims to transform: the value, as complex
    assert out.shape == () and out.dtype is ember.complex64 and complex(out.item()) == 2.5
    with pytest.raises(IndexError, match="tensor has no dimensions"):
        F.fft(x)
    with pytest.raises(RuntimeError, match="at least one axis"):
        F.rfftn(x)


@pytest.mark.parametrize("dtype, result", [
    (ember.float32, ember.complex64), (ember.float64, ember.complex128), (ember.complex64, ember.complex64),
    (ember.complex128, ember.complex128), (ember.int64, ember.complex64), (ember.uint8, ember.complex64),
    (ember.bool, ember.complex64),
])
def test_dtypes_follow_pytorch(dtype, result):
    x = ember.ones(8, dtype=dtype)
    assert F.fft(x).dtype is result
    assert F.ifftn(x).dtype is result
    assert F.irfft(x).dtype is result.to_real()
    assert F.hfft(x).dtype is result.to_real()
    if not dtype.is_complex:
        assert F.rfft(x).dtype is result
        assert F.ihfft(x).dtype is result


def test_integers_compute_in_the_default_dtype():
    previous = ember.get_default_dtype()
    ember.set_default_dtype(ember.float64)
    try:
        assert F.fft(ember.arange(4)).dtype is ember.complex128
        assert F.irfft(ember.arange(4)).dtype is ember.float64
    finally:
        ember.set_default_dtype(previous)


@pytest.mark.parametrize("dtype, name", [(ember.float16, "Half"), (ember.bfloat16, "BFloat16")])
@pytest.mark.parametrize("fn", ALL)
def test_half_types_raise_as_pytorch_on_cpu(fn, dtype, name):
    with pytest.raises(RuntimeError, match=f"Unsupported dtype {name}"):
        getattr(F, fn)(ember.ones(4, 4, dtype=dtype))


def test_single_precision_accuracy(cpu_backend):
    x = _complex(64, 4096)
    ours = F.fft(ember.tensor(x.astype(np.complex64)))
    assert ours.dtype is ember.complex64
    assert_close(ours, np.fft.fft(x.astype(np.complex64)), rtol=1e-4, atol=2e-3, check_dtype=False)


@pytest.mark.parametrize("norm", NORMS)
def test_round_trips(norm, cpu_backend):
    x = _real(3, 10)
    t = ember.tensor(x)
    assert_close(F.irfft(F.rfft(t, norm=norm), n=10, norm=norm), x)
    assert_close(F.irfft(F.rfft(t[:, :9], norm=norm), n=9, norm=norm), x[:, :9])  # odd length
    assert_close(F.ifft(F.fft(t, norm=norm), norm=norm).real, x)
    assert_close(F.irfftn(F.rfftn(t, norm=norm), s=(3, 10), norm=norm), x)
    assert_close(F.hfft(F.ihfft(t, norm=norm), n=10, norm=norm), x)
    z = _complex(4, 5)
    assert_close(F.ifft2(F.fft2(ember.tensor(z), norm=norm), norm=norm), z)


def test_parseval_under_ortho():
    x = _complex(128)
    y = F.fft(ember.tensor(x), norm="ortho")
    assert abs(float((y.abs() ** 2).sum()) - float(np.sum(np.abs(x) ** 2))) < 1e-9


def test_errors():
    x = ember.ones(4, 6)
    with pytest.raises(RuntimeError, match='Invalid normalization mode: "bad"'):
        F.fft(x, norm="bad")
    with pytest.raises(RuntimeError, match=r"Invalid number of data points \(0\) specified"):
        F.fft(x, n=0)
    with pytest.raises(RuntimeError, match=r"Invalid number of data points \(-2\) specified"):
        F.rfft2(x, s=(-2, 3))
    with pytest.raises(RuntimeError, match=r"Invalid number of data points \(0\) specified"):
        F.irfft(ember.ones(1, dtype=ember.complex64))  # 2 * (1 - 1) points
    with pytest.raises(IndexError, match="Dimension out of range"):
        F.fft(x, dim=2)
    with pytest.raises(IndexError, match="Dimension out of range"):
        F.fft2(ember.ones(4))
    with pytest.raises(RuntimeError, match="dim and shape arguments must have the same length"):
        F.fftn(x, s=(2, 2), dim=(0,))
    with pytest.raises(RuntimeError, match="FFT dims must be unique"):
        F.fftn(x, dim=(0, -2))
    with pytest.raises(RuntimeError, match="Got shape with 3 values but input tensor only has 2 dimensions"):
        F.fftn(x, s=(2, 3, 4))
    with pytest.raises(RuntimeError, match="rfft expects a real input tensor, but got ComplexFloat"):
        F.rfft(x.to(ember.complex64))
    with pytest.raises(TypeError, match="argument 'dim' must be int, not tuple"):
        F.fft(x, dim=(0,))
    with pytest.raises(TypeError, match="must be Tensor, not list"):
        F.fft([1.0, 2.0])


def test_prim_errors():
    c2c, r2c, c2r = ember._ops.fft._fft_c2c, ember._ops.fft._fft_r2c, ember._ops.fft._fft_c2r
    z = ember.ones(4, 6, dtype=ember.complex64)
    with pytest.raises(RuntimeError, match="FFT dims must be unique"):
        c2c(z, (1, 1), "backward", True)
    with pytest.raises(IndexError, match="Dimension out of range"):
        r2c(z.real, (2,), "backward", True)
    with pytest.raises(RuntimeError, match="expects a complex input"):
        c2c(z.real, (1,), "backward", True)
    with pytest.raises(RuntimeError, match="expected 4 bins along dim 1 for last_dim_size=6, but got 6"):
        c2r(z, (1,), "backward", 6)
    with pytest.raises(RuntimeError, match="must transform at least one dim"):
        r2c(z.real, (), "backward", True)


@pytest.mark.parametrize("name", ALL)
def test_meta_shapes_and_dtypes(name):
    x = ember.ones(3, 4, 5, dtype=ember.float64 if name in R2C else ember.complex128)
    kwargs = {"n": 7} if name[-1] not in "2n" else {"s": (6, 7)}
    real = getattr(F, name)(x, **kwargs)
    meta = getattr(F, name)(x.to("meta"), **kwargs)
    assert meta.device.type == "meta" and meta.shape == real.shape and meta.dtype is real.dtype


def test_out_argument():
    x = ember.tensor(_complex(3, 8))
    out = ember.empty(0, dtype=ember.complex128)
    assert F.fft(x, out=out) is out
    assert_close(out, np.fft.fft(x.numpy()))
    real_out = ember.empty(3, 14, dtype=ember.float64)
    F.irfft(x, out=real_out)
    assert_close(real_out, np.fft.irfft(x.numpy()))
    with pytest.raises(RuntimeError):
        F.irfft(x, out=ember.empty(3, 14, dtype=ember.int64))


def test_not_in_the_ember_namespace_but_registered():
    assert not hasattr(ember, "fft_fft")
    assert ember._ops.registry["fft_rfft2"] is F.rfft2
    assert F.fft.category == "composite" and ember._ops.registry["_fft_c2c"].category == "prim"


def test_input_untouched():
    x = ember.tensor(_complex(4, 6))
    before = x.numpy().copy()
    F.fft2(x)
    F.hfft(x)
    F.irfftn(x)
    np.testing.assert_array_equal(x.numpy(), before)


def test_cpu_kernels_use_embers_thread_count(monkeypatch, cpu_backend):
    seen = []
    if cpu_backend == "scipy":
        module, name, keyword = scipy.fft, "fftn", "workers"
    else:
        import ducc0

        module, name, keyword = ducc0.fft, "c2c", "nthreads"
    real = getattr(module, name)

    def spy(*args, **kwargs):
        seen.append(kwargs.get(keyword))
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    previous = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        F.fft(ember.ones(2, 8, dtype=ember.complex64))
        ember.set_num_threads(2)
        F.fft(ember.ones(2, 8, dtype=ember.complex64))
    finally:
        ember.set_num_threads(previous)
    assert seen == [1, 2]


def test_two_sided_r2c_and_c2r_weighting_agree_between_backends(monkeypatch):
    ducc0 = pytest.importorskip("ducc0", reason="ducc0 (the optional faster CPU FFT) is not installed")
    x = ember.tensor(_real(3, 9))
    z = ember.tensor(_complex(3, 5))
    results = []
    for module in (False, ducc0):
        monkeypatch.setattr(FFT_OPS, "_ducc", module)
        results.append((FFT_OPS._fft_r2c(x, (0, 1), "ortho", False), FFT_OPS._fft_c2r(z, (1,), "forward", 8),
                        FFT_OPS._fft_c2r(z, (0, 1), "backward", 9)))
    for a, b in zip(*results):
        assert_close(a, b, rtol=1e-12, atol=1e-12)


# -- fftfreq, rfftfreq, fftshift, ifftshift ------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 4, 5, 10])
@pytest.mark.parametrize("d", [1.0, 0.25])
def test_frequencies(n, d):
    if n == 0:  # numpy divides by zero here; PyTorch gives an empty tensor and one NaN
        assert F.fftfreq(0, d).shape == (0,)
        assert F.rfftfreq(0, d).shape == (1,) and np.isnan(F.rfftfreq(0, d).item())
        return
    assert_close(F.fftfreq(n, d), np.fft.fftfreq(n, d).astype(np.float32))
    assert_close(F.rfftfreq(n, d), np.fft.rfftfreq(n, d).astype(np.float32))


def test_frequency_options():
    f = F.fftfreq(6, dtype=ember.float64, requires_grad=True)
    assert f.dtype is ember.float64 and f.requires_grad
    assert F.rfftfreq(4, device="meta").device.type == "meta"
    out = ember.empty(0)
    assert F.fftfreq(4, out=out) is out and out.tolist() == [0.0, 0.25, -0.5, -0.25]
    with pytest.raises(RuntimeError, match="negative dimension"):
        F.fftfreq(-1)
    with pytest.raises(RuntimeError, match="floating point or complex dtype"):
        F.fftfreq(4, dtype=ember.int64)


@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1), (-1,)])
def test_shifts(dim):
    x = RNG.standard_normal((5, 6))
    assert_close(F.fftshift(ember.tensor(x), dim=dim), np.fft.fftshift(x, axes=dim))
    assert_close(F.ifftshift(ember.tensor(x), dim=dim), np.fft.ifftshift(x, axes=dim))
    assert_close(F.ifftshift(F.fftshift(ember.tensor(x), dim=dim), dim=dim), x)
