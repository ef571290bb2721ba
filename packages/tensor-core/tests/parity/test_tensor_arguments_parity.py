"""Lists where ops take tensors: PyTorch refuses the same calls that ember refuses (``test_tensor_arguments.py``).

For every op of ``op_db`` with a PyTorch counterpart, each tensor argument of its samples is replaced by
its ``tolist()``. Where PyTorch refuses the call, ember must raise TypeError; PyTorch's own Python-level
functions (``torch.nn.functional``) fail there with AttributeError, which ember improves on. Where PyTorch
takes the list (``ctc_loss``'s lengths), ember must take it too.
"""

import warnings

import pytest

torch = pytest.importorskip("torch")

import ember  # noqa: E402
from ember.testing import op_db  # noqa: E402
from ember.testing._torch_oracle import to_torch, torch_counterpart  # noqa: E402

#: ctc_loss takes its lengths as tensors or as lists; PyTorch refuses one of each, ember takes them.
_MIXED_LENGTHS = {("ctc_loss", "argument 3"), ("ctc_loss", "argument 4")}

_WITH_TORCH = sorted(name for name, info in op_db.items() if torch_counterpart(info)[0] is not None)


def _outcome(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the type is what the test compares
            return type(exc)
    return None


def _listed(sample):
    values = [sample.input, *sample.args]
    for i, value in enumerate(values):
        if isinstance(value, ember.Tensor) and value.ndim > 0:
            replaced = list(values)
            replaced[i] = value.tolist()
            yield f"argument {i + 1}", replaced, dict(sample.kwargs)
    for key, value in sample.kwargs.items():
        if isinstance(value, ember.Tensor) and value.ndim > 0:
            yield key, values, {**sample.kwargs, key: value.tolist()}


@pytest.mark.parametrize("name", _WITH_TORCH)
def test_lists_refused_where_pytorch_refuses_them(name):
    info = op_db[name]
    torch_fn = torch_counterpart(info)[0]
    dtype = ember.float32 if ember.float32 in info.dtypes else info.dtypes[0]
    for sample in list(info.sample_inputs(info, "cpu", dtype, False))[:6]:
        for where, args, kwargs in _listed(sample):
            expected = _outcome(torch_fn, *to_torch(tuple(args)), **to_torch(kwargs))
            got = _outcome(info.op, *args, **kwargs)
            if expected is None:
                assert got is None, f"{where}: PyTorch takes the list, ember raised {got.__name__}"
            elif got is not None or (name, where) not in _MIXED_LENGTHS:
                assert got is TypeError, f"{where}: PyTorch raised {expected.__name__}, ember {got}"

