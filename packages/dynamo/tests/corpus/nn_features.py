"""nn.Module features: ModuleList/ModuleDict/Sequential iteration, buffers, ``training``, hooks, parameters
used directly, submodule attributes, ``F`` calls on module weights, shared modules."""

from __future__ import annotations

import ember
import ember.nn as nn
import ember.nn.functional as F

from ._entry import Theme

theme = Theme("nn_features")


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x) if i % 2 == 0 else F.relu(layer(x))
        return x


@theme.module(lambda g: g.randn(2, 4), trains=True)
def module_list_loop():
    return Stack()


class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"cls": nn.Linear(4, 3), "reg": nn.Linear(4, 1)})

    def forward(self, x):
        return {name: head(x) for name, head in self.heads.items()}


@theme.module(lambda g: g.randn(2, 4), trains=True)
def module_dict_heads():
    return Heads()


@theme.module(lambda g: g.randn(3, 4), trains=True)
def sequential_mlp():
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))


class RunningMean(nn.Module):
    """Updates a buffer in training mode (an in-place write to module state)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", ember.zeros(4))
        self.register_buffer("steps", ember.tensor(0))

    def forward(self, x):
        if self.training:
            self.mean.mul_(0.9).add_(x.mean(0) * 0.1)
            self.steps += 1
        return x - self.mean


@theme.module(lambda g: g.randn(3, 4))
def buffer_update_in_training():
    return RunningMean()


@theme.module(lambda g: g.randn(3, 4))
def buffer_read_in_eval():
    return RunningMean().eval()


class DirectParameter(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(ember.randn(4, 2) * 0.1)
        self.scale = nn.Parameter(ember.ones(1))

    def forward(self, x):
        return (x @ self.weight) * self.scale


@theme.module(lambda g: g.randn(3, 4), trains=True)
def parameter_used_directly():
    return DirectParameter()


class Shared(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Linear(3, 3)

    def forward(self, x):
        return self.block(self.block(x).relu())


@theme.module(lambda g: g.randn(2, 3), trains=True)
def shared_submodule_twice():
    return Shared()


class Hooked(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.lin.register_forward_hook(lambda mod, inp, out: out * 2)
        self.lin.register_forward_pre_hook(lambda mod, inp: (inp[0] + 1,))

    def forward(self, x):
        return self.lin(x)


@theme.module(lambda g: g.randn(2, 3), trains=True)
def forward_hooks():
    return Hooked()


class Gated(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(4, 4)
        self.value = nn.Linear(4, 4)
        self.use_gate = True

    def forward(self, x):
        v = self.value(x)
        if self.use_gate:
            v = v * ember.sigmoid(self.gate(x))
        return v


@theme.module(lambda g: g.randn(2, 4), trains=True)
def python_attribute_flag():
    return Gated()


class FunctionalWeights(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)

    def forward(self, x):
        return F.conv2d(x, self.conv.weight.flip(-1), self.conv.bias, padding=1) + self.conv(x)


@theme.module(lambda g: g.randn(1, 2, 5, 5), trains=True)
def functional_call_on_module_weights():
    return FunctionalWeights()


class ParamLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Parameter(ember.ones(3))
        self.b = nn.Parameter(ember.ones(3) * 2)

    def forward(self, x):
        for p in self.parameters():
            x = x * p
        return x + sum(p.sum() for p in self.parameters())


@theme.module(lambda g: g.randn(3), trains=True)
def iterate_parameters():
    return ParamLoop()


@theme.module(lambda g: g.randn(2, 4), trains=True)
def dropout_in_eval():
    return nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.ReLU()).eval()


class Residual(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x, **kwargs):
        return self.fn(x, **kwargs) + x


class Scaled(nn.Module):
    def forward(self, x, scale=1.0):
        return x * scale


@theme.module(lambda g: g.randn(3), trains=True)
def wrapper_module_forwards_kwargs():
    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.res = Residual(Scaled())

        def forward(self, x):
            return self.res(x, scale=3.0)

    return Outer()


class NamedChildren(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(3, 3)
        self.second = nn.Linear(3, 3)

    def forward(self, x):
        outs = []
        for name, child in self.named_children():
            outs.append(child(x) * (2 if name == "second" else 1))
        return ember.cat(outs, dim=-1)


@theme.module(lambda g: g.randn(2, 3), trains=True)
def named_children_loop():
    return NamedChildren()


@theme.module(lambda g: g.randn(4, 3), trains=True, tol=(1e-5, 1e-5))
def batchnorm_training():
    """The Linear's bias gradient is zero in exact arithmetic (batch norm removes the mean): rounding noise only."""
    return nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))


@theme.module(lambda g: g.randn(4, 3), trains=True)
def batchnorm_eval():
    return nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3)).eval()
