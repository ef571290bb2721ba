"""ember.nn.Module and Parameter: registration, iteration, state dicts, conversions, hooks, printing."""

import io
from collections import OrderedDict

import numpy as np
import pytest

import ember
from ember import nn


class Sub(nn.Module):
    def __init__(self):
        super().__init__()
        self.b = nn.Parameter(ember.tensor([1.0, 2.0, 3.0]))

    def extra_repr(self):
        return "k=1"

    def forward(self, x):
        return x + self.b


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(ember.ones(2, 3))
        self.register_buffer("rm", ember.zeros(3))
        self.register_buffer("tmp", ember.zeros(1), persistent=False)
        self.register_buffer("count", ember.tensor(0))
        self.child = Sub()
        self.plain = ember.ones(1)  # a plain tensor attribute: not registered

    def forward(self, x):
        return self.child(x @ self.w)


def test_registration_and_iterators():
    m = Net()
    assert [n for n, _ in m.named_parameters()] == ["w", "child.b"]
    assert [n for n, _ in m.named_buffers()] == ["rm", "tmp", "count"]
    assert [n for n, _ in m.named_parameters(prefix="net", recurse=False)] == ["net.w"]
    assert [n for n, _ in m.named_modules()] == ["", "child"]
    assert list(m.children()) == [m.child]
    assert "plain" in m.__dict__ and "plain" not in m._buffers
    assert m.get_parameter("child.b") is m.child.b
    assert m.get_buffer("rm") is m._buffers["rm"]
    assert m.get_submodule("child") is m.child
    assert "w" in dir(m) and "child" in dir(m)


def test_shared_parameter_counted_once():
    m = nn.Module()
    m.a = Sub()
    m.b = m.a
    assert len(list(m.parameters())) == 1
    assert [n for n, _ in m.named_parameters(remove_duplicate=False)] == ["a.b", "b.b"]


def test_setattr_moves_names_between_kinds_and_delattr():
    m = Net()
    with pytest.raises(TypeError, match=r"cannot assign 'ember.FloatTensor' as parameter 'w' \(ember.nn.Parameter"):
        m.w = ember.ones(2, 3)
    m.w = None
    assert m.w is None and "w" not in m.state_dict()
    m.rm = nn.Parameter(ember.ones(3))  # a buffer name re-assigned a Parameter becomes a parameter
    assert "rm" in m._parameters and "rm" not in m._buffers
    m.count = ember.tensor(5)  # assigning a tensor to a buffer name updates the buffer
    assert int(m._buffers["count"]) == 5
    m.extra = nn.Buffer(ember.ones(2), persistent=False)
    assert "extra" in m._buffers and "extra" in m._non_persistent_buffers_set
    del m.child
    assert "child" not in m._modules
    with pytest.raises(AttributeError, match="'Net' object has no attribute 'child'"):
        _ = m.child


def test_errors_before_init_and_bad_names():
    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(ember.ones(1))

    with pytest.raises(AttributeError, match=r"cannot assign parameters before Module.__init__\(\) call"):
        Early()
    m = nn.Module()
    with pytest.raises(KeyError, match="parameter name can"):
        m.register_parameter("a.b", None)
    with pytest.raises(TypeError, match="cannot assign 'ember.FloatTensor' object to parameter 'p'"):
        m.register_parameter("p", ember.ones(1))
    with pytest.raises(KeyError, match="attribute 'training' already exists"):
        m.register_buffer("training", ember.ones(1))
    with pytest.raises(TypeError, match="int is not a Module subclass"):
        m.add_module("x", 3)
    with pytest.raises(NotImplementedError, match=r'Module \[Module\] is missing the required "forward" function'):
        m(1)
    with pytest.raises(ValueError, match="Cannot assign non-leaf Tensor"):
        m.register_parameter("q", _non_leaf_parameter())


def _non_leaf_parameter():
    p = nn.Parameter(ember.ones(1))
    p._grad_fn = (p * 2).grad_fn  # what a Parameter produced by an op would carry
    return p


def test_state_dict_order_and_values():
    m = Net()
    sd = m.state_dict()
    assert list(sd) == ["w", "rm", "count", "child.b"]
    assert type(sd["w"]) is ember.Tensor and not sd["w"].requires_grad
    np.testing.assert_array_equal(sd["child.b"].numpy(), [1.0, 2.0, 3.0])
    assert sd._metadata[""] == {"version": 1} and "child" in sd._metadata
    assert m.state_dict(keep_vars=True)["w"] is m.w
    assert list(m.state_dict(prefix="m.")) == ["m.w", "m.rm", "m.count", "m.child.b"]


def test_load_state_dict_copies_in_place():
    m, src = Net(), Net()
    with ember.no_grad():
        src.w.mul_(3.0)
        src.child.b.add_(1.0)
    w = m.w
    result = m.load_state_dict(src.state_dict())
    assert repr(result) == "<All keys matched successfully>"
    assert m.w is w and m.w.requires_grad
    np.testing.assert_array_equal(m.w.detach().numpy(), np.full((2, 3), 3.0))
    np.testing.assert_array_equal(m.child.b.detach().numpy(), [2.0, 3.0, 4.0])


def test_load_state_dict_errors():
    m = Net()
    sd = m.state_dict()
    sd["w"] = ember.ones(3)
    del sd["rm"]
    sd["extra.key"] = ember.ones(1)
    with pytest.raises(RuntimeError) as info:
        m.load_state_dict(sd)
    assert str(info.value) == (
        "Error(s) in loading state_dict for Net:\n\t"
        'Missing key(s) in state_dict: "rm". \n\t'
        'Unexpected key(s) in state_dict: "extra.key". \n\t'
        "size mismatch for w: copying a param with shape ember.Size([3]) from checkpoint, "
        "the shape in current model is ember.Size([2, 3])."
    )
    del sd["w"]
    result = m.load_state_dict(sd, strict=False)
    # non-strict: reported, not raised (size mismatches are errors even then, so "w" was removed)
    assert result.missing_keys == ["w", "rm"] and result.unexpected_keys == ["extra.key"]
    with pytest.raises(TypeError, match="Expected state_dict to be dict-like"):
        m.load_state_dict([1, 2])


def test_load_state_dict_assign():
    m = Net()
    new_w = ember.full((2, 3), 7.0)
    sd = m.state_dict()
    sd["w"] = new_w
    m.load_state_dict(sd, assign=True)
    assert isinstance(m.w, nn.Parameter) and m.w.requires_grad
    new_w[0, 0] = 9.0  # assign shares the data
    assert float(m.w[0, 0]) == 9.0


def test_state_dict_round_trip_through_save_load():
    m = Net()
    with ember.no_grad():
        m.w.copy_(ember.arange(6, dtype=ember.float32).reshape(2, 3))
    buffer = io.BytesIO()
    ember.save(m.state_dict(), buffer)
    buffer.seek(0)
    loaded = ember.load(buffer)
    assert list(loaded) == ["w", "rm", "count", "child.b"]
    m2 = Net()
    m2.load_state_dict(loaded)
    np.testing.assert_array_equal(m2.w.detach().numpy(), np.arange(6, dtype=np.float32).reshape(2, 3))


def test_state_dict_hooks():
    m = Net()
    seen = []

    def post(module, state_dict, prefix, local_metadata):
        state_dict[prefix + "added"] = ember.zeros(1)

    m.child._register_state_dict_hook(post)
    assert list(m.state_dict())[-1] == "child.added"
    m.register_load_state_dict_post_hook(lambda module, keys: keys.unexpected_keys.remove("child.added"))
    m.child.register_load_state_dict_post_hook(lambda module, keys: seen.append(list(keys.unexpected_keys)))
    m.load_state_dict(m.state_dict())  # the root's post hook clears the unexpected key, so strict passes
    assert seen == [["child.added"]]


def test_to_keeps_parameter_identity_and_integer_buffers():
    m = Net()
    w, b = m.w, m.child.b
    (m.w * 2).sum().backward()
    assert m.to(ember.float64) is m
    assert m.w is w and m.child.b is b
    assert m.w.dtype == ember.float64 and m.w.grad.dtype == ember.float64
    assert m._buffers["rm"].dtype == ember.float64 and m._buffers["count"].dtype == ember.int64
    m.float()
    assert m.w.dtype == ember.float32 and isinstance(m.w, nn.Parameter) and m.w.requires_grad
    m.half()
    assert m.child.b.dtype == ember.float16
    m.double().bfloat16()
    assert m.w.dtype == ember.bfloat16
    with pytest.raises(TypeError, match="nn.Module.to only accepts floating point or complex dtypes"):
        m.to(ember.int32)
    assert m.cpu() is m and m.w.device.type == "cpu"


def test_train_eval_requires_grad_zero_grad_apply():
    m = Net()
    assert m.training and m.child.training
    m.eval()
    assert not m.training and not m.child.training
    m.train()
    assert m.child.training
    with pytest.raises(ValueError, match="training mode is expected to be boolean"):
        m.train("yes")
    (m(ember.ones(1, 2))).sum().backward()
    np.testing.assert_array_equal(m.w.grad.detach().numpy(), np.full((2, 3), 1.0))
    m.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(m.w.grad.detach().numpy(), np.zeros((2, 3)))
    m.zero_grad()
    assert m.w.grad is None
    m.requires_grad_(False)
    assert not m.w.requires_grad and not m.child.b.requires_grad
    order = []
    m.apply(lambda mod: order.append(type(mod).__name__))
    assert order == ["Sub", "Net"]


def test_forward_hooks_order_and_results():
    m = Sub()
    calls = []
    m.register_forward_pre_hook(lambda mod, args: calls.append("pre1") or (args[0] * 2,))
    m.register_forward_pre_hook(lambda mod, args: calls.append("pre0"), prepend=True)
    m.register_forward_pre_hook(lambda mod, args, kwargs: calls.append("prekw") or (args, kwargs), with_kwargs=True)
    h = m.register_forward_hook(lambda mod, args, out: calls.append("post") or out * 10)
    m.register_forward_hook(lambda mod, args, kwargs, out: calls.append("postkw"), with_kwargs=True)
    out = m(ember.ones(3))
    assert calls == ["pre0", "pre1", "prekw", "post", "postkw"]
    np.testing.assert_array_equal(out.detach().numpy(), [30.0, 40.0, 50.0])  # ((1 * 2) + b) * 10
    h.remove()
    np.testing.assert_array_equal(m(ember.ones(3)).detach().numpy(), [3.0, 4.0, 5.0])


def test_always_call_forward_hook_runs_on_error():
    class Boom(nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    m = Boom()
    seen = []
    m.register_forward_hook(lambda mod, args, out: seen.append("normal"))
    m.register_forward_hook(lambda mod, args, out: seen.append(out), always_call=True)
    with pytest.raises(ValueError, match="boom"):
        m(1)
    assert seen == [None]


def test_full_backward_hook_grad_input_and_output():
    class MatMul(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(ember.tensor([[1.0, 2.0], [3.0, 4.0]]))

        def forward(self, x):
            return x @ self.w

    m = MatMul()
    log = []
    m.register_full_backward_hook(lambda mod, gi, go: log.append((gi, go)))
    x = ember.tensor([[1.0, 1.0]], requires_grad=True)
    m(x).sum().backward()
    (grad_input,), (grad_output,) = log[0]
    np.testing.assert_array_equal(grad_output.numpy(), [[1.0, 1.0]])
    np.testing.assert_array_equal(grad_input.numpy(), [[3.0, 7.0]])  # ones @ w.T
    np.testing.assert_array_equal(m.w.grad.detach().numpy(), [[1.0, 1.0], [1.0, 1.0]])
    h = m.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 10,))
    x.grad = None
    m(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[30.0, 70.0]])
    h.remove()
    log.clear()
    m(ember.ones(1, 2)).sum().backward()  # no input requires grad: grad_input is (None,)
    assert log[0][0] == (None,)


def test_repr_nested():
    m = nn.Module()
    m.net = Net()
    assert repr(m) == "Module(\n  (net): Net(\n    (child): Sub(k=1)\n  )\n)"

    class Multi(nn.Module):
        def extra_repr(self):
            return "a=1\nb=2"

    assert repr(Multi()) == "Multi(\n  a=1\n  b=2\n)"


def test_parameter_basics():
    t = ember.tensor([1.0, 2.0])
    p = nn.Parameter(t)
    assert repr(p) == "Parameter containing:\ntensor([1., 2.], requires_grad=True)"
    assert p.requires_grad and p.is_leaf and p.grad_fn is None
    with ember.no_grad():
        p.add_(1.0)
    np.testing.assert_array_equal(t.numpy(), [2.0, 3.0])  # shares data
    assert type(p * 2) is ember.Tensor  # ops on a Parameter return plain tensors
    assert not nn.Parameter(ember.ones(1), requires_grad=False).requires_grad
    assert nn.Parameter().shape == (0,)
    import copy

    q = copy.deepcopy(p)
    assert type(q) is nn.Parameter and q.requires_grad and q is not p
    np.testing.assert_array_equal(q.detach().numpy(), [2.0, 3.0])


def test_uninitialized_parameter_materialize():
    u = nn.UninitializedParameter()
    assert repr(u) == "<UninitializedParameter>"
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized parameter"):
        _ = u.shape
    with pytest.raises(ValueError, match="Attempted to use an uninitialized parameter"):
        u + 1
    m = nn.Module()
    m.w = u
    u.materialize((2, 3), dtype=ember.float64)
    assert type(m.w) is nn.Parameter and m.w.shape == (2, 3) and m.w.dtype == ember.float64


def test_buffer_marker():
    b = nn.Buffer(ember.ones(2))
    assert type(b) is ember.Tensor and isinstance(b, nn.Buffer)
    assert not isinstance(ember.ones(2), nn.Buffer)


def test_incompatible_keys_namedtuple():
    m = Net()
    sd = OrderedDict(m.state_dict())
    sd["zz"] = ember.ones(1)
    result = m.load_state_dict(sd, strict=False)
    missing, unexpected = result
    assert missing == [] and unexpected == ["zz"]
    assert repr(result) == "_IncompatibleKeys(missing_keys=[], unexpected_keys=['zz'])"


def test_modules_remove_duplicate_and_set_submodule():
    shared = nn.Linear(2, 2)
    model = nn.Sequential(shared, nn.ReLU())
    model.add_module("again", shared)
    assert len(list(model.modules())) == 3
    assert len(list(model.modules(remove_duplicate=False))) == 4
    model.set_submodule("1", nn.Tanh())
    assert isinstance(model[1], nn.Tanh)
    nested = nn.Sequential(nn.Sequential(nn.Linear(1, 1)))
    nested.set_submodule("0.extra", nn.ReLU())  # a new name under an existing parent
    assert isinstance(nested[0].extra, nn.ReLU)
    with pytest.raises(ValueError, match="Cannot set the submodule without a target name!"):
        model.set_submodule("", nn.ReLU())
    with pytest.raises(ValueError, match="`module` is not an nn.Module, found <class 'int'>"):
        model.set_submodule("1", 3)
    with pytest.raises(AttributeError, match="Sequential has no attribute `x`"):
        model.set_submodule("x", nn.ReLU(), strict=True)
    with pytest.raises(AttributeError, match="`weight` is not an nn.Module"):
        model.set_submodule("0.weight", nn.ReLU())
    with pytest.raises(AttributeError, match="Sequential has no attribute `5`"):
        model.set_submodule("5.a", nn.ReLU())


def test_to_empty_and_skip_init():
    meta = nn.Linear(3, 4, device="meta")
    assert meta.weight.device.type == "meta"
    moved = meta.to_empty(device="cpu")
    assert moved is meta and isinstance(meta.weight, nn.Parameter)
    assert meta.weight.device.type == "cpu" and meta.weight.shape == (4, 3) and meta.bias.dtype == ember.float32
    meta.weight.data.fill_(2.0)  # real storage: writable and readable
    meta.bias.data.fill_(0.5)  # (to_empty leaves it uninitialised: any value, 1e31 included)
    assert abs(float(meta(ember.ones(1, 3)).sum()) - 26.0) < 1e-5
    m = nn.utils.skip_init(nn.Conv1d, 2, 3, 2, dtype=ember.float64)
    assert m.weight.device.type == "cpu" and m.weight.dtype == ember.float64 and m.weight.shape == (3, 2, 2)
    bn = nn.utils.skip_init(nn.BatchNorm1d, 3)
    assert bn.running_mean.device.type == "cpu" and bn.num_batches_tracked.dtype == ember.int64
    with pytest.raises(RuntimeError, match="Expected a Module"):
        nn.utils.skip_init(int)

    class NoDevice(nn.Module):
        def __init__(self, n):
            super().__init__()

    with pytest.raises(RuntimeError, match="Module must support a 'device' arg to skip initialization"):
        nn.utils.skip_init(NoDevice, 2)


def test_parameter_of_integers_cannot_require_grad():
    with pytest.raises(RuntimeError, match="only Tensors of floating point and complex dtype can require gradients"):
        ember.nn.Parameter(ember.tensor([1, 2]))
    p = ember.nn.Parameter(ember.tensor([1, 2]), requires_grad=False)
    assert not p.requires_grad and p.dtype is ember.int64


def test_parameter_subclass_calling_the_default_override_does_not_recurse():
    calls = []

    class Tracked(ember.nn.Parameter):
        @classmethod
        def __ember_function__(cls, func, types, args=(), kwargs=None):
            calls.append(func.__name__)
            return super().__ember_function__(func, types, args, kwargs)

    out = ember.nn.functional.linear(ember.ones(2, 3), Tracked(ember.ones(4, 3)))
    assert type(out) is ember.Tensor and out.shape == (2, 4)
    np.testing.assert_array_equal(out.detach().numpy(), np.full((2, 4), 3.0))
    assert calls == ["linear"]
