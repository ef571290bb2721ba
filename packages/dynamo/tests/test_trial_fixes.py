"""Regression tests for the bugs a new user's trial of ember.compile found (issue 26): each compiled
result is compared with eager ember's."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember._dynamo as dynamo

BACKENDS = ["eager", "aot_eager", "inductor"]


@pytest.fixture(autouse=True)
def _fresh_cache():
    dynamo.reset()
    yield
    dynamo.reset()


def _same(got, want):
    assert got.dtype == want.dtype
    assert got.requires_grad == want.requires_grad
    np.testing.assert_allclose(got.detach().float().numpy(), want.detach().float().numpy(), rtol=1e-5, atol=1e-6)


# -- autocast inside a compiled function --------------------------------------------------------------


def _autocast_matmul(x):
    with ember.autocast("cpu", dtype=ember.bfloat16):
        y = x @ x
    return y + 1


def _autocast_with_break(x):
    with ember.autocast("cpu", enabled=False):
        y = x * 2
        v = y.sum().item()
    return y + v


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_autocast_matmul, _autocast_with_break])
def test_autocast_region_inside_compiled_function(backend, fn):
    x = ember.randn(4, 4)
    want = fn(x)
    _same(ember.compile(fn, backend=backend)(x), want)
    assert not ember.is_autocast_enabled("cpu")


# -- a break inside enable_grad, called under no_grad ---------------------------------------------------


def _enable_grad_break(x):
    with ember.enable_grad():
        y = x * x
        s = y.sum().item()
        z = y * s
    return z


def _enable_grad_no_break(x):
    with ember.enable_grad():
        y = x * x
    return y


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_enable_grad_break, _enable_grad_no_break])
def test_enable_grad_inside_no_grad_call(backend, fn):
    x = ember.randn(3, requires_grad=True)
    with ember.no_grad():
        want = fn(x)
        got = ember.compile(fn, backend=backend)(x)
    assert want.requires_grad
    _same(got, want)
    got.sum().backward()
    assert x.grad is not None
    assert ember.is_grad_enabled()


# -- a compiled function calling another compiled function twice ----------------------------------------


def test_compiled_function_called_twice_inside_another():
    inner = ember.compile(lambda x: x.sin() + 1)

    def outer(x):
        return inner(x) * 2 + inner(x * 2)

    x = ember.randn(4)
    compiled = ember.compile(outer)
    _same(compiled(x), outer(x))
    _same(compiled(x), outer(x))  # the second call reuses the entry: its guards hold


# -- stale values: what the capture read is guarded ----------------------------------------------------


def _scaled(t, s=2.0):
    return t * s


def _calls_scaled(t):
    return _scaled(t)


@pytest.mark.parametrize("fn", [_scaled, _calls_scaled])
def test_changed_defaults_recompile(fn):
    x = ember.ones(3)
    compiled = ember.compile(fn, backend="eager")
    saved = _scaled.__defaults__
    try:
        _same(compiled(x), fn(x))
        _scaled.__defaults__ = (5.0,)
        _same(compiled(x), fn(x))
    finally:
        _scaled.__defaults__ = saved


def _kw_scaled(t, *, s=2.0):
    return t * s


def test_changed_kwdefaults_recompile():
    x = ember.ones(3)
    compiled = ember.compile(_kw_scaled, backend="eager")
    saved = _kw_scaled.__kwdefaults__
    try:
        _same(compiled(x), _kw_scaled(x))
        _kw_scaled.__kwdefaults__ = {"s": 7.0}
        _same(compiled(x), _kw_scaled(x))
    finally:
        _kw_scaled.__kwdefaults__ = saved


def _gelu(t):
    import ember.nn.functional as F

    return F.gelu(t)


def _sigmoid(t):
    return ember.sigmoid(t)


@pytest.mark.parametrize("fn, module, name", [
    (_gelu, "ember.nn.functional", "gelu"), (_sigmoid, "ember", "sigmoid"),
])
def test_patched_library_function_recompiles(fn, module, name, monkeypatch):
    import importlib

    x = ember.ones(3)
    compiled = ember.compile(fn, backend="eager")
    _same(compiled(x), fn(x))
    monkeypatch.setattr(importlib.import_module(module), name, lambda t: t * 0 + 7)
    want = fn(x)
    assert want.tolist() == [7.0, 7.0, 7.0]
    _same(compiled(x), want)


class _AddOne(ember.nn.Module):
    def forward(self, t):
        return t + 1


def test_replaced_instance_forward_recompiles():
    m = ember.nn.Linear(3, 3)
    x = ember.ones(3)
    compiled = ember.compile(m, backend="eager")
    _same(compiled(x), m(x))
    m.forward = lambda t: t + 100
    _same(compiled(x), m(x))


def test_replaced_class_forward_recompiles(monkeypatch):
    m = _AddOne()
    x = ember.ones(3)
    compiled = ember.compile(m, backend="eager")
    _same(compiled(x), m(x))
    monkeypatch.setattr(_AddOne, "forward", lambda self, t: t + 100)
    want = m(x)
    assert want.tolist() == [101.0, 101.0, 101.0]
    _same(compiled(x), want)


class _TwoOfAKind(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.second = _AddOne(), _AddOne()

    def forward(self, t):
        return self.second(self.first(t))


def test_forward_replaced_on_a_second_instance_of_a_class_recompiles():
    """The class's forward is guarded once (on the first instance called); the second instance's
    own forward, assigned after compiling, is seen by its hook-count guard."""
    m = _TwoOfAKind()
    x = ember.ones(3)
    compiled = ember.compile(m, backend="eager")
    _same(compiled(x), m(x))
    m.second.forward = lambda t: t * 10
    want = m(x)
    assert want.tolist() == [20.0, 20.0, 20.0]
    _same(compiled(x), want)


class _ScaledByClass(ember.nn.Module):
    scale = 1.0

    def forward(self, t):
        return t * self.scale


class _PlainScaled:
    scale = 1.0

    def times(self, t):
        return t * self.scale


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_class_attribute_read_through_self_recompiles_when_the_class_changes(backend, monkeypatch):
    x = ember.ones(2)
    module, plain = _ScaledByClass(), _PlainScaled()
    compiled_module = ember.compile(module, backend=backend)
    compiled_method = ember.compile(plain.times, backend=backend)
    _same(compiled_module(x), module(x))
    _same(compiled_method(x), plain.times(x))
    monkeypatch.setattr(_ScaledByClass, "scale", 3.0)
    monkeypatch.setattr(_PlainScaled, "scale", 3.0)
    assert module(x).tolist() == [3.0, 3.0]
    _same(compiled_module(x), module(x))
    _same(compiled_method(x), plain.times(x))


class _Stack(ember.nn.Module):
    def __init__(self, container):
        super().__init__()
        self.layers = container

    def forward(self, t):
        for layer in self.layers:
            t = layer(t)
        return t


@pytest.mark.parametrize("kind", ["ModuleList", "Sequential"])
def test_a_module_container_that_grows_after_compiling_recompiles(kind):
    layers = [_AddOne(), _AddOne()]
    container = ember.nn.ModuleList(layers) if kind == "ModuleList" else ember.nn.Sequential(*layers)
    model = _Stack(container)
    x = ember.ones(3)
    compiled = ember.compile(model, backend="eager")
    _same(compiled(x), model(x))
    container.append(_AddOne())
    want = model(x)
    assert want.tolist() == [4.0, 4.0, 4.0]
    _same(compiled(x), want)


class _LazyRunningMean(ember.nn.Module):
    def forward(self, x):
        if not hasattr(self, "run_mean"):
            self.register_buffer("run_mean", x.mean(0))
        else:
            self.run_mean.mul_(0.5).add_(x.mean(0) * 0.5)
        return x - self.run_mean


class _CountsWithGetattr(ember.nn.Module):
    def forward(self, x):
        n = getattr(self, "calls", None)
        self.calls = 1 if n is None else n + 1
        return x * self.calls


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("cls", [_LazyRunningMean, _CountsWithGetattr])
def test_an_attribute_set_on_the_first_call_is_seen_by_the_next(cls, backend):
    """``hasattr``/``getattr(obj, name, default)`` of an absent attribute: the answer is guarded."""
    compiled_model, eager_model = cls(), cls()
    compiled = ember.compile(compiled_model, backend=backend)
    for i in range(3):
        x = ember.full((2, 3), float(i + 1))
        _same(compiled(x), eager_model(x))


def _scaled_kw(x, *, k=2.0):
    return x * k


def _appends_to_default(x, acc=[]):  # noqa: B006 - the mutable default is what is tested
    acc.append(1)
    return x + len(acc)


def _appends_to_kw_default(x, *, acc=[]):  # noqa: B006
    acc.append(1)
    return x + len(acc)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_keyword_defaults_edited_in_place_recompile(backend, monkeypatch):
    def caller(x):
        return _scaled_kw(x)

    x = ember.ones(2)
    compiled = ember.compile(caller, backend=backend)
    _same(compiled(x), caller(x))
    monkeypatch.setitem(_scaled_kw.__kwdefaults__, "k", 9.0)
    assert caller(x).tolist() == [9.0, 9.0]
    _same(compiled(x), caller(x))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("helper", [_appends_to_default, _appends_to_kw_default])
def test_a_mutable_default_changed_by_an_inlined_helper_keeps_the_change(helper, backend):
    def caller(x):
        return helper(x)

    acc = helper.__defaults__[0] if helper.__defaults__ else helper.__kwdefaults__["acc"]
    acc.clear()
    compiled = ember.compile(caller, backend=backend)
    outs = [compiled(ember.ones(2))[0].item() for _ in range(3)]
    assert outs == [2.0, 3.0, 4.0] and len(acc) == 3
    acc.clear()


class _ChildrenLoop(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.first = _AddOne()

    def forward(self, t):
        for child in self.children():
            t = child(t)
        return t


def test_a_child_added_after_compiling_is_seen_by_children_iteration():
    model = _ChildrenLoop()
    x = ember.ones(3)
    compiled = ember.compile(model, backend="eager")
    _same(compiled(x), model(x))
    model.second = _AddOne()
    assert model(x).tolist() == [3.0, 3.0, 3.0]
    _same(compiled(x), model(x))


class _TreeLoop(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = ember.nn.ModuleList([ember.nn.Linear(3, 3)])

    def forward(self, x):
        for module in self.modules():
            if isinstance(module, ember.nn.Linear):
                x = module(x)
        return x, sum(p.sum() for p in self.parameters()), len(list(self.buffers()))


def test_modules_parameters_and_buffers_added_deep_in_the_tree_recompile():
    ember.manual_seed(0)
    model = _TreeLoop()
    x = ember.randn(2, 3)
    compiled = ember.compile(model, backend="eager")

    def check():
        got, want = compiled(x), model(x)
        _same(got[0], want[0])
        _same(got[1], want[1])
        assert got[2] == want[2]

    check()
    model.blocks.append(ember.nn.Linear(3, 3))  # a module two levels down
    check()
    model.blocks[0].register_parameter("extra", ember.nn.Parameter(ember.ones(1)))
    check()
    model.blocks[1].register_buffer("count", ember.zeros(1))
    check()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize(
    "options",
    [
        dict(batch_first=True),
        dict(batch_first=False),
        dict(batch_first=True, kdim=6, vdim=5),
        dict(batch_first=True, need_weights=True),
        dict(batch_first=True, mask=True),
    ],
    ids=["batch_first", "seq_first", "kdim_vdim", "weights", "mask"],
)
def test_multi_head_attention_is_inlined_and_dynamic_in_the_batch(backend, options):
    # F.multi_head_attention_forward computes sizes in Python: traced inline, a new batch size
    # needs one more capture only (it was a capture per size)
    options = dict(options)
    need_weights, use_mask = options.pop("need_weights", False), options.pop("mask", False)
    ember.manual_seed(0)
    mha = ember.nn.MultiheadAttention(8, 2, **options)
    kdim, vdim = options.get("kdim", 8), options.get("vdim", 8)
    mask = ember.triu(ember.ones(4, 4, dtype=ember.bool), 1) if use_mask else None

    def f(q, k, v):
        out, weights = mha(q, k, v, need_weights=need_weights, attn_mask=mask)
        return out if weights is None else (out, weights)

    from ember._dynamo.testing import CompileCounterWithBackend

    cnt = CompileCounterWithBackend(backend)
    compiled = ember.compile(f, backend=cnt, fullgraph=True)
    for batch in (2, 3, 5):
        shape = (batch, 4) if options["batch_first"] else (4, batch)
        q, k, v = ember.randn(*shape, 8), ember.randn(*shape, kdim), ember.randn(*shape, vdim)
        got, want = compiled(q, k, v), f(q, k, v)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-5, atol=1e-5)
    assert cnt.frame_count == 2


def test_wrapper_made_with_functools_wraps_is_inlined_not_run_on_meta():
    # ``functools.wraps`` copies ``__module__``: a user's wrapper around an ember function is user code
    import functools

    log = []

    def logged(fn):
        @functools.wraps(fn)
        def wrapper(x):
            log.append(x.device.type)
            return fn(x)

        return wrapper

    gelu = logged(ember.nn.functional.gelu)
    x = ember.randn(4)
    compiled = ember.compile(lambda t: gelu(t) * 2, backend="eager")
    for _ in range(3):
        _same(compiled(x), ember.nn.functional.gelu(x) * 2)
    assert log == ["cpu"] * 3


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("optimizer", ["AdamW", "SGD"])
def test_compiled_step_with_an_lr_scheduler_equals_eager(backend, optimizer):
    # the scheduler wraps opt.step (ember code): it must be traced inline, never run on meta examples
    def train(compiled):
        ember.manual_seed(0)
        model = ember.nn.Linear(5, 2)
        kwargs = dict(lr=1e-2, momentum=0.9) if optimizer == "SGD" else dict(lr=1e-2)
        opt = getattr(ember.optim, optimizer)(model.parameters(), **kwargs)
        sched = ember.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        x = ember.randn(6, 5)

        def step(x):
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss.detach()

        run = ember.compile(step, backend=backend) if compiled else step
        losses = []
        for _ in range(4):
            losses.append(run(x).item())
            sched.step()
        states = [v for s in opt.state.values() for v in s.values() if isinstance(v, ember.Tensor)]
        assert all(v.device.type == "cpu" for v in states)
        return losses, model.weight.detach().clone()

    (want, w_want), (got, w_got) = train(False), train(True)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    _same(w_got, w_want)


class _HookTable(dict):
    __slots__ = ("__weakref__",)  # as ember.autograd.graph._HookDict


@pytest.mark.parametrize("table", [_HookTable, dict])
def test_iterating_a_plain_dict_subclass_never_recompiles(table):
    import itertools

    hooks, more = table(), table()
    hooks[0] = lambda t: t * 3

    def f(x):
        x = x + 1
        for h in itertools.chain(hooks.values(), more.values()):
            x = h(x)
        return x * 2

    from ember._dynamo.testing import CompileCounter

    cnt = CompileCounter()
    compiled = ember.compile(f, backend=cnt, fullgraph=True)
    for _ in range(4):
        _same(compiled(ember.ones(2)), f(ember.ones(2)))
    assert cnt.frame_count == 1
    more[1] = lambda t: t - 1  # a new key: one recompile
    _same(compiled(ember.ones(2)), f(ember.ones(2)))
    assert cnt.frame_count == 2


def test_setting_grad_to_none_is_replayed_after_the_graph():
    model = ember.nn.Linear(3, 2)
    model(ember.randn(4, 3)).sum().backward()

    def clear(x):
        y = model(x) * 2
        for p in model.parameters():
            p.grad = None
        return y, model.weight.grad is None

    got, cleared = ember.compile(clear, backend="eager", fullgraph=True)(ember.randn(4, 3))
    assert cleared is True and model.weight.grad is None and model.bias.grad is None


def test_compiled_train_step_breaks_only_at_backward_and_the_step():
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(8, 16), ember.nn.ReLU(), ember.nn.Linear(16, 2))
    opt = ember.optim.AdamW(model.parameters(), lr=1e-3)

    def step(x):
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()

    x = ember.randn(4, 8)
    step(x)
    explained = dynamo.explain(step)(x)
    assert explained.graph_break_count == 2, [str(r) for r in explained.break_reasons]


@pytest.mark.parametrize("how", ["module", "star_args"])
def test_mark_dynamic_reaches_a_module_input_and_star_args(how):
    from ember._dynamo.testing import CompileCounter

    class Relu2(ember.nn.Module):
        def forward(self, x):
            return x.relu() * 2

    def star(*args):
        return args[0].relu() * 2

    cnt = CompileCounter()
    compiled = ember.compile(Relu2() if how == "module" else star, backend=cnt)
    for n in (3, 5, 7):
        x = ember.randn(n, 4)
        dynamo.mark_dynamic(x, 0)
        _same(compiled(x), x.relu() * 2)
    assert cnt.frame_count == 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_distributions_are_traced_inline(backend):
    # ember.distributions are Python classes over ops: lazy properties and validation are traced
    # (the validation's data-dependent checks are graph breaks; the rest is captured)
    from ember.distributions import Categorical, Normal

    def f(logits, mu, value):
        d = Categorical(logits=logits)
        n = Normal(mu, ember.ones_like(mu))
        return d.log_prob(value), d.entropy(), d.probs, n.log_prob(mu * 2), n.entropy()

    logits, mu, value = ember.randn(5, 4), ember.randn(5), ember.tensor([0, 1, 2, 3, 0])
    got = ember.compile(f, backend=backend)(logits, mu, value)
    want = f(logits, mu, value)
    for g, w in zip(got, want):
        _same(g, w)
    explained = dynamo.explain(f)(logits, mu, value)
    assert all("data-dependent" in str(r) for r in explained.break_reasons)
    no_checks = ember.compile(
        lambda lg: Categorical(logits=lg, validate_args=False).entropy(), backend=backend, fullgraph=True
    )
    _same(no_checks(logits), Categorical(logits=logits).entropy())


class _Lazy:
    def __init__(self, fn):
        self.fn = fn

    def __get__(self, obj, cls=None):
        value = self.fn(obj)
        setattr(obj, self.fn.__name__, value)
        return value


class _WithLazy:
    def __init__(self, x):
        self.x = x

    @_Lazy
    def doubled(self):
        return self.x * 2


def test_a_descriptor_written_in_python_is_inlined():
    def f(x):
        obj = _WithLazy(x)
        return obj.doubled + obj.doubled, "doubled" in obj.__dict__

    got, cached = ember.compile(f, backend="eager", fullgraph=True)(ember.ones(3))
    _same(got, ember.full((3,), 4.0))
    assert cached is True


class _LSTMTagger(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = ember.nn.Embedding(10, 6)
        self.lstm = ember.nn.LSTM(6, 8, num_layers=2, batch_first=True)
        self.head = ember.nn.Linear(8, 3)

    def forward(self, tokens):
        out, _ = self.lstm(self.embed(tokens))
        return self.head(out).log_softmax(-1)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_recurrent_layers_run_eagerly_by_default(backend):
    # as torch.compile (config.allow_rnn False): unrolled, an LSTM would compile for minutes
    ember.manual_seed(0)
    model = _LSTMTagger()
    tokens = ember.randint(0, 10, (2, 7))
    compiled = ember.compile(model, backend=backend)
    _same(compiled(tokens), model(tokens))
    explained = dynamo.explain(model)(tokens)
    assert explained.graph_count == 2  # the embedding, then the head: the LSTM between them eager
    assert any("nn.LSTM runs eagerly" in str(r) for r in explained.break_reasons)
    lstm_alone = dynamo.explain(model.lstm)(ember.randn(2, 7, 6))
    assert lstm_alone.graph_count == 0
    with dynamo.config.patch(allow_rnn=True):
        dynamo.reset()
        assert dynamo.explain(model)(tokens).graph_break_count == 0


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("form", ["with", "decorator", "nested"])
def test_inference_mode_inside_compiled_code_sets_grad_mode(backend, form):
    ember.manual_seed(0)
    lin = ember.nn.Linear(3, 3)
    x = ember.randn(2, 3)
    if form == "decorator":
        f = ember.inference_mode()(lambda x: lin(x).relu())
    elif form == "with":
        def f(x):
            with ember.inference_mode():
                y = lin(x).relu()
            return y
    else:
        def f(x):
            with ember.inference_mode():
                with ember.inference_mode(False):
                    y = lin(x)
                z = lin(x)
            return y, z, lin(x)
    want = f(x)
    got = ember.compile(f, backend=backend)(x)
    want, got = (want if isinstance(want, tuple) else (want,)), (got if isinstance(got, tuple) else (got,))
    assert [t.requires_grad for t in got] == [t.requires_grad for t in want]
    for g, w in zip(got, want):
        _same(g, w)


def test_default_dtype_is_guarded():
    def f(x):
        z = ember.zeros(2)
        return x.to(z.dtype) * (2.0 if z.dtype == ember.float64 else 1.0), ember.finfo(z.dtype).eps

    compiled = ember.compile(f, backend="eager")
    x = ember.ones(2)
    assert compiled(x)[0].tolist() == [1.0, 1.0]
    previous = ember.get_default_dtype()
    ember.set_default_dtype(ember.float64)
    try:
        got, eps = compiled(x)
        assert got.dtype == ember.float64 and got.tolist() == [2.0, 2.0] and eps == f(x)[1]
    finally:
        ember.set_default_dtype(previous)


def _scaled_classes():
    class ByType(ember.nn.Module):
        c = 1.0

        def forward(self, x):
            return x * type(self).c

    class ByName(ember.nn.Module):
        c = 1.0

        def forward(self, x):
            return x * ByName.c  # a class defined in a function: read through the closure cell

    return ByType, ByName


@pytest.mark.parametrize("which", [0, 1], ids=["type_self", "closure_class"])
def test_class_attribute_read_through_type_or_a_closure_is_guarded(which):
    cls = _scaled_classes()[which]
    module = cls()
    compiled = ember.compile(module, backend="eager")
    assert compiled(ember.ones(1)).item() == 1.0
    cls.c = 3.0
    assert compiled(ember.ones(1)).item() == 3.0


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_tensor_literals_made_inside_compiled_code(backend):
    # ``ember.tensor([...])`` in the frame is a constant of the graph (a non-persistent buffer, which
    # aot lifts to an input): a KV-cache write at a position, a mask, an index
    def f(cache, k, x, pos):
        cache.index_copy_(1, ember.tensor([pos]), k)
        scaled = x * ember.tensor([float(pos), 1.0])
        return cache.sum(), scaled, x.index_select(0, ember.tensor([0, 1]))

    args = (ember.zeros(1, 4, 2), ember.ones(1, 1, 2), ember.randn(2, 2), 2)
    want_cache = args[0].clone()
    want = f(want_cache, *args[1:])
    got = ember.compile(f, backend=backend)(*args)
    for g, w in zip(got, want):
        _same(g, w)
    _same(args[0], want_cache)
