"""NAdam: Adam with Nesterov momentum, with the momentum-decay schedule of Dozat.

References: Dozat, "Incorporating Nesterov Momentum into Adam" (ICLR 2016 workshop);
Loshchilov & Hutter, "Decoupled Weight Decay Regularization" (ICLR 2019) for
``decoupled_weight_decay``; PyTorch's ``torch.optim.NAdam``.
"""

from __future__ import annotations

import ember
from ember._tensor import Tensor

from .optimizer import (
    Optimizer,
    _as_real,
    _check_adam_family_args,
    _check_hyperparameters,
    _evaluate_closure,
    _get_value,
    _pick_step,
    _to_scalar,
    _use_grad_for_differentiable,
)

__all__ = ["NAdam", "nadam"]


class NAdam(Optimizer):
    """NAdam, PyTorch's ``torch.optim.NAdam``.

    Per step ``t``, for each parameter with gradient ``g`` (negated when ``maximize``)::

        theta = theta * (1 - lr * weight_decay)     (decoupled_weight_decay)
        g = g + weight_decay * theta                (otherwise, if weight_decay != 0)
        mu_t = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
        mu_product = mu_product * mu_t
        m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g
        denom = sqrt(v / (1 - beta2 ** t)) + eps
        theta = theta - lr * (1 - mu_t) / (1 - mu_product) * g / denom
                      - lr * mu_{t+1} / (1 - mu_product * mu_{t+1}) * m / denom

    State per parameter: ``"step"``, ``"mu_product"`` (0-d tensors), ``"exp_avg"``, ``"exp_avg_sq"``.

    Args:
        params (iterable): tensors or parameter-group dicts.
        lr (float, default 2e-3): learning rate.
        betas (tuple[float, float], default (0.9, 0.999)): decay rates of the moments.
        eps (float, default 1e-8): added to the denominator.
        weight_decay (float, default 0): weight decay (L2 penalty, or decoupled).
        momentum_decay (float, default 4e-3): momentum decay ``psi``.
        decoupled_weight_decay (bool, default False): AdamW-style decay (NAdamW).
        foreach (bool, optional): run the multi-tensor path (``ember._foreach_*`` list ops; same results).
            None (default): it, for plain CPU tensors without ``differentiable`` (it measured faster).
        maximize (bool, default False): maximize the objective.
        capturable (bool, default False): accepted for compatibility.
        differentiable (bool, default False): run the step with autograd enabled, recording the update
            (to differentiate through unrolled steps); parameters may then be non-leaf tensors.

    Raises:
        ValueError: a negative ``lr``, ``eps``, ``weight_decay`` or ``momentum_decay``; a beta
            outside ``[0, 1)``; a tensor ``lr`` with more than one element.
    """

    def __init__(
        self,
        params,
        lr: float | Tensor = 2e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum_decay: float = 4e-3,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        _check_adam_family_args(lr, betas, eps, weight_decay)
        _check_hyperparameters(lr, ("momentum_decay value", momentum_decay))
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "momentum_decay": momentum_decay,
            "decoupled_weight_decay": decoupled_weight_decay,
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        self._upgrade_loaded_state(
            {
                "maximize": False,
                "foreach": None,
                "capturable": False,
                "differentiable": False,
                "decoupled_weight_decay": False,
            },
            tensor_keys=("step", "mu_product"),
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
            params, grads, state = self._gather_state(group, ["exp_avg", "exp_avg_sq"], {"mu_product": 1.0})
            exp_avgs, exp_avg_sqs, mu_products = state["exp_avg"], state["exp_avg_sq"], state["mu_product"]
            state_steps = state["step"]
            beta1, beta2 = group["betas"]
            nadam(
                params,
                grads,
                exp_avgs,
                exp_avg_sqs,
                mu_products,
                state_steps,
                beta1=beta1,
                beta2=beta2,
                lr=group["lr"],
                weight_decay=group["weight_decay"],
                momentum_decay=group["momentum_decay"],
                eps=group["eps"],
                decoupled_weight_decay=group["decoupled_weight_decay"],
                maximize=group["maximize"],
                foreach=group["foreach"],
                differentiable=group["differentiable"],
            )
        return loss


def nadam(
    params,
    grads,
    exp_avgs,
    exp_avg_sqs,
    mu_products,
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
    momentum_decay,
    eps,
):
    """Functional NAdam (PyTorch's ``torch.optim.nadam.nadam``); see :class:`NAdam`.

    Runs the multi-tensor path when ``foreach`` (None: the optimizer class's default), else the
    single-tensor loop.

    Raises:
        AssertionError: ``foreach=True`` with ``differentiable=True``.
    """
    impl = _pick_step(foreach, differentiable, params, _single_tensor_nadam, _multi_tensor_nadam)
    impl(
        params, grads, exp_avgs, exp_avg_sqs, mu_products, state_steps, beta1=beta1, beta2=beta2, lr=_to_scalar(lr),
        weight_decay=weight_decay, momentum_decay=momentum_decay, eps=eps,
        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize, differentiable=differentiable,
    )


def _mu(beta1, momentum_decay, step):
    """NAdam's momentum coefficient of step ``step``: ``beta1 * (1 - 0.5 * 0.96 ** (step * momentum_decay))``."""
    return beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))


def _single_tensor_nadam(
    params, grads, exp_avgs, exp_avg_sqs, mu_products, state_steps, *, beta1, beta2, lr, weight_decay,
    momentum_decay, eps, decoupled_weight_decay, maximize, differentiable,
):
    for i, param in enumerate(params):
        grad = grads[i] if not maximize else -grads[i]
        exp_avg = exp_avgs[i]
        exp_avg_sq = exp_avg_sqs[i]
        mu_product = mu_products[i]
        step_t = state_steps[i]
        if param.is_complex():
            param = ember.view_as_real(param)
            grad = ember.view_as_real(grad)
            exp_avg = ember.view_as_real(exp_avg)
            exp_avg_sq = ember.view_as_real(exp_avg_sq)

        step_t.add_(1)
        step = _get_value(step_t)
        bias_correction2 = 1 - beta2**step

        if weight_decay != 0:
            if decoupled_weight_decay:
                param.mul_(1 - lr * weight_decay)
            else:
                grad = grad.add(param, alpha=weight_decay)

        mu = _mu(beta1, momentum_decay, step)
        mu_next = _mu(beta1, momentum_decay, step + 1)
        mu_product.mul_(mu)

        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = exp_avg_sq.div(bias_correction2).sqrt()
        # differentiable: sqrt's node keeps its result, addcdiv's keeps exp_avg; neither may be overwritten
        denom = denom + eps if differentiable else denom.add_(eps)

        mu_product_value = _get_value(mu_product)
        mu_product_next = mu_product_value * mu_next
        param.addcdiv_(grad, denom, value=(-lr * (1.0 - mu) / (1.0 - mu_product_value)))
        param.addcdiv_(exp_avg.clone() if differentiable else exp_avg, denom,
                       value=(-lr * mu_next) / (1.0 - mu_product_next))


def _multi_tensor_nadam(
    params, grads, exp_avgs, exp_avg_sqs, mu_products, state_steps, *, beta1, beta2, lr, weight_decay,
    momentum_decay, eps, decoupled_weight_decay, maximize, differentiable,
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
    steps = [_get_value(step_t) for step_t in state_steps]
    if weight_decay != 0:
        if decoupled_weight_decay:
            ember._foreach_mul_(params, 1 - lr * weight_decay)
        else:
            grads = ember._foreach_add(grads, params, alpha=weight_decay)
    mus = [_mu(beta1, momentum_decay, step) for step in steps]
    mu_nexts = [_mu(beta1, momentum_decay, step + 1) for step in steps]
    ember._foreach_mul_(mu_products, mus)

    ember._foreach_lerp_(exp_avgs, grads, 1 - beta1)
    ember._foreach_mul_(exp_avg_sqs, beta2)
    ember._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)
    denoms = ember._foreach_div(exp_avg_sqs, [1 - beta2**step for step in steps])
    ember._foreach_sqrt_(denoms)
    ember._foreach_add_(denoms, eps)

    products = [_get_value(mu_product) for mu_product in mu_products]
    grad_values = [-lr * (1.0 - mu) / (1.0 - product) for mu, product in zip(mus, products)]
    avg_values = [(-lr * mu_next) / (1.0 - product * mu_next) for mu_next, product in zip(mu_nexts, products)]
    ember._foreach_addcdiv_(params, grads, denoms, grad_values)
    ember._foreach_addcdiv_(params, exp_avgs, denoms, avg_values)
