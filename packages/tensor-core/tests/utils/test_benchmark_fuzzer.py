"""Fuzzer: reproducible under a seed, distributions within bounds, constraints honoured, layouts as asked."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.utils.benchmark import FuzzedParameter, FuzzedTensor, Fuzzer, ParameterAlias


def snapshot(fuzzer, n=8):
    """Everything a fuzzer yields for ``n`` cases, as plain numpy/python values."""
    cases = []
    for tensors, properties, params in fuzzer.take(n):
        cases.append(
            (
                dict(params),
                {k: (tuple(t.shape), tuple(t.stride()), np.asarray(t).copy()) for k, t in tensors.items()},
                {k: {**p, "order": tuple(p["order"])} for k, p in properties.items()},
            )
        )
    return cases


def make_fuzzer(seed):
    return Fuzzer(
        parameters=[
            FuzzedParameter("k0", minval=1, maxval=64, distribution="loguniform"),
            FuzzedParameter("k1", minval=1, maxval=16, distribution="uniform"),
            FuzzedParameter("scale", minval=0.5, maxval=2.0, distribution="uniform"),
        ],
        tensors=[FuzzedTensor("x", size=("k0", "k1"), probability_contiguous=0.5)],
        seed=seed,
    )


def assert_same(a, b):
    assert len(a) == len(b)
    for (pa, ta, qa), (pb, tb, qb) in zip(a, b):
        assert pa == pb and qa == qb
        for name in ta:
            assert ta[name][:2] == tb[name][:2]
            np.testing.assert_array_equal(ta[name][2], tb[name][2])


def test_same_seed_same_cases_and_values():
    first = snapshot(make_fuzzer(123))
    ember.manual_seed(999)  # the fuzzer reseeds ember itself
    ember.rand(10)
    second = snapshot(make_fuzzer(123))
    assert_same(first, second)
    # take() starts over from the seed each time
    fuzzer = make_fuzzer(123)
    assert_same(snapshot(fuzzer), snapshot(fuzzer))


def test_different_seed_different_cases():
    a = [params for params, _, _ in snapshot(make_fuzzer(1))]
    b = [params for params, _, _ in snapshot(make_fuzzer(2))]
    assert a != b


def test_distributions_stay_within_bounds_and_types():
    fuzzer = make_fuzzer(0)
    for tensors, _, params in fuzzer.take(200):
        assert isinstance(params["k0"], int) and 1 <= params["k0"] <= 64
        assert isinstance(params["k1"], int) and 1 <= params["k1"] <= 16
        assert isinstance(params["scale"], float) and 0.5 <= params["scale"] <= 2.0
        assert tuple(tensors["x"].shape) == (params["k0"], params["k1"])
        assert tensors["x"].dtype == ember.float32


def test_loguniform_is_uniform_in_log_space():
    state = np.random.RandomState(0)
    p = FuzzedParameter("n", minval=1, maxval=10_000, distribution="loguniform")
    draws = np.array([p.sample(state) for _ in range(4000)])
    # Each decade [1,10), [10,100), [100,1000), [1000,10000] holds about a quarter of the draws.
    counts = np.histogram(np.log10(draws), bins=[0, 1, 2, 3, 4.0001])[0]
    assert np.all(np.abs(counts / len(draws) - 0.25) < 0.04), counts


def test_dict_distribution_and_alias():
    fuzzer = Fuzzer(
        parameters=[
            FuzzedParameter("x_len", minval=4, maxval=64, distribution="uniform"),
            FuzzedParameter("y_len", distribution={1: 0.5, ParameterAlias("x_len"): 0.5}),
        ],
        tensors=[],
        seed=0,
    )
    seen = set()
    for _, _, params in fuzzer.take(200):
        assert params["y_len"] in (1, params["x_len"])
        seen.add(params["y_len"] == 1)
    assert seen == {True, False}


def test_constraints_and_element_limits_reject_draws():
    fuzzer = Fuzzer(
        parameters=[FuzzedParameter(f"k{i}", minval=1, maxval=100, distribution="uniform") for i in range(2)],
        tensors=[FuzzedTensor("x", size=("k0", "k1"), min_elements=50, max_elements=1000)],
        constraints=[lambda params: params["k0"] >= params["k1"]],
        seed=0,
    )
    for tensors, properties, params in fuzzer.take(100):
        assert params["k0"] >= params["k1"]
        assert 50 <= params["k0"] * params["k1"] <= 1000
        assert properties["x"]["numel"] == params["k0"] * params["k1"] == tensors["x"].numel()
    assert 0 < fuzzer.rejection_rate < 1


def test_max_allocation_bytes_counts_the_steps():
    # size (4, 8) with steps (1, 4) allocates 4 x 32 float32: 512 bytes.
    tensor = FuzzedTensor("x", size=(4, 8), steps=(1, 4), max_allocation_bytes=512)
    assert tensor.satisfies_constraints({})
    assert not FuzzedTensor("x", size=(4, 8), steps=(1, 4), max_allocation_bytes=511).satisfies_constraints({})


def test_steps_give_strided_views():
    fuzzer = Fuzzer(parameters=[], tensors=[FuzzedTensor("x", size=(4, 8), steps=(1, 4), probability_contiguous=1.0)])
    ((tensors, properties, _),) = fuzzer.take(1)
    x = tensors["x"]
    assert tuple(x.shape) == (4, 8)
    assert tuple(x.stride()) == (32, 4)  # every 4th element of rows of 32
    assert properties["x"]["steps"] == (1, 4) and properties["x"]["is_contiguous"] is False


@pytest.mark.parametrize(("probability", "contiguous"), [(1.0, True), (0.0, False)])
def test_probability_contiguous(probability, contiguous):
    fuzzer = Fuzzer(
        parameters=[], tensors=[FuzzedTensor("x", size=(3, 4, 5), probability_contiguous=probability)], seed=0
    )
    for tensors, properties, _ in fuzzer.take(10):
        x = tensors["x"]
        assert tuple(x.shape) == (3, 4, 5)
        assert x.is_contiguous() is contiguous is properties["x"]["is_contiguous"]
        identity = tuple(properties["x"]["order"]) == (0, 1, 2)
        assert identity is contiguous
        if not contiguous:
            # The strides are those of a contiguous tensor of the permuted shape, viewed back.
            order = properties["x"]["order"]
            permuted_shape = [x.shape[i] for i in order]
            expected = np.empty(3, dtype=np.int64)
            expected[order] = np.cumprod([1, *permuted_shape[::-1]])[:-1][::-1]
            assert tuple(x.stride()) == tuple(expected)


def test_dim_parameter_and_dtypes():
    fuzzer = Fuzzer(
        parameters=[
            FuzzedParameter("dim", distribution={1: 0.5, 3: 0.5}),
            FuzzedParameter("n", minval=2, maxval=5, distribution="uniform"),
        ],
        tensors=[FuzzedTensor("i", size=("n", "n", "n"), dim_parameter="dim", dtype=ember.int32)],
        seed=3,
    )
    dims = set()
    for tensors, properties, params in fuzzer.take(20):
        t = tensors["i"]
        assert tuple(t.shape) == (params["n"],) * params["dim"]
        assert t.dtype == ember.int32 and properties["i"]["dtype"] == "ember.int32"
        values = np.asarray(t)
        assert values.min() >= 1 and values.max() < 127
        dims.add(params["dim"])
    assert dims == {1, 3}


def test_tensor_constructor_gets_size_dtype_and_params():
    calls = []

    def constructor(size, dtype, **params):
        calls.append((size, dtype, params))
        return ember.zeros(size, dtype=dtype)

    fuzzer = Fuzzer(
        parameters=[FuzzedParameter("n", minval=2, maxval=3, distribution="uniform")],
        tensors=[FuzzedTensor("z", size=("n",), dtype=ember.float64, tensor_constructor=constructor)],
        seed=0,
    )
    ((tensors, _, params),) = fuzzer.take(1)
    assert calls == [((params["n"],), ember.float64, params)]
    assert np.asarray(tensors["z"]).tolist() == [0.0] * params["n"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"minval": 1, "maxval": 2, "distribution": "gaussian"}, "unknown distribution 'gaussian'"),
        ({"distribution": {1: 0.7, 2: 0.7}}, "must sum to 1"),
        ({"distribution": {1: 1.5, 2: -0.5}}, "cannot be negative"),
        ({"minval": 1, "distribution": {1: 1.0}}, "must be None with a dict"),
        ({"distribution": "uniform"}, "needs minval and maxval"),
    ],
)
def test_bad_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FuzzedParameter("p", **kwargs)


def test_fuzzer_errors():
    with pytest.raises(ValueError, match="Duplicate names"):
        Fuzzer(parameters=[FuzzedParameter("x", distribution={1: 1.0})], tensors=[FuzzedTensor("x", size=(1,))])
    impossible = Fuzzer(
        parameters=[FuzzedParameter("n", minval=1, maxval=2, distribution="uniform")],
        tensors=[FuzzedTensor("x", size=("n",), min_elements=10)],
        seed=0,
    )
    with pytest.raises(ValueError, match="Failed to generate"):
        next(impossible.take(1))
    cycle = Fuzzer(
        parameters=[
            FuzzedParameter("a", distribution={ParameterAlias("b"): 1.0}),
            FuzzedParameter("b", distribution={ParameterAlias("a"): 1.0}),
        ],
        tensors=[],
        seed=0,
    )
    with pytest.raises(ValueError, match="ParameterAlias cycle"):
        next(cycle.take(1))
