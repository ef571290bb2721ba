"""Kernels compute inf and NaN without numpy's floating-point warnings, as PyTorch computes silently.

pytest.ini turns numpy's floating-point RuntimeWarnings into errors for the whole suite; these
cases name the paths that once leaked one (add/sub's promoting and broadcasting kernel).
"""

import math

import numpy as np
import pytest

import ember

INF = math.inf


@pytest.mark.parametrize(
    "call, expected",
    [
        # broadcasting: the general kernel, not the same-shape fast path
        (lambda: ember.tensor([[INF]]) + ember.tensor([-INF, 1.0]), [[math.nan, INF]]),
        (lambda: ember.tensor([[INF]]) - ember.tensor([INF, 1.0]), [[math.nan, INF]]),
        # promotion (float32 + float64) and alpha
        (lambda: ember.tensor([INF]).double() + ember.tensor([-INF]), [math.nan]),
        (lambda: ember.tensor([INF]).add(ember.tensor([-INF]), alpha=2), [math.nan]),
        (lambda: ember.tensor([[1e38]]).add(ember.tensor([1e38, 1.0]), alpha=1e10), [[INF, 1e38]]),
        (lambda: ember.tensor([[INF]]) * ember.tensor([0.0, 1.0]), [[math.nan, INF]]),
    ],
)
def test_special_values_compute_silently(call, expected):
    with np.errstate(all="raise"):  # the user's own numpy state must not reach ember's kernels either
        result = call()
    np.testing.assert_allclose(result.double().numpy(), np.array(expected), rtol=1e-6)
