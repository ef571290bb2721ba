"""The native Normal sampler (csrc/random.cpp, Generator._fill_normal) behind randn / normal / normal_ on the CPU.

Oracles: numpy's PCG64 (``random_raw``, ``advance``) for the stream, the Box-Muller formula of
docs/internals.rst ("Random generators") evaluated in float64 with numpy's log/sqrt/cos/sin for the
values, and scipy.stats for the distribution (fixed seeds, so the statistical checks cannot flake).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

import ember
from ember import _C, _random

_M64 = 2**64 - 1


def _pcg(seed):
    """A fresh numpy PCG64 with ember's stream for ``seed`` (what Generator().manual_seed(seed) holds)."""
    return np.random.PCG64(seed)


def _split(value):
    return value >> 64, value & _M64


def _oracle(bit_generator, n, dtype):
    """The documented samples, in float64, from the draws of ``bit_generator`` (which it advances)."""
    pairs = (n + 1) // 2
    if dtype == np.float32:
        d = bit_generator.random_raw(pairs)
        hi, lo = d >> np.uint64(32), d & np.uint64(0xFFFFFFFF)
        u_bits, quadrant, t_bits, frac = (hi >> np.uint64(9)), lo >> np.uint64(30), lo >> np.uint64(7), 23
    else:
        d = bit_generator.random_raw(2 * pairs)
        a, b = d[0::2], d[1::2]
        u_bits, quadrant, t_bits, frac = a >> np.uint64(12), b >> np.uint64(62), b >> np.uint64(10), 52
    mask = np.uint64((1 << frac) - 1)
    u = 2.0 - (1.0 + (u_bits & mask).astype(np.float64) / 2.0**frac)
    t = (1.0 + (t_bits & mask).astype(np.float64) / 2.0**frac - 1.5) * (math.pi / 2)
    theta = t + quadrant.astype(np.float64) * (math.pi / 2)
    r = np.sqrt(-2.0 * np.log(u))
    z = np.empty(2 * pairs)
    z[0::2], z[1::2] = r * np.cos(theta), r * np.sin(theta)
    return z[:n]


# -- the stream ---------------------------------------------------------------------------------------


def test_pcg64_raw_is_numpys_stream():
    bg = _pcg(12345)
    inner = bg.state["state"]
    raw, hi, lo = _C.pcg64_raw(*_split(inner["state"]), *_split(inner["inc"]), 1000)
    np.testing.assert_array_equal(raw, bg.random_raw(1000))
    assert (hi << 64) | lo == bg.state["state"]["state"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 2, 7, 255, 256, 257, 4095, 4096, 4097, 70001])
def test_values_follow_the_documented_formula(dtype, n):
    g = ember.Generator().manual_seed(2024)
    out = np.empty(n, dtype)
    g._fill_normal(out)
    want = _oracle(_pcg(2024), n, dtype)
    tol = 2e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(out, want, rtol=tol, atol=tol)


@pytest.mark.parametrize(
    ("dtype", "draws_per_pair"),
    [(ember.float32, 1), (ember.float16, 1), (ember.bfloat16, 1), (ember.float64, 2), (ember.complex64, 1)],
)
@pytest.mark.parametrize("n", [1, 6, 5001])
def test_stream_advances_by_the_defined_amount(dtype, draws_per_pair, n):
    g = ember.Generator().manual_seed(77)
    ember.randn(n, generator=g, dtype=dtype)
    reals = 2 * n if dtype.is_complex else n
    want = _pcg(77).advance((reals + 1) // 2 * draws_per_pair)
    assert g._rng.bit_generator.state["state"] == want.state["state"]
    # the next op continues on the same numpy stream
    np.testing.assert_array_equal(
        ember.rand(5, generator=g, dtype=ember.float64).numpy(), np.random.Generator(want).random(5)
    )


def test_small_and_large_paths_give_the_same_values(monkeypatch):
    first = np.empty(5001, np.float32)
    ember.Generator().manual_seed(3)._fill_normal(first, 1.5, 0.25)
    monkeypatch.setattr(_random, "NORMAL_RAW_BELOW", 10**9)  # through random_raw
    second = np.empty(5001, np.float32)
    ember.Generator().manual_seed(3)._fill_normal(second, 1.5, 0.25)
    np.testing.assert_array_equal(first, second)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_do_not_depend_on_the_thread_count(monkeypatch, dtype):
    if not _C.has_openmp:
        pytest.skip("ember._C was built without OpenMP")
    monkeypatch.setattr(_random, "NORMAL_MIN_PARALLEL", 1)
    before = ember.get_num_threads()
    results = []
    try:
        for threads in (1, 2, 3):
            ember.set_num_threads(threads)
            g = ember.Generator().manual_seed(11)
            out = np.empty(300_001, dtype)  # odd: the last pair is half written
            g._fill_normal(out, -1.0, 3.0)
            results.append((out, g._rng.bit_generator.state["state"]))
    finally:
        ember.set_num_threads(before)
    for out, state in results[1:]:
        np.testing.assert_array_equal(out, results[0][0])
        assert state == results[0][1]


# -- reproducibility -------------------------------------------------------------------------------------


def test_manual_seed_and_state_restore_reproduce_draws():
    ember.manual_seed(5)
    a = ember.randn(10_000)
    ember.manual_seed(5)
    np.testing.assert_array_equal(ember.randn(10_000).numpy(), a.numpy())
    state = ember.get_rng_state()
    b = ember.randn(3, 7, dtype=ember.float64)
    c = ember.empty(5000).normal_(2.0, 3.0)
    ember.set_rng_state(state)
    np.testing.assert_array_equal(ember.randn(3, 7, dtype=ember.float64).numpy(), b.numpy())
    np.testing.assert_array_equal(ember.empty(5000).normal_(2.0, 3.0).numpy(), c.numpy())


def test_fork_rng_leaves_the_stream_where_it_was():
    ember.manual_seed(9)
    with ember.random.fork_rng():
        inside = ember.randn(100)
    after = ember.randn(100)
    np.testing.assert_array_equal(after.numpy(), inside.numpy())


def test_generators_are_independent_of_the_default_one():
    reference = ember.Generator().manual_seed(1)
    ember.randn(50, generator=reference)
    want = ember.randn(50, generator=reference)  # a generator's second draw when nothing else moved it
    ember.manual_seed(2)
    want_default = ember.randn(1000)
    g = ember.Generator().manual_seed(1)
    ember.manual_seed(2)
    ember.randn(50, generator=g)  # g's draw leaves the default generator where it was ...
    got_default = ember.randn(1000)  # ... and the default generator's draw leaves g where it was
    np.testing.assert_array_equal(got_default.numpy(), want_default.numpy())
    np.testing.assert_array_equal(ember.randn(50, generator=g).numpy(), want.numpy())


# -- mean and std, every op ------------------------------------------------------------------------------


def test_normal_ops_apply_mean_and_std_to_the_same_draws():
    n = 1001
    z64 = _oracle(_pcg(8), n, np.float64)
    z32 = _oracle(_pcg(8), n, np.float32)

    def gen():
        return ember.Generator().manual_seed(8)

    np.testing.assert_allclose(ember.randn(n, generator=gen(), dtype=ember.float64).numpy(), z64, rtol=1e-13)
    np.testing.assert_allclose(
        ember.normal(2.0, 0.5, (n,), generator=gen(), dtype=ember.float64).numpy(), 2.0 + 0.5 * z64, rtol=1e-13
    )
    np.testing.assert_allclose(
        ember.empty(n, dtype=ember.float64).normal_(-1.0, 4.0, generator=gen()).numpy(), -1.0 + 4.0 * z64, rtol=1e-13
    )
    np.testing.assert_allclose(ember.randn(n, generator=gen()).numpy(), z32, rtol=2e-6, atol=2e-6)
    mean = ember.arange(n, dtype=ember.float32)
    np.testing.assert_allclose(
        ember.normal(mean, 2.0, generator=gen()).numpy(), np.arange(n) + 2.0 * z32, rtol=2e-6, atol=1e-5
    )
    like = ember.randn_like(ember.zeros(n, dtype=ember.float64), generator=gen())
    np.testing.assert_allclose(like.numpy(), z64, rtol=1e-13)
    # a non-contiguous target is filled through a temporary, with the same values
    target = ember.zeros(n, 2, dtype=ember.float64)[:, 0]
    target.normal_(generator=gen())
    np.testing.assert_allclose(target.numpy(), z64, rtol=1e-13)


@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16])
def test_half_dtypes_are_float32_draws_rounded(dtype):
    n = 999
    z32 = ember.randn(n, generator=ember.Generator().manual_seed(4))  # checked against the oracle above
    got = ember.randn(n, generator=ember.Generator().manual_seed(4), dtype=dtype)
    np.testing.assert_array_equal(got.float().numpy(), z32.to(dtype).float().numpy())
    filled = ember.empty(n, dtype=dtype).normal_(3.0, 0.0, generator=ember.Generator().manual_seed(4))
    assert (filled.float().numpy() == 3.0).all()


def test_complex_parts_have_variance_one_half():
    n = 1001
    z32 = _oracle(_pcg(6), 2 * n, np.float32) * math.sqrt(0.5)
    got = ember.randn(n, generator=ember.Generator().manual_seed(6), dtype=ember.complex64).numpy()
    np.testing.assert_allclose(got.real, z32[0::2], rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(got.imag, z32[1::2], rtol=2e-6, atol=2e-6)


# -- the distribution ------------------------------------------------------------------------------------

# n, and the seed: fixed, so these checks give the same answer on every run
_SAMPLES = {ember.float64: 400_000, ember.float32: 400_000, ember.float16: 100_000, ember.bfloat16: 20_000}


@pytest.mark.parametrize("dtype", list(_SAMPLES))
def test_moments_and_kolmogorov_smirnov(dtype):
    n = _SAMPLES[dtype]
    x = ember.randn(n, generator=ember.Generator().manual_seed(31), dtype=dtype).double().numpy()
    se = 1 / math.sqrt(n)
    # standard errors: mean 1/sqrt(n), variance sqrt(2/n), skewness sqrt(6/n), excess kurtosis sqrt(24/n);
    # 5 of them, plus the rounding of the dtype (bfloat16 rounds to 8 significant bits)
    rounding = {ember.bfloat16: 3e-3, ember.float16: 4e-4}.get(dtype, 0.0)
    assert abs(x.mean()) < 5 * se
    assert abs(x.var() - 1) < 5 * math.sqrt(2) * se + rounding
    assert abs(scipy.stats.skew(x)) < 5 * math.sqrt(6) * se
    assert abs(scipy.stats.kurtosis(x)) < 5 * math.sqrt(24) * se + rounding
    assert scipy.stats.kstest(x, "norm").pvalue > 1e-3


def test_kolmogorov_smirnov_rejects_a_wrong_distribution():
    # the test above can fail: the same sample against N(0, 1.05^2) is rejected
    x = ember.randn(400_000, generator=ember.Generator().manual_seed(31), dtype=ember.float64).numpy()
    assert scipy.stats.kstest(x, scipy.stats.norm(scale=1.05).cdf).pvalue < 1e-6


def test_tails_reach_the_documented_bounds():
    x = ember.randn(2_000_000, generator=ember.Generator().manual_seed(2), dtype=ember.float64).numpy()
    assert 4.5 < np.abs(x).max() <= math.sqrt(2 * 52 * math.log(2))
    y = ember.randn(2_000_000, generator=ember.Generator().manual_seed(2)).numpy()
    assert 4.5 < np.abs(y).max() <= math.sqrt(2 * 23 * math.log(2)) + 1e-6


def test_kernel_rejects_bad_arrays():
    with pytest.raises(ValueError, match="float32 or float64"):
        _C.normal_fill(np.empty(3, np.int64), 0, 1, 0, 1, 0.0, 1.0, 1)
    with pytest.raises(ValueError, match="C-contiguous"):
        _C.normal_fill(np.empty((3, 2))[:, 0], 0, 1, 0, 1, 0.0, 1.0, 1)
    with pytest.raises(ValueError, match="odd"):
        _C.normal_fill(np.empty(3), 0, 1, 0, 2, 0.0, 1.0, 1)
    with pytest.raises(ValueError, match="expected 4 draws"):
        _C.normal_from_draws(np.empty(3), np.zeros(3, np.uint64), 0.0, 1.0)
