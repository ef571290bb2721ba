"""Deterministic mode against PyTorch's on the cpu: which calls raise or warn, and the fill of empty."""

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ember  # noqa: E402

pytestmark = pytest.mark.parity


@pytest.fixture(autouse=True)
def restore():
    yield
    torch.use_deterministic_algorithms(False)
    ember.use_deterministic_algorithms(False)


CALLS = {
    "put_": lambda m: m.zeros(3).put_(m.tensor([0, 0]), m.tensor([1.0, 2.0])),
    "put_ accumulate": lambda m: m.zeros(3).put_(m.tensor([0, 0]), m.tensor([1.0, 2.0]), accumulate=True),
    "index_add_": lambda m: m.zeros(3).index_add_(0, m.tensor([0, 0]), m.tensor([1.0, 2.0])),
    "scatter_add_": lambda m: m.zeros(3).scatter_add_(0, m.tensor([0, 0]), m.tensor([1.0, 2.0])),
    "index_put_ accumulate": lambda m: m.zeros(3).index_put_((m.tensor([0, 0]),), m.tensor([1.0, 2.0]), True),
    "scatter_reduce sum": lambda m: m.zeros(3).scatter_reduce(0, m.tensor([0, 0]), m.tensor([1.0, 2.0]), "sum"),
    "bincount weights": lambda m: m.bincount(m.tensor([0, 1, 1]), m.tensor([1.0, 2.0, 3.0])),
    "histc": lambda m: m.histc(m.tensor([1.0, 2.0]), bins=2),
}


def _outcome(lib, call, warn_only):
    lib.use_deterministic_algorithms(True, warn_only=warn_only)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = call(lib)
        except RuntimeError as exc:
            assert "does not have a deterministic implementation" in str(exc)
            return "raises", None
    warned = any("does not have a deterministic implementation" in str(w.message) for w in caught)
    return ("warns" if warned else "runs"), np.asarray(value.numpy())


@pytest.mark.parametrize("warn_only", [False, True])
@pytest.mark.parametrize("name", list(CALLS))
def test_cpu_calls_raise_warn_or_run_as_in_torch(name, warn_only):
    got = _outcome(ember, CALLS[name], warn_only)
    want = _outcome(torch, CALLS[name], warn_only)
    assert got[0] == want[0], name
    if want[1] is not None:
        np.testing.assert_allclose(got[1], want[1])


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "int32", "int64", "uint8", "bool"])
def test_empty_fill_matches_torch(dtype):
    torch.use_deterministic_algorithms(True)
    ember.use_deterministic_algorithms(True)
    want = torch.empty(4, dtype=getattr(torch, dtype))
    got = ember.empty(4, dtype=getattr(ember, dtype))
    np.testing.assert_array_equal(got.float().numpy() if dtype == "bfloat16" else got.numpy(),
                                  want.float().numpy() if dtype == "bfloat16" else want.numpy())
