"""Old PyTorch names ember-autograd keeps for ported programs: ``ember.autograd.Variable`` and
``ember.optim.lr_scheduler._LRScheduler``."""

import pytest

import ember
from ember.autograd import Variable
from ember.optim.lr_scheduler import LRScheduler, _LRScheduler


def test_variable_is_a_detached_alias():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    v = Variable(y)
    assert type(v) is ember.Tensor and v is not y
    assert v.data_ptr() == y.data_ptr() and v.requires_grad is False and v.grad_fn is None
    leaf = Variable(y, requires_grad=True)
    assert leaf.requires_grad and leaf.is_leaf and y.requires_grad
    (leaf * 3).sum().backward()
    assert leaf.grad.tolist() == [3.0, 3.0] and x.grad is None  # detached from y's graph


def test_every_tensor_is_a_variable():
    assert isinstance(ember.ones(1), Variable)
    assert isinstance(ember.nn.Parameter(ember.ones(1)), Variable)
    assert not isinstance([1.0], Variable)


def test_variable_errors():
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got list"):
        Variable([1, 2])
    with pytest.raises(ValueError, match="volatile"):
        Variable(ember.ones(1), volatile=True)


def test_old_scheduler_base_class():
    assert issubclass(_LRScheduler, LRScheduler)

    class Halving(_LRScheduler):
        def get_lr(self):
            return [group["lr"] * 0.5 for group in self.optimizer.param_groups]

    opt = ember.optim.SGD([ember.nn.Parameter(ember.ones(1))], lr=0.8)
    scheduler = Halving(opt)
    lrs = [opt.param_groups[0]["lr"]]
    for _ in range(2):
        opt.step()
        scheduler.step()
        lrs.append(opt.param_groups[0]["lr"])
    assert lrs == [0.4, 0.2, 0.1]  # as PyTorch: the constructor's first step already halves


@pytest.mark.parity
def test_against_pytorch():
    torch = pytest.importorskip("torch")
    t = torch.ones(2)
    e = ember.ones(2)
    for requires_grad in (False, True):
        tv, ev = torch.autograd.Variable(t, requires_grad=requires_grad), Variable(e, requires_grad=requires_grad)
        assert (tv is t, tv.requires_grad, tv.is_leaf) == (ev is e, ev.requires_grad, ev.is_leaf)
    assert isinstance(t, torch.autograd.Variable) == isinstance(e, Variable)

    class TorchHalving(torch.optim.lr_scheduler._LRScheduler):
        def get_lr(self):
            return [group["lr"] * 0.5 for group in self.optimizer.param_groups]

    opt = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.8)
    TorchHalving(opt)
    assert opt.param_groups[0]["lr"] == 0.4
