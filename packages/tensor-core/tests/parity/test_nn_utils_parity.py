"""ember.nn.utils against torch.nn.utils: same total norms and clipped gradients, same weight_norm /
spectral_norm outputs, gradients and state_dict keys with copied weights, same fused conv/linear-bn."""

import numpy as np
import pytest
import torch

import ember
import ember.nn as enn
from ember.nn.utils import parametrizations as eparam
from ember.nn.utils import parametrize as eparametrize

pytestmark = pytest.mark.parity


def _e(a):
    return ember.tensor(np.asarray(a))


def _copy_state(torch_module, ember_module):
    sd = {k: _e(v.detach().numpy().copy()) for k, v in torch_module.state_dict().items()}
    result = ember_module.load_state_dict(sd)
    assert result.missing_keys == [] and result.unexpected_keys == []


def _make_grads(rng, shapes, scale=1.0):
    values = [rng.standard_normal(s).astype(np.float32) * scale for s in shapes]
    tp, ep = [], []
    for v in values:
        t = torch.nn.Parameter(torch.zeros(v.shape))
        t.grad = torch.tensor(v)
        e = enn.Parameter(ember.zeros(*v.shape))
        e.grad = _e(v)
        tp.append(t)
        ep.append(e)
    return tp, ep


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf"), 3.5])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_parity(norm_type, max_norm):
    rng = np.random.default_rng(0)
    tp, ep = _make_grads(rng, [(3, 4), (5,), (2, 2, 2)])
    tn = torch.nn.utils.clip_grad_norm_(tp, max_norm, norm_type=norm_type)
    en = enn.utils.clip_grad_norm_(ep, max_norm, norm_type=norm_type)
    np.testing.assert_allclose(en.numpy(), tn.numpy(), rtol=1e-5)
    assert en.dtype == ember.float32 and en.shape == ()
    for t, e in zip(tp, ep):
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_clip_grad_norm_nonfinite_message_parity():
    t = torch.nn.Parameter(torch.zeros(2))
    t.grad = torch.tensor([float("nan"), 1.0])
    e = enn.Parameter(ember.zeros(2))
    e.grad = ember.tensor([float("nan"), 1.0])
    with pytest.raises(RuntimeError) as tinfo:
        torch.nn.utils.clip_grad_norm_([t], 1.0, error_if_nonfinite=True)
    with pytest.raises(RuntimeError) as einfo:
        enn.utils.clip_grad_norm_([e], 1.0, error_if_nonfinite=True)
    assert str(einfo.value) == str(tinfo.value)


def test_get_total_norm_and_clip_value_parity():
    rng = np.random.default_rng(1)
    tp, ep = _make_grads(rng, [(4, 3), (6,)], scale=3.0)
    tn = torch.nn.utils.get_total_norm([p.grad for p in tp], 2.0)
    en = enn.utils.get_total_norm([p.grad for p in ep], 2.0)
    np.testing.assert_allclose(en.numpy(), tn.numpy(), rtol=1e-6)
    torch.nn.utils.clip_grads_with_norm_(tp, 1.0, tn)
    enn.utils.clip_grads_with_norm_(ep, 1.0, en)
    for t, e in zip(tp, ep):
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-7)
    tp, ep = _make_grads(rng, [(4, 3), (6,)], scale=3.0)
    torch.nn.utils.clip_grad_value_(tp, 0.7)
    enn.utils.clip_grad_value_(ep, 0.7)
    for t, e in zip(tp, ep):
        np.testing.assert_array_equal(e.grad.numpy(), t.grad.numpy())


def test_parameters_vector_parity():
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Conv1d(2, 2, 2))
    em = enn.Sequential(enn.Linear(3, 4), enn.Conv1d(2, 2, 2))
    _copy_state(tm, em)
    tv = torch.nn.utils.parameters_to_vector(tm.parameters())
    ev = enn.utils.parameters_to_vector(em.parameters())
    np.testing.assert_array_equal(ev.detach().numpy(), tv.detach().numpy())
    new = np.arange(tv.numel(), dtype=np.float32)
    torch.nn.utils.vector_to_parameters(torch.tensor(new), tm.parameters())
    enn.utils.vector_to_parameters(_e(new), em.parameters())
    for (tk, tval), (ek, evalue) in zip(tm.state_dict().items(), em.state_dict().items()):
        assert tk == ek
        np.testing.assert_array_equal(evalue.numpy(), tval.numpy())


def _check_forward_backward(tm, em, shape, rtol=1e-5, atol=1e-6):
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    tout = tm(torch.tensor(x))
    eout = em(_e(x))
    np.testing.assert_allclose(eout.detach().numpy(), tout.detach().numpy(), rtol=rtol, atol=atol)
    tout.square().sum().backward()
    eout.square().sum().backward()
    tgrads = dict(tm.named_parameters())
    egrads = dict(em.named_parameters())
    assert list(egrads) == list(tgrads)
    for name in tgrads:
        np.testing.assert_allclose(
            egrads[name].grad.numpy(), tgrads[name].grad.numpy(), rtol=rtol * 10, atol=atol * 10, err_msg=name
        )


@pytest.mark.parametrize(
    "make, shape, dim",
    [
        (lambda nn: nn.Linear(5, 3), (4, 5), 0),
        (lambda nn: nn.Linear(5, 3), (4, 5), None),
        (lambda nn: nn.Conv2d(2, 3, 3), (2, 2, 5, 5), 0),
        (lambda nn: nn.Conv2d(2, 3, 3), (2, 2, 5, 5), 1),
        (lambda nn: nn.Conv1d(2, 3, 3), (2, 2, 6), 2),
    ],
)
def test_weight_norm_parity(make, shape, dim):
    torch.manual_seed(0)
    tm = torch.nn.utils.parametrizations.weight_norm(make(torch.nn), dim=dim)
    em = eparam.weight_norm(make(enn), dim=dim)
    assert list(em.state_dict()) == list(tm.state_dict())
    for k, v in tm.state_dict().items():
        assert tuple(em.state_dict()[k].shape) == tuple(v.shape), k
    _copy_state(tm, em)
    np.testing.assert_allclose(em.weight.detach().numpy(), tm.weight.detach().numpy(), rtol=1e-6)
    _check_forward_backward(tm, em, shape)


def test_weight_norm_right_inverse_parity():
    torch.manual_seed(0)
    tm = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(4, 3))
    em = eparam.weight_norm(enn.Linear(4, 3))
    w = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)
    tm.weight = torch.tensor(w)
    em.weight = _e(w)
    assert list(em.state_dict()) == list(tm.state_dict())
    for k in ("parametrizations.weight.original0", "parametrizations.weight.original1"):
        v = tm.state_dict()[k]
        np.testing.assert_allclose(em.state_dict()[k].numpy(), v.numpy(), rtol=1e-6, err_msg=k)


@pytest.mark.parametrize(
    "make, shape",
    [
        (lambda nn: nn.Linear(6, 4), (3, 6)),
        (lambda nn: nn.Conv2d(2, 3, 3), (2, 2, 5, 5)),
        (lambda nn: nn.ConvTranspose2d(3, 2, 2), (1, 3, 4, 4)),
    ],
)
@pytest.mark.parametrize("training", [True, False])
def test_spectral_norm_parity(make, shape, training):
    torch.manual_seed(0)
    tm = torch.nn.utils.parametrizations.spectral_norm(make(torch.nn), n_power_iterations=2)
    em = eparam.spectral_norm(make(enn), n_power_iterations=2)
    assert list(em.state_dict()) == list(tm.state_dict())
    assert type(em).__name__ == type(tm).__name__
    _copy_state(tm, em)  # copies the power-iteration vectors _u/_v too
    tm.train(training)
    em.train(training)
    _check_forward_backward(tm, em, shape, rtol=1e-4, atol=1e-5)
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(em.state_dict()[k].numpy(), v.numpy(), rtol=1e-4, atol=1e-6, err_msg=k)


class _TSym(torch.nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)


class _ESym(enn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)


def test_register_and_remove_parametrization_parity():
    tm = torch.nn.Linear(3, 3)
    em = enn.Linear(3, 3)
    _copy_state(tm, em)
    torch.nn.utils.parametrize.register_parametrization(tm, "weight", _TSym())
    eparametrize.register_parametrization(em, "weight", _ESym())
    assert type(em).__name__ == type(tm).__name__ == "ParametrizedLinear"
    assert list(em.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in em.named_parameters()] == [n for n, _ in tm.named_parameters()]
    _check_forward_backward(tm, em, (4, 3))
    torch.nn.utils.parametrize.remove_parametrizations(tm, "weight")
    eparametrize.remove_parametrizations(em, "weight")
    assert list(em.state_dict()) == list(tm.state_dict())
    np.testing.assert_allclose(em.weight.detach().numpy(), tm.weight.detach().numpy(), rtol=1e-6)


def _bn_pair(num, kind):
    tbn = getattr(torch.nn, kind)(num)
    ebn = getattr(enn, kind)(num)
    rng = np.random.default_rng(4)
    with torch.no_grad():
        tbn.running_mean.copy_(torch.tensor(rng.standard_normal(num).astype(np.float32)))
        tbn.running_var.copy_(torch.tensor(rng.uniform(0.5, 2.0, num).astype(np.float32)))
        tbn.weight.copy_(torch.tensor(rng.standard_normal(num).astype(np.float32)))
        tbn.bias.copy_(torch.tensor(rng.standard_normal(num).astype(np.float32)))
    _copy_state(tbn, ebn)
    return tbn.eval(), ebn.eval()


@pytest.mark.parametrize(
    "make, bn_kind, shape, transpose",
    [
        (lambda nn: nn.Conv2d(3, 4, 3, padding=1), "BatchNorm2d", (2, 3, 5, 5), False),
        (lambda nn: nn.Conv2d(3, 4, 3, bias=False), "BatchNorm2d", (2, 3, 5, 5), False),
        (lambda nn: nn.Conv1d(2, 4, 3), "BatchNorm1d", (2, 2, 7), False),
        (lambda nn: nn.ConvTranspose2d(3, 4, 2, stride=2), "BatchNorm2d", (1, 3, 3, 3), True),
    ],
)
def test_fuse_conv_bn_parity(make, bn_kind, shape, transpose):
    tconv, econv = make(torch.nn).eval(), make(enn).eval()
    _copy_state(tconv, econv)
    tbn, ebn = _bn_pair(4, bn_kind)
    tf = torch.nn.utils.fuse_conv_bn_eval(tconv, tbn, transpose=transpose)
    ef = enn.utils.fuse_conv_bn_eval(econv, ebn, transpose=transpose)
    assert list(ef.state_dict()) == list(tf.state_dict())
    for k, v in tf.state_dict().items():
        np.testing.assert_allclose(ef.state_dict()[k].detach().numpy(), v.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(ef(_e(x)).detach().numpy(), tf(torch.tensor(x)).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_fuse_linear_bn_parity():
    tl, el = torch.nn.Linear(5, 4).eval(), enn.Linear(5, 4).eval()
    _copy_state(tl, el)
    tbn, ebn = _bn_pair(4, "BatchNorm1d")
    tf = torch.nn.utils.fuse_linear_bn_eval(tl, tbn)
    ef = enn.utils.fuse_linear_bn_eval(el, ebn)
    for k, v in tf.state_dict().items():
        np.testing.assert_allclose(ef.state_dict()[k].detach().numpy(), v.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    assert ef.weight.requires_grad == tf.weight.requires_grad
