"""ember.func and ember.autograd.functional against torch.func / torch.autograd.functional (values).

The same program runs on both libraries (``lib`` is ``ember`` or ``torch``) on the same float64
inputs; the results must agree.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.func

import ember
import ember.func


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal(5),
        "w": rng.standard_normal((4, 5)),
        "b": rng.standard_normal(4),
        "xs": rng.standard_normal((6, 5)),
        "ys": rng.standard_normal((6, 4)),
        "img": rng.standard_normal((3, 1, 6, 6)),
        "k": rng.standard_normal((2, 1, 3, 3)),
    }


def _both(program):
    """``program(lib, func, tensors)`` on ember and torch, converted to numpy (nested tuples/dicts kept)."""
    arrays = _inputs()
    results = []
    for lib, func in ((ember, ember.func), (torch, torch.func)):
        tensors = {k: lib.from_numpy(v.copy()) for k, v in arrays.items()}
        results.append(_to_numpy(program(lib, func, tensors)))
    return results


def _to_numpy(value):
    if isinstance(value, (tuple, list)):
        return [_to_numpy(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_numpy(v) for k, v in value.items()}
    return value.detach().numpy()


def _assert_same(ours, theirs):
    if isinstance(theirs, list):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _assert_same(a, b)
    elif isinstance(theirs, dict):
        assert set(ours) == set(theirs)
        for k in theirs:
            _assert_same(ours[k], theirs[k])
    else:
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=1e-7, atol=1e-9)


def _mlp(lib, t):
    def f(x):
        return lib.nn.functional.linear(x, t["w"], t["b"]).tanh().sin()

    return f


PROGRAMS = {
    "grad": lambda lib, func, t: func.grad(lambda x: (x.sin() * x).sum())(t["x"]),
    "grad_grad": lambda lib, func, t: func.grad(func.grad(lambda x: x.exp() * x.sin()))(t["x"][0]),
    "grad_argnums": lambda lib, func, t: func.grad(lambda w, b: _mlp(lib, {"w": w, "b": b})(t["x"]).sum(),
                                                   argnums=(0, 1))(t["w"], t["b"]),
    "grad_and_value_aux": lambda lib, func, t: func.grad_and_value(lambda x: ((x**2).sum(), x.mean()),
                                                                   has_aux=True)(t["x"]),
    "vjp": lambda lib, func, t: func.vjp(_mlp(lib, t), t["x"])[1](t["b"]),
    "jvp": lambda lib, func, t: func.jvp(_mlp(lib, t), (t["x"],), (t["x"].cos(),)),
    "jacrev": lambda lib, func, t: func.jacrev(_mlp(lib, t))(t["x"]),
    "jacfwd": lambda lib, func, t: func.jacfwd(_mlp(lib, t))(t["x"]),
    "hessian": lambda lib, func, t: func.hessian(lambda x: (x.sin() * x.exp()).sum() * x.sum())(t["x"]),
    "jacrev_jacrev": lambda lib, func, t: func.jacrev(func.jacrev(lambda x: x.tanh() * x.sum()))(t["x"]),
    "vmap": lambda lib, func, t: func.vmap(_mlp(lib, t))(t["xs"]),
    "vmap_in_dims": lambda lib, func, t: func.vmap(lambda a, b: a @ b, in_dims=(1, None))(t["xs"], t["ys"][:, 0]),
    "vmap_nested": lambda lib, func, t: func.vmap(func.vmap(lambda a, b: a * b + a.sum()), in_dims=(0, None))(
        t["xs"], t["x"]),
    "per_sample_grads": lambda lib, func, t: func.vmap(
        func.grad(lambda w, x, y: ((lib.nn.functional.linear(x, w).tanh() - y) ** 2).sum()),
        in_dims=(None, 0, 0))(t["w"], t["xs"], t["ys"]),
    "per_sample_conv_grads": lambda lib, func, t: func.vmap(
        func.grad(lambda k, x: lib.nn.functional.conv2d(x[None], k).relu().square().sum()),
        in_dims=(None, 0))(t["k"], t["img"]),
    "linearize": lambda lib, func, t: func.linearize(_mlp(lib, t), t["x"])[1](t["x"]),
    "functional_jacobian": lambda lib, func, t: lib.autograd.functional.jacobian(_mlp(lib, t), t["x"],
                                                                                 vectorize=True),
    "functional_hessian": lambda lib, func, t: lib.autograd.functional.hessian(
        lambda x: (x.sin() * x).sum() ** 2, t["x"]),
    "functional_hvp": lambda lib, func, t: lib.autograd.functional.hvp(
        lambda x: (x.sin() * x).sum() ** 2, t["x"], t["x"].cos()),
    "functional_jvp": lambda lib, func, t: lib.autograd.functional.jvp(_mlp(lib, t), t["x"], t["x"].cos()),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_func_values_match_torch(name):
    ours, theirs = _both(PROGRAMS[name])
    _assert_same(ours, theirs)


def test_forward_ad_matches_torch():
    arrays = _inputs()
    results = []
    for lib in (ember, torch):
        fwad = lib.autograd.forward_ad
        t = {k: lib.from_numpy(v.copy()) for k, v in arrays.items()}
        with fwad.dual_level():
            dual = fwad.make_dual(t["x"], t["x"].cos())
            out = _mlp(lib, t)(dual).softmax(0) * dual.amax()
            results.append([v.detach().numpy() for v in fwad.unpack_dual(out)])
    _assert_same(results[0], results[1])


def test_stack_module_state_ensembling_matches_torch():
    arrays = _inputs()
    results = []
    for lib, func in ((ember, ember.func), (torch, torch.func)):
        lib.manual_seed(0)
        models = [lib.nn.Linear(5, 4).double() for _ in range(3)]
        for i, m in enumerate(models):  # the same weights in both libraries
            m.weight.data = lib.from_numpy(arrays["w"].copy() * (i + 1))
            m.bias.data = lib.from_numpy(arrays["b"].copy() - i)
        params, buffers = func.stack_module_state(models)
        xs = lib.from_numpy(arrays["xs"].copy())
        out = func.vmap(lambda p, b, x: func.functional_call(models[0], (p, b), (x,)), in_dims=(0, 0, None))(
            params, buffers, xs)
        results.append(out.detach().numpy())
    _assert_same(results[0], results[1])
