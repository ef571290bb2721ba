"""Printing parity: ``repr`` of an ember tensor equals PyTorch's for the same values.

PyTorch is the oracle here: both libraries print the same array (and the same
print options), and the texts must agree character for character once
``torch.`` is spelled ``ember.``. Inputs come from a fixed set of seeded
random arrays and from hypothesis (shapes up to 3-D, magnitudes from
subnormal to huge, nan/inf/negative zero, every printed dtype family).
"""

import contextlib

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

import ember  # noqa: E402
from ember._printing import printoptions  # noqa: E402

pytestmark = pytest.mark.parity

DTYPES = {
    "float32": np.float32,
    "float64": np.float64,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "int64": np.int64,
    "int32": np.int32,
    "uint8": np.uint8,
    "bool": np.bool_,
    "complex64": np.complex64,
    "complex128": np.complex128,
}


def _torch_tensor(array):
    """The same values as a PyTorch tensor (bfloat16 through float32, which is exact)."""
    if array.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(np.asarray(array, dtype=np.float32)).to(torch.bfloat16)
    return torch.from_numpy(np.array(array, copy=True))


def _ember_tensor(array):
    return ember.from_numpy(np.array(array, copy=True))


@contextlib.contextmanager
def _both_printoptions(options):
    with printoptions(**options), torch._tensor_str.printoptions(**options):
        yield


def assert_same_repr(array, options=None, requires_grad=False):
    """repr of ember and PyTorch tensors holding ``array`` agree (under ``options``)."""
    options = options or {}
    ours = _ember_tensor(array)
    theirs = _torch_tensor(array)
    if requires_grad:
        ours.requires_grad_(True)
        theirs.requires_grad_(True)
    with _both_printoptions(options):
        expected = repr(theirs).replace("torch.", "ember.")
        actual = repr(ours)
    assert actual == expected, f"options={options}\nPyTorch:\n{expected}\nember:\n{actual}"


@pytest.fixture(autouse=True)
def _default_options():
    """Each test starts from the default options in both libraries, and restores them after."""
    with _both_printoptions({"profile": "default"}):
        yield


# -- a fixed set of seeded random arrays ------------------------------------------------


def _seeded_arrays():
    rng = np.random.default_rng(20240601)
    shapes = [(), (1,), (5,), (17,), (40,), (3, 4), (2, 3, 4), (1, 1, 9), (7, 0), (6, 30), (1001,), (12, 10, 10)]
    cases = []
    for shape in shapes:
        for scale in (1e-9, 1e-3, 1.0, 123.456, 1e6, 1e12):
            normal = rng.standard_normal(shape)
            cases.append((f"f32-{shape}-{scale:g}", (normal * scale).astype(np.float32)))
            cases.append((f"f64-{shape}-{scale:g}", (normal * scale).astype(np.float64)))
            cases.append((f"c64-{shape}-{scale:g}", (normal * scale + 1j * rng.standard_normal(shape)).astype(np.complex64)))
        cases.append((f"ints-{shape}", rng.integers(-(10**6), 10**6, size=shape)))
        cases.append((f"round-{shape}", np.round(rng.standard_normal(shape) * 100).astype(np.float32)))
        cases.append((f"bool-{shape}", rng.random(shape) > 0.5))
        cases.append((f"f16-{shape}", (rng.standard_normal(shape) * 50).astype(np.float16)))
        cases.append((f"bf16-{shape}", (rng.standard_normal(shape) * 50).astype(ml_dtypes.bfloat16)))
        spread = rng.standard_normal(shape) * 10.0 ** rng.uniform(-8, 8, size=shape)
        cases.append((f"spread-{shape}", spread.astype(np.float32)))
        special = (rng.standard_normal(shape) * 3).astype(np.float32)
        if special.size:
            flat = special.reshape(-1)
            picks = rng.integers(0, flat.size, size=max(1, flat.size // 4))
            flat[picks] = rng.choice(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], dtype=np.float32), size=picks.size)
        cases.append((f"special-{shape}", special))
    return cases


SEEDED = _seeded_arrays()


@pytest.mark.parametrize("array", [a for _, a in SEEDED], ids=[name for name, _ in SEEDED])
def test_seeded_arrays(array):
    assert_same_repr(array)


OPTION_SETS = [
    {"precision": 2},
    {"precision": 0},
    {"precision": 7, "linewidth": 120},
    {"threshold": 10},
    {"threshold": 10, "edgeitems": 1},
    {"threshold": 10, "edgeitems": 0},
    {"edgeitems": 0},
    {"linewidth": 30},
    {"linewidth": 1},
    {"sci_mode": True},
    {"sci_mode": False},
    {"profile": "short"},
    {"profile": "full"},
]


@pytest.mark.parametrize("options", OPTION_SETS, ids=[str(o) for o in OPTION_SETS])
@pytest.mark.parametrize(
    "name", ["f32-(2, 3, 4)-1", "f64-(6, 30)-123.456", "c64-(40,)-1e-09", "ints-(12, 10, 10)", "special-(6, 30)", "bool-(17,)"]
)
def test_seeded_arrays_with_options(name, options):
    array = dict(SEEDED)[name]
    assert_same_repr(array, options)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64"])
def test_requires_grad(dtype):
    array = (np.arange(30).reshape(3, 10) / 7).astype(DTYPES[dtype])
    assert_same_repr(array, requires_grad=True)


def test_default_dtype_float64():
    arrays = [np.array([1.5, 2.0], np.float32), np.array([1.5, 2.0]), np.array([1j]), np.array([1j], np.complex64)]
    old_ember, old_torch = ember.get_default_dtype(), torch.get_default_dtype()
    ember.set_default_dtype(ember.float64)
    torch.set_default_dtype(torch.float64)
    try:
        for array in arrays:
            assert_same_repr(array)
    finally:
        ember.set_default_dtype(old_ember)
        torch.set_default_dtype(old_torch)


@pytest.mark.parametrize(
    ("shape", "dtype"), [((2, 3), "float32"), ((4,), "int64"), ((), "float64"), ((0, 5), "bool"), ((3, 1), "complex64")]
)
def test_meta(shape, dtype):
    ours = ember.empty(shape, dtype=getattr(ember, dtype), device="meta")
    theirs = torch.empty(shape, dtype=getattr(torch, dtype), device="meta")
    assert repr(ours) == repr(theirs).replace("torch.", "ember.")


# -- hypothesis ---------------------------------------------------------------------------

shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=8)


@st.composite
def arrays(draw):
    """An array of any printed dtype family, with values of widely varied magnitude."""
    name = draw(st.sampled_from(sorted(DTYPES)))
    dtype = DTYPES[name]
    shape = draw(shapes)
    if name in ("float16", "float32", "float64", "bfloat16"):
        width = {"float16": 16, "float32": 32, "float64": 64, "bfloat16": 32}[name]
        scale = draw(st.sampled_from([1e-30, 1e-9, 1e-4, 1e-2, 1.0, 1e3, 1e7, 1e9, 1e20]))
        style = draw(st.sampled_from(["any", "scaled", "whole"]))
        if style == "any":
            elements = st.floats(width=width, allow_nan=True, allow_infinity=True)
        elif style == "scaled":
            elements = st.floats(-10, 10, width=64).map(lambda v: v * scale)
        else:
            elements = st.integers(-5000, 5000).map(float)
        values = draw(hnp.arrays(np.float64 if width == 64 or name == "bfloat16" else np.float32, shape, elements=elements))
        with np.errstate(over="ignore"):
            return values.astype(dtype)
    if name.startswith("complex"):
        width = 64 if name == "complex64" else 128
        elements = st.complex_numbers(width=width, allow_nan=True, allow_infinity=True) | st.builds(
            complex, st.integers(-99, 99), st.integers(-99, 99)
        )
        return draw(hnp.arrays(dtype, shape, elements=elements))
    if name == "bool":
        return draw(hnp.arrays(dtype, shape))
    info = np.iinfo(dtype)
    bound = draw(st.sampled_from([9, 1000, int(info.max)]))
    return draw(hnp.arrays(dtype, shape, elements=st.integers(max(int(info.min), -bound), min(int(info.max), bound))))


options = st.fixed_dictionaries(
    {},
    optional={
        "precision": st.integers(0, 8),
        "threshold": st.integers(1, 60),
        "edgeitems": st.integers(0, 4),
        "linewidth": st.integers(1, 160),
        "sci_mode": st.booleans(),
        "profile": st.sampled_from(["default", "short", "full"]),
    },
)

HYPOTHESIS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@HYPOTHESIS
@given(arrays())
def test_hypothesis_default_options(array):
    assert_same_repr(array)


@HYPOTHESIS
@given(arrays(), options, st.booleans())
def test_hypothesis_with_options(array, opts, requires_grad):
    differentiable = array.dtype.kind in "fc" or array.dtype == ml_dtypes.bfloat16
    requires_grad = requires_grad and differentiable
    assert_same_repr(array, opts, requires_grad=requires_grad)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    st.sampled_from([np.float32, np.float64, np.int64, np.complex64, np.bool_]),
    st.sampled_from([(1001,), (1200,), (35, 31), (11, 10, 10), (3, 400)]),
    st.integers(0, 2**32 - 1),
)
def test_hypothesis_summarised(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape) * 10.0 ** rng.uniform(-6, 6)
    if np.dtype(dtype).kind == "c":
        values = values + 1j * rng.standard_normal(shape)
    array = values.astype(dtype) if np.dtype(dtype).kind != "b" else values > 0
    assert_same_repr(array)
