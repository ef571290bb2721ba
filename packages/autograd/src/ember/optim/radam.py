"""RAdam: Adam with a rectified adaptive learning rate.

References: Liu et al., "On the Variance of the Adaptive Learning Rate and Beyond" (ICLR 2020);
Loshchilov & Hutter, "Decoupled Weight Decay Regularization" (ICLR 2019) for
``decoupled_weight_decay``; PyTorch's ``torch.optim.RAdam``.
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

__all__ = ["RAdam", "radam"]


class RAdam(Optimizer):
    """RAdam, PyTorch's ``torch.optim.RAdam``.

    Per step ``t``, for each parameter with gradient ``g`` (negated when ``maximize``)::

        theta = theta * (1 - lr * weight_decay)     (decoupled_weight_decay)
        g = g + weight_decay * theta                (otherwise, if weight_decay != 0)
        m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g
        m_hat = m / (1 - beta1 ** t)
        rho_inf = 2 / (1 - beta2) - 1;  rho_t = rho_inf - 2 t beta2 ** t / (1 - beta2 ** t)
        if rho_t > 5:
            r = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
            theta = theta - lr * m_hat * r * sqrt(1 - beta2 ** t) / (sqrt(v) + eps)
        else:
            theta = theta - lr * m_hat

    State per parameter: ``"step"`` (0-d tensor), ``"exp_avg"``, ``"exp_avg_sq"``.

    Args:
        params (iterable): tensors or parameter-group dicts.
        lr (float, default 1e-3): learning rate.
        betas (tuple[float, float], default (0.9, 0.999)): decay rates of the moments.
        eps (float, default 1e-8): added to the denominator.
        weight_decay (float, default 0): weight decay (L2 penalty, or decoupled).
        decoupled_weight_decay (bool, default False): AdamW-style decay (RAdamW).
        foreach (bool, optional): accepted for compatibility; ember runs the single-tensor loop.
        maximize (bool, default False): maximize the objective.
        capturable (bool, default False): accepted for compatibility.
        differentiable (bool, default False): run the step with autograd enabled.

    Raises:
        ValueError: a negative ``lr``, ``eps`` or ``weight_decay``; a beta outside ``[0, 1)``; a
            tensor ``lr`` with more than one element.
    """

    def __init__(
        self,
        params,
        lr: float | Tensor = 1e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
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
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "decoupled_weight_decay": decoupled_weight_decay,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        self._upgrade_loaded_state(
            {
                "foreach": None,
                "maximize": False,
                "differentiable": False,
                "decoupled_weight_decay": False,
                "capturable": False,
            }
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
            params, grads, exp_avgs, exp_avg_sqs, state_steps = [], [], [], [], []
            for p in group["params"]:
                if p.grad is None:
                    continue
                params.append(p)
                grads.append(p.grad)
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = ember.tensor(0.0, dtype=_get_scalar_dtype())
                    state["exp_avg"] = ember.zeros_like(p)
                    state["exp_avg_sq"] = ember.zeros_like(p)
                exp_avgs.append(state["exp_avg"])
                exp_avg_sqs.append(state["exp_avg_sq"])
                state_steps.append(state["step"])
            beta1, beta2 = group["betas"]
            radam(
                params,
                grads,
                exp_avgs,
                exp_avg_sqs,
                state_steps,
                beta1=beta1,
                beta2=beta2,
                lr=group["lr"],
                weight_decay=group["weight_decay"],
                eps=group["eps"],
                maximize=group["maximize"],
                decoupled_weight_decay=group["decoupled_weight_decay"],
            )
        return loss


def radam(
    params,
    grads,
    exp_avgs,
    exp_avg_sqs,
    state_steps,
    *,
    beta1,
    beta2,
    lr,
    weight_decay,
    eps,
    maximize=False,
    decoupled_weight_decay=False,
):
    """Functional RAdam (PyTorch's ``torch.optim.radam.radam``, single-tensor form); see :class:`RAdam`."""
    lr = _to_scalar(lr)
    for i, param in enumerate(params):
        grad = grads[i] if not maximize else -grads[i]
        exp_avg = exp_avgs[i]
        exp_avg_sq = exp_avg_sqs[i]
        step_t = state_steps[i]
        if param.is_complex():
            param = ember.view_as_real(param)
            grad = ember.view_as_real(grad)
            exp_avg = ember.view_as_real(exp_avg)
            exp_avg_sq = ember.view_as_real(exp_avg_sq)

        step_t.add_(1)
        step = _get_value(step_t)

        if weight_decay != 0:
            if decoupled_weight_decay:
                param.mul_(1 - lr * weight_decay)
            else:
                grad = grad.add(param, alpha=weight_decay)

        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)

        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        bias_corrected_exp_avg = exp_avg / bias_correction1

        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2

        if rho_t > 5.0:
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            adaptive_lr = (bias_correction2**0.5) / exp_avg_sq.sqrt().add_(eps)
            param.add_(bias_corrected_exp_avg * lr * adaptive_lr * rect, alpha=-1.0)
        else:
            param.add_(bias_corrected_exp_avg * lr, alpha=-1.0)
