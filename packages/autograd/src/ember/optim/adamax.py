"""Adamax, the infinity-norm variant of Adam.

Reference: Kingma & Ba, "Adam: A Method for Stochastic Optimization" (ICLR 2015), section 7.1;
PyTorch's ``torch.optim.Adamax``.
"""

from __future__ import annotations

import ember
from ember._tensor import Tensor

from .optimizer import (
    Optimizer,
    _as_real,
    _check_adam_family_args,
    _evaluate_closure,
    _get_value,
    _pick_step,
    _to_scalar,
    _use_grad_for_differentiable,
)

__all__ = ["Adamax", "adamax"]


class Adamax(Optimizer):
    """Adamax (Adam with the infinity norm), PyTorch's ``torch.optim.Adamax``.

    Per step ``t``, for each parameter with gradient ``g`` (negated when ``maximize``)::

        g = g + weight_decay * theta                     (if weight_decay != 0)
        m = beta1 * m + (1 - beta1) * g
        u = max(beta2 * u, |g| + eps)
        theta = theta - lr / (1 - beta1 ** t) * m / u

    State per parameter: ``"step"`` (0-d tensor), ``"exp_avg"`` (m), ``"exp_inf"`` (u).

    Args:
        params (iterable): tensors or parameter-group dicts.
        lr (float, default 2e-3): learning rate.
        betas (tuple[float, float], default (0.9, 0.999)): decay rates of m and u.
        eps (float, default 1e-8): added to ``|g|`` for numerical stability.
        weight_decay (float, default 0): L2 penalty.
        foreach (bool, optional): run the multi-tensor path (``ember._foreach_*`` list ops; same results).
            None (default): it, for plain CPU tensors without ``differentiable`` (it measured faster).
        maximize (bool, default False): maximize the objective.
        differentiable (bool, default False): run the step with autograd enabled, recording the update
            (to differentiate through unrolled steps); parameters may then be non-leaf tensors.
        capturable (bool, default False): accepted for compatibility.

    Raises:
        ValueError: a negative ``lr``, ``eps`` or ``weight_decay``; a beta outside ``[0, 1)``; a
            tensor ``lr`` with more than one element.
    """

    def __init__(
        self,
        params,
        lr: float | Tensor = 2e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        _check_adam_family_args(lr, betas, eps, weight_decay)
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
            "capturable": capturable,
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
            params, grads, state = self._gather_state(group, ["exp_avg", "exp_inf"])
            exp_avgs, exp_infs, state_steps = state["exp_avg"], state["exp_inf"], state["step"]
            beta1, beta2 = group["betas"]
            adamax(
                params,
                grads,
                exp_avgs,
                exp_infs,
                state_steps,
                eps=group["eps"],
                beta1=beta1,
                beta2=beta2,
                lr=group["lr"],
                weight_decay=group["weight_decay"],
                maximize=group["maximize"],
                foreach=group["foreach"],
                differentiable=group["differentiable"],
            )
        return loss


def adamax(
    params,
    grads,
    exp_avgs,
    exp_infs,
    state_steps,
    foreach=None,
    maximize=False,
    differentiable=False,
    *,
    eps,
    beta1,
    beta2,
    lr,
    weight_decay,
):
    """Functional Adamax (PyTorch's ``torch.optim.adamax.adamax``); see :class:`Adamax`.

    Runs the multi-tensor path when ``foreach`` (None: the optimizer class's default), else the
    single-tensor loop.

    Raises:
        AssertionError: ``foreach=True`` with ``differentiable=True``.
    """
    impl = _pick_step(foreach, differentiable, params, _single_tensor_adamax, _multi_tensor_adamax)
    impl(
        params, grads, exp_avgs, exp_infs, state_steps, eps=eps, beta1=beta1, beta2=beta2, lr=_to_scalar(lr),
        weight_decay=weight_decay, maximize=maximize, differentiable=differentiable,
    )


def _single_tensor_adamax(
    params, grads, exp_avgs, exp_infs, state_steps, *, eps, beta1, beta2, lr, weight_decay, maximize, differentiable
):
    for i, param in enumerate(params):
        grad = grads[i] if not maximize else -grads[i]
        exp_avg = exp_avgs[i]
        exp_inf = exp_infs[i]
        step_t = state_steps[i]
        step_t.add_(1)
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        if param.is_complex():
            param = ember.view_as_real(param)
            grad = ember.view_as_real(grad)
            exp_avg = ember.view_as_real(exp_avg)
            exp_inf = ember.view_as_real(exp_inf)
        exp_avg.lerp_(grad, 1 - beta1)
        norm = grad.abs().add_(eps)
        if differentiable:
            # maximum's and addcdiv's nodes keep their inputs: hand them tensors no later step overwrites
            exp_inf.copy_(ember.maximum(exp_inf.mul(beta2), norm))
            param.addcdiv_(exp_avg.clone(), exp_inf.clone(), value=-_step_size(lr, beta1, step_t))
        else:
            exp_inf.copy_(ember.maximum(exp_inf.mul_(beta2), norm))
            param.addcdiv_(exp_avg, exp_inf, value=-_step_size(lr, beta1, step_t))


def _step_size(lr, beta1, step_t):
    return lr / (1 - beta1 ** _get_value(step_t))


def _multi_tensor_adamax(
    params, grads, exp_avgs, exp_infs, state_steps, *, eps, beta1, beta2, lr, weight_decay, maximize, differentiable
):
    """The single-tensor loop's ops, one list op at a time over all parameters (the same bits)."""
    if differentiable:
        raise AssertionError("_foreach ops don't support autograd")
    if len(params) == 0:
        return
    if maximize:
        grads = ember._foreach_neg(grads)
    ember._foreach_add_(state_steps, 1)
    if weight_decay != 0:
        grads = ember._foreach_add(grads, params, alpha=weight_decay)
    params, grads, exp_avgs, exp_infs = _as_real(params), _as_real(grads), _as_real(exp_avgs), _as_real(exp_infs)
    ember._foreach_lerp_(exp_avgs, grads, 1 - beta1)
    norms = ember._foreach_abs(grads)
    ember._foreach_add_(norms, eps)
    ember._foreach_mul_(exp_infs, beta2)
    ember._foreach_maximum_(exp_infs, norms)
    ember._foreach_addcdiv_(params, exp_avgs, exp_infs, [-_step_size(lr, beta1, step_t) for step_t in state_steps])
