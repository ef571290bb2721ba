"""Hooks that return a gradient which does not fit: the same error type and leading words as PyTorch.

The cases of ``test_hook_results.py``, run on both libraries through one program written against
either (``lib`` is ``torch`` or ``ember``).
"""

import re

import pytest

torch = pytest.importorskip("torch")

import ember  # noqa: E402


def _leaf(lib):
    return lib.ones(2, requires_grad=True)


def _tensor_hook_on_leaf(lib, replace):
    x = _leaf(lib)
    x.register_hook(replace)
    (x * 2).sum().backward()


def _tensor_hook_on_nonleaf(lib, replace):
    x = _leaf(lib)
    y = x * 2
    y.register_hook(replace)
    y.sum().backward()


def _node_hook(lib, replace):
    y = _leaf(lib) * 2
    y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: (replace(grad_inputs[0]), *grad_inputs[1:]))
    y.sum().backward()


def _node_prehook(lib, replace):
    y = _leaf(lib) * 2
    y.grad_fn.register_prehook(lambda grad_outputs: (replace(grad_outputs[0]),))
    y.sum().backward()


def _module_hook(lib, replace):
    m = lib.nn.Linear(2, 2)
    m.register_full_backward_hook(lambda module, grad_input, grad_output: (replace(grad_input[0]),))
    m(_leaf(lib)).sum().backward()


def _module_prehook(lib, replace):
    m = lib.nn.Linear(2, 2)
    m.register_full_backward_pre_hook(lambda module, grad_output: (replace(grad_output[0]),))
    m(_leaf(lib)).sum().backward()


PLACES = {
    "tensor hook, leaf": _tensor_hook_on_leaf,
    "tensor hook, non-leaf": _tensor_hook_on_nonleaf,
    "node hook": _node_hook,
    "node pre-hook": _node_prehook,
    "module full backward hook": _module_hook,
    "module full backward pre-hook": _module_prehook,
}

BAD = {
    "bigger": lambda lib: lambda g: lib.ones(3),
    "broadcastable": lambda lib: lambda g: lib.ones(1),
    "float64": lambda lib: lambda g: g.double(),
    "int64": lambda lib: lambda g: g.long(),
    "meta device": lambda lib: lambda g: lib.empty_like(g, device="meta"),
    "a float": lambda lib: lambda g: 3.0,
    "a list": lambda lib: lambda g: [g],
}


def _error(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the type and message are what the test compares
        return exc
    return None


def _gist(exc):
    """The message up to its first parenthesis, without the hook's name (PyTorch's wrappers rename module hooks)."""
    return re.sub(r"hook '[^']*'", "hook", str(exc).split(" (")[0]).replace("Variable", "Tensor")


@pytest.mark.parametrize("bad", sorted(BAD))
@pytest.mark.parametrize("place", sorted(PLACES))
def test_refused_as_in_pytorch(place, bad):
    expected = _error(lambda: PLACES[place](torch, BAD[bad](torch)))
    got = _error(lambda: PLACES[place](ember, BAD[bad](ember)))
    assert expected is not None, "PyTorch accepted it"
    assert type(got) is type(expected), f"PyTorch: {expected!r}; ember: {got!r}"
    if isinstance(expected, RuntimeError):
        # "hook 'h' has changed the size of value" / "... the type of value (was torch.FloatTensor got ...)"
        assert _gist(got) == _gist(expected)
        if "type of value" in str(expected):
            assert str(got).split("(was ")[1] == str(expected).split("(was ")[1].replace("torch", "ember").replace(
                "MetaFloatType", "ember.meta.FloatTensor")


@pytest.mark.parametrize("place", sorted(PLACES))
def test_a_fitting_replacement_gives_pytorch_gradients(place):
    grads = {}
    for lib in (torch, ember):
        x = _leaf(lib)

        def replace(g):
            return g * 3 + 1

        # the same program as PLACES[place], with the leaf kept to read its gradient
        if place == "tensor hook, leaf":
            x.register_hook(replace)
            (x * 2).sum().backward()
        elif place == "tensor hook, non-leaf":
            y = x * 2
            y.register_hook(replace)
            y.sum().backward()
        elif place == "node hook":
            y = x * 2
            y.grad_fn.register_hook(lambda gi, go: (replace(gi[0]), *gi[1:]))
            y.sum().backward()
        elif place == "node pre-hook":
            y = x * 2
            y.grad_fn.register_prehook(lambda go: (replace(go[0]),))
            y.sum().backward()
        else:
            m = lib.nn.Linear(2, 2)
            with lib.no_grad():
                m.weight.copy_(lib.tensor([[1.0, 2.0], [3.0, 4.0]]))
            if place == "module full backward hook":
                m.register_full_backward_hook(lambda mod, gi, go: (replace(gi[0]),))
            else:
                m.register_full_backward_pre_hook(lambda mod, go: (replace(go[0]),))
            m(x).sum().backward()
        grads[lib.__name__] = x.grad.tolist()
    assert grads["ember"] == pytest.approx(grads["torch"])
