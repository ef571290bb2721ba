"""What a gradient hook returns must fit the gradient it replaces (shape, dtype, device).

Every place where a hook's return value replaces a gradient goes through one check
(``ember._hooks.check_hook_result``): tensor hooks on leaves and non-leaves, autograd-node hooks
and pre-hooks, post-accumulate-grad hooks, Module full backward hooks and pre-hooks. A hook that
returned a tensor of another shape was once accepted silently (``x.grad`` took the hook's shape).
``parity/test_hook_results_parity.py`` compares the same cases with PyTorch.
"""

import numpy as np
import pytest

import ember
from ember import nn


def _leaf():
    return ember.ones(2, requires_grad=True)


def _tensor_hook_on_leaf(replace):
    x = _leaf()
    x.register_hook(replace)
    (x * 2).sum().backward()
    return x


def _tensor_hook_on_nonleaf(replace):
    x = _leaf()
    y = x * 2
    y.register_hook(replace)
    y.sum().backward()
    return x


def _node_hook(replace):
    x = _leaf()
    y = x * 2
    y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: (replace(grad_inputs[0]), *grad_inputs[1:]))
    y.sum().backward()
    return x


def _node_prehook(replace):
    x = _leaf()
    y = x * 2
    y.grad_fn.register_prehook(lambda grad_outputs: (replace(grad_outputs[0]),))
    y.sum().backward()
    return x


def _module_hook(replace):
    m = nn.Linear(2, 2)
    m.register_full_backward_hook(lambda module, grad_input, grad_output: (replace(grad_input[0]),))
    x = _leaf()
    m(x).sum().backward()
    return x


def _module_prehook(replace):
    m = nn.Linear(2, 2)
    m.register_full_backward_pre_hook(lambda module, grad_output: (replace(grad_output[0]),))
    x = _leaf()
    m(x).sum().backward()
    return x


PLACES = {
    "tensor hook, leaf": _tensor_hook_on_leaf,
    "tensor hook, non-leaf": _tensor_hook_on_nonleaf,
    "node hook": _node_hook,
    "node pre-hook": _node_prehook,
    "module full backward hook": _module_hook,
    "module full backward pre-hook": _module_prehook,
}

BAD = {
    "bigger": (lambda g: ember.ones(3), RuntimeError, r"has changed the size of value \(was \[2\] got \[3\]\)"),
    "broadcastable": (lambda g: ember.ones(1), RuntimeError, r"has changed the size of value \(was \[2\] got \[1\]\)"),
    "float64": (lambda g: g.double(), RuntimeError,
                r"has changed the type of value \(was ember\.FloatTensor got ember\.DoubleTensor\)"),
    "int64": (lambda g: g.long(), RuntimeError,
              r"has changed the type of value \(was ember\.FloatTensor got ember\.LongTensor\)"),
    "meta device": (lambda g: ember.empty_like(g, device="meta"), RuntimeError,
                    r"has changed the type of value \(was ember\.FloatTensor got ember\.meta\.FloatTensor\)"),
    "a float": (lambda g: 3.0, TypeError, r"^expected Tensor, but hook '.*' returned 'float'$"),
    "a list": (lambda g: [g], TypeError, r"^expected Tensor, but hook '.*' returned 'list'$"),
}


@pytest.mark.parametrize("bad", sorted(BAD))
@pytest.mark.parametrize("place", sorted(PLACES))
def test_a_gradient_that_does_not_fit_is_refused(place, bad):
    replace, error, message = BAD[bad]
    with pytest.raises(error, match=message):
        PLACES[place](replace)


@pytest.mark.parametrize("place", sorted(PLACES))
def test_a_gradient_that_fits_replaces_the_original(place):
    # a non-contiguous tensor of the right shape, dtype and device is a valid replacement
    x = PLACES[place](lambda g: ember.full((2, 2), 5.0)[:, 0])
    assert x.grad is not None and tuple(x.grad.shape) == (2,)
    # the replacement is x's gradient itself (leaf hook, node hook on grad_inputs), or the gradient of
    # "x * 2" that flows back through it (non-leaf hook, node pre-hook on grad_outputs)
    expected = {"tensor hook, leaf": 5.0, "node hook": 5.0, "tensor hook, non-leaf": 10.0, "node pre-hook": 10.0}
    if place in expected:
        np.testing.assert_array_equal(x.grad.numpy(), [expected[place]] * 2)


def test_the_hook_is_named():
    def double_it(g):
        return g.double()

    with pytest.raises(RuntimeError, match=r"^hook 'double_it' has changed the type of value"):
        _tensor_hook_on_leaf(double_it)


def test_none_keeps_the_gradient():
    x = _tensor_hook_on_nonleaf(lambda g: None)
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


def test_node_hook_must_return_one_value_per_gradient():
    x = _leaf()
    y = x * 2
    y.grad_fn.register_prehook(lambda grad_outputs: (grad_outputs[0], grad_outputs[0]))
    with pytest.raises(RuntimeError, match=r"has returned an incorrect number of values \(got 2, but expected 1\)"):
        y.sum().backward()


def test_node_hook_cannot_fill_a_missing_gradient():
    a = ember.ones(2, requires_grad=True)
    b = ember.ones(2)  # needs no gradient: its slot in MulBackward0's grad_inputs is None
    y = a * b
    y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: (grad_inputs[0], ember.ones(2)))
    with pytest.raises(RuntimeError, match=r"can't replace a None gradient with a non-None value"):
        y.sum().backward()


def test_module_pre_hook_must_return_one_value_per_grad_output():
    m = nn.Linear(2, 2)
    m.register_full_backward_pre_hook(lambda module, grad_output: (grad_output[0], grad_output[0]))
    with pytest.raises(RuntimeError, match=r"Backward pre hook returned an invalid number of grad_output, got 2, "
                                           r"but expected 1"):
        m(_leaf()).sum().backward()


def test_module_hook_values_for_inputs_without_grad_are_dropped():
    class Mul(nn.Module):
        def forward(self, a, b):
            return a * b

    m = Mul()
    m.register_full_backward_hook(lambda module, grad_input, grad_output: (grad_input[0] * 3, ember.ones(5)))
    a = _leaf()
    m(a, ember.ones(2)).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [3.0, 3.0])


@pytest.mark.parametrize("value", [ember.ones(2), ember.ones(3), 3.0])
def test_post_accumulate_grad_hooks_must_return_none(value):
    x = _leaf()
    x.register_post_accumulate_grad_hook(lambda t: value)
    with pytest.raises(RuntimeError, match=r"Tensor post accumulate grad hooks should return None"):
        (x * 2).sum().backward()


def test_function_backward_on_another_device_is_refused():
    class Twice(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return ember.empty_like(g, device="meta")

    with pytest.raises(RuntimeError, match=r"TwiceBackward returned an invalid gradient at index 0 - expected device "
                                           r"cpu but got meta"):
        Twice.apply(_leaf()).sum().backward()
