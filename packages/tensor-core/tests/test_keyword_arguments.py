"""Every op takes its arguments by keyword, under the names of its signature, with the same result
as positionally: a kernel whose parameter names differ from its op's (``mm`` sharing
``matmul``'s kernel made ``ember.mm(a, mat2=b)`` a TypeError) fails here, and so does an argument
named ``self`` (``threshold_backward``'s second one, as in PyTorch's signature)."""

import inspect

import numpy as np
import pytest

import ember
from ember.testing import op_db

_BY_NAME = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
_UNINITIALIZED = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}  # values arbitrary


def _keyword_calls(info):
    """``(positional args, kwargs, keyword form)`` for up to 4 samples whose arguments can go by name."""
    dtype = ember.float64 if ember.float64 in info.dtypes else next(iter(info.dtypes))
    parameters = list(info.op._call_signature.parameters.values())
    calls = []
    for sample in info.sample_inputs(info, "cpu", dtype, False):
        args = (sample.input, *sample.args)
        named = parameters[1 : len(args)]
        if len(parameters) < len(args) or any(p.kind not in _BY_NAME for p in parameters[: len(args)]):
            continue
        calls.append((args, sample.kwargs, {p.name: a for p, a in zip(named, args[1:])} | sample.kwargs))
        if len(calls) == 4:
            break
    return calls


def _values(result):
    results = result if isinstance(result, (tuple, list)) else (result,)
    return [np.asarray(r.numpy()) if isinstance(r, ember.Tensor) else r for r in results]


OPS = sorted(name for name, info in op_db.items() if getattr(info.op, "_call_signature", None) is not None)


@pytest.mark.parametrize("name", OPS)
def test_arguments_by_keyword_equal_positional(name):
    info = op_db[name]
    calls = _keyword_calls(info)
    if not calls:
        pytest.skip(f"{name}: no sample whose arguments after the first can be passed by keyword")
    for args, kwargs, by_name in calls:
        ember.manual_seed(0)
        try:
            with ember.no_grad():
                expected = info.op(*args, **kwargs)
        except Exception as exc:  # a sample meant to fail must fail the same way by keyword
            with pytest.raises(type(exc)), ember.no_grad():
                info.op(args[0], **by_name)
            continue
        ember.manual_seed(0)
        with ember.no_grad():
            got = info.op(args[0], **by_name)
        for g, e in zip(_values(got), _values(expected), strict=True):
            if name in _UNINITIALIZED:
                assert (g.shape, g.dtype) == (e.shape, e.dtype)
            else:
                np.testing.assert_array_equal(g, e)
