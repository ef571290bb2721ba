"""The generated C++'s float32 transcendentals (codegen/cpp.py PRELUDE) against numpy in float64.

``exp``, ``erf``, ``log``, ``log2``, ``log10``, ``log1p``, ``tanh``, ``sin`` and ``cos`` of float32 are
straight-line code in the prelude (so `omp simd` loops vectorise them) instead of scalar libm calls.
Each is checked on a million random bit patterns (every exponent, subnormals, huge arguments of
sin/cos), scaled normals and special values: the error in units of the float32 result's last place
against numpy's float64 value, and NaN, infinities and signed zeros where numpy has them.
"""

from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
import pytest

import ember
from ember._inductor import config
from ember._inductor.codegen import cpp
from ember._inductor.compile_fx import compile_fx
from ember.fx.experimental.proxy_tensor import make_fx

SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1e-40, -1e-40, 1.17549435e-38, 3.4028235e38,
            -3.4028235e38, 1.0, -1.0, 2.0, 0.5, 1e-8, -1e-8, -0.99999994, 88.0, -88.0, 89.0, -104.0, 20.0, 9.0,
            1.5707964, 3.1415927, 4.712389, 6.2831855, 1e6, -1e6, 16777216.0, 1e30, 2.0 ** 127]

# (ember op, numpy reference, allowed error in ulp of the float32 result)
FUNCTIONS = [
    ("exp", np.exp, 1.0),
    ("log", np.log, 1.0),
    ("log2", np.log2, 1.0),
    ("log10", np.log10, 1.0),
    ("log1p", np.log1p, 1.0),
    ("tanh", np.tanh, 1.0),
    ("sin", np.sin, 1.0),
    ("cos", np.cos, 1.0),
]


def _inputs():
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2 ** 32, size=1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
    scales = np.array([1.0, 10.0, 1e-3, 100.0, 1e4])
    normals = rng.standard_normal(1 << 18) * scales[rng.integers(0, len(scales), 1 << 18)]
    return np.concatenate([bits, normals.astype(np.float32), np.array(SPECIALS, dtype=np.float32)])


def _compiled(fn, x):
    t = ember.from_numpy(x.copy())
    with config.patch(fallback_on_compile_error=False):
        compiled = compile_fx(make_fx(lambda a: (fn(a),))(t), [t])
        out = compiled(t)[0].numpy()
    assert compiled.fallbacks == []
    return out


def _ulp_error(got, want64):
    """Max |got - want| in units of the last place of want rounded to float32 (finite values)."""
    with np.errstate(over="ignore"):
        want32 = want64.astype(np.float32)
    ok = np.isfinite(want32) & np.isfinite(got)
    ulp = np.spacing(np.abs(want32[ok])).astype(np.float64)
    return float(np.max(np.abs(got[ok].astype(np.float64) - want64[ok]) / ulp))


@pytest.mark.parametrize("name, reference, max_ulp", FUNCTIONS, ids=[f[0] for f in FUNCTIONS])
def test_float32_functions_within_an_ulp_and_exact_at_special_values(name, reference, max_ulp):
    x = _inputs()
    got = _compiled(getattr(ember, name), x)
    with np.errstate(all="ignore"):
        want = reference(x.astype(np.float64))
        want32 = want.astype(np.float32)
    assert got.dtype == np.float32
    assert _ulp_error(got, want) <= max_ulp
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want32), err_msg=f"{name}: NaN positions")
    inf = np.isinf(want32)
    np.testing.assert_array_equal(got[inf], want32[inf], err_msg=f"{name}: infinities")
    zero = want32 == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want32[zero]), err_msg=f"{name}: signed zeros")


@pytest.mark.parametrize("name", ["log", "tanh"])
def test_log_and_tanh_give_the_eager_kernels_bits(name):
    # the same maths as ember-core's threaded C++ kernels, which eager uses on large tensors
    x = np.abs(np.random.default_rng(1).standard_normal(1 << 18).astype(np.float32) * 5)
    fn = getattr(ember, name)
    np.testing.assert_array_equal(_compiled(fn, x), fn(ember.from_numpy(x)).numpy())


@pytest.mark.parametrize("dtype", [ember.float64, ember.bfloat16])
@pytest.mark.parametrize("name", ["log1p", "tanh", "sin"])
def test_other_float_types_match_eager(name, dtype):
    x = ember.linspace(-0.9, 30.0, 1001).to(dtype)
    fn = getattr(ember, name)
    got = _compiled(fn, x.numpy())
    want = fn(x).numpy()
    rtol = 1e-12 if dtype == ember.float64 else 1e-2
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=rtol)


@pytest.mark.parametrize("name", [f[0] for f in FUNCTIONS])
def test_float32_functions_are_prelude_code_not_libm_calls(name):
    t = ember.randn(64, 64)
    from ember._inductor.codegen.wrapper import compile_graph

    source = compile_graph(make_fx(lambda a: (getattr(ember, name)(a),))(t), [t]).source
    kernels = source[len(cpp.PRELUDE):]
    assert f"ember_{name}<float>(" in kernels
    assert f"std::{name}(" not in kernels


def test_sin_cos_reduction_chunks_are_two_over_pi():
    # the nine 26-bit chunks of 2/pi in ember_reduce_pio2, recomputed from pi to 300 bits (Machin)
    def arctan_inv(n, bits):
        one = 1 << bits
        total, term, k, sign = 0, one // n, 1, 1
        while term:
            total += sign * (term // k)
            term //= n * n
            k += 2
            sign = -sign
        return total

    bits = 300
    pi = 16 * arctan_inv(5, bits) - 4 * arctan_inv(239, bits)  # pi * 2**bits
    two_over_pi = Fraction(2 << bits, pi)  # 2/pi to ~300 bits
    scaled = int(two_over_pi * 2 ** 234)
    want = sorted(float(((scaled >> (26 * (8 - i))) & ((1 << 26) - 1)) * Fraction(1, 2 ** (26 * (i + 1))))
                  for i in range(9))
    body = cpp.PRELUDE[cpp.PRELUDE.index("ember_reduce_pio2(float"):cpp.PRELUDE.index("ember_sin_poly")]
    got = sorted(float.fromhex(h) for h in re.findall(r"d \* (0x[0-9a-f.]+p-?[0-9]+)", body))
    assert got == want
