"""Random numbers: generators, seeding and state, and the random ops.

Distribution checks use scipy.stats on 20k samples drawn from fixed seeds, so
they are deterministic; each asserts a p-value threshold that the right
distribution passes and that a slightly wrong one fails (shown next to it
where the check could otherwise pass vacuously).
"""

from __future__ import annotations

import doctest
import itertools
import math
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

import ember
import ember._ops.random as random_ops
import ember._random as random_impl

N = 20_000
P_MIN = 1e-3  # a correct sampler passes (fixed seeds: deterministic); see the power checks below


@pytest.fixture(autouse=True)
def _keep_default_generator():
    """Each test may reseed the default generator; put its state back afterwards."""
    state = ember.get_rng_state()
    yield
    ember.set_rng_state(state)


def _norm_cdf(loc, scale):
    """The normal cdf for ``stats.kstest``: the frozen distribution's, since scipy 1.18's
    ``kstest(x, "norm", args=(loc, scale))`` fails (it hands the args to ``special.ndtr``)."""
    return stats.norm(loc, scale).cdf


def gen(seed=0):
    return ember.Generator().manual_seed(seed)


def values(t):
    """A tensor's values as a float64 (or complex128) numpy array."""
    a = np.asarray(t.numpy())
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


def same(a, b):
    return a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape) and np.array_equal(a.numpy(), b.numpy())


# Each draw takes a generator (None: the default one) and returns a tensor; big enough that two
# different streams essentially never agree.
DRAWS = {
    "rand": lambda g: ember.rand(10, 10, generator=g),
    "rand_float64": lambda g: ember.rand(100, generator=g, dtype=ember.float64),
    "rand_bfloat16": lambda g: ember.rand(100, generator=g, dtype=ember.bfloat16),
    "rand_float16": lambda g: ember.rand(100, generator=g, dtype=ember.float16),
    "rand_complex64": lambda g: ember.rand(100, generator=g, dtype=ember.complex64),
    "randn": lambda g: ember.randn(4, 25, generator=g),
    "randn_complex128": lambda g: ember.randn(100, generator=g, dtype=ember.complex128),
    "randint": lambda g: ember.randint(0, 1000, (100,), generator=g),
    "randint_high_only": lambda g: ember.randint(1000, (100,), generator=g),
    "randint_uint8": lambda g: ember.randint(0, 256, (100,), generator=g, dtype=ember.uint8),
    "randperm": lambda g: ember.randperm(100, generator=g),
    "normal_numbers": lambda g: ember.normal(1.0, 2.0, (100,), generator=g),
    "normal_tensors": lambda g: ember.normal(ember.zeros(10, 1), ember.ones(10), generator=g),
    "normal_tensor_mean": lambda g: ember.normal(ember.zeros(100), generator=g),
    "normal_tensor_std": lambda g: ember.normal(0.0, ember.ones(100, dtype=ember.float64), generator=g),
    "bernoulli": lambda g: ember.bernoulli(ember.full((200,), 0.5), generator=g),
    "bernoulli_p": lambda g: ember.bernoulli(ember.zeros(200), 0.5, generator=g),
    "multinomial": lambda g: ember.multinomial(ember.ones(3, 50), 50, generator=g),
    "multinomial_replacement": lambda g: ember.multinomial(ember.ones(50), 100, True, generator=g),
    "rand_like": lambda g: ember.rand_like(ember.zeros(100), generator=g),
    "randn_like": lambda g: ember.randn_like(ember.zeros(100, dtype=ember.float16), generator=g),
    "randint_like": lambda g: ember.randint_like(ember.zeros(100, dtype=ember.int32), 5, 1000, generator=g),
    "uniform_": lambda g: ember.empty(100).uniform_(-3, 3, generator=g),
    "normal_": lambda g: ember.empty(100, dtype=ember.bfloat16).normal_(1, 2, generator=g),
    "random_": lambda g: ember.empty(100, dtype=ember.int64).random_(generator=g),
    "random_float": lambda g: ember.empty(100).random_(0, 1000, generator=g),
    "exponential_": lambda g: ember.empty(100, dtype=ember.float64).exponential_(2.0, generator=g),
    "bernoulli_": lambda g: ember.zeros(200, dtype=ember.bool).bernoulli_(0.5, generator=g),
    "bernoulli_tensor_p": lambda g: ember.zeros(200).bernoulli_(ember.full((200,), 0.5), generator=g),
}


# -- reproducibility ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_same_seed_same_values_explicit_generator(name):
    draw = DRAWS[name]
    assert same(draw(gen(123)), draw(gen(123)))


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_same_seed_same_values_default_generator(name):
    draw = DRAWS[name]
    ember.manual_seed(123)
    a = draw(None)
    ember.manual_seed(123)
    b = draw(None)
    assert same(a, b)


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_different_seeds_differ_and_draws_advance(name):
    draw = DRAWS[name]
    assert not same(draw(gen(1)), draw(gen(2)))
    g = gen(1)
    assert not same(draw(g), draw(g))


def test_whole_program_reproducible_with_manual_seed():
    def program():
        ember.manual_seed(2024)
        a = ember.rand(5)
        b = ember.randint(0, 10, (5,))
        c = ember.empty(5).normal_()
        d = ember.multinomial(ember.ones(5), 3)
        return [x.tolist() for x in (a, b, c, d)]

    assert program() == program()


def test_default_seed_at_import_is_fixed():
    code = "import ember; print(ember.initial_seed()); print(ember.rand(4).tolist())"
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
            for _ in range(2)]
    assert runs[0] == runs[1]
    assert runs[0].splitlines()[0] == str(random_impl.DEFAULT_SEED) == "67280421310721"
    assert ember.Generator().initial_seed() == 67280421310721


def test_new_generator_starts_from_default_seed():
    assert same(ember.rand(5, generator=ember.Generator()), ember.rand(5, generator=gen(67280421310721)))


# -- seeding --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "seed, expected",
    [(0, 0), (7, 7), (-1, 2**64 - 1), (-(2**63), 2**63), (2**64 - 1, 2**64 - 1), (2**64 + 5, 5), (2**100 + 3, 3)],
)
def test_manual_seed_reduces_mod_2_64(seed, expected):
    g = ember.Generator()
    assert g.manual_seed(seed) is g
    assert g.initial_seed() == expected
    assert same(ember.rand(4, generator=g), ember.rand(4, generator=gen(expected)))


@pytest.mark.parametrize("bad", [1.5, "3", None, True])
def test_generator_manual_seed_rejects_non_integers(bad):
    with pytest.raises(RuntimeError, match=f"manual_seed expected an int, but got {type(bad).__name__}"):
        ember.Generator().manual_seed(bad)


def test_module_manual_seed_converts_with_int_and_returns_default_generator():
    assert ember.manual_seed("11") is ember.default_generator
    assert ember.initial_seed() == 11
    ember.manual_seed(2.9)
    assert ember.initial_seed() == 2
    with pytest.raises(ValueError):
        ember.manual_seed("not a number")


def test_seed_is_nondeterministic_and_recorded():
    g = ember.Generator()
    s1, s2 = g.seed(), g.seed()
    assert s1 != s2  # 64-bit entropy: a collision has probability 2**-64
    assert g.initial_seed() == s2
    assert 0 <= s1 < 2**64
    assert same(ember.rand(3, generator=g), ember.rand(3, generator=gen(s2)))
    s = ember.seed()
    assert ember.initial_seed() == s


def test_generator_device_attribute_and_meta_rejected():
    g = ember.Generator()
    assert g.device == ember.device("cpu")
    assert ember.Generator(ember.device("cpu")).device.type == "cpu"
    assert ember.default_generator.device.type == "cpu"
    with pytest.raises(RuntimeError, match="meta device has no random number generator"):
        ember.Generator("meta")
    assert "initial_seed=" in repr(g)


def test_public_module_ember_random():
    assert ember.random.manual_seed is ember.manual_seed
    for name in ("manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state", "fork_rng"):
        assert name in ember.random.__all__
        assert callable(getattr(ember.random, name))
    assert ember.random.default_generator is ember.default_generator


# -- generator state --------------------------------------------------------------------------------------


def _mixed_draws(g):
    return [
        ember.rand(7, generator=g).tolist(),
        ember.randn(3, dtype=ember.float64, generator=g).tolist(),
        ember.randint(0, 100, (5,), generator=g).tolist(),
        ember.randperm(9, generator=g).tolist(),
        ember.multinomial(ember.ones(2, 6), 4, generator=g).tolist(),
        ember.empty(4).exponential_(generator=g).tolist(),
    ]


def test_get_state_set_state_reproduces_following_draws():
    g = gen(5)
    ember.rand(13, generator=g)  # move away from the seeded state
    state = g.get_state()
    first = _mixed_draws(g)
    assert g.set_state(state) is g
    assert _mixed_draws(g) == first
    # The state tensor is a copy: drawing more does not change it, and it can be reused.
    g.set_state(state)
    assert _mixed_draws(g) == first


def test_state_restores_into_another_generator_with_its_seed():
    g = gen(99)
    ember.randn(5, generator=g)
    other = gen(1)
    other.set_state(g.get_state())
    assert other.initial_seed() == 99
    assert _mixed_draws(other) == _mixed_draws(g)


def test_state_is_deterministic_bytes():
    a, b = gen(3).get_state(), gen(3).get_state()
    assert a.dtype is ember.uint8 and a.ndim == 1 and a.shape[0] == random_impl.STATE_SIZE
    assert a.tolist() == b.tolist()
    assert a.tolist() != gen(4).get_state().tolist()
    g = gen(3)
    ember.rand(1, generator=g)
    assert g.get_state().tolist() != a.tolist()


def test_state_includes_numpys_buffered_half_word():
    g = gen(8)
    g._rng.integers(0, 10, dtype=np.int32)  # leaves a buffered 32-bit half word in the bit generator
    assert g._rng.bit_generator.state["has_uint32"] == 1
    state = g.get_state()
    expected = g._rng.integers(0, 2**31, size=5, dtype=np.int32).tolist()
    g.set_state(state)
    assert g._rng.integers(0, 2**31, size=5, dtype=np.int32).tolist() == expected


def test_rng_state_module_functions():
    ember.manual_seed(17)
    state = ember.get_rng_state()
    a = ember.rand(5).tolist()
    ember.rand(5)
    ember.set_rng_state(state)
    assert ember.rand(5).tolist() == a
    assert ember.random.get_rng_state().tolist() == ember.default_generator.get_state().tolist()


def _corrupt(state, index, value):
    raw = state.numpy().copy()
    raw[index] = value
    return ember.from_numpy(raw)


@pytest.mark.parametrize(
    "make_bad, exc, message",
    [
        (lambda s: [1, 2, 3], TypeError, "must be an ember.uint8 tensor, not list"),
        (lambda s: s.to(ember.int64), TypeError, "got a tensor of dtype ember.int64"),
        (lambda s: ember.zeros(10, dtype=ember.uint8), RuntimeError, r"shape \[59\].*got shape \[10\]"),
        (lambda s: s.reshape(1, -1), RuntimeError, r"got shape \[1, 59\]"),
        (lambda s: ember.zeros(59, dtype=ember.uint8), RuntimeError, "not an ember generator state"),
        (lambda s: _corrupt(s, 8, 7), RuntimeError, "unsupported generator state format version 7"),
        (lambda s: _corrupt(s, 9, 3), RuntimeError, "unknown bit generator id 3"),
        (lambda s: _corrupt(s, 20, (int(s.numpy()[20]) + 1) % 256), RuntimeError, "checksum mismatch"),
        (lambda s: _corrupt(s, 58, (int(s.numpy()[58]) + 1) % 256), RuntimeError, "checksum mismatch"),
        (lambda s: ember.empty(59, dtype=ember.uint8, device="meta"), RuntimeError, "meta tensor"),
    ],
)
def test_set_state_rejects_garbage_and_keeps_the_generator(make_bad, exc, message):
    g = gen(4)
    state = g.get_state()
    expected = ember.rand(5, generator=gen(4)).tolist()
    with pytest.raises(exc, match=message):
        g.set_state(make_bad(state))
    assert ember.rand(5, generator=g).tolist() == expected


def test_set_state_rejects_impossible_pcg_values_even_with_valid_checksum():
    import struct
    import zlib

    raw = bytearray(gen(0).get_state().numpy().tobytes())
    raw[26] &= 0xFE  # make the PCG increment even, then fix the checksum
    raw[-4:] = struct.pack("<I", zlib.crc32(bytes(raw[:-4])))
    with pytest.raises(RuntimeError, match="increment must be odd"):
        ember.Generator().set_state(ember.from_numpy(np.frombuffer(bytes(raw), dtype=np.uint8).copy()))


# -- independence of generators and fork_rng --------------------------------------------------------------


def test_explicit_generators_do_not_touch_the_default_one():
    ember.manual_seed(31)
    expected = ember.rand(6).tolist()
    ember.manual_seed(31)
    g = gen(31)
    for draw in DRAWS.values():
        draw(g)
    assert ember.rand(6).tolist() == expected


def test_default_draws_do_not_touch_an_explicit_generator():
    expected = [ember.rand(4, generator=g).tolist() for g in [gen(5)] for _ in range(3)]
    g = gen(5)
    got = []
    for _ in range(3):
        ember.rand(100)
        ember.randint(0, 5, (10,))
        got.append(ember.rand(4, generator=g).tolist())
    assert got == expected


def test_two_generators_are_independent_streams():
    g1, g2 = gen(0), gen(0)
    a = [ember.randn(3, generator=g1).tolist() for _ in range(3)]
    b = []
    for _ in range(3):
        ember.rand(5, generator=gen(77))
        b.append(ember.randn(3, generator=g2).tolist())
    assert a == b


def test_fork_rng_restores_state_even_on_error():
    ember.manual_seed(12)
    with ember.random.fork_rng():
        inside = ember.rand(4).tolist()
        ember.randn(100)
    assert ember.rand(4).tolist() == inside
    ember.manual_seed(12)
    with pytest.raises(ZeroDivisionError), ember.random.fork_rng(devices=[]):
        ember.rand(3)
        1 / 0  # noqa: B018
    assert ember.rand(4).tolist() == inside


def test_fork_rng_disabled_does_not_restore():
    ember.manual_seed(12)
    with ember.random.fork_rng(enabled=False):
        inside = ember.rand(4).tolist()
    assert ember.rand(4).tolist() != inside


# -- distributions ---------------------------------------------------------------------------------------------


def test_rand_is_uniform_01():
    x = values(ember.rand(N, dtype=ember.float64, generator=gen(0)))
    assert x.min() >= 0 and x.max() < 1
    assert stats.kstest(x, "uniform").pvalue > P_MIN
    # Power: the same test rejects a distribution that is off by a little.
    assert stats.kstest(x, "uniform", args=(0, 0.97)).pvalue < 1e-6
    assert stats.kstest(x**1.1, "uniform").pvalue < P_MIN


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_uniform__is_uniform_on_range(dtype):
    x = values(ember.empty(N, dtype=dtype).uniform_(-2.0, 3.0, generator=gen(1)))
    assert x.min() >= -2 and x.max() < 3
    assert stats.kstest(x, "uniform", args=(-2.0, 5.0)).pvalue > P_MIN
    assert stats.kstest(x, "uniform", args=(-2.0, 5.2)).pvalue < 1e-6


@pytest.mark.parametrize("dtype, digits", [(ember.bfloat16, 8), (ember.float16, 11)])
def test_low_precision_rand_covers_its_grid_uniformly_and_stays_below_one(dtype, digits):
    x = values(ember.rand(N * 5, dtype=dtype, generator=gen(2)))
    assert x.min() >= 0 and x.max() < 1
    k = x * 2**digits
    assert np.array_equal(k, np.floor(k))  # exactly on the grid k / 2**digits
    bins = 2**digits if digits == 8 else 64
    counts = np.bincount((k // (2**digits // bins)).astype(np.int64), minlength=bins)
    assert stats.chisquare(counts).pvalue > P_MIN


@pytest.mark.parametrize("dtype", [ember.bfloat16, ember.float16])
@pytest.mark.parametrize("low, high", [(0.0, 1.0), (1.0, 2.0), (-1.0, 0.1), (100.0, 100.5)])
def test_low_precision_uniform__never_reaches_the_upper_bound(dtype, low, high):
    x = values(ember.empty(N, dtype=dtype).uniform_(low, high, generator=gen(3)))
    assert x.max() < high
    assert x.min() >= np.float64(np.array(low, dtype=dtype.numpy_dtype))


def test_complex_rand_and_uniform_parts_are_independent_uniforms():
    z = values(ember.rand(N, dtype=ember.complex128, generator=gen(4)))
    for part in (z.real, z.imag):
        assert stats.kstest(part, "uniform").pvalue > P_MIN
    assert abs(np.corrcoef(z.real, z.imag)[0, 1]) < 0.03
    w = values(ember.empty(N, dtype=ember.complex64).uniform_(1, 3, generator=gen(5)))
    assert stats.kstest(w.imag, "uniform", args=(1, 2)).pvalue > P_MIN


def test_randn_is_standard_normal():
    x = values(ember.randn(N, dtype=ember.float64, generator=gen(6)))
    assert stats.kstest(x, _norm_cdf(0.0, 1.0)).pvalue > P_MIN
    assert stats.kstest(x, _norm_cdf(0.0, 1.1)).pvalue < P_MIN
    assert stats.kstest(x, _norm_cdf(0.1, 1.0)).pvalue < P_MIN


def test_complex_randn_has_unit_variance_split_over_the_parts():
    z = values(ember.randn(N, dtype=ember.complex128, generator=gen(7)))
    for part in (z.real, z.imag):
        assert stats.kstest(part, _norm_cdf(0.0, math.sqrt(0.5))).pvalue > P_MIN
    assert abs(np.mean(np.abs(z) ** 2) - 1.0) < 0.03


def test_normal_numbers_and_normal__have_mean_and_std():
    x = values(ember.normal(3.0, 2.0, (N,), generator=gen(8), dtype=ember.float64))
    assert stats.kstest(x, _norm_cdf(3.0, 2.0)).pvalue > P_MIN
    assert stats.kstest(x, _norm_cdf(3.0, 2.2)).pvalue < P_MIN
    y = values(ember.empty(N, dtype=ember.float64).normal_(-1.5, 0.5, generator=gen(9)))
    assert stats.kstest(y, _norm_cdf(-1.5, 0.5)).pvalue > P_MIN


def test_normal_tensor_overloads_broadcast_means_and_stds():
    mean = ember.tensor([[-5.0], [5.0]], dtype=ember.float64)  # (2, 1)
    std = ember.tensor([0.5, 2.0], dtype=ember.float64)  # (2,)
    draws = np.stack([values(ember.normal(mean, std, generator=g)) for g in [gen(10)] for _ in range(N // 4)])
    assert draws.shape == (N // 4, 2, 2)
    for i, j in itertools.product(range(2), range(2)):
        m, s = [-5.0, 5.0][i], [0.5, 2.0][j]
        assert stats.kstest(draws[:, i, j], _norm_cdf(m, s)).pvalue > P_MIN
    x = values(ember.normal(ember.full((N,), 2.0), 3.0, generator=gen(11)))
    assert stats.kstest(x, _norm_cdf(2.0, 3.0)).pvalue > P_MIN
    y = values(ember.normal(-1.0, ember.full((N,), 0.25), generator=gen(12)))
    assert stats.kstest(y, _norm_cdf(-1.0, 0.25)).pvalue > P_MIN


def test_normal_dtype_follows_mean_then_std():
    f32, f64 = ember.zeros(3), ember.ones(3, dtype=ember.float64)
    assert ember.normal(f32, f64).dtype is ember.float32
    assert ember.normal(1.0, f64).dtype is ember.float64
    assert ember.normal(ember.zeros(2, dtype=ember.bfloat16), 1.0).dtype is ember.bfloat16
    assert ember.normal(0.0, 1.0, (2,)).dtype is ember.get_default_dtype()
    assert ember.normal(0.0, 1.0, (2,), dtype=ember.float16).dtype is ember.float16


def test_normal_zero_std_gives_the_mean_exactly():
    assert ember.normal(ember.tensor([1.0, -2.0]), 0.0).tolist() == [1.0, -2.0]
    assert ember.empty(3, dtype=ember.complex64).normal_(5, 0).tolist() == [5 + 5j] * 3


def test_exponential__is_exponential():
    x = values(ember.empty(N, dtype=ember.float64).exponential_(2.5, generator=gen(13)))
    assert x.min() >= 0
    assert stats.kstest(x, "expon", args=(0, 1 / 2.5)).pvalue > P_MIN
    assert stats.kstest(x, "expon", args=(0, 1 / 2.3)).pvalue < P_MIN
    y = values(ember.empty(N).exponential_(generator=gen(14)))
    assert stats.kstest(y, "expon").pvalue > P_MIN


def test_randint_is_uniform_over_its_range():
    x = ember.randint(3, 13, (N,), generator=gen(15)).numpy()
    assert x.min() == 3 and x.max() == 12
    counts = np.bincount(x - 3, minlength=10)
    assert stats.chisquare(counts).pvalue > P_MIN
    # Power: a sampler that favoured one value by 10% would fail.
    biased = counts.astype(np.float64).copy()
    biased[0] *= 1.1
    biased *= counts.sum() / biased.sum()
    assert stats.chisquare(biased).pvalue < P_MIN


@pytest.mark.parametrize(
    "dtype, from_, to, support",
    [
        (ember.uint8, 0, None, range(256)),
        (ember.int8, 0, None, range(128)),
        (ember.bool, 0, None, range(2)),
        (ember.int16, -5, 5, range(-5, 5)),
        (ember.int32, 7, None, range(7)),
        (ember.bfloat16, 0, None, range(257)),
        (ember.float32, -3, 4, range(-3, 4)),
    ],
)
def test_random__is_uniform_over_its_support(dtype, from_, to, support):
    x = values(ember.empty(N, dtype=dtype).random_(from_, to, generator=gen(16))).astype(np.int64)
    assert set(np.unique(x)) <= set(support)
    counts = np.array([(x == v).sum() for v in support])
    assert stats.chisquare(counts).pvalue > P_MIN


def test_random__default_ranges_per_dtype():
    big = values(ember.empty(N, dtype=ember.int64).random_(generator=gen(17)))
    assert big.min() >= 0 and big.max() > 2**62  # spans [0, 2**63 - 1]
    f64 = values(ember.empty(N, dtype=ember.float64).random_(generator=gen(18)))
    assert f64.min() >= 0 and f64.max() <= 2**53 and f64.max() > 2**52
    f16 = values(ember.empty(N, dtype=ember.float16).random_(generator=gen(19)))
    assert f16.max() == 2**11 and f16.min() == 0  # 0 .. 2048 inclusive, every value exact


def test_randperm_is_a_uniform_permutation():
    for n in (0, 1, 5, 1000):
        p = ember.randperm(n, generator=gen(n))
        assert p.dtype is ember.int64 and sorted(p.tolist()) == list(range(n))
    assert sorted(ember.randperm(300, dtype=ember.float32).tolist()) == list(map(float, range(300)))
    g = gen(20)
    perms = list(itertools.permutations(range(4)))
    index = {p: i for i, p in enumerate(perms)}
    counts = np.zeros(24, np.int64)
    for _ in range(24 * 400):
        counts[index[tuple(ember.randperm(4, generator=g).tolist())]] += 1
    assert stats.chisquare(counts).pvalue > P_MIN


def test_multinomial_with_replacement_frequencies():
    p = np.array([0.1, 0.2, 0.3, 0.4])
    x = ember.multinomial(ember.tensor(p * 10, dtype=ember.float64), N, replacement=True, generator=gen(21)).numpy()
    counts = np.bincount(x, minlength=4)
    assert stats.chisquare(counts, p * N).pvalue > P_MIN
    assert stats.chisquare(counts, np.array([0.12, 0.2, 0.3, 0.38]) * N).pvalue < 1e-6


@pytest.mark.parametrize("block, search_from", [(random_ops._MULTINOMIAL_BLOCK, 1024), (50, 1024), (50, 9)],
                         ids=["one block", "blocks of rows", "per-row search"])
def test_multinomial_with_replacement_is_inverse_cdf(monkeypatch, block, search_from):
    # The vectorised sampler (and, for long rows, the per-row search) against a per-row searchsorted of the
    # same uniforms (and the clamp of a draw that rounds up to the total onto the last positive weight).
    monkeypatch.setattr(random_ops, "_MULTINOMIAL_BLOCK", block)
    monkeypatch.setattr(random_ops, "_SEARCH_ROW_SAMPLES", search_from)
    rng = np.random.default_rng(3)
    w = rng.random((37, 6))
    w[w < 0.4] = 0.0
    w[:, 2] += 0.5
    got = random_ops._multinomial_with_replacement(np.random.default_rng(4), w, 9)
    u = np.random.default_rng(4).random((37, 9))
    cdf = np.cumsum(w, axis=1)
    want = [np.minimum(np.searchsorted(c, r * c[-1], side="right"), np.flatnonzero(x > 0)[-1])
            for c, r, x in zip(cdf, u, w)]
    assert got.dtype == np.int64 and (got == np.array(want)).all()

    class AlmostOne:  # u * total rounds to total
        def random(self, shape):
            return np.full(shape, 1 - 2.0**-53)

    assert random_ops._multinomial_with_replacement(AlmostOne(), np.array([[1.0, 2.0, 0.0]]), 2).tolist() == [[1, 1]]


def test_multinomial_without_replacement_draws_sequentially_in_proportion():
    p = np.array([0.1, 0.2, 0.3, 0.4])
    rows = ember.tensor(np.tile(p, (N, 1)), dtype=ember.float32)
    x = ember.multinomial(rows, 2, generator=gen(22)).numpy()
    assert x.shape == (N, 2) and (x[:, 0] != x[:, 1]).all()
    first = np.bincount(x[:, 0], minlength=4)
    assert stats.chisquare(first, p * N).pvalue > P_MIN
    # P(second = j) = sum_i p_i * p_j / (1 - p_i), i != j
    second_expected = np.array([sum(p[i] * p[j] / (1 - p[i]) for i in range(4) if i != j) for j in range(4)])
    second = np.bincount(x[:, 1], minlength=4)
    assert stats.chisquare(second, second_expected * N).pvalue > P_MIN
    # Power: sampling the second draw independently of the first would give p again, which fails.
    assert stats.chisquare(second, p * N).pvalue < 1e-6


def test_multinomial_without_replacement_unique_indices():
    w = ember.rand(50, 20, generator=gen(23)) + 0.01
    full = ember.multinomial(w, 20, generator=gen(24)).numpy()
    assert (np.sort(full, axis=1) == np.arange(20)).all()
    part = ember.multinomial(w, 10, generator=gen(25)).numpy()
    assert all(len(set(row)) == 10 for row in part.tolist())


def test_multinomial_zero_weights():
    w = ember.tensor([[0.0, 1.0, 0.0, 3.0, 0.0], [2.0, 0.0, 0.0, 0.0, 1.0]])
    with_repl = ember.multinomial(w, 1000, replacement=True, generator=gen(26)).numpy()
    assert set(with_repl[0]) == {1, 3} and set(with_repl[1]) == {0, 4}
    without = ember.multinomial(w, 2, generator=gen(27)).numpy()
    assert set(without[0]) == {1, 3} and set(without[1]) == {0, 4}
    # Asking for more samples than positive weights: zero-weight categories come last (as PyTorch's CPU kernel).
    everything = ember.multinomial(w, 5, generator=gen(28)).numpy()
    assert set(everything[0, :2]) == {1, 3} and sorted(everything[0]) == [0, 1, 2, 3, 4]


def test_bernoulli_rates():
    x = values(ember.bernoulli(ember.full((N,), 0.3), generator=gen(29)))
    assert set(np.unique(x)) == {0.0, 1.0}
    assert stats.binomtest(int(x.sum()), N, 0.3).pvalue > P_MIN
    assert stats.binomtest(int(x.sum()), N, 0.32).pvalue < P_MIN
    p = ember.tensor([0.1, 0.9] * (N // 2), dtype=ember.float64)
    y = values(ember.bernoulli(p, generator=gen(30)))
    assert stats.binomtest(int(y[0::2].sum()), N // 2, 0.1).pvalue > P_MIN
    assert stats.binomtest(int(y[1::2].sum()), N // 2, 0.9).pvalue > P_MIN
    z = values(ember.bernoulli(ember.zeros(N, dtype=ember.float16), 0.6, generator=gen(31)))
    assert stats.binomtest(int(z.sum()), N, 0.6).pvalue > P_MIN


def test_bernoulli__rates_with_number_and_tensor_p():
    x = ember.zeros(N, dtype=ember.bool).bernoulli_(0.7, generator=gen(32)).numpy()
    assert stats.binomtest(int(x.sum()), N, 0.7).pvalue > P_MIN
    y = values(ember.zeros(N // 2, 2, dtype=ember.int32).bernoulli_(ember.tensor([0.2, 0.5]), generator=gen(33)))
    assert stats.binomtest(int(y[:, 0].sum()), N // 2, 0.2).pvalue > P_MIN
    assert stats.binomtest(int(y[:, 1].sum()), N // 2, 0.5).pvalue > P_MIN


def test_bernoulli_extreme_probabilities_are_exact():
    p = ember.tensor([0.0, 1.0] * 500)
    assert ember.bernoulli(p).tolist() == [0.0, 1.0] * 500
    assert ember.empty(100).bernoulli_(1.0).tolist() == [1.0] * 100
    assert ember.empty(100).bernoulli_(0.0).tolist() == [0.0] * 100


# -- shapes and dtypes: meta vs CPU -----------------------------------------------------------------------


def _on(device):
    def t(*shape, dtype=ember.float32, fill=0.5):
        return ember.full(shape, fill, dtype=dtype, device=device)

    return t


SHAPE_CASES = {
    "rand": lambda d, t: ember.rand(2, 3, device=d),
    "rand_size_tuple": lambda d, t: ember.rand((4, 0, 2), device=d, dtype=ember.float64),
    "rand_scalar": lambda d, t: ember.rand((), device=d),
    "rand_bf16": lambda d, t: ember.rand(3, device=d, dtype=ember.bfloat16),
    "rand_c64": lambda d, t: ember.rand(3, device=d, dtype=ember.complex64),
    "randn_f16": lambda d, t: ember.randn(2, 2, device=d, dtype=ember.float16),
    "randn_c128": lambda d, t: ember.randn(5, device=d, dtype=ember.complex128),
    "randint": lambda d, t: ember.randint(10, (3, 4), device=d),
    "randint_bool": lambda d, t: ember.randint(0, 2, (3,), device=d, dtype=ember.bool),
    "randint_f16": lambda d, t: ember.randint(-4, 4, (3,), device=d, dtype=ember.float16),
    "randint_uint8": lambda d, t: ember.randint(0, 256, (3,), device=d, dtype=ember.uint8),
    "randperm": lambda d, t: ember.randperm(6, device=d),
    "randperm_i16": lambda d, t: ember.randperm(6, device=d, dtype=ember.int16),
    "normal_numbers": lambda d, t: ember.normal(0.0, 1.0, (2, 5), device=d),
    "normal_tensors": lambda d, t: ember.normal(t(3, 1), t(4), generator=None),
    "normal_mean_f64": lambda d, t: ember.normal(t(3, dtype=ember.float64)),
    "normal_std_bf16": lambda d, t: ember.normal(1.0, t(2, 2, dtype=ember.bfloat16)),
    "bernoulli": lambda d, t: ember.bernoulli(t(2, 3)),
    "bernoulli_p_int": lambda d, t: ember.bernoulli(t(4, dtype=ember.int64), 0.5),
    "multinomial_1d": lambda d, t: ember.multinomial(t(5), 3),
    "multinomial_2d": lambda d, t: ember.multinomial(t(2, 5), 7, True),
    "rand_like": lambda d, t: ember.rand_like(t(2, 2, dtype=ember.float16)),
    "randn_like_dtype": lambda d, t: ember.randn_like(t(3), dtype=ember.float64),
    "randint_like": lambda d, t: ember.randint_like(t(3, dtype=ember.int8), 5),
    "uniform_": lambda d, t: t(2, 3).uniform_(),
    "normal_": lambda d, t: t(4, dtype=ember.bfloat16).normal_(1, 2),
    "random_": lambda d, t: t(4, dtype=ember.int16).random_(),
    "exponential_": lambda d, t: t(4, dtype=ember.float64).exponential_(3),
    "bernoulli_": lambda d, t: t(3, 2, dtype=ember.bool).bernoulli_(t(2)),
}


@pytest.mark.parametrize("name", sorted(SHAPE_CASES))
def test_meta_matches_cpu_shape_and_dtype(name):
    case = SHAPE_CASES[name]
    real = case("cpu", _on("cpu"))
    meta = case("meta", _on("meta"))
    assert real.device.type == "cpu"
    assert meta.device.type == "meta"
    assert tuple(meta.shape) == tuple(real.shape)
    assert meta.dtype is real.dtype


@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16, ember.float32, ember.float64])
def test_factory_dtypes(dtype):
    for op in (ember.rand, ember.randn):
        x = op(3, 4, dtype=dtype, generator=gen(0))
        assert x.dtype is dtype and tuple(x.shape) == (3, 4)
        assert np.isfinite(values(x)).all()
    assert ember.normal(0.0, 1.0, (5,), dtype=dtype).dtype is dtype


def test_default_dtype_is_respected():
    previous = ember.get_default_dtype()
    ember.set_default_dtype(ember.float64)
    try:
        assert ember.rand(2).dtype is ember.float64
        assert ember.randn(2).dtype is ember.float64
        assert ember.normal(0.0, 1.0, (2,)).dtype is ember.float64
    finally:
        ember.set_default_dtype(previous)


def test_randint_bounds_and_dtypes():
    for dtype in (ember.int8, ember.int16, ember.int32, ember.int64, ember.uint8):
        info = ember.iinfo(dtype)
        x = ember.randint(int(info.min), int(info.max) + 1, (1000,), dtype=dtype, generator=gen(1))
        assert x.dtype is dtype
    x = ember.randint(-(2**63), 2**63, (1000,), generator=gen(2)).numpy()
    assert x.min() < -(2**61) and x.max() > 2**61
    assert ember.randint(5, 6, (10,)).tolist() == [5] * 10


def test_factory_requires_grad_and_out():
    x = ember.rand(2, 3, requires_grad=True)
    assert x.requires_grad and x.is_leaf
    assert ember.randn_like(x, requires_grad=True).requires_grad
    out = ember.empty(2, 3)
    result = ember.rand(2, 3, generator=gen(3), out=out)
    assert result is out
    assert out.tolist() == ember.rand(2, 3, generator=gen(3)).tolist()
    idx = ember.empty(4, dtype=ember.int64)
    ember.randperm(4, out=idx)
    assert sorted(idx.tolist()) == [0, 1, 2, 3]


def test_like_ops_follow_input_dtype_and_device():
    base = ember.zeros(2, 3, dtype=ember.float64)
    assert ember.rand_like(base).dtype is ember.float64
    assert ember.randn_like(base, dtype=ember.float16).dtype is ember.float16
    x = ember.randint_like(ember.zeros(100, dtype=ember.int16), 3, 7)
    assert x.dtype is ember.int16 and set(x.tolist()) <= {3, 4, 5, 6}
    y = ember.randint_like(ember.zeros(100), 4)
    assert y.dtype is ember.float32 and set(y.tolist()) <= {0.0, 1.0, 2.0, 3.0}
    assert ember.rand_like(base, device="meta").device.type == "meta"


# -- in-place ops ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, call",
    [
        ("uniform_", lambda x, g: x.uniform_(-1, 1, generator=g)),
        ("normal_", lambda x, g: x.normal_(generator=g)),
        ("random_", lambda x, g: x.random_(1, 100, generator=g)),
        ("exponential_", lambda x, g: x.exponential_(generator=g)),
        ("bernoulli_", lambda x, g: x.bernoulli_(0.5, generator=g)),
    ],
)
def test_inplace_returns_self_bumps_version_and_writes_through_views(name, call):
    x = ember.zeros(4, 5)
    version = x._version
    assert call(x, gen(0)) is x
    assert x._version == version + 1
    assert np.count_nonzero(x.numpy()) > 0
    # Through a column view (non-contiguous): only that column changes.
    y = ember.zeros(6, 5)
    col = y.select(1, 2)
    call(col, gen(1))
    data = y.numpy()
    assert np.count_nonzero(data[:, 2]) > 0
    assert not np.delete(data, 2, axis=1).any()
    assert y._version >= 1
    # Through a transposed view: the same values as a contiguous tensor of the transposed shape.
    z = ember.zeros(3, 4)
    call(z.t(), gen(2))
    ref = ember.zeros(4, 3)
    call(ref, gen(2))
    assert np.array_equal(z.numpy().T, ref.numpy())


def test_inplace_errors_leave_the_tensor_untouched():
    x = ember.zeros(3)
    version = x._version
    for bad in (
        lambda: x.bernoulli_(ember.tensor([0.1, 2.0, 0.0])),
        lambda: x.bernoulli_(1.5),
        lambda: x.normal_(0, -1),
        lambda: x.uniform_(2, 1),
        lambda: x.exponential_(0),
        lambda: x.random_(5, 3),
    ):
        with pytest.raises(RuntimeError):
            bad()
    assert x.tolist() == [0.0, 0.0, 0.0] and x._version == version


def test_random_bool_and_small_int_ranges():
    b = ember.zeros(1000, dtype=ember.bool).random_(generator=gen(5))
    assert b.dtype is ember.bool and set(b.tolist()) == {False, True}
    u = ember.zeros(1000, dtype=ember.uint8).random_(250, 256, generator=gen(6))
    assert set(u.tolist()) <= set(range(250, 256))
    assert ember.zeros(5, dtype=ember.int8).random_(1).tolist() == [0] * 5


# -- errors --------------------------------------------------------------------------------------------------------


ERRORS = [
    # dtypes that can't hold the samples
    (lambda: ember.rand(2, dtype=ember.int64), NotImplementedError, r'"rand" not implemented for ember.int64'),
    (lambda: ember.randn(2, dtype=ember.bool), NotImplementedError, r'"randn" not implemented for ember.bool'),
    (lambda: ember.rand_like(ember.zeros(2, dtype=ember.int32)), NotImplementedError, "ember.int32"),
    (lambda: ember.randint(3, (2,), dtype=ember.complex64), NotImplementedError, "ember.complex64"),
    (lambda: ember.randperm(3, dtype=ember.bool), NotImplementedError, "ember.bool"),
    (lambda: ember.normal(0, 1, (3,), dtype=ember.int64), NotImplementedError, "ember.int64"),
    (lambda: ember.normal(ember.tensor([1, 2]), 1.0), NotImplementedError, "ember.int64"),
    (lambda: ember.bernoulli(ember.tensor([1, 0])), NotImplementedError, "ember.int64"),
    (lambda: ember.zeros(2, dtype=ember.int64).uniform_(), NotImplementedError, "ember.int64"),
    (lambda: ember.zeros(2, dtype=ember.int64).normal_(), NotImplementedError, "ember.int64"),
    (lambda: ember.zeros(2, dtype=ember.complex64).random_(), NotImplementedError, "ember.complex64"),
    (lambda: ember.zeros(2, dtype=ember.int64).exponential_(), RuntimeError, "floating-point dtype, got ember.int64"),
    (lambda: ember.zeros(2).bernoulli_(ember.tensor([1, 0])), NotImplementedError, "ember.int64"),
    (lambda: ember.rand(2, dtype="float32"), TypeError, "argument 'dtype' must be ember.dtype, not str"),
    # sizes and argument types
    (lambda: ember.rand(-1), RuntimeError, "negative dimension -1"),
    (lambda: ember.rand(2.5), TypeError, "float"),
    (lambda: ember.rand(2, generator=5), TypeError, "argument 'generator' must be ember.Generator, not int"),
    (lambda: ember.randint(5), TypeError, "missing required argument 'size'"),
    (lambda: ember.randint(5, 2), TypeError, "argument 'size' must be tuple of ints, not int"),
    (lambda: ember.randint(0.5, 3, (3,)), TypeError, "argument 'low' must be int, not float"),
    (lambda: ember.randperm(2.0), TypeError, "argument 'n' must be int, not float"),
    (lambda: ember.multinomial(ember.ones(3), 2.0), TypeError, "argument 'num_samples' must be int, not float"),
    (lambda: ember.multinomial([0.5, 0.5], 1), TypeError, r"argument 'input' \(position 1\) must be Tensor, not list"),
    (lambda: ember.zeros(3).random_(1.5), TypeError, "argument 'from_' must be int, not float"),
    (lambda: ember.zeros(3).uniform_("a"), TypeError, "argument 'from_' must be a real number, not str"),
    (lambda: ember.normal(2.0, 3.0), TypeError, "size is required"),
    (lambda: ember.normal(ember.zeros(2), 1.0, (3,)), TypeError, "size can only be given"),
    (lambda: ember.normal(ember.zeros(2), dtype=ember.float64), TypeError, "dtype can only be given"),
    # ranges
    (lambda: ember.randint(5, 5, (3,)), RuntimeError, "expects 'low' to be less than 'high', but got low=5 >= high=5"),
    (lambda: ember.randint(6, 2, (3,)), RuntimeError, "low=6 >= high=2"),
    (lambda: ember.randint(0, 300, (3,), dtype=ember.uint8), RuntimeError, r"high - 1 = 299 is out of bounds for ember.uint8"),
    (lambda: ember.randint(-1, 3, (3,), dtype=ember.uint8), RuntimeError, r"low=-1 is out of bounds for ember.uint8"),
    (lambda: ember.randint(0, 3, (3,), dtype=ember.bool), RuntimeError, r"high - 1 = 2 is out of bounds for ember.bool"),
    (lambda: ember.randint_like(ember.zeros(2), 4, 4), RuntimeError, "low=4 >= high=4"),
    (lambda: ember.randperm(-1), RuntimeError, "n=-1"),
    (lambda: ember.randperm(3000, dtype=ember.float16), RuntimeError, "n cannot be greater than 2049 for ember.float16"),
    (lambda: ember.randperm(300, dtype=ember.int8), RuntimeError, "n=300 is too large for ember.int8"),
    (lambda: ember.zeros(3).random_(5, 3), RuntimeError, "'from' to be less than 'to', but got from=5 >= to=3"),
    (lambda: ember.zeros(3, dtype=ember.int8).random_(0, 200), RuntimeError, r"to - 1 = 199 is out of bounds for ember.int8"),
    (lambda: ember.zeros(3, dtype=ember.int8).random_(-200, 2), RuntimeError, "from=-200 is out of bounds for ember.int8"),
    (lambda: ember.zeros(3).uniform_(5, 1), RuntimeError, r"\[from, to\) range, but found from=5.0 > to=1.0"),
    (lambda: ember.zeros(3).uniform_(float("-inf"), 1), RuntimeError, "from=-inf is out of bounds for ember.float32"),
    (lambda: ember.zeros(3).uniform_(-3e38, 3e38), RuntimeError, "to=3e\\+38 and from=-3e\\+38"),
    (lambda: ember.zeros(3, dtype=ember.float16).uniform_(0, 1e5), RuntimeError, "to=100000.0 is out of bounds for ember.float16"),
    # std, lambda and probabilities
    (lambda: ember.normal(2.0, -3.0, (2,)), RuntimeError, "normal expects std >= 0.0, but found std -3.0"),
    (lambda: ember.normal(2.0, float("nan"), (2,)), RuntimeError, "found std nan"),
    (lambda: ember.normal(ember.zeros(2), -1.0), RuntimeError, "found std -1.0"),
    (lambda: ember.normal(ember.zeros(2), ember.tensor([1.0, -2.5])), RuntimeError, "all elements of std >= 0.0, but found std -2.5"),
    (lambda: ember.normal(ember.zeros(2), ember.ones(3)), RuntimeError, r"size of tensor a \(2\) must match the size of tensor b \(3\)"),
    (lambda: ember.zeros(3).normal_(0, -1), RuntimeError, "normal_ expects std >= 0.0, but found std -1.0"),
    (lambda: ember.zeros(3).exponential_(0), RuntimeError, "exponential_ expects lambda > 0.0, but found lambda=0.0"),
    (lambda: ember.zeros(3).exponential_(-2), RuntimeError, "lambda=-2.0"),
    (lambda: ember.zeros(3).exponential_(float("nan")), RuntimeError, "lambda=nan"),
    (lambda: ember.bernoulli(ember.tensor([1.5, 0.0])), RuntimeError, r"probabilities in \[0, 1\], but found 1.5"),
    (lambda: ember.bernoulli(ember.tensor([float("nan"), 0.0])), RuntimeError, "but found nan"),
    (lambda: ember.bernoulli(ember.zeros(2), 1.3), RuntimeError, r"p to be in \[0, 1\], but got p=1.3"),
    (lambda: ember.zeros(3).bernoulli_(-0.5), RuntimeError, r"bernoulli_ expects p to be in \[0, 1\], but got p=-0.5"),
    (lambda: ember.zeros(3).bernoulli_(ember.tensor([0.1, 2.0, 0.0])), RuntimeError, "but found 2.0"),
    (lambda: ember.zeros(3).bernoulli_(ember.zeros(2, 3)), RuntimeError, r"p of shape \[2, 3\] does not broadcast to self's shape \[3\]"),
    (lambda: ember.zeros(3).bernoulli_(ember.zeros(2)), RuntimeError, r"size of tensor a \(3\) must match the size of tensor b \(2\)"),
    # multinomial
    (lambda: ember.multinomial(ember.tensor(0.5), 1), RuntimeError, "prob_dist must be 1 or 2 dim, got a 0-dim tensor"),
    (lambda: ember.multinomial(ember.ones(2, 2, 2), 1), RuntimeError, r"1 or 2 dim, got a 3-dim tensor of shape \[2, 2, 2\]"),
    (lambda: ember.multinomial(ember.tensor([1, 2]), 1), RuntimeError, "only supports floating-point dtypes for input, got: ember.int64"),
    (lambda: ember.multinomial(ember.ones(2), 0), RuntimeError, r"n_sample <= 0 samples \(num_samples=0\)"),
    (lambda: ember.multinomial(ember.ones(2), -1), RuntimeError, r"num_samples=-1"),
    (lambda: ember.multinomial(ember.ones(2), 3), RuntimeError, r"without replacement \(num_samples=3, categories=2\)"),
    (lambda: ember.multinomial(ember.tensor([-0.1, 0.5]), 1), RuntimeError, "`inf`, `nan` or element < 0"),
    (lambda: ember.multinomial(ember.tensor([float("inf"), 0.5]), 1), RuntimeError, "`inf`, `nan` or element < 0"),
    (lambda: ember.multinomial(ember.tensor([float("nan"), 0.5]), 1, True), RuntimeError, "`inf`, `nan` or element < 0"),
    (lambda: ember.multinomial(ember.tensor([[1.0, 1.0], [0.0, 0.0]]), 1), RuntimeError, r"sum of probabilities <= 0\) in row 1"),
    (lambda: ember.multinomial(ember.ones(2, 0), 1, True), RuntimeError, "sum of probabilities <= 0"),
]


@pytest.mark.parametrize("call, exc, message", ERRORS, ids=[f"error{i}" for i in range(len(ERRORS))])
def test_errors(call, exc, message):
    with pytest.raises(exc, match=message):
        call()


def test_meta_device_reports_the_same_argument_errors():
    meta = ember.zeros(3, device="meta")
    with pytest.raises(RuntimeError, match="found std -1.0"):
        meta.normal_(0, -1)
    with pytest.raises(NotImplementedError, match="ember.int64"):
        ember.rand(2, dtype=ember.int64, device="meta")
    with pytest.raises(RuntimeError, match="num_samples=3, categories=2"):
        ember.multinomial(ember.ones(2, device="meta"), 3)


def test_randint_float_dtype_out_of_exact_range_warns_like_pytorch():
    with pytest.warns(UserWarning, match=r"out of bounds \[-\(2\^24\), 2\^24\]"):
        x = ember.randint(0, 2**25, (10,), dtype=ember.float32)
    assert x.dtype is ember.float32


# -- registry wiring and docs -------------------------------------------------------------------------------------


def test_ops_are_registered_tagged_and_exposed():
    from ember._ops import registry

    functions = ["rand", "randn", "randint", "randperm", "normal", "bernoulli", "multinomial",
                 "rand_like", "randn_like", "randint_like"]
    inplace = ["uniform_", "normal_", "random_", "exponential_", "bernoulli_"]
    for name in functions + inplace:
        op = registry[name]
        assert "random" in op.tags
        assert op.kind == ("inplace" if name in inplace else "function")
    for name in functions:
        assert getattr(ember, name) is registry[name]
    for name in inplace + ["bernoulli", "multinomial"]:
        assert callable(getattr(ember.Tensor, name))


def test_docstring_examples_run():
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE | doctest.DONT_ACCEPT_TRUE_FOR_1
    with ember.random.fork_rng():
        for module in (random_impl, ember.random, random_ops):
            result = doctest.testmod(module, optionflags=flags, extraglobs={"ember": ember})
            assert result.attempted > 0 and result.failed == 0, module.__name__
