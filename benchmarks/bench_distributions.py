"""ember.distributions against torch.distributions on the CPU: the workloads issue 22 names.

* ``normal_sample_1M``: ``Normal(loc, scale).sample((2**20,))`` (float32, scalar parameters);
* ``normal_log_prob_1M``: ``log_prob`` of 2**20 float32 values;
* ``categorical_sample_1M``: ``Categorical(probs).sample((2**20,))`` over 10 categories;
* ``categorical_log_prob_1M``: ``log_prob`` of 2**20 int64 indices.

Target: at most 1.3x PyTorch's time. Sampling rows draw from different generators, so their setups check
the sample means against each other instead of values; the log_prob rows check values.
"""

from __future__ import annotations

import numpy as np
from harness import Workload, import_torch

N = 2**20


def _normal_params(lib):
    return lib.tensor(0.5), lib.tensor(2.0)


def _probs():
    return np.random.default_rng(0).dirichlet(np.ones(10)).astype(np.float32)


def _setup(build, compare):
    """A setup from ``build(lib, D) -> fn`` (``D`` the library's distributions module)."""

    def setup():
        import ember
        import ember.distributions as ED

        ember_fn = build(ember, ED)
        torch = import_torch()
        torch_fn = None
        if torch is not None:
            import torch.distributions as TD

            torch_fn = build(torch, TD)
            compare(np.asarray(ember_fn().numpy()), torch_fn().numpy())
        return ember_fn, torch_fn

    return setup


def _same_values(ours, theirs):
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def _same_mean(ours, theirs):
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours.astype(np.float64).mean(), theirs.astype(np.float64).mean(), rtol=0.02, atol=0.02)


def _normal_sample(lib, D):
    d = D.Normal(*_normal_params(lib))
    return lambda: d.sample((N,))


def _normal_log_prob(lib, D):
    d = D.Normal(*_normal_params(lib))
    x = lib.from_numpy(np.random.default_rng(1).normal(size=N).astype(np.float32))
    return lambda: d.log_prob(x)


def _categorical_sample(lib, D):
    d = D.Categorical(probs=lib.from_numpy(_probs()))
    return lambda: d.sample((N,))


def _categorical_log_prob(lib, D):
    d = D.Categorical(probs=lib.from_numpy(_probs()))
    x = lib.from_numpy(np.random.default_rng(2).integers(0, 10, N))
    return lambda: d.log_prob(x)


WORKLOADS = [
    Workload("normal_sample_1M", _setup(_normal_sample, _same_mean), description="Normal.sample of 2^20 float32"),
    Workload("normal_log_prob_1M", _setup(_normal_log_prob, _same_values), description="Normal.log_prob of 2^20"),
    Workload(
        "categorical_sample_1M", _setup(_categorical_sample, _same_mean), description="Categorical(10).sample of 2^20"
    ),
    Workload(
        "categorical_log_prob_1M",
        _setup(_categorical_log_prob, _same_values),
        description="Categorical(10).log_prob of 2^20",
    ),
]
