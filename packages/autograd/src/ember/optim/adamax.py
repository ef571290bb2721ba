"""Adamax, the infinity-norm variant of Adam.

Reference: Kingma & Ba, "Adam: A Method for Stochastic Optimization" (ICLR 2015), section 7.1;
PyTorch's ``torch.optim.Adamax``.
"""

from __future__ import annotations

import ember
from ember._tensor import Tensor

from .optimizer import (
    Optimizer,
    _evaluate_closure,
    _get_scalar_dtype,
    _get_value,
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
        foreach (bool, optional): accepted for compatibility; ember runs the single-tensor loop.
        maximize (bool, default False): maximize the objective.
        differentiable (bool, default False): run the step with autograd enabled.
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
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
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
            params, grads, exp_avgs, exp_infs, state_steps = [], [], [], [], []
            for p in group["params"]:
                if p.grad is None:
                    continue
                params.append(p)
                grads.append(p.grad)
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = ember.tensor(0.0, dtype=_get_scalar_dtype())
                    state["exp_avg"] = ember.zeros_like(p)
                    state["exp_inf"] = ember.zeros_like(p)
                exp_avgs.append(state["exp_avg"])
                exp_infs.append(state["exp_inf"])
                state_steps.append(state["step"])
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
            )
        return loss


def adamax(params, grads, exp_avgs, exp_infs, state_steps, *, eps, beta1, beta2, lr, weight_decay, maximize):
    """Functional Adamax (PyTorch's ``torch.optim.adamax.adamax``, single-tensor form); see :class:`Adamax`."""
    lr = _to_scalar(lr)
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
        exp_inf.copy_(ember.maximum(exp_inf.mul_(beta2), grad.abs().add_(eps)))
        bias_correction = 1 - beta1 ** _get_value(step_t)
        clr = lr / bias_correction
        param.addcdiv_(exp_avg, exp_inf, value=-clr)
