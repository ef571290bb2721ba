"""Stochastic gradient descent, with momentum, dampening, Nesterov momentum and weight decay.

Reference: PyTorch's ``torch.optim.SGD``; Nesterov momentum as in Sutskever et al., "On the
importance of initialization and momentum in deep learning" (ICML 2013).
"""

from __future__ import annotations

import ember
from ember._tensor import Tensor

from .optimizer import (
    Optimizer,
    _check_fused,
    _check_hyperparameters,
    _evaluate_closure,
    _lr_value,
    _pick_step,
    _use_grad_for_differentiable,
)

__all__ = ["SGD", "sgd"]


class SGD(Optimizer):
    r"""Stochastic gradient descent (optionally with momentum), PyTorch's ``torch.optim.SGD``.

    Per step, for each parameter :math:`\theta` with gradient :math:`g` (negated when ``maximize``)::

        g = g + weight_decay * theta                        (if weight_decay != 0)
        b = g  (first step),  b = momentum * b + (1 - dampening) * g   (later steps; if momentum != 0)
        g = g + momentum * b  (nesterov)  or  g = b          (if momentum != 0)
        theta = theta - lr * g

    The momentum buffer is kept in ``state[p]["momentum_buffer"]``.

    Args:
        params (iterable): tensors or parameter-group dicts.
        lr (float, default 1e-3): learning rate.
        momentum (float, default 0): momentum factor.
        dampening (float, default 0): dampening of the momentum.
        weight_decay (float, default 0): L2 penalty.
        nesterov (bool, default False): Nesterov momentum (needs momentum > 0 and dampening 0).
        maximize (bool, default False): maximize the objective instead of minimizing it.
        foreach (bool, optional): run the multi-tensor path (``ember._foreach_*`` list ops; same results).
            None (default): it, for plain CPU tensors without ``differentiable`` (it measured faster).
        differentiable (bool, default False): run the step with autograd enabled, recording the update
            (to differentiate through unrolled steps, and for ``lr``, when it is a tensor that requires
            grad); the first momentum buffer then keeps the gradient's history too (PyTorch detaches it).
        fused (bool, optional): None or False; ``True`` raises (ember has no fused kernels).

    Raises:
        ValueError: a negative ``lr``, ``momentum`` or ``weight_decay``; Nesterov without momentum
            or with dampening; a tensor ``lr`` with more than one element.
        RuntimeError: ``fused=True``.

    Example::

        >>> w = ember.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = ember.optim.SGD([w], lr=0.1, momentum=0.9)
        >>> (w * w).sum().backward()
        >>> opt.step()
        >>> w
        tensor([ 0.8000, -1.6000], requires_grad=True)
    """

    def __init__(
        self,
        params,
        lr: float | Tensor = 1e-3,
        momentum: float = 0,
        dampening: float = 0,
        weight_decay: float = 0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        # PyTorch's SGD tests ``x < 0``: NaN passes
        _check_hyperparameters(lr, ("momentum value", momentum), ("weight_decay value", weight_decay), reject_nan=False)

        defaults = {
            "lr": lr,
            "momentum": momentum,
            "dampening": dampening,
            "weight_decay": weight_decay,
            "nesterov": nesterov,
            "maximize": maximize,
            "foreach": foreach,
            "differentiable": differentiable,
            "fused": fused,
        }
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        _check_fused(fused, foreach, differentiable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        self._upgrade_loaded_state(
            {
                "nesterov": False,
                "maximize": False,
                "foreach": None,
                "differentiable": False,
                "fused": False,
            },
            tensor_keys=(),
        )

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Perform a single optimization step.

        Args:
            closure (Callable, optional): re-evaluates the model and returns the loss.

        Returns:
            The closure's loss, or ``None``.
        """
        loss = _evaluate_closure(closure)

        for group in self.param_groups:
            params = []
            grads = []
            momentum_buffer_list = []
            for p in group["params"]:
                if p.grad is None:
                    continue
                params.append(p)
                grads.append(p.grad)
                if group["momentum"] != 0:
                    momentum_buffer_list.append(self.state[p].get("momentum_buffer"))

            sgd(
                params,
                grads,
                momentum_buffer_list,
                weight_decay=group["weight_decay"],
                momentum=group["momentum"],
                lr=group["lr"],
                dampening=group["dampening"],
                nesterov=group["nesterov"],
                maximize=group["maximize"],
                foreach=group["foreach"],
                differentiable=group["differentiable"],
            )

            if group["momentum"] != 0:
                for p, buf in zip(params, momentum_buffer_list):
                    self.state[p]["momentum_buffer"] = buf
        return loss


def sgd(
    params,
    grads,
    momentum_buffer_list,
    foreach=None,
    differentiable=False,
    fused=None,
    *,
    weight_decay,
    momentum,
    lr,
    dampening,
    nesterov,
    maximize,
):
    """Functional SGD (PyTorch's ``torch.optim.sgd.sgd``); see :class:`SGD`.

    ``momentum_buffer_list`` entries that are ``None`` are replaced by the new buffers in place. Runs
    the multi-tensor path when ``foreach`` (None: :class:`SGD`'s default), else the single-tensor loop.

    Raises:
        RuntimeError: ``fused=True``.
        AssertionError: ``foreach=True`` with ``differentiable=True``.
    """
    _check_fused(fused, foreach, differentiable)
    impl = _pick_step(foreach, differentiable, params, _single_tensor_sgd, _multi_tensor_sgd)
    impl(
        params, grads, momentum_buffer_list, weight_decay=weight_decay, momentum=momentum,
        lr=_lr_value(lr, differentiable),
        dampening=dampening, nesterov=nesterov, maximize=maximize, differentiable=differentiable,
    )


def _single_tensor_sgd(
    params, grads, momentum_buffer_list, *, weight_decay, momentum, lr, dampening, nesterov, maximize, differentiable
):
    for i, param in enumerate(params):
        grad = grads[i] if not maximize else -grads[i]
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        if momentum != 0:
            buf = momentum_buffer_list[i]
            if buf is None:
                buf = grad.clone() if differentiable else grad.clone().detach()
                momentum_buffer_list[i] = buf
            else:
                buf.mul_(momentum).add_(grad, alpha=1 - dampening)
            if nesterov:
                grad = grad.add(buf, alpha=momentum)
            else:
                grad = buf
        if isinstance(lr, Tensor):  # differentiable, with a gradient for lr
            # addcmul's node keeps its factors: not the momentum buffer, which the next step's mul_ overwrites
            param.addcmul_(grad.clone(), lr, value=-1)
        else:
            param.add_(grad, alpha=-lr)


def _multi_tensor_sgd(
    params, grads, momentum_buffer_list, *, weight_decay, momentum, lr, dampening, nesterov, maximize, differentiable
):
    """The single-tensor loop's ops, one list op at a time over all parameters (the same bits)."""
    if differentiable:
        raise AssertionError("_foreach ops don't support autograd")
    if len(params) == 0:
        return
    if maximize:
        grads = ember._foreach_neg(grads)
    if weight_decay != 0:
        grads = ember._foreach_add(grads, params, alpha=weight_decay)
    if momentum != 0:
        old = [i for i, buf in enumerate(momentum_buffer_list) if buf is not None]
        if old:
            bufs = [momentum_buffer_list[i] for i in old]
            ember._foreach_mul_(bufs, momentum)
            ember._foreach_add_(bufs, [grads[i] for i in old], alpha=1 - dampening)
        for i, buf in enumerate(momentum_buffer_list):
            if buf is None:
                momentum_buffer_list[i] = grads[i].clone().detach()
        if nesterov:
            grads = ember._foreach_add(grads, momentum_buffer_list, alpha=momentum)
        else:
            grads = momentum_buffer_list
    ember._foreach_add_(params, grads, alpha=-lr)
