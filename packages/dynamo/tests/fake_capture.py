"""A stand-in translator for the runtime's tests (cache, guards, api): whole-function capture with make_fx.

It captures ``fn`` called with the frame's locals, the tensors as graph inputs and every other
argument as a constant, and emits the guards a real capture would (types, tensor specs, constant
values, grad mode), plus any extra guards a test asks for. The runtime's tests use it so that they
test the runtime alone, whatever the state of the real translator.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import ember
from ember._dynamo.guards import Guard, GuardKind, TensorSpec
from ember._dynamo.source import GetItemSource, LocalSource
from ember.fx.experimental.proxy_tensor import make_fx


@dataclass
class FakeResult:
    """Builds the return value: the graph's outputs (one value or a tuple)."""

    single: bool

    def build(self, outs, frame_locals, frame_globals):
        return outs[0] if self.single else tuple(outs)


@dataclass
class FakeCaptured:
    gm: object
    graph_inputs: list
    example_inputs: list
    guards: list
    side_effects: list = field(default_factory=list)
    result: object = None
    graph_break: object = None
    ops_in_graph: int = 0


def tensor_spec(t, dynamic=()):
    shape = tuple(None if i in dynamic else s for i, s in enumerate(t.shape))
    stride = tuple(None if i in dynamic else s for i, s in enumerate(t.stride()))
    return TensorSpec(t.dtype, t.device, shape, stride, t.requires_grad)


class FakeTranslator:
    """Callable like ``translate(fn, frame_locals, *, config)``; counts its calls and keeps the configs."""

    def __init__(self, extra_guards=()):
        # extra_guards: Guard objects, or callables frame_locals -> Guard
        self.calls = 0
        self.configs = []
        self.extra_guards = list(extra_guards)

    def __call__(self, fn, frame_locals, config):
        self.calls += 1
        self.configs.append(config)
        names = list(frame_locals)
        # graph inputs: tensor arguments, and tensors one level inside *args
        inputs = [(LocalSource(n), frame_locals[n]) for n in names if isinstance(frame_locals[n], ember.Tensor)]
        code = fn.__code__
        varargs = code.co_varnames[code.co_argcount + code.co_kwonlyargcount] if code.co_flags & 0x04 else None
        if varargs is not None:
            inputs += [
                (GetItemSource(LocalSource(varargs), i), v)
                for i, v in enumerate(frame_locals[varargs])
                if isinstance(v, ember.Tensor)
            ]
        guards = [Guard(None, GuardKind.GRAD_MODE, ember.is_grad_enabled())]
        for n in names:
            v, src = frame_locals[n], LocalSource(n)
            guards.append(Guard(src, GuardKind.TYPE_MATCH, type(v)))
            if isinstance(v, (list, tuple)):
                guards.append(Guard(src, GuardKind.LEN_MATCH, len(v)))
            elif v is None or isinstance(v, (int, float, str, bool)):
                guards.append(Guard(src, GuardKind.EQUALS_MATCH, v) if v is not None else Guard(src, GuardKind.IS_NONE))
        for src, v in inputs:
            dims = config.dynamic_dims.get(src.name(), frozenset())
            guards.append(Guard(src, GuardKind.TENSOR_MATCH, tensor_spec(v, dims)))
        guards.extend(g(frame_locals) if callable(g) else g for g in self.extra_guards)

        def run(*tensors):
            env = dict(frame_locals)
            for (src, _), t in zip(inputs, tensors):
                if isinstance(src, GetItemSource):
                    items = list(env[varargs])
                    items[src.index] = t
                    env[varargs] = tuple(items)
                else:
                    env[src.local_name] = t
            positional = [env[n] for n in code.co_varnames[: code.co_argcount]]
            if varargs is not None:
                positional += list(env[varargs])
            keywords = {
                n: env[n] for n in code.co_varnames[code.co_argcount : code.co_argcount + code.co_kwonlyargcount]
            }
            if code.co_flags & 0x08:  # **kwargs
                keywords.update(
                    env[code.co_varnames[code.co_argcount + code.co_kwonlyargcount + (varargs is not None)]]
                )
            return fn(*positional, **keywords)

        example = [v for _, v in inputs]
        gm = make_fx(run)(*example)
        out_node = next(n for n in gm.graph.nodes if n.op == "output")
        single = not isinstance(out_node.args[0], (tuple, list))
        ops = sum(1 for n in gm.graph.nodes if n.op == "call_function")
        return FakeCaptured(
            gm=gm,
            graph_inputs=[src for src, _ in inputs],
            example_inputs=example,
            guards=guards,
            result=FakeResult(single),
            ops_in_graph=ops,
        )
