"""RMSprop, with the centered variant and momentum.

References: Hinton, "Neural Networks for Machine Learning", lecture 6e; Graves, "Generating Sequences
With Recurrent Neural Networks" (2013, centered version). PyTorch's ``torch.optim.RMSprop``.
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

__all__ = ["RMSprop", "rmsprop"]


class RMSprop(Optimizer):
    """RMSprop, PyTorch's ``torch.optim.RMSprop``.

    Per step, for each parameter with gradient ``g`` (negated when ``maximize``)::

        g = g + weight_decay * theta                      (if weight_decay != 0)
        v = alpha * v + (1 - alpha) * g * g
        avg = sqrt(v - m * m) + eps, m = m.lerp(g, 1 - alpha)   (centered)
        avg = sqrt(v) + eps                                (otherwise)
        b = momentum * b + g / avg; theta = theta - lr * b (momentum > 0)
        theta = theta - lr * g / avg                       (otherwise)

    State per parameter: ``"step"``, ``"square_avg"``, ``"momentum_buffer"`` (momentum > 0) and
    ``"grad_avg"`` (centered).

    Args:
        params (iterable): tensors or parameter-group dicts.
        lr (float, default 1e-2): learning rate.
        alpha (float, default 0.99): smoothing constant.
        eps (float, default 1e-8): added to the denominator.
        weight_decay (float, default 0): L2 penalty.
        momentum (float, default 0): momentum factor.
        centered (bool, default False): normalize by an estimate of the gradient's variance.
        capturable (bool, default False): accepted for compatibility.
        foreach (bool, optional): run the multi-tensor path (``ember._foreach_*`` list ops; same results).
            None (default): it, for plain CPU tensors without ``differentiable`` (it measured faster).
        maximize (bool, default False): maximize the objective.
        differentiable (bool, default False): run the step with autograd enabled, recording the update
            (to differentiate through unrolled steps); parameters may then be non-leaf tensors.

    Raises:
        ValueError: a negative ``lr``, ``eps``, ``momentum``, ``weight_decay`` or ``alpha``.
    """

    def __init__(
        self,
        params,
        lr: float | Tensor = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum: float = 0,
        centered: bool = False,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        _check_hyperparameters(
            lr,
            ("epsilon value", eps),
            ("momentum value", momentum),
            ("weight_decay value", weight_decay),
            ("alpha value", alpha),
        )
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "alpha": alpha,
            "eps": eps,
            "centered": centered,
            "weight_decay": weight_decay,
            "capturable": capturable,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        self._upgrade_loaded_state(
            {
                "momentum": 0,
                "centered": False,
                "foreach": None,
                "maximize": False,
                "differentiable": False,
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
            buffers = ["square_avg"]
            if group["momentum"] > 0:
                buffers.append("momentum_buffer")
            if group["centered"]:
                buffers.append("grad_avg")
            params, grads, state = self._gather_state(group, buffers)
            square_avgs, steps = state["square_avg"], state["step"]
            momentum_buffers, grad_avgs = state.get("momentum_buffer", []), state.get("grad_avg", [])
            rmsprop(
                params,
                grads,
                square_avgs,
                grad_avgs,
                momentum_buffers,
                steps,
                lr=group["lr"],
                alpha=group["alpha"],
                eps=group["eps"],
                weight_decay=group["weight_decay"],
                momentum=group["momentum"],
                centered=group["centered"],
                maximize=group["maximize"],
                foreach=group["foreach"],
                differentiable=group["differentiable"],
            )
        return loss


def rmsprop(
    params,
    grads,
    square_avgs,
    grad_avgs,
    momentum_buffer_list,
    state_steps,
    foreach=None,
    maximize=False,
    differentiable=False,
    capturable=False,
    has_complex=False,
    *,
    lr,
    alpha,
    eps,
    weight_decay,
    momentum,
    centered,
):
    """Functional RMSprop (PyTorch's ``torch.optim.rmsprop.rmsprop``); see :class:`RMSprop`.

    Runs the multi-tensor path when ``foreach`` (None: the optimizer class's default), else the
    single-tensor loop.

    Raises:
        AssertionError: ``foreach=True`` with ``differentiable=True``.
    """
    impl = _pick_step(foreach, differentiable, params, _single_tensor_rmsprop, _multi_tensor_rmsprop)
    impl(
        params, grads, square_avgs, grad_avgs, momentum_buffer_list, state_steps, lr=_to_scalar(lr), alpha=alpha,
        eps=eps, weight_decay=weight_decay, momentum=momentum, centered=centered, maximize=maximize,
        differentiable=differentiable,
    )


def _single_tensor_rmsprop(
    params, grads, square_avgs, grad_avgs, momentum_buffer_list, state_steps, *, lr, alpha, eps, weight_decay,
    momentum, centered, maximize, differentiable,
):
    for i, param in enumerate(params):
        step = state_steps[i]
        grad = grads[i] if not maximize else -grads[i]
        square_avg = square_avgs[i]
        step.add_(1)
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)

        is_complex_param = param.is_complex()
        if is_complex_param:
            param = ember.view_as_real(param)
            grad = ember.view_as_real(grad)
            square_avg = ember.view_as_real(square_avg)

        square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
        if centered:
            grad_avg = grad_avgs[i]
            if is_complex_param:
                grad_avg = ember.view_as_real(grad_avg)
            grad_avg.lerp_(grad, 1 - alpha)
            # differentiable: addcmul's node keeps grad_avg, which the next step's lerp_ overwrites
            centre = grad_avg.clone() if differentiable else grad_avg
            avg = square_avg.addcmul(centre, centre, value=-1).sqrt_()
        else:
            avg = square_avg.sqrt()
        # differentiable: sqrt's node keeps its result, which an in-place add would overwrite
        avg = avg.add(eps) if differentiable else avg.add_(eps)

        if momentum > 0:
            buf = momentum_buffer_list[i]
            if is_complex_param:
                buf = ember.view_as_real(buf)
            buf.mul_(momentum).addcdiv_(grad, avg)
            param.add_(buf, alpha=-lr)
        else:
            param.addcdiv_(grad, avg, value=-lr)


def _multi_tensor_rmsprop(
    params, grads, square_avgs, grad_avgs, momentum_buffer_list, state_steps, *, lr, alpha, eps, weight_decay,
    momentum, centered, maximize, differentiable,
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
    params, grads, square_avgs = _as_real(params), _as_real(grads), _as_real(square_avgs)
    ember._foreach_mul_(square_avgs, alpha)
    ember._foreach_addcmul_(square_avgs, grads, grads, 1 - alpha)
    if centered:
        grad_avgs = _as_real(grad_avgs)
        ember._foreach_lerp_(grad_avgs, grads, 1 - alpha)
        avgs = ember._foreach_addcmul(square_avgs, grad_avgs, grad_avgs, -1)
        ember._foreach_sqrt_(avgs)
    else:
        avgs = ember._foreach_sqrt(square_avgs)
    ember._foreach_add_(avgs, eps)
    if momentum > 0:
        bufs = _as_real(momentum_buffer_list)
        ember._foreach_mul_(bufs, momentum)
        ember._foreach_addcdiv_(bufs, grads, avgs)
        ember._foreach_add_(params, bufs, alpha=-lr)
    else:
        ember._foreach_addcdiv_(params, grads, avgs, -lr)
