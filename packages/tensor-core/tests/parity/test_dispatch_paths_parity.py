"""Float overflow and broadcasting in add/sub/mul: silent, with PyTorch's values, on every path.

Issue 19 found ``ember.add(x, x)`` silent where ``ember.add(x, x, alpha=1)`` warned (and raised
under ``np.errstate(over="raise")``), and a broadcasting ``add`` warning where ``mul`` did not;
PyTorch is silent in every case. See ``tests/test_dispatch_paths.py`` for the fast paths
against the general one.
"""

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ember  # noqa: E402

pytestmark = pytest.mark.parity

_BIG = float(np.finfo(np.float32).max)
_X = [_BIG, 1.0, -_BIG, float("inf")]
_COLUMN = [[_BIG], [2.0], [float("nan")]]

CALLS = {
    "add(x, x)": lambda lib, x, c: lib.add(x, x),
    "add(x, x, alpha=1)": lambda lib, x, c: lib.add(x, x, alpha=1),
    "add(x, x, alpha=2)": lambda lib, x, c: lib.add(x, x, alpha=2),
    "x + x": lambda lib, x, c: x + x,
    "sub(x, -x)": lambda lib, x, c: lib.sub(x, -x),
    "add(x, column)": lambda lib, x, c: lib.add(x, c),
    "mul(x, column)": lambda lib, x, c: lib.mul(x, c),
    "sub(column, x)": lambda lib, x, c: lib.sub(c, x),
    "mul(x, 2.0)": lambda lib, x, c: lib.mul(x, 2.0),
    "2.0 * x": lambda lib, x, c: 2.0 * x,
    "add(x, 3e38)": lambda lib, x, c: lib.add(x, 3e38),
    "add(x, x, out=)": lambda lib, x, c: lib.add(x, x, out=lib.empty(4)),
    "x.clone().add_(x)": lambda lib, x, c: x.clone().add_(x),
    "x.clone().mul_(x)": lambda lib, x, c: x.clone().mul_(x),
}


@pytest.mark.parametrize("form", list(CALLS))
@pytest.mark.parametrize("numpy_setting", ["default", "raise"])
def test_overflow_and_broadcasting_are_silent_with_pytorchs_values(form, numpy_setting):
    call = CALLS[form]
    results = {}
    for lib in (ember, torch):
        x, column = lib.tensor(_X), lib.tensor(_COLUMN)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # any warning fails, as PyTorch gives none
            with np.errstate(all="raise" if numpy_setting == "raise" else "warn"):
                results[lib.__name__] = call(lib, x, column).numpy()
    ours, theirs = results["ember"], results["torch"]
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_array_equal(ours, theirs)  # inf, -inf and NaN where PyTorch has them
    assert np.isinf(theirs).any(), "the case must overflow"
