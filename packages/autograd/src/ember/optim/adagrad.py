"""Adagrad, with learning-rate decay and an initial accumulator value.

Reference: Duchi, Hazan & Singer, "Adaptive Subgradient Methods for Online Learning and Stochastic
Optimization" (JMLR 2011). PyTorch's ``torch.optim.Adagrad``.
"""

from __future__ import annotations

import ember
from ember._tensor import Tensor

from .optimizer import (
    Optimizer,
    _as_real,
    _check_fused,
    _check_hyperparameters,
    _evaluate_closure,
    _get_scalar_dtype,
    _get_value,
    _pick_step,
    _to_scalar,
    _use_grad_for_differentiable,
)

__all__ = ["Adagrad", "adagrad"]


class Adagrad(Optimizer):
    """Adagrad, PyTorch's ``torch.optim.Adagrad``.

    Per step ``t`` (from 1), for each parameter with gradient ``g`` (negated when ``maximize``)::

        g = g + weight_decay * theta                  (if weight_decay != 0)
        clr = lr / (1 + (t - 1) * lr_decay)
        s = s + g * g
        theta = theta - clr * g / (sqrt(s) + eps)

    State (created in the constructor, for every parameter, as in PyTorch): ``"step"`` (0-d
    float tensor) and ``"sum"`` (filled with ``initial_accumulator_value``).

    Args:
        params (iterable): tensors or parameter-group dicts.
        lr (float, default 1e-2): learning rate.
        lr_decay (float, default 0): learning-rate decay.
        weight_decay (float, default 0): L2 penalty.
        initial_accumulator_value (float, default 0): initial value of the sums of squares.
        eps (float, default 1e-10): added to the denominator.
        foreach (bool, optional): run the multi-tensor path (``ember._foreach_*`` list ops; same results).
            None (default): it, for plain CPU tensors without ``differentiable`` (it measured faster).
        maximize (bool, default False): maximize the objective.
        differentiable (bool, default False): run the step with autograd enabled, recording the update
            (to differentiate through unrolled steps); parameters may then be non-leaf tensors.
        fused (bool, optional): None or False; ``True`` raises (ember has no fused kernels).

    Raises:
        ValueError: a negative ``lr``, ``lr_decay``, ``weight_decay``, ``initial_accumulator_value``
            or ``eps``.
        RuntimeError: ``fused=True``.
    """

    def __init__(
        self,
        params,
        lr: float | Tensor = 1e-2,
        lr_decay: float = 0,
        weight_decay: float = 0,
        initial_accumulator_value: float = 0,
        eps: float = 1e-10,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        _check_hyperparameters(
            lr,
            ("lr_decay value", lr_decay),
            ("weight_decay value", weight_decay),
            ("initial_accumulator_value value", initial_accumulator_value),
            ("epsilon value", eps),
        )
        defaults = {
            "lr": lr,
            "lr_decay": lr_decay,
            "eps": eps,
            "weight_decay": weight_decay,
            "initial_accumulator_value": initial_accumulator_value,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
            "fused": fused,
        }
        _check_fused(fused, foreach, differentiable)
        super().__init__(params, defaults)

        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["step"] = ember.tensor(0.0, dtype=_get_scalar_dtype())
                init_value = (
                    complex(initial_accumulator_value, initial_accumulator_value)
                    if p.is_complex()
                    else initial_accumulator_value
                )
                state["sum"] = ember.full_like(p, init_value)

    def __setstate__(self, state):
        super().__setstate__(state)
        self._upgrade_loaded_state({"foreach": None, "maximize": False, "differentiable": False, "fused": None})

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
            params, grads, state_sums, state_steps = [], [], [], []
            for p in group["params"]:
                if p.grad is None:
                    continue
                params.append(p)
                grads.append(p.grad)
                state = self.state[p]
                state_sums.append(state["sum"])
                state_steps.append(state["step"])
            adagrad(
                params,
                grads,
                state_sums,
                state_steps,
                lr=group["lr"],
                weight_decay=group["weight_decay"],
                lr_decay=group["lr_decay"],
                eps=group["eps"],
                maximize=group["maximize"],
                foreach=group["foreach"],
                differentiable=group["differentiable"],
            )
        return loss


def adagrad(
    params,
    grads,
    state_sums,
    state_steps,
    fused=None,
    grad_scale=None,
    found_inf=None,
    has_sparse_grad=False,
    foreach=None,
    differentiable=False,
    has_complex=False,
    *,
    lr,
    weight_decay,
    lr_decay,
    eps,
    maximize,
):
    """Functional Adagrad (PyTorch's ``torch.optim.adagrad.adagrad``); see :class:`Adagrad`.

    ``grad_scale``, ``found_inf``, ``has_sparse_grad`` and ``has_complex`` are accepted for PyTorch's signature.
    Runs the multi-tensor path when ``foreach`` (None: :class:`Adagrad`'s default), else the
    single-tensor loop.

    Raises:
        RuntimeError: ``fused=True``.
        AssertionError: ``foreach=True`` with ``differentiable=True``.
    """
    _check_fused(fused, foreach, differentiable)
    impl = _pick_step(foreach, differentiable, params, _single_tensor_adagrad, _multi_tensor_adagrad)
    impl(
        params, grads, state_sums, state_steps, lr=_to_scalar(lr), weight_decay=weight_decay, lr_decay=lr_decay,
        eps=eps, maximize=maximize, differentiable=differentiable,
    )


def _clr(lr, lr_decay, step_t):
    return lr / (1 + (_get_value(step_t) - 1) * lr_decay)


def _single_tensor_adagrad(
    params, grads, state_sums, state_steps, *, lr, weight_decay, lr_decay, eps, maximize, differentiable
):
    for param, grad, state_sum, step_t in zip(params, grads, state_sums, state_steps):
        step_t.add_(1)
        grad = grad if not maximize else -grad
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        clr = _clr(lr, lr_decay, step_t)
        if param.is_complex():
            param = ember.view_as_real(param)
            grad = ember.view_as_real(grad)
            state_sum = ember.view_as_real(state_sum)
        state_sum.addcmul_(grad, grad, value=1)
        std = state_sum.sqrt()
        # differentiable: sqrt's node keeps its result, which an in-place add would overwrite
        std = std + eps if differentiable else std.add_(eps)
        param.addcdiv_(grad, std, value=-clr)


def _multi_tensor_adagrad(
    params, grads, state_sums, state_steps, *, lr, weight_decay, lr_decay, eps, maximize, differentiable
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
    clrs = [-_clr(lr, lr_decay, step_t) for step_t in state_steps]
    params, grads, state_sums = _as_real(params), _as_real(grads), _as_real(state_sums)
    ember._foreach_addcmul_(state_sums, grads, grads, 1)
    stds = ember._foreach_sqrt(state_sums)
    ember._foreach_add_(stds, eps)
    ember._foreach_addcdiv_(params, grads, stds, clrs)
