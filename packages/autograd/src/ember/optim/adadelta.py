"""Adadelta: an adaptive learning-rate method without a global step size.

Reference: Zeiler, "ADADELTA: An Adaptive Learning Rate Method" (2012), Algorithm 1;
PyTorch's ``torch.optim.Adadelta``.
"""

from __future__ import annotations

import ember
from ember._tensor import Tensor

from .optimizer import (
    Optimizer,
    _as_real,
    _check_hyperparameters,
    _evaluate_closure,
    _pick_step,
    _to_scalar,
    _use_grad_for_differentiable,
)

__all__ = ["Adadelta", "adadelta"]


class Adadelta(Optimizer):
    """Adadelta, PyTorch's ``torch.optim.Adadelta``.

    Per step, for each parameter with gradient ``g`` (negated when ``maximize``)::

        g = g + weight_decay * theta                         (if weight_decay != 0)
        v = rho * v + (1 - rho) * g * g
        delta = sqrt(u + eps) / sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta * delta
        theta = theta - lr * delta

    State per parameter: ``"step"`` (0-d tensor), ``"square_avg"`` (v), ``"acc_delta"`` (u).

    Args:
        params (iterable): tensors or parameter-group dicts.
        lr (float, default 1.0): coefficient that scales delta before it is applied.
        rho (float, default 0.9): decay rate of the running averages.
        eps (float, default 1e-6): added inside the square roots.
        weight_decay (float, default 0): L2 penalty.
        foreach (bool, optional): run the multi-tensor path (``ember._foreach_*`` list ops; same results).
            None (default): it, for plain CPU tensors without ``differentiable`` (it measured faster).
        capturable (bool, default False): accepted for compatibility.
        maximize (bool, default False): maximize the objective.
        differentiable (bool, default False): run the step with autograd enabled, recording the update
            (to differentiate through unrolled steps); parameters may then be non-leaf tensors.

    Raises:
        ValueError: a negative ``lr``, ``eps`` or ``weight_decay``; ``rho`` outside ``[0, 1]``; a
            tensor ``lr`` with more than one element.
    """

    def __init__(
        self,
        params,
        lr: float | Tensor = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0,
        foreach: bool | None = None,
        *,
        capturable: bool = False,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        _check_hyperparameters(
            lr, ("rho value", rho, 1.0, True), ("epsilon value", eps), ("weight_decay value", weight_decay)
        )
        defaults = {
            "lr": lr,
            "rho": rho,
            "eps": eps,
            "weight_decay": weight_decay,
            "maximize": maximize,
            "capturable": capturable,
            "foreach": foreach,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        self._upgrade_loaded_state({"foreach": None, "maximize": False, "differentiable": False, "capturable": False})

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
            params, grads, state = self._gather_state(group, ["square_avg", "acc_delta"])
            square_avgs, acc_deltas, state_steps = state["square_avg"], state["acc_delta"], state["step"]
            adadelta(
                params,
                grads,
                square_avgs,
                acc_deltas,
                state_steps,
                lr=group["lr"],
                rho=group["rho"],
                eps=group["eps"],
                weight_decay=group["weight_decay"],
                maximize=group["maximize"],
                foreach=group["foreach"],
                differentiable=group["differentiable"],
            )
        return loss


def adadelta(
    params,
    grads,
    square_avgs,
    acc_deltas,
    state_steps,
    foreach=None,
    capturable=False,
    maximize=False,
    differentiable=False,
    has_complex=False,
    *,
    lr,
    rho,
    eps,
    weight_decay,
):
    """Functional Adadelta (PyTorch's ``torch.optim.adadelta.adadelta``); see :class:`Adadelta`.

    Runs the multi-tensor path when ``foreach`` (None: the optimizer class's default), else the
    single-tensor loop.

    Raises:
        AssertionError: ``foreach=True`` with ``differentiable=True``.
    """
    impl = _pick_step(foreach, differentiable, params, _single_tensor_adadelta, _multi_tensor_adadelta)
    impl(
        params, grads, square_avgs, acc_deltas, state_steps, lr=_to_scalar(lr), rho=rho, eps=eps,
        weight_decay=weight_decay, maximize=maximize, differentiable=differentiable,
    )


def _single_tensor_adadelta(
    params, grads, square_avgs, acc_deltas, state_steps, *, lr, rho, eps, weight_decay, maximize, differentiable
):
    for param, grad, square_avg, acc_delta, step in zip(params, grads, square_avgs, acc_deltas, state_steps):
        step.add_(1)
        grad = grad if not maximize else -grad
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        is_complex_param = param.is_complex()
        if is_complex_param:
            square_avg = ember.view_as_real(square_avg)
            acc_delta = ember.view_as_real(acc_delta)
            grad = ember.view_as_real(grad)
        square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
        std = square_avg.add(eps).sqrt_()
        delta = acc_delta.add(eps).sqrt_()
        delta.div_(std).mul_(grad)
        acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
        if is_complex_param:
            delta = ember.view_as_complex(delta)
        param.add_(delta, alpha=-lr)


def _multi_tensor_adadelta(
    params, grads, square_avgs, acc_deltas, state_steps, *, lr, rho, eps, weight_decay, maximize, differentiable
):
    """The single-tensor loop's ops, one list op at a time over all parameters (the same bits)."""
    if differentiable:
        raise AssertionError("_foreach ops don't support autograd")
    if len(params) == 0:
        return
    ember._foreach_add_(state_steps, 1)
    if maximize:
        grads = ember._foreach_neg(grads)
    if weight_decay != 0:
        grads = ember._foreach_add(grads, params, alpha=weight_decay)
    grads, square_avgs, acc_deltas = _as_real(grads), _as_real(square_avgs), _as_real(acc_deltas)
    ember._foreach_mul_(square_avgs, rho)
    ember._foreach_addcmul_(square_avgs, grads, grads, 1 - rho)
    stds = ember._foreach_add(square_avgs, eps)
    ember._foreach_sqrt_(stds)
    deltas = ember._foreach_add(acc_deltas, eps)
    ember._foreach_sqrt_(deltas)
    ember._foreach_div_(deltas, stds)
    ember._foreach_mul_(deltas, grads)
    ember._foreach_mul_(acc_deltas, rho)
    ember._foreach_addcmul_(acc_deltas, deltas, deltas, 1 - rho)
    deltas = [ember.view_as_complex(d) if p.is_complex() else d for p, d in zip(params, deltas)]
    ember._foreach_add_(params, deltas, alpha=-lr)
