"""Tensor printing: every case asserts the exact text PyTorch prints for the same values.

The expected strings were produced by running the same constructions through
PyTorch 2.13 (with ``torch`` replaced by ``ember``) and are hardcoded, so this
file does not need PyTorch; ``tests/parity/test_printing_parity.py`` compares
with a live PyTorch on random inputs.
"""

import contextlib
import math

import numpy as np
import pytest

import ember
from ember._device import _BACKENDS, Backend
from ember._printing import get_printoptions, printoptions, set_printoptions, tensor_repr

nan, inf = float("nan"), float("inf")

DEFAULT_OPTIONS = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": None}


@pytest.fixture(autouse=True)
def _restore_print_options():
    """Every test starts from, and leaves behind, the default options and default dtype."""
    set_printoptions(profile="default")
    dtype = ember.get_default_dtype()
    yield
    set_printoptions(profile="default")
    ember.set_default_dtype(dtype)


@contextlib.contextmanager
def _default_dtype(name):
    if name is None:
        yield
        return
    old = ember.get_default_dtype()
    ember.set_default_dtype(getattr(ember, name))
    try:
        yield
    finally:
        ember.set_default_dtype(old)


# (make the tensor, print options, default dtype name or None, PyTorch's text)
CASES = [
    # Floating values: integer, fixed and scientific styles, nan/inf, negative zero.
    pytest.param(lambda: ember.tensor([1., 2.]), {}, None, "tensor([1., 2.])", id="float_ints"),
    pytest.param(lambda: ember.tensor([0.5, 1.25]), {}, None, "tensor([0.5000, 1.2500])", id="float_fixed"),
    pytest.param(lambda: ember.tensor([-0.5, 1.25, -3.0]), {}, None, "tensor([-0.5000,  1.2500, -3.0000])", id="float_negative"),
    pytest.param(lambda: ember.tensor([0.123456, 2.71828, 3.14159265]), {}, None, "tensor([0.1235, 2.7183, 3.1416])", id="float_rounding"),
    pytest.param(lambda: ember.tensor([1., 1000.]), {}, None, "tensor([   1., 1000.])", id="float_large_ints_no_sci"),
    pytest.param(lambda: ember.tensor([1., 1001.]), {}, None, "tensor([1.0000e+00, 1.0010e+03])", id="float_int_spread_sci"),
    pytest.param(lambda: ember.tensor([1e9, 2.]), {}, None, "tensor([1.0000e+09, 2.0000e+00])", id="float_int_above_1e8"),
    pytest.param(lambda: ember.tensor([1e-5, 1e5]), {}, None, "tensor([1.0000e-05, 1.0000e+05])", id="float_sci_range"),
    pytest.param(lambda: ember.tensor([1e-5]), {}, None, "tensor([1.0000e-05])", id="float_sci_small"),
    pytest.param(lambda: ember.tensor([-1.5e-7, 2.5e-6]), {}, None, "tensor([-1.5000e-07,  2.5000e-06])", id="float_sci_small_negative"),
    pytest.param(lambda: ember.tensor([0.1, 100.0]), {}, None, "tensor([  0.1000, 100.0000])", id="float_ratio_fixed"),
    pytest.param(lambda: ember.tensor([0.01, 100.5]), {}, None, "tensor([1.0000e-02, 1.0050e+02])", id="float_ratio_sci"),
    pytest.param(lambda: ember.tensor([12345.678]), {}, None, "tensor([12345.6777])", id="float_big_fixed"),
    pytest.param(lambda: ember.tensor([nan, inf, -inf]), {}, None, "tensor([nan, inf, -inf])", id="float_nan_inf_only"),
    pytest.param(lambda: ember.tensor([nan, 1.5, -inf]), {}, None, "tensor([   nan, 1.5000,   -inf])", id="float_nan_with_values"),
    pytest.param(lambda: ember.tensor([inf, 1., -2.]), {}, None, "tensor([inf,  1., -2.])", id="float_inf_with_ints"),
    pytest.param(lambda: ember.tensor([nan, 1e-8, 1.]), {}, None, "tensor([       nan, 1.0000e-08, 1.0000e+00])", id="float_nan_sci"),
    pytest.param(lambda: ember.tensor([-0.]), {}, None, "tensor([-0.])", id="negative_zero"),
    pytest.param(lambda: ember.tensor([0., -0.]), {}, None, "tensor([0., -0.])", id="negative_and_positive_zero"),
    pytest.param(lambda: ember.tensor([-0., 1.5]), {}, None, "tensor([-0.0000, 1.5000])", id="negative_zero_fixed"),
    pytest.param(lambda: ember.tensor(-0.), {}, None, "tensor(-0.)", id="negative_zero_scalar"),
    pytest.param(lambda: ember.zeros(4), {}, None, "tensor([0., 0., 0., 0.])", id="zeros_float"),
    pytest.param(lambda: ember.tensor([5e-5, 0.01]), {}, None, "tensor([5.0000e-05, 1.0000e-02])", id="sci_boundary_small_sci"),
    pytest.param(lambda: ember.tensor([0.0001]), {}, None, "tensor([1.0000e-04])", id="sci_boundary_1e-4_float32_is_below"),
    pytest.param(lambda: ember.tensor([0.0001], dtype=ember.float64), {}, None, "tensor([0.0001], dtype=ember.float64)", id="sci_boundary_1e-4_float64_is_not"),
    pytest.param(lambda: ember.tensor([0.00011, 0.01]), {}, None, "tensor([0.0001, 0.0100])", id="sci_boundary_small_fixed"),
    pytest.param(lambda: ember.tensor([0.5, 500.]), {}, None, "tensor([  0.5000, 500.0000])", id="sci_boundary_ratio_1000_fixed"),
    pytest.param(lambda: ember.tensor([0.5, 501.]), {}, None, "tensor([5.0000e-01, 5.0100e+02])", id="sci_boundary_ratio_above_1000"),
    # Integer and bool tensors.
    pytest.param(lambda: ember.tensor([1, 2, 3]), {}, None, "tensor([1, 2, 3])", id="int64"),
    pytest.param(lambda: ember.tensor([-1, 10, -100, 1000]), {}, None, "tensor([  -1,   10, -100, 1000])", id="int64_widths"),
    pytest.param(lambda: ember.tensor([1, -2], dtype=ember.int32), {}, None, "tensor([ 1, -2], dtype=ember.int32)", id="int32"),
    pytest.param(lambda: ember.tensor([0, 255], dtype=ember.uint8), {}, None, "tensor([  0, 255], dtype=ember.uint8)", id="uint8"),
    pytest.param(lambda: ember.tensor([-128, 127], dtype=ember.int8), {}, None, "tensor([-128,  127], dtype=ember.int8)", id="int8"),
    pytest.param(lambda: ember.tensor([300], dtype=ember.int16), {}, None, "tensor([300], dtype=ember.int16)", id="int16"),
    pytest.param(lambda: ember.tensor([True, False]), {}, None, "tensor([ True, False])", id="bool"),
    pytest.param(lambda: ember.tensor([True, True]), {}, None, "tensor([True, True])", id="bool_all_true"),
    pytest.param(lambda: ember.tensor([[True, False], [False, True]]), {}, None, "tensor([[ True, False],\n        [False,  True]])", id="bool_matrix"),
    # Zero-dimensional tensors.
    pytest.param(lambda: ember.tensor(3.), {}, None, "tensor(3.)", id="scalar_float"),
    pytest.param(lambda: ember.tensor(3.25), {}, None, "tensor(3.2500)", id="scalar_fixed"),
    pytest.param(lambda: ember.tensor(1e-9), {}, None, "tensor(1.0000e-09)", id="scalar_sci"),
    pytest.param(lambda: ember.tensor(7), {}, None, "tensor(7)", id="scalar_int"),
    pytest.param(lambda: ember.tensor(True), {}, None, "tensor(True)", id="scalar_bool"),
    pytest.param(lambda: ember.tensor(nan), {}, None, "tensor(nan)", id="scalar_nan"),
    pytest.param(lambda: ember.tensor(2.5, dtype=ember.float64), {}, None, "tensor(2.5000, dtype=ember.float64)", id="scalar_float64"),
    pytest.param(lambda: ember.tensor(2+3j), {}, None, "tensor(2.+3.j)", id="scalar_complex"),
    pytest.param(lambda: ember.tensor(1.5, requires_grad=True), {}, None, "tensor(1.5000, requires_grad=True)", id="scalar_int_requires_grad"),
    # Empty tensors show their size (unless 1-D) and any non-default dtype.
    pytest.param(lambda: ember.tensor([]), {}, None, "tensor([])", id="empty_float"),
    pytest.param(lambda: ember.zeros((0, 3)), {}, None, "tensor([], size=(0, 3))", id="empty_2d"),
    pytest.param(lambda: ember.zeros((2, 0)), {}, None, "tensor([], size=(2, 0))", id="empty_2d_rows"),
    pytest.param(lambda: ember.zeros(0, dtype=ember.int64), {}, None, "tensor([], dtype=ember.int64)", id="empty_int64"),
    pytest.param(lambda: ember.zeros((2, 0, 1), dtype=ember.bool), {}, None, "tensor([], size=(2, 0, 1), dtype=ember.bool)", id="empty_bool_3d"),
    pytest.param(lambda: ember.zeros((0,), dtype=ember.float64), {}, None, "tensor([], dtype=ember.float64)", id="empty_float64"),
    pytest.param(lambda: ember.zeros((0, 2), requires_grad=True), {}, None, "tensor([], size=(0, 2), requires_grad=True)", id="empty_requires_grad"),
    # Complex tensors: one format for the real parts, one for the imaginary parts.
    pytest.param(lambda: ember.tensor([1+2j, 3-4j]), {}, None, "tensor([1.+2.j, 3.-4.j])", id="complex"),
    pytest.param(lambda: ember.tensor([1.5+0.25j, -2-1j]), {}, None, "tensor([ 1.5000+0.2500j, -2.0000-1.0000j])", id="complex_fixed"),
    pytest.param(lambda: ember.tensor([complex(1, -0.0), 2+1j]), {}, None, "tensor([1.-0.j, 2.+1.j])", id="complex_negative_zero_imag"),
    pytest.param(lambda: ember.tensor([1+1e-6j, 2+3j]), {}, None, "tensor([1.+1.0000e-06j, 2.+3.0000e+00j])", id="complex_sci_imag"),
    pytest.param(lambda: ember.tensor([complex(nan, 1), complex(1, inf), complex(2, -inf)]), {}, None, "tensor([nan+1.j, 1.+infj, 2.-infj])", id="complex_nan_inf"),
    pytest.param(lambda: ember.tensor([1+1j], dtype=ember.complex128), {}, None, "tensor([1.+1.j], dtype=ember.complex128)", id="complex128"),
    pytest.param(lambda: ember.tensor([[1+1j, 2.5-2j], [0j, -1+0.5j]]), {}, None, "tensor([[ 1.0000+1.0000j,  2.5000-2.0000j],\n        [ 0.0000+0.0000j, -1.0000+0.5000j]])", id="complex_matrix"),
    # Dtype suffixes; half precision prints its values too.
    pytest.param(lambda: ember.tensor([1., 2.], dtype=ember.float64), {}, None, "tensor([1., 2.], dtype=ember.float64)", id="float64"),
    pytest.param(lambda: ember.tensor([0.1, 0.2], dtype=ember.float64), {}, None, "tensor([0.1000, 0.2000], dtype=ember.float64)", id="float64_fixed"),
    pytest.param(lambda: ember.tensor([1.5, 2.0, -0.1], dtype=ember.float16), {}, None, "tensor([ 1.5000,  2.0000, -0.1000], dtype=ember.float16)", id="float16"),
    pytest.param(lambda: ember.tensor([1e-5, 6e4], dtype=ember.float16), {}, None, "tensor([1.0014e-05, 6.0000e+04], dtype=ember.float16)", id="float16_sci"),
    pytest.param(lambda: ember.tensor([1.5, 3.14159, 1e10], dtype=ember.bfloat16), {}, None, "tensor([1.5000e+00, 3.1406e+00, 9.9992e+09], dtype=ember.bfloat16)", id="bfloat16"),
    pytest.param(lambda: ember.tensor([0.1, 0.2, 0.3], dtype=ember.bfloat16), {}, None, "tensor([0.1001, 0.2002, 0.3008], dtype=ember.bfloat16)", id="bfloat16_fixed"),
    # Nesting: rows aligned under the first bracket, one blank line per extra dimension.
    pytest.param(lambda: ember.tensor([[1, 2, 3], [4, 5, 60]]), {}, None, "tensor([[ 1,  2,  3],\n        [ 4,  5, 60]])", id="matrix_int"),
    pytest.param(lambda: ember.tensor([[1.5, -2.0], [3.25, 4.0]]), {}, None, "tensor([[ 1.5000, -2.0000],\n        [ 3.2500,  4.0000]])", id="matrix_float"),
    pytest.param(lambda: ember.arange(24).reshape(2, 3, 4), {}, None, "tensor([[[ 0,  1,  2,  3],\n         [ 4,  5,  6,  7],\n         [ 8,  9, 10, 11]],\n\n        [[12, 13, 14, 15],\n         [16, 17, 18, 19],\n         [20, 21, 22, 23]]])", id="cube"),
    pytest.param(lambda: ember.arange(12, dtype=ember.float32).reshape(2, 3, 2) / 3, {}, None, "tensor([[[0.0000, 0.3333],\n         [0.6667, 1.0000],\n         [1.3333, 1.6667]],\n\n        [[2.0000, 2.3333],\n         [2.6667, 3.0000],\n         [3.3333, 3.6667]]])", id="cube_float"),
    pytest.param(lambda: ember.arange(16).reshape(2, 2, 2, 2), {}, None, "tensor([[[[ 0,  1],\n          [ 2,  3]],\n\n         [[ 4,  5],\n          [ 6,  7]]],\n\n\n        [[[ 8,  9],\n          [10, 11]],\n\n         [[12, 13],\n          [14, 15]]]])", id="four_dims"),
    pytest.param(lambda: ember.tensor([[1.], [2.], [3.]]), {}, None, "tensor([[1.],\n        [2.],\n        [3.]])", id="single_row_column"),
    pytest.param(lambda: ember.ones((1, 1, 1)), {}, None, "tensor([[[1.]]])", id="nested_ones"),
    pytest.param(lambda: ember.arange(6).reshape(2, 3).t(), {}, None, "tensor([[0, 3],\n        [1, 4],\n        [2, 5]])", id="transposed_view"),
    pytest.param(lambda: ember.arange(10.)[::3], {}, None, "tensor([0., 3., 6., 9.])", id="strided_view"),
    # Rows wrap at the line width.
    pytest.param(lambda: ember.arange(40, dtype=ember.float32) * 1.5, {}, None, "tensor([ 0.0000,  1.5000,  3.0000,  4.5000,  6.0000,  7.5000,  9.0000, 10.5000,\n        12.0000, 13.5000, 15.0000, 16.5000, 18.0000, 19.5000, 21.0000, 22.5000,\n        24.0000, 25.5000, 27.0000, 28.5000, 30.0000, 31.5000, 33.0000, 34.5000,\n        36.0000, 37.5000, 39.0000, 40.5000, 42.0000, 43.5000, 45.0000, 46.5000,\n        48.0000, 49.5000, 51.0000, 52.5000, 54.0000, 55.5000, 57.0000, 58.5000])", id="wrap_long_row"),
    pytest.param(lambda: ember.arange(100, 140), {}, None, "tensor([100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113,\n        114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127,\n        128, 129, 130, 131, 132, 133, 134, 135, 136, 137, 138, 139])", id="wrap_ints"),
    pytest.param(lambda: ember.arange(60, dtype=ember.float32).reshape(2, 30) / 7, {}, None, "tensor([[0.0000, 0.1429, 0.2857, 0.4286, 0.5714, 0.7143, 0.8571, 1.0000, 1.1429,\n         1.2857, 1.4286, 1.5714, 1.7143, 1.8571, 2.0000, 2.1429, 2.2857, 2.4286,\n         2.5714, 2.7143, 2.8571, 3.0000, 3.1429, 3.2857, 3.4286, 3.5714, 3.7143,\n         3.8571, 4.0000, 4.1429],\n        [4.2857, 4.4286, 4.5714, 4.7143, 4.8571, 5.0000, 5.1429, 5.2857, 5.4286,\n         5.5714, 5.7143, 5.8571, 6.0000, 6.1429, 6.2857, 6.4286, 6.5714, 6.7143,\n         6.8571, 7.0000, 7.1429, 7.2857, 7.4286, 7.5714, 7.7143, 7.8571, 8.0000,\n         8.1429, 8.2857, 8.4286]])", id="wrap_matrix_rows"),
    pytest.param(lambda: ember.arange(20, dtype=ember.float32) * (1.5-0.5j), {}, None, "tensor([ 0.0000+0.0000j,  1.5000-0.5000j,  3.0000-1.0000j,  4.5000-1.5000j,\n         6.0000-2.0000j,  7.5000-2.5000j,  9.0000-3.0000j, 10.5000-3.5000j,\n        12.0000-4.0000j, 13.5000-4.5000j, 15.0000-5.0000j, 16.5000-5.5000j,\n        18.0000-6.0000j, 19.5000-6.5000j, 21.0000-7.0000j, 22.5000-7.5000j,\n        24.0000-8.0000j, 25.5000-8.5000j, 27.0000-9.0000j, 28.5000-9.5000j])", id="wrap_complex"),
    # More than `threshold` elements: `edgeitems` entries at each end of each dimension.
    pytest.param(lambda: ember.arange(2000), {}, None, "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])", id="summarize_1d"),
    pytest.param(lambda: ember.arange(1001, dtype=ember.float32) / 4, {}, None, "tensor([  0.0000,   0.2500,   0.5000,  ..., 249.5000, 249.7500, 250.0000])", id="summarize_1d_float"),
    pytest.param(lambda: ember.arange(2000, dtype=ember.float32).reshape(40, 50), {}, None, "tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 4.7000e+01, 4.8000e+01,\n         4.9000e+01],\n        [5.0000e+01, 5.1000e+01, 5.2000e+01,  ..., 9.7000e+01, 9.8000e+01,\n         9.9000e+01],\n        [1.0000e+02, 1.0100e+02, 1.0200e+02,  ..., 1.4700e+02, 1.4800e+02,\n         1.4900e+02],\n        ...,\n        [1.8500e+03, 1.8510e+03, 1.8520e+03,  ..., 1.8970e+03, 1.8980e+03,\n         1.8990e+03],\n        [1.9000e+03, 1.9010e+03, 1.9020e+03,  ..., 1.9470e+03, 1.9480e+03,\n         1.9490e+03],\n        [1.9500e+03, 1.9510e+03, 1.9520e+03,  ..., 1.9970e+03, 1.9980e+03,\n         1.9990e+03]])", id="summarize_2d"),
    pytest.param(lambda: ember.arange(2000).reshape(10, 10, 20), {}, None, "tensor([[[   0,    1,    2,  ...,   17,   18,   19],\n         [  20,   21,   22,  ...,   37,   38,   39],\n         [  40,   41,   42,  ...,   57,   58,   59],\n         ...,\n         [ 140,  141,  142,  ...,  157,  158,  159],\n         [ 160,  161,  162,  ...,  177,  178,  179],\n         [ 180,  181,  182,  ...,  197,  198,  199]],\n\n        [[ 200,  201,  202,  ...,  217,  218,  219],\n         [ 220,  221,  222,  ...,  237,  238,  239],\n         [ 240,  241,  242,  ...,  257,  258,  259],\n         ...,\n         [ 340,  341,  342,  ...,  357,  358,  359],\n         [ 360,  361,  362,  ...,  377,  378,  379],\n         [ 380,  381,  382,  ...,  397,  398,  399]],\n\n        [[ 400,  401,  402,  ...,  417,  418,  419],\n         [ 420,  421,  422,  ...,  437,  438,  439],\n         [ 440,  441,  442,  ...,  457,  458,  459],\n         ...,\n         [ 540,  541,  542,  ...,  557,  558,  559],\n         [ 560,  561,  562,  ...,  577,  578,  579],\n         [ 580,  581,  582,  ...,  597,  598,  599]],\n\n        ...,\n\n        [[1400, 1401, 1402,  ..., 1417, 1418, 1419],\n         [1420, 1421, 1422,  ..., 1437, 1438, 1439],\n         [1440, 1441, 1442,  ..., 1457, 1458, 1459],\n         ...,\n         [1540, 1541, 1542,  ..., 1557, 1558, 1559],\n         [1560, 1561, 1562,  ..., 1577, 1578, 1579],\n         [1580, 1581, 1582,  ..., 1597, 1598, 1599]],\n\n        [[1600, 1601, 1602,  ..., 1617, 1618, 1619],\n         [1620, 1621, 1622,  ..., 1637, 1638, 1639],\n         [1640, 1641, 1642,  ..., 1657, 1658, 1659],\n         ...,\n         [1740, 1741, 1742,  ..., 1757, 1758, 1759],\n         [1760, 1761, 1762,  ..., 1777, 1778, 1779],\n         [1780, 1781, 1782,  ..., 1797, 1798, 1799]],\n\n        [[1800, 1801, 1802,  ..., 1817, 1818, 1819],\n         [1820, 1821, 1822,  ..., 1837, 1838, 1839],\n         [1840, 1841, 1842,  ..., 1857, 1858, 1859],\n         ...,\n         [1940, 1941, 1942,  ..., 1957, 1958, 1959],\n         [1960, 1961, 1962,  ..., 1977, 1978, 1979],\n         [1980, 1981, 1982,  ..., 1997, 1998, 1999]]])", id="summarize_3d"),
    pytest.param(lambda: ember.tensor([1e-7] * 500 + list(range(10)) + [1e-7] * 500), {}, None, "tensor([1.0000e-07, 1.0000e-07, 1.0000e-07,  ..., 1.0000e-07, 1.0000e-07,\n        1.0000e-07])", id="summarize_uses_edges_for_format"),
    pytest.param(lambda: ember.arange(1500).reshape(3, 500), {}, None, "tensor([[   0,    1,    2,  ...,  497,  498,  499],\n        [ 500,  501,  502,  ...,  997,  998,  999],\n        [1000, 1001, 1002,  ..., 1497, 1498, 1499]])", id="summarize_short_dim"),
    pytest.param(lambda: ember.arange(1200, dtype=ember.float32) * (1+2j), {}, None, "tensor([0.0000e+00+0.0000e+00j, 1.0000e+00+2.0000e+00j, 2.0000e+00+4.0000e+00j,\n         ..., 1.1970e+03+2.3940e+03j, 1.1980e+03+2.3960e+03j,\n        1.1990e+03+2.3980e+03j])", id="summarize_complex"),
    # Print options.
    pytest.param(lambda: ember.arange(10), {"threshold": 5}, None, "tensor([0, 1, 2,  ..., 7, 8, 9])", id="threshold_option"),
    pytest.param(lambda: ember.arange(10), {"threshold": 5, "edgeitems": 1}, None, "tensor([0,  ..., 9])", id="edgeitems_option"),
    pytest.param(lambda: ember.arange(10), {"threshold": 5, "edgeitems": 0}, None, "tensor([...], size=(10,))", id="edgeitems_zero_1d"),
    pytest.param(lambda: ember.arange(20.).reshape(4, 5), {"threshold": 5, "edgeitems": 0}, None, "tensor([...], size=(4, 5))", id="edgeitems_zero_2d"),
    pytest.param(lambda: ember.tensor([1., 2.]), {"edgeitems": 0}, None, "tensor([1., 2.], size=(2,))", id="edgeitems_zero_small"),
    pytest.param(lambda: ember.arange(49).reshape(7, 7), {"threshold": 10, "edgeitems": 2}, None, "tensor([[ 0,  1,  ...,  5,  6],\n        [ 7,  8,  ..., 12, 13],\n        ...,\n        [35, 36,  ..., 40, 41],\n        [42, 43,  ..., 47, 48]])", id="threshold_matrix"),
    pytest.param(lambda: ember.tensor([1.12345, 2.5]), {"precision": 2}, None, "tensor([1.12, 2.50])", id="precision_2"),
    pytest.param(lambda: ember.tensor([1.6, 2.4]), {"precision": 0}, None, "tensor([2, 2])", id="precision_0"),
    pytest.param(lambda: ember.tensor([1 / 3], dtype=ember.float64), {"precision": 8}, None, "tensor([0.33333333], dtype=ember.float64)", id="precision_8"),
    pytest.param(lambda: ember.tensor([0.5, 1234.5]), {"sci_mode": True}, None, "tensor([5.0000e-01, 1.2345e+03])", id="sci_mode_true"),
    pytest.param(lambda: ember.tensor([1., 20.]), {"sci_mode": True}, None, "tensor([1.0000e+00, 2.0000e+01])", id="sci_mode_true_ints"),
    pytest.param(lambda: ember.tensor([0., 0.]), {"sci_mode": True}, None, "tensor([0., 0.])", id="sci_mode_true_zeros_only"),
    pytest.param(lambda: ember.tensor([1e-5, 1e5]), {"sci_mode": False}, None, "tensor([     0.0000, 100000.0000])", id="sci_mode_false"),
    pytest.param(lambda: ember.tensor([1e10, 1.5]), {"sci_mode": False}, None, "tensor([10000000000.0000,           1.5000])", id="sci_mode_false_huge"),
    pytest.param(lambda: ember.arange(20.), {"linewidth": 40}, None, "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,\n         6.,  7.,  8.,  9., 10., 11.,\n        12., 13., 14., 15., 16., 17.,\n        18., 19.])", id="linewidth_option"),
    pytest.param(lambda: ember.tensor([1.5, 2.5, 3.5]), {"linewidth": 5}, None, "tensor([1.5000,\n        2.5000,\n        3.5000])", id="linewidth_tiny"),
    pytest.param(lambda: ember.tensor([1.12345, 2.5]), {"profile": "short"}, None, "tensor([1.12, 2.50])", id="profile_short"),
    pytest.param(lambda: ember.arange(2000), {"profile": "short"}, None, "tensor([   0,    1,  ..., 1998, 1999])", id="profile_short_summary"),
    pytest.param(lambda: ember.arange(1100).reshape(11, 100)[:2, :30], {"profile": "full"}, None, "tensor([[  0,   1,   2,   3,   4,   5,   6,   7,   8,   9,  10,  11,  12,  13,\n          14,  15,  16,  17,  18,  19,  20,  21,  22,  23,  24,  25,  26,  27,\n          28,  29],\n        [100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113,\n         114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127,\n         128, 129]])", id="profile_full"),
    pytest.param(lambda: ember.arange(1010), {"profile": "full", "linewidth": 200}, None, "tensor([   0,    1,    2,    3,    4,    5,    6,    7,    8,    9,   10,   11,   12,   13,   14,   15,   16,   17,   18,   19,   20,   21,   22,   23,   24,   25,   26,   27,   28,   29,   30,   31,\n          32,   33,   34,   35,   36,   37,   38,   39,   40,   41,   42,   43,   44,   45,   46,   47,   48,   49,   50,   51,   52,   53,   54,   55,   56,   57,   58,   59,   60,   61,   62,   63,\n          64,   65,   66,   67,   68,   69,   70,   71,   72,   73,   74,   75,   76,   77,   78,   79,   80,   81,   82,   83,   84,   85,   86,   87,   88,   89,   90,   91,   92,   93,   94,   95,\n          96,   97,   98,   99,  100,  101,  102,  103,  104,  105,  106,  107,  108,  109,  110,  111,  112,  113,  114,  115,  116,  117,  118,  119,  120,  121,  122,  123,  124,  125,  126,  127,\n         128,  129,  130,  131,  132,  133,  134,  135,  136,  137,  138,  139,  140,  141,  142,  143,  144,  145,  146,  147,  148,  149,  150,  151,  152,  153,  154,  155,  156,  157,  158,  159,\n         160,  161,  162,  163,  164,  165,  166,  167,  168,  169,  170,  171,  172,  173,  174,  175,  176,  177,  178,  179,  180,  181,  182,  183,  184,  185,  186,  187,  188,  189,  190,  191,\n         192,  193,  194,  195,  196,  197,  198,  199,  200,  201,  202,  203,  204,  205,  206,  207,  208,  209,  210,  211,  212,  213,  214,  215,  216,  217,  218,  219,  220,  221,  222,  223,\n         224,  225,  226,  227,  228,  229,  230,  231,  232,  233,  234,  235,  236,  237,  238,  239,  240,  241,  242,  243,  244,  245,  246,  247,  248,  249,  250,  251,  252,  253,  254,  255,\n         256,  257,  258,  259,  260,  261,  262,  263,  264,  265,  266,  267,  268,  269,  270,  271,  272,  273,  274,  275,  276,  277,  278,  279,  280,  281,  282,  283,  284,  285,  286,  287,\n         288,  289,  290,  291,  292,  293,  294,  295,  296,  297,  298,  299,  300,  301,  302,  303,  304,  305,  306,  307,  308,  309,  310,  311,  312,  313,  314,  315,  316,  317,  318,  319,\n         320,  321,  322,  323,  324,  325,  326,  327,  328,  329,  330,  331,  332,  333,  334,  335,  336,  337,  338,  339,  340,  341,  342,  343,  344,  345,  346,  347,  348,  349,  350,  351,\n         352,  353,  354,  355,  356,  357,  358,  359,  360,  361,  362,  363,  364,  365,  366,  367,  368,  369,  370,  371,  372,  373,  374,  375,  376,  377,  378,  379,  380,  381,  382,  383,\n         384,  385,  386,  387,  388,  389,  390,  391,  392,  393,  394,  395,  396,  397,  398,  399,  400,  401,  402,  403,  404,  405,  406,  407,  408,  409,  410,  411,  412,  413,  414,  415,\n         416,  417,  418,  419,  420,  421,  422,  423,  424,  425,  426,  427,  428,  429,  430,  431,  432,  433,  434,  435,  436,  437,  438,  439,  440,  441,  442,  443,  444,  445,  446,  447,\n         448,  449,  450,  451,  452,  453,  454,  455,  456,  457,  458,  459,  460,  461,  462,  463,  464,  465,  466,  467,  468,  469,  470,  471,  472,  473,  474,  475,  476,  477,  478,  479,\n         480,  481,  482,  483,  484,  485,  486,  487,  488,  489,  490,  491,  492,  493,  494,  495,  496,  497,  498,  499,  500,  501,  502,  503,  504,  505,  506,  507,  508,  509,  510,  511,\n         512,  513,  514,  515,  516,  517,  518,  519,  520,  521,  522,  523,  524,  525,  526,  527,  528,  529,  530,  531,  532,  533,  534,  535,  536,  537,  538,  539,  540,  541,  542,  543,\n         544,  545,  546,  547,  548,  549,  550,  551,  552,  553,  554,  555,  556,  557,  558,  559,  560,  561,  562,  563,  564,  565,  566,  567,  568,  569,  570,  571,  572,  573,  574,  575,\n         576,  577,  578,  579,  580,  581,  582,  583,  584,  585,  586,  587,  588,  589,  590,  591,  592,  593,  594,  595,  596,  597,  598,  599,  600,  601,  602,  603,  604,  605,  606,  607,\n         608,  609,  610,  611,  612,  613,  614,  615,  616,  617,  618,  619,  620,  621,  622,  623,  624,  625,  626,  627,  628,  629,  630,  631,  632,  633,  634,  635,  636,  637,  638,  639,\n         640,  641,  642,  643,  644,  645,  646,  647,  648,  649,  650,  651,  652,  653,  654,  655,  656,  657,  658,  659,  660,  661,  662,  663,  664,  665,  666,  667,  668,  669,  670,  671,\n         672,  673,  674,  675,  676,  677,  678,  679,  680,  681,  682,  683,  684,  685,  686,  687,  688,  689,  690,  691,  692,  693,  694,  695,  696,  697,  698,  699,  700,  701,  702,  703,\n         704,  705,  706,  707,  708,  709,  710,  711,  712,  713,  714,  715,  716,  717,  718,  719,  720,  721,  722,  723,  724,  725,  726,  727,  728,  729,  730,  731,  732,  733,  734,  735,\n         736,  737,  738,  739,  740,  741,  742,  743,  744,  745,  746,  747,  748,  749,  750,  751,  752,  753,  754,  755,  756,  757,  758,  759,  760,  761,  762,  763,  764,  765,  766,  767,\n         768,  769,  770,  771,  772,  773,  774,  775,  776,  777,  778,  779,  780,  781,  782,  783,  784,  785,  786,  787,  788,  789,  790,  791,  792,  793,  794,  795,  796,  797,  798,  799,\n         800,  801,  802,  803,  804,  805,  806,  807,  808,  809,  810,  811,  812,  813,  814,  815,  816,  817,  818,  819,  820,  821,  822,  823,  824,  825,  826,  827,  828,  829,  830,  831,\n         832,  833,  834,  835,  836,  837,  838,  839,  840,  841,  842,  843,  844,  845,  846,  847,  848,  849,  850,  851,  852,  853,  854,  855,  856,  857,  858,  859,  860,  861,  862,  863,\n         864,  865,  866,  867,  868,  869,  870,  871,  872,  873,  874,  875,  876,  877,  878,  879,  880,  881,  882,  883,  884,  885,  886,  887,  888,  889,  890,  891,  892,  893,  894,  895,\n         896,  897,  898,  899,  900,  901,  902,  903,  904,  905,  906,  907,  908,  909,  910,  911,  912,  913,  914,  915,  916,  917,  918,  919,  920,  921,  922,  923,  924,  925,  926,  927,\n         928,  929,  930,  931,  932,  933,  934,  935,  936,  937,  938,  939,  940,  941,  942,  943,  944,  945,  946,  947,  948,  949,  950,  951,  952,  953,  954,  955,  956,  957,  958,  959,\n         960,  961,  962,  963,  964,  965,  966,  967,  968,  969,  970,  971,  972,  973,  974,  975,  976,  977,  978,  979,  980,  981,  982,  983,  984,  985,  986,  987,  988,  989,  990,  991,\n         992,  993,  994,  995,  996,  997,  998,  999, 1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009])", id="profile_full_no_summary"),
    # Autograd suffixes, and suffixes that do not fit on the last line.
    pytest.param(lambda: ember.tensor([1., 2.], requires_grad=True), {}, None, "tensor([1., 2.], requires_grad=True)", id="requires_grad"),
    pytest.param(lambda: ember.tensor([[1., 2.]], requires_grad=True), {}, None, "tensor([[1., 2.]], requires_grad=True)", id="requires_grad_matrix"),
    pytest.param(lambda: ember.tensor([1., 2.], dtype=ember.float64, requires_grad=True), {}, None, "tensor([1., 2.], dtype=ember.float64, requires_grad=True)", id="requires_grad_float64"),
    pytest.param(lambda: ember.arange(14, dtype=ember.float64) / 3, {}, None, "tensor([0.0000, 0.3333, 0.6667, 1.0000, 1.3333, 1.6667, 2.0000, 2.3333, 2.6667,\n        3.0000, 3.3333, 3.6667, 4.0000, 4.3333], dtype=ember.float64)", id="suffix_fits_on_last_line"),
    pytest.param(lambda: ember.tensor([1.5] * 8, dtype=ember.float64, requires_grad=True), {}, None, "tensor([1.5000, 1.5000, 1.5000, 1.5000, 1.5000, 1.5000, 1.5000, 1.5000],\n       dtype=ember.float64, requires_grad=True)", id="suffix_wraps_one_of_two"),
    pytest.param(lambda: ember.arange(12, dtype=ember.float64).reshape(2, 6) * 1111.5, {}, None, "tensor([[    0.0000,  1111.5000,  2223.0000,  3334.5000,  4446.0000,  5557.5000],\n        [ 6669.0000,  7780.5000,  8892.0000, 10003.5000, 11115.0000, 12226.5000]],\n       dtype=ember.float64)", id="suffix_after_matrix"),
    pytest.param(lambda: ember.tensor([1.] * 13, requires_grad=True), {}, None, "tensor([1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1.],\n       requires_grad=True)", id="suffix_wraps_at_exact_boundary"),
    # Meta tensors have no values.
    pytest.param(lambda: ember.empty((2, 3), device="meta"), {}, None, "tensor(..., device='meta', size=(2, 3))", id="meta"),
    pytest.param(lambda: ember.empty((4,), dtype=ember.int64, device="meta"), {}, None, "tensor(..., device='meta', size=(4,), dtype=ember.int64)", id="meta_int64"),
    pytest.param(lambda: ember.empty((), device="meta"), {}, None, "tensor(..., device='meta', size=())", id="meta_scalar"),
    pytest.param(lambda: ember.empty((0, 2), device="meta"), {}, None, "tensor(..., device='meta', size=(0, 2))", id="meta_empty"),
    pytest.param(lambda: ember.empty((2,), device="meta", requires_grad=True), {}, None, "tensor(..., device='meta', size=(2,), requires_grad=True)", id="meta_requires_grad"),
    pytest.param(lambda: ember.empty((1, 1), dtype=ember.bool, device="meta"), {}, None, "tensor(..., device='meta', size=(1, 1), dtype=ember.bool)", id="meta_bool"),
    # With float64 as the default dtype.
    pytest.param(lambda: ember.tensor([1.5, 2.]), {}, "float64", "tensor([1.5000, 2.0000])", id="default_float64_float64"),
    pytest.param(lambda: ember.tensor([1.5, 2.], dtype=ember.float32), {}, "float64", "tensor([1.5000, 2.0000], dtype=ember.float32)", id="default_float64_float32"),
    pytest.param(lambda: ember.tensor([1+1j]), {}, "float64", "tensor([1.+1.j])", id="default_float64_complex128"),
    pytest.param(lambda: ember.tensor([1+1j], dtype=ember.complex64), {}, "float64", "tensor([1.+1.j], dtype=ember.complex64)", id="default_float64_complex64"),
    pytest.param(lambda: ember.zeros(0, dtype=ember.float32), {}, "float64", "tensor([], dtype=ember.float32)", id="default_float64_empty_float32"),
    pytest.param(lambda: ember.empty((2,), dtype=ember.float32, device="meta"), {}, "float64", "tensor(..., device='meta', size=(2,), dtype=ember.float32)", id="default_float64_meta_float32"),
]


@pytest.mark.parametrize(("make", "options", "default_dtype", "expected"), CASES)
def test_repr_matches_pytorch(make, options, default_dtype, expected):
    with _default_dtype(default_dtype):
        t = make()
        with printoptions(**options):
            assert repr(t) == expected
            assert str(t) == expected
            assert tensor_repr(t) == expected


# A few layouts spelled out, so the format can be read here as well as checked.


def test_matrix_layout():
    t = ember.tensor([[1.5, -2.0], [3.25, 4.0]])
    assert repr(t) == (
        "tensor([[ 1.5000, -2.0000],\n"
        "        [ 3.2500,  4.0000]])"
    )


def test_three_dims_are_separated_by_a_blank_line():
    t = ember.arange(8).reshape(2, 2, 2)
    assert repr(t) == (
        "tensor([[[0, 1],\n"
        "         [2, 3]],\n"
        "\n"
        "        [[4, 5],\n"
        "         [6, 7]]])"
    )


def test_summarised_matrix():
    t = ember.arange(2000).reshape(40, 50)
    assert repr(t) == (
        "tensor([[   0,    1,    2,  ...,   47,   48,   49],\n"
        "        [  50,   51,   52,  ...,   97,   98,   99],\n"
        "        [ 100,  101,  102,  ...,  147,  148,  149],\n"
        "        ...,\n"
        "        [1850, 1851, 1852,  ..., 1897, 1898, 1899],\n"
        "        [1900, 1901, 1902,  ..., 1947, 1948, 1949],\n"
        "        [1950, 1951, 1952,  ..., 1997, 1998, 1999]])"
    )


def test_suffix_moves_to_a_new_line_when_it_does_not_fit():
    t = ember.arange(16, dtype=ember.float64) / 3
    assert repr(t) == (
        "tensor([0.0000, 0.3333, 0.6667, 1.0000, 1.3333, 1.6667, 2.0000, 2.3333, 2.6667,\n"
        "        3.0000, 3.3333, 3.6667, 4.0000, 4.3333, 4.6667, 5.0000],\n"
        "       dtype=ember.float64)"
    )


# grad_fn: the node's name() when it has one, else its class name.


class MulBackward0:
    pass


class _NamedNode:
    def name(self):
        return "ember::autograd::AddBackward0"


def test_grad_fn_class_name():
    t = ember.tensor([2.0, 4.0])
    t.grad_fn = MulBackward0()
    assert repr(t) == "tensor([2., 4.], grad_fn=<MulBackward0>)"


def test_grad_fn_name_method_wins_and_drops_namespaces():
    t = ember.tensor([[1.0, 2.0]], dtype=ember.float64)
    t.grad_fn = _NamedNode()
    assert repr(t) == "tensor([[1., 2.]], dtype=ember.float64, grad_fn=<AddBackward0>)"


def test_grad_fn_replaces_requires_grad():
    t = ember.tensor([1.0], requires_grad=True)
    t.grad_fn = MulBackward0()
    assert repr(t) == "tensor([1.], grad_fn=<MulBackward0>)"


# Subclasses print their class name in place of "tensor".


class MyTensor(ember.Tensor):
    pass


def test_subclass_prefix_and_indent():
    t = MyTensor._make(np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32))
    assert repr(t) == "MyTensor([[1., 2.],\n          [3., 4.]])"


def test_tensor_contents_replaces_the_values():
    t = ember.tensor([1.0, 2.0], dtype=ember.float64)
    assert tensor_repr(t, tensor_contents="<wrapped>") == "tensor(<wrapped>, dtype=ember.float64)"


def test_float16_and_bfloat16_values_print_exactly():
    import ml_dtypes

    # The stored values, not the decimal literals: 0.1 is 0.10009765625 in bfloat16 and
    # 0.0999755859375 in float16 (which makes 100 / 0.09998 > 1000, so scientific style).
    t = ember.from_numpy(np.array([0.1, 100.0], dtype=ml_dtypes.bfloat16))
    assert repr(t) == "tensor([  0.1001, 100.0000], dtype=ember.bfloat16)"
    t = ember.from_numpy(np.array([0.1, 100.0], dtype=np.float16))
    assert repr(t) == "tensor([9.9976e-02, 1.0000e+02], dtype=ember.float16)"


def test_printing_does_not_change_the_tensor():
    t = ember.arange(3000, dtype=ember.float32)
    version = t._version
    before = t.numpy().copy()
    repr(t)
    assert t._version == version
    np.testing.assert_array_equal(t.numpy(), before)


# Devices other than the CPU are named, and their values are read back to the host.


class _PrintTestBackend(Backend):
    """A device type that keeps numpy arrays, registered only by this test file."""

    def from_numpy(self, array, index):
        return np.array(array, copy=True)

    def to_numpy(self, array):
        return np.array(array, copy=True)


_TEST_DEVICE = "printtest"
if _TEST_DEVICE not in _BACKENDS:
    from ember.utils.backend_registration import register_backend

    register_backend(_TEST_DEVICE, _PrintTestBackend(), generate_methods=False)


def test_other_device_is_named():
    t = ember.Tensor._make(np.array([1.0, 2.5], dtype=np.float32), device=ember.device(_TEST_DEVICE, 0))
    assert repr(t) == "tensor([1.0000, 2.5000], device='printtest:0')"


@pytest.mark.cuda
def test_cuda_device_is_named(device):
    t = ember.tensor([1.0, 2.0], device=device)
    assert repr(t) == "tensor([1., 2.], device='cuda:0')"


def test_meta_tensor_data_is_not_read(monkeypatch):
    t = ember.empty((2, 3), device="meta")

    def fail(self):
        raise AssertionError("printing a meta tensor read its data")

    monkeypatch.setattr(ember.Tensor, "_host_array", fail)
    assert repr(t) == "tensor(..., device='meta', size=(2, 3))"


# The options API.


def test_get_printoptions_defaults():
    assert get_printoptions() == DEFAULT_OPTIONS


def test_get_printoptions_returns_a_copy():
    options = get_printoptions()
    options["precision"] = 9
    assert get_printoptions()["precision"] == 4


def test_set_printoptions_round_trips_through_get():
    set_printoptions(precision=2, threshold=10, edgeitems=1, linewidth=40, sci_mode=True)
    assert get_printoptions() == {"precision": 2, "threshold": 10, "edgeitems": 1, "linewidth": 40, "sci_mode": True}
    set_printoptions(**DEFAULT_OPTIONS)
    assert get_printoptions() == DEFAULT_OPTIONS


def test_set_printoptions_keeps_unset_options_but_resets_sci_mode():
    set_printoptions(precision=2, sci_mode=True)
    set_printoptions(linewidth=100)
    assert get_printoptions() == {"precision": 2, "threshold": 1000, "edgeitems": 3, "linewidth": 100, "sci_mode": None}


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        ("default", {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": None}),
        ("short", {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80, "sci_mode": None}),
        ("full", {"precision": 4, "threshold": math.inf, "edgeitems": 3, "linewidth": 80, "sci_mode": None}),
    ],
)
def test_profiles(profile, expected):
    set_printoptions(precision=7, linewidth=33)
    set_printoptions(profile=profile)
    assert get_printoptions() == expected


def test_explicit_options_override_the_profile():
    set_printoptions(profile="short", precision=6)
    assert get_printoptions()["precision"] == 6
    assert get_printoptions()["edgeitems"] == 2


def test_unknown_profile_is_rejected():
    with pytest.raises(ValueError, match="profile must be one of .*'short'.*got 'tiny'"):
        set_printoptions(profile="tiny")
    assert get_printoptions() == DEFAULT_OPTIONS


def test_printoptions_context_restores_on_exit_and_on_error():
    t = ember.tensor([1.12345])
    with printoptions(precision=2):
        assert repr(t) == "tensor([1.12])"
        assert get_printoptions()["precision"] == 2
    assert repr(t) == "tensor([1.1235])"
    with pytest.raises(RuntimeError, match="boom"), printoptions(precision=1, sci_mode=True):
        raise RuntimeError("boom")
    assert get_printoptions() == DEFAULT_OPTIONS


def test_printoptions_context_nests():
    set_printoptions(linewidth=100)
    with printoptions(precision=2):
        with printoptions(precision=6, sci_mode=False):
            assert get_printoptions()["precision"] == 6
        assert get_printoptions() == {**DEFAULT_OPTIONS, "precision": 2, "linewidth": 100}
    assert get_printoptions() == {**DEFAULT_OPTIONS, "linewidth": 100}


def test_printoptions_rejects_unknown_keywords():
    with pytest.raises(TypeError), printoptions(precission=2):
        pass
    assert get_printoptions() == DEFAULT_OPTIONS
