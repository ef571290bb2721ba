"""The dispatcher's fast paths give what its general path gives (the table in ``ember._ops._dispatch``).

Every op_db sample runs twice: as a plain call (the positional scan, checked kernels, the
binary ops' plans) and inside :func:`~ember._ops._dispatch.fast_paths_disabled` (the general
scan, the meta function, the op's general kernel). The two must agree on the value (bit for
bit), dtype, shape, warnings, errors and the version counters of the arguments. Other ways
into the general path are compared too: ``alpha=1`` given as a keyword, ``out=``, a Tensor
subclass, the meta device. The named cases of issue 19 (float overflow, broadcasting) come
first.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
from ember._ops import _dispatch, registry
from ember._ops._binary_plan import BinaryRule, plans_disabled
from ember.testing import op_db

_F32_MAX = float(np.finfo(np.float32).max)


# -- the disagreements issue 19 found: float overflow and broadcasting are silent on every path -----------


def _overflow_operands():
    x = ember.tensor([_F32_MAX, 1.0, -_F32_MAX])
    column = ember.tensor([[_F32_MAX], [2.0]])  # broadcasts against x: (2, 3)
    return x, column


_OVERFLOW_CALLS = {
    "add(x, x)": lambda x, c: ember.add(x, x),
    "add(x, x, alpha=1)": lambda x, c: ember.add(x, x, alpha=1),
    "add(x, x, alpha=2)": lambda x, c: ember.add(x, x, alpha=2),
    "x + x": lambda x, c: x + x,
    "add(x, column)": lambda x, c: ember.add(x, c),
    "mul(x, column)": lambda x, c: ember.mul(x, c),
    "sub(x, -x)": lambda x, c: ember.sub(x, -x),
    "mul(x, 10.0)": lambda x, c: ember.mul(x, 10.0),
    "add(x, 3e38)": lambda x, c: ember.add(x, 3e38),
    "3e38 + x": lambda x, c: 3e38 + x,
    "add(x, x, out=)": lambda x, c: ember.add(x, x, out=ember.empty(3)),
    "x.add_(x)": lambda x, c: x.clone().add_(x),
    "mul(x.double(), column.double())": lambda x, c: ember.mul(x.double(), c.double()).float(),
}


@pytest.mark.parametrize("form", list(_OVERFLOW_CALLS))
def test_float_overflow_is_silent_in_every_form(form):
    x, column = _overflow_operands()
    call = _OVERFLOW_CALLS[form]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning("overflow encountered") fails the test
        result = call(x, column)
        with np.errstate(all="raise"):  # the user's numpy setting is not the kernels'
            again = call(x, column)
            assert np.geterr()["over"] == "raise"  # and it is left as the user set it
    values = result.numpy()
    assert np.isinf(values).any(), f"{form}: {values} has no inf: the case does not overflow"
    np.testing.assert_array_equal(again.numpy(), values)


def test_overflow_gives_the_same_bits_on_the_fast_and_general_paths():
    x, column = _overflow_operands()
    for form, call in _OVERFLOW_CALLS.items():
        fast = call(x, column).numpy()
        with _dispatch.fast_paths_disabled():
            general = call(x, column).numpy()
        assert fast.tobytes() == general.tobytes(), form


# -- the switch itself --------------------------------------------------------------------------------------


def test_fast_paths_disabled_takes_every_fast_path_away_and_gives_it_back():
    add = registry["add"]
    a, b = ember.ones(3), ember.ones(3)
    checked = dict(add.checked_kernels)
    assert "cpu" in checked and add.binary_rule.plan(a, b) is not None
    with _dispatch.fast_paths_disabled():
        assert add.checked_kernels == {}
        assert add.binary_rule.plan(a, b) is None
        assert add.binary_rule.direct(a, b) is None
        assert _dispatch.dispatch is not _dispatch._dispatch_fast
        np.testing.assert_array_equal(ember.add(a, b).numpy(), [2.0, 2.0, 2.0])
    assert add.checked_kernels == checked
    assert _dispatch.dispatch is _dispatch._dispatch_fast
    assert add.binary_rule.plan(a, b) is not None


def test_plans_are_cached_and_the_cache_is_bounded(monkeypatch):
    from ember._ops import _binary_plan

    monkeypatch.setattr(_binary_plan, "CACHE_LIMIT", 4)
    rule = BinaryRule(np.add, direct={np.dtype(np.float32)})
    a = ember.ones(2, 3)
    first = rule.plan(a, ember.ones(3))
    assert rule.plan(a, ember.ones(3)) is first  # one plan per (dtypes, shapes)
    assert first.shape == (2, 3) and first.dtype == np.float32 and first.direct
    for n in range(1, 10):
        rule.plan(ember.ones(n, 1), ember.ones(4))
    assert len(rule._plans) <= 4


@pytest.mark.parametrize(
    "input, other, expected",
    [
        (ember.ones(3), ember.ones(3, dtype=ember.float64), None),  # promotion
        (ember.ones(3), ember.ones(4), None),  # shapes that don't broadcast: meta raises
        (ember.ones(()), ember.ones(()), None),  # two zero-dim tensors: numpy gives a scalar
        (ember.ones(3, dtype=ember.int64), 2.5, None),  # the number promotes
        (ember.ones(3), 2**60, "not direct"),  # an int float64 can't hold: no cast-free call
        (ember.ones(3, dtype=ember.float16), 2.0, "direct"),
        (2.0, ember.ones(3), "direct"),
    ],
)
def test_which_calls_get_a_plan(input, other, expected):
    rule = registry["mul"].binary_rule
    plan = rule.plan(input, other)
    if expected is None:
        assert plan is None and rule.direct(input, other) is None
    else:
        assert plan is not None and plan.direct
        assert (rule.direct(input, other) is not None) == (expected == "direct")


def test_sub_of_bools_takes_the_general_path_that_refuses_it():
    t = ember.tensor([True, False])
    assert registry["sub"].binary_rule.plan(t, t) is None
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool tensors"):
        ember.sub(t, t)


# -- op_db: the plain call against the general path ----------------------------------------------------------

_DTYPES = (ember.float32, ember.float16, ember.int64, ember.bool, ember.complex64)
_OPS = sorted(n for n in op_db if "random" not in op_db[n].op.tags)


def _samples(info, dtype):
    return list(info.sample_inputs(info, "cpu", dtype, False))


def _tensors(value):
    if isinstance(value, ember.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return _tensors(list(value.values()))
    return []


def _outcome(call, sample):
    """What a call did: its results (bytes, dtype, shape), warnings, error, and the arguments' versions."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = call()
        except Exception as exc:  # noqa: BLE001 - the error is part of what is compared
            result = exc
    if isinstance(result, Exception):
        value = ("error", type(result), str(result))
    else:
        value = ("ok", _describe(result))
    seen = [(w.category, str(w.message)) for w in caught]
    versions = [t._version for t in _tensors((sample.input, sample.args, sample.kwargs))]
    return value, seen, versions


def _describe(result):
    if isinstance(result, ember.Tensor):
        array = np.ascontiguousarray(result._host_array())
        return ("tensor", result.dtype, tuple(result.shape), array.tobytes())
    if isinstance(result, (tuple, list)):
        return tuple(_describe(r) for r in result)
    return result


def _compare(info, dtype, call_fast, call_general):
    """Run both calls on fresh samples (the sample functions are seeded) and compare everything."""
    fast_samples, general_samples = _samples(info, dtype), _samples(info, dtype)
    for fast_sample, general_sample in zip(fast_samples, general_samples):
        fast = _outcome(lambda: call_fast(fast_sample), fast_sample)
        with _dispatch.fast_paths_disabled():
            general = _outcome(lambda: call_general(general_sample), general_sample)
        assert fast == general, f"{info.name} {dtype}: {fast_sample}"
    return len(fast_samples)


@pytest.mark.parametrize("name", _OPS)
def test_op_db_samples_take_the_same_path_results(name):
    info = op_db[name]
    op = info.op
    count = 0
    for dtype in (d for d in _DTYPES if d in info.dtypes):
        count += _compare(info, dtype, lambda s: s.call(op), lambda s: s.call(op))
        if op.inplace is not None and name not in _INPLACE_SELF_ELSEWHERE:
            count += _compare(info, dtype, lambda s: _call_inplace(op, s), lambda s: _call_inplace(op, s))
    assert count > 0 or not any(d in info.dtypes for d in _DTYPES) or name in ("arange", "linspace")


# ops whose in-place form writes into another argument than the sample's input (op_db's skips say so)
_INPLACE_SELF_ELSEWHERE = ("polygamma", "where")


def _call_inplace(op, sample):
    if not isinstance(sample.input, ember.Tensor):
        return None
    return op.inplace(sample.input, *sample.args, **sample.kwargs)


# -- other ways into the general path: keywords, out=, a subclass, the meta device ----------------------------

_BINARY = sorted(n for n in _OPS if getattr(registry[n], "binary_rule", None) is not None)


@pytest.mark.parametrize("name", ["add", "sub"])
def test_alpha_one_as_a_keyword_gives_the_plain_calls_result(name):
    info = op_db[name]
    op = info.op
    for dtype in (d for d in _DTYPES if d in info.dtypes):
        plain = [s for s in _samples(info, dtype) if not s.kwargs]
        keyword = [s for s in _samples(info, dtype) if not s.kwargs]
        for p, k in zip(plain, keyword):
            fast = _outcome(lambda: p.call(op), p)
            general = _outcome(lambda: op(k.input, *k.args, alpha=1), k)
            assert fast == general, f"{name} {dtype}: {p}"


@pytest.mark.parametrize("name", _BINARY)
def test_out_gives_the_plain_calls_result(name):
    info = op_db[name]
    op = info.op
    for dtype in (d for d in _DTYPES if d in info.dtypes):
        for sample in _samples(info, dtype):
            try:
                expected = sample.call(op)
            except Exception:  # noqa: BLE001 - error samples are compared by the op_db test above
                continue
            out = ember.empty(0, dtype=expected.dtype)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                assert op(sample.input, *sample.args, **sample.kwargs, out=out) is out
            assert _describe(out) == _describe(expected), f"{name} {dtype}: {sample}"


class _Subclass(ember.Tensor):
    """A Tensor subclass with the default ``__ember_function__``: its calls take the general scan."""


@pytest.mark.parametrize("name", _BINARY)
def test_a_tensor_subclass_gives_the_plain_calls_result(name):
    info = op_db[name]
    op = info.op
    for dtype in (d for d in _DTYPES if d in info.dtypes):
        for sample in _samples(info, dtype):
            fast = _outcome(lambda: sample.call(op), sample)

            def as_subclass(v):
                return v.as_subclass(_Subclass) if isinstance(v, ember.Tensor) else v

            sub_args = tuple(as_subclass(a) for a in sample.args)
            general = _outcome(lambda: op(as_subclass(sample.input), *sub_args, **sample.kwargs), sample)
            assert general[0][0] == fast[0][0], f"{name} {dtype}: {sample}"
            if fast[0][0] == "ok":
                assert general[0][1][1:] == fast[0][1][1:], f"{name} {dtype}: {sample}"  # all but the type tag
            assert general[1] == fast[1]


@pytest.mark.parametrize("name", _BINARY)
def test_meta_gives_the_real_calls_dtype_and_shape(name):
    info = op_db[name]
    op = info.op

    def to_meta(v):
        return v.to("meta") if isinstance(v, ember.Tensor) else v

    for dtype in (d for d in _DTYPES if d in info.dtypes):
        for sample in _samples(info, dtype):
            try:
                real = sample.call(op)
            except Exception as exc:  # noqa: BLE001 - the meta device must raise the same
                with pytest.raises(type(exc)):
                    op(to_meta(sample.input), *map(to_meta, sample.args), **sample.kwargs)
                continue
            meta = op(to_meta(sample.input), *map(to_meta, sample.args), **sample.kwargs)
            assert (meta.dtype, tuple(meta.shape)) == (real.dtype, tuple(real.shape)), f"{name}: {sample}"
            with plans_disabled():
                general = op(to_meta(sample.input), *map(to_meta, sample.args), **sample.kwargs)
            assert (general.dtype, tuple(general.shape)) == (meta.dtype, tuple(meta.shape)), f"{name}: {sample}"
