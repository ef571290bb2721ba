"""A Python list or tuple where an op takes a tensor raises PyTorch's TypeError, naming the argument.

Thirty-odd ops once failed inside their meta functions with "'list' object has no attribute '_data'",
and the checked pointwise kernels took a list for an array (``ember.add([1, 2], t)`` worked; PyTorch
refuses it). The dispatcher now refuses a list or tuple given for a tensor parameter
(``ember._ops._registry.TENSOR_PARAMETERS``) before any meta function or kernel runs, on every path (the hot
loop's plain sequences, keywords, lists holding tensors). These tests are the probe that found the
failures, kept: every sample of every op in ``op_db`` with each tensor argument replaced by its
``tolist()``. ``parity/test_tensor_arguments_parity.py`` checks that PyTorch refuses the same calls.
"""

import inspect
import warnings

import pytest

import ember
from ember._ops import registry
from ember._ops._registry import TENSOR_PARAMETERS
from ember.testing import op_db

#: (op, parameter) pairs that take a list as well as a tensor, as in PyTorch.
LISTS_ACCEPTED = {("ctc_loss", "input_lengths"), ("ctc_loss", "target_lengths")}


def _listed_samples(info):
    """``(parameter name, call arguments)`` for each tensor argument (with dims) of each sample, replaced
    by its values as nested lists."""
    dtype = ember.float32 if ember.float32 in info.dtypes else info.dtypes[0]
    names = [p.name for p in info.op._call_signature.parameters.values()]
    for sample in list(info.sample_inputs(info, "cpu", dtype, False))[:6]:
        values = [sample.input, *sample.args]
        for i, value in enumerate(values):
            if isinstance(value, ember.Tensor) and value.ndim > 0 and i < len(names):
                replaced = list(values)
                replaced[i] = value.tolist()
                yield names[i], f"position {i + 1}", replaced, dict(sample.kwargs)
        for key, value in sample.kwargs.items():
            if isinstance(value, ember.Tensor) and value.ndim > 0:
                yield key, "keyword", values, {**sample.kwargs, key: value.tolist()}


@pytest.mark.parametrize("name", sorted(op_db))
def test_lists_for_tensors_raise_type_error(name):
    info = op_db[name]
    tensor_parameters = {n for _, n in info.op.tensor_parameters}
    for parameter, where, args, kwargs in _listed_samples(info):
        if (name, parameter) in LISTS_ACCEPTED:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated overloads some samples call on purpose
            with pytest.raises(TypeError) as caught:
                info.op(*args, **kwargs)
        if parameter in tensor_parameters:
            position = "" if where == "keyword" else f" ({where})"
            assert str(caught.value) == f"{name}(): argument '{parameter}'{position} must be Tensor, not list", where


def test_every_tensor_parameter_of_the_registry_is_checked():
    """The registry-wide probe: each required positional parameter of every op given a nested list."""
    x = ember.ones(2, 2)
    listed = [[1.0, 2.0], [3.0, 4.0]]
    failures = []
    for name, op in registry.items():
        parameters = [p for p in op._call_signature.parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is inspect.Parameter.empty]
        for i, parameter in enumerate(parameters):
            args = [x] * len(parameters)
            args[i] = listed
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    op(*args)
            except TypeError:
                continue
            except Exception as exc:  # noqa: BLE001 - any other error is what this test looks for
                if isinstance(exc, AttributeError) or parameter.name in TENSOR_PARAMETERS:
                    failures.append(f"{name}({parameter.name}=list): {type(exc).__name__}: {exc}")
                continue
            if parameter.name in TENSOR_PARAMETERS:
                failures.append(f"{name}({parameter.name}=list) was accepted")
    assert not failures, "\n".join(failures)


def test_numbers_for_tensors_name_the_argument():
    """The same probe with a Python number: ops that take numbers there still do (``ember.add(t, 2)``); the
    others raise TypeError naming the argument, never an AttributeError from inside a meta function."""
    x = ember.ones(2, 2)
    failures = []
    for name, op in registry.items():
        parameters = [p for p in op._call_signature.parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is inspect.Parameter.empty]
        for i, parameter in enumerate(parameters):
            args = [x] * len(parameters)
            args[i] = 3.0
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    op(*args)
            except AttributeError as exc:
                failures.append(f"{name}({parameter.name}=3.0): {exc}")
            except TypeError as exc:
                if "object has no attribute" in str(exc):
                    failures.append(f"{name}({parameter.name}=3.0): {exc}")
            except Exception:  # noqa: BLE001, S112 - other errors (a number of the wrong kind) are the op's own
                continue
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda t: ember.add([1.0, 2.0], t), "add(): argument 'input' (position 1) must be Tensor, not list"),
        (lambda t: ember.add(t, (1.0, 2.0)), "add(): argument 'other' (position 2) must be Tensor, not tuple"),
        (lambda t: ember.add(t, other=[1.0, 2.0]), "add(): argument 'other' must be Tensor, not list"),
        (lambda t: t.mul([1.0, 2.0]), "mul(): argument 'other' (position 2) must be Tensor, not list"),
        (lambda t: ember.clone([1.0, 2.0]), "clone(): argument 'input' (position 1) must be Tensor, not list"),
        (lambda t: ember.sum([[1.0], [t]]), "sum(): argument 'input' (position 1) must be Tensor, not list"),
        (lambda t: ember.where(t > 0, [1.0, 2.0], t), "where(): argument 'input' (position 2) must be Tensor, not list"),
        (lambda t: ember.nn.functional.linear(t, ember.ones(2, 2), bias=[1.0, 2.0]),
         "linear(): argument 'bias' must be Tensor, not list"),
        (lambda t: ember.reshape([1.0, 2.0], (2,)), "reshape(): argument 'input' (position 1) must be Tensor, not list"),
        (lambda t: ember.numel([1.0, 2.0]), "numel(): argument 'input' (position 1) must be Tensor, not list"),
        (lambda t: ember.clone(3.0), "clone(): argument 'input' (position 1) must be Tensor, not float"),
        (lambda t: ember.transpose(2, 0, 1), "transpose(): argument 'input' (position 1) must be Tensor, not int"),
        (lambda t: ember.complex(1.0, t), "complex(): argument 'real' (position 1) must be Tensor, not float"),
        (lambda t: ember.reshape(3.0, (1,)), "reshape(): argument 'input' (position 1) must be Tensor, not float"),
        (lambda t: ember.is_complex([1.0]), "is_complex(): argument 'input' (position 1) must be Tensor, not list"),
        (lambda t: ember.is_floating_point([1.0]),
         "is_floating_point(): argument 'input' (position 1) must be Tensor, not list"),
    ],
)
def test_messages_name_the_argument(call, message):
    with pytest.raises(TypeError) as caught:
        call(ember.ones(2))
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda g: ember.complex(1.0, g), "complex(): argument 'real' (position 1) must be Tensor, not float"),
        (lambda g: ember.Tensor.view_as(3.0, g), "view_as(): argument 'input' (position 1) must be Tensor, not float"),
        (lambda g: ember.add([1.0, 2.0], g), "add(): argument 'input' (position 1) must be Tensor, not list"),
    ],
)
def test_the_autograd_path_names_the_argument_too(call, message):
    pytest.importorskip("ember.autograd")
    with pytest.raises(TypeError) as caught:
        call(ember.ones(2, requires_grad=True))
    assert str(caught.value) == message


def test_numbers_still_work_where_ops_take_them():
    x = ember.tensor([1.0, 2.0])
    assert ember.add(2, x).tolist() == [3.0, 4.0]
    assert ember.pow(2, x).tolist() == [2.0, 4.0]
    assert ember.where(x > 1, 1.0, 0.0).tolist() == [0.0, 1.0]
    assert ember.lerp(x, ember.zeros(2), 0.5).tolist() == [0.5, 1.0]


def test_sequences_that_are_not_tensors_still_work():
    x = ember.arange(6.0).reshape(2, 3)
    assert x.permute((1, 0)).shape == (3, 2)
    assert ember.sum(x, (0, 1)).item() == 15.0
    assert ember.nn.functional.pad(x, (1, 1)).shape == (2, 5)
    assert ember.cat([x, x]).shape == (4, 3)
    assert ember.index_put(x, (ember.tensor([0]),), ember.tensor(9.0))[0, 0].item() == 9.0
    lengths = ember.nn.functional.ctc_loss(ember.zeros(3, 1, 2).log_softmax(2), ember.tensor([[1]]), [3], [1])
    assert lengths.ndim == 0
