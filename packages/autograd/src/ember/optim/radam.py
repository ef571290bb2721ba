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
    _as_real,
    _check_adam_family_args,
    _evaluate_closure,
    _get_value,
    _pick_step,
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
        foreach (bool, optional): run the multi-tensor path (``ember._foreach_*`` list ops; same results).
            None (default): it, for plain CPU tensors without ``differentiable`` (it measured faster).
        maximize (bool, default False): maximize the objective.
        capturable (bool, default False): accepted for compatibility.
        differentiable (bool, default False): run the step with autograd enabled, recording the update
            (to differentiate through unrolled steps); parameters may then be non-leaf tensors.

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
        _check_adam_family_args(lr, betas, eps, weight_decay)
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
            params, grads, state = self._gather_state(group, ["exp_avg", "exp_avg_sq"])
            exp_avgs, exp_avg_sqs, state_steps = state["exp_avg"], state["exp_avg_sq"], state["step"]
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
                foreach=group["foreach"],
                differentiable=group["differentiable"],
            )
        return loss


def radam(
    params,
    grads,
    exp_avgs,
    exp_avg_sqs,
    state_steps,
    decoupled_weight_decay=False,
    foreach=None,
    capturable=False,
    differentiable=False,
    has_complex=False,
    maximize=False,
    *,
    beta1,
    beta2,
    lr,
    weight_decay,
    eps,
):
    """Functional RAdam (PyTorch's ``torch.optim.radam.radam``); see :class:`RAdam`.

    Runs the multi-tensor path when ``foreach`` (None: the optimizer class's default), else the
    single-tensor loop.

    Raises:
        AssertionError: ``foreach=True`` with ``differentiable=True``.
    """
    impl = _pick_step(foreach, differentiable, params, _single_tensor_radam, _multi_tensor_radam)
    impl(
        params, grads, exp_avgs, exp_avg_sqs, state_steps, beta1=beta1, beta2=beta2, lr=_to_scalar(lr),
        weight_decay=weight_decay, eps=eps, maximize=maximize, decoupled_weight_decay=decoupled_weight_decay,
        differentiable=differentiable,
    )


def _radam_step(step, lr, beta1, beta2):
    """(rectified, step size) of step ``step``: with the variance rectified (``rho_t > 5``) the update is
    ``-step_size * m / (sqrt(v) + eps)``, else ``-step_size * m`` (SGD with momentum)."""
    bias_correction1 = 1 - beta1**step
    bias_correction2 = 1 - beta2**step
    rho_inf = 2 / (1 - beta2) - 1
    rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2
    if rho_t > 5.0:
        rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
        return True, lr * rect * bias_correction2**0.5 / bias_correction1
    return False, lr / bias_correction1


def _single_tensor_radam(
    params, grads, exp_avgs, exp_avg_sqs, state_steps, *, beta1, beta2, lr, weight_decay, eps, maximize,
    decoupled_weight_decay, differentiable,
):
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
        if weight_decay != 0:
            if decoupled_weight_decay:
                param.mul_(1 - lr * weight_decay)
            else:
                grad = grad.add(param, alpha=weight_decay)

        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)

        rectified, step_size = _radam_step(_get_value(step_t), lr, beta1, beta2)
        # differentiable: addcdiv's node keeps exp_avg, sqrt's its result; neither may be overwritten
        avg = exp_avg.clone() if differentiable else exp_avg
        if rectified:
            denom = exp_avg_sq.sqrt()
            denom = denom + eps if differentiable else denom.add_(eps)
            param.addcdiv_(avg, denom, value=-step_size)
        else:
            param.add_(avg, alpha=-step_size)


def _multi_tensor_radam(
    params, grads, exp_avgs, exp_avg_sqs, state_steps, *, beta1, beta2, lr, weight_decay, eps, maximize,
    decoupled_weight_decay, differentiable,
):
    """The single-tensor loop's ops, one list op at a time over all parameters (the same bits)."""
    if differentiable:
        raise AssertionError("_foreach ops don't support autograd")
    if len(params) == 0:
        return
    if maximize:
        grads = ember._foreach_neg(grads)
    params, grads, exp_avgs, exp_avg_sqs = _as_real(params), _as_real(grads), _as_real(exp_avgs), _as_real(exp_avg_sqs)
    ember._foreach_add_(state_steps, 1)
    if weight_decay != 0:
        if decoupled_weight_decay:
            ember._foreach_mul_(params, 1 - lr * weight_decay)
        else:
            grads = ember._foreach_add(grads, params, alpha=weight_decay)
    ember._foreach_lerp_(exp_avgs, grads, 1 - beta1)
    ember._foreach_mul_(exp_avg_sqs, beta2)
    ember._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)

    plans = [_radam_step(_get_value(step_t), lr, beta1, beta2) for step_t in state_steps]
    rect = [i for i, (rectified, _) in enumerate(plans) if rectified]
    plain = [i for i, (rectified, _) in enumerate(plans) if not rectified]
    if rect:
        denoms = ember._foreach_sqrt([exp_avg_sqs[i] for i in rect])
        ember._foreach_add_(denoms, eps)
        ember._foreach_addcdiv_([params[i] for i in rect], [exp_avgs[i] for i in rect], denoms,
                                [-plans[i][1] for i in rect])
    for i in plain:  # no list op: add_ takes one alpha for the whole list
        params[i].add_(exp_avgs[i], alpha=-plans[i][1])
