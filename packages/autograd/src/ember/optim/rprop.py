"""Rprop: resilient backpropagation (sign-based updates with per-element adaptive step sizes).

Reference: Riedmiller & Braun, "A Direct Adaptive Method for Faster Backpropagation Learning:
The RPROP Algorithm" (ICNN 1993); PyTorch's ``torch.optim.Rprop`` (the Rprop- variant, without
weight backtracking).
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

__all__ = ["Rprop", "rprop"]


def _initial_step_size(p, group):
    """A parameter's step sizes at its first step: the learning rate (``lr + lr*1j`` for complex ones)."""
    lr = _to_scalar(group["lr"])
    return ember.full_like(p, complex(lr, lr) if p.is_complex() else lr)


class Rprop(Optimizer):
    """Rprop, PyTorch's ``torch.optim.Rprop``.

    Per step, for each parameter with gradient ``g`` (negated when ``maximize``), elementwise::

        s = sign(g * prev)
        eta = etaplus if s > 0, etaminus if s < 0, 1 otherwise
        step_size = clamp(step_size * eta, step_size_min, step_size_max)
        g = 0 where s < 0
        theta = theta - sign(g) * step_size;  prev = g

    State per parameter: ``"step"`` (0-d tensor), ``"prev"`` (the previous gradient, zeroed where
    the sign flipped) and ``"step_size"`` (initialised to ``lr``).

    Args:
        params (iterable): tensors or parameter-group dicts.
        lr (float, default 1e-2): initial step size.
        etas (tuple[float, float], default (0.5, 1.2)): (etaminus, etaplus), multiplicative decrease
            and increase factors.
        step_sizes (tuple[float, float], default (1e-6, 50)): minimal and maximal step sizes.
        capturable (bool, default False): accepted for compatibility.
        foreach (bool, optional): run the multi-tensor path (``ember._foreach_*`` list ops; same results).
            None (default): it, for plain CPU tensors without ``differentiable`` (it measured faster).
        maximize (bool, default False): maximize the objective.
        differentiable (bool, default False): run the step with autograd enabled, recording the update
            (to differentiate through unrolled steps); parameters may then be non-leaf tensors.

    Raises:
        ValueError: a negative ``lr``, etas not satisfying ``0 < etaminus < 1 < etaplus``, a tensor
            ``lr`` with more than one element.
    """

    def __init__(
        self,
        params,
        lr: float | Tensor = 1e-2,
        etas=(0.5, 1.2),
        step_sizes=(1e-6, 50),
        *,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        _check_hyperparameters(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = {
            "lr": lr,
            "etas": etas,
            "step_sizes": step_sizes,
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
            params, grads, state = self._gather_state(group, ["prev"], filled={"step_size": _initial_step_size})
            if any(getattr(grad, "is_sparse", False) for grad in grads):
                raise RuntimeError("Rprop does not support sparse gradients")
            prevs, step_sizes, state_steps = state["prev"], state["step_size"], state["step"]
            etaminus, etaplus = group["etas"]
            step_size_min, step_size_max = group["step_sizes"]
            rprop(
                params,
                grads,
                prevs,
                step_sizes,
                state_steps,
                step_size_min=step_size_min,
                step_size_max=step_size_max,
                etaminus=etaminus,
                etaplus=etaplus,
                maximize=group["maximize"],
                foreach=group["foreach"],
                differentiable=group["differentiable"],
            )
        return loss


def rprop(
    params,
    grads,
    prevs,
    step_sizes,
    state_steps,
    foreach=None,
    capturable=False,
    maximize=False,
    differentiable=False,
    has_complex=False,
    *,
    step_size_min,
    step_size_max,
    etaminus,
    etaplus,
):
    """Functional Rprop (PyTorch's ``torch.optim.rprop.rprop``); see :class:`Rprop`.

    Runs the multi-tensor path when ``foreach`` (None: the optimizer class's default), else the
    single-tensor loop.

    Raises:
        AssertionError: ``foreach=True`` with ``differentiable=True``.
    """
    impl = _pick_step(foreach, differentiable, params, _single_tensor_rprop, _multi_tensor_rprop)
    impl(
        params, grads, prevs, step_sizes, state_steps, step_size_min=step_size_min, step_size_max=step_size_max,
        etaminus=etaminus, etaplus=etaplus, maximize=maximize, differentiable=differentiable,
    )


def _factors(sign, etaminus, etaplus):
    """The step-size factors from ``sign`` (of grad * prev): etaplus where positive, etaminus where negative, 1
    where zero (masked_fill rather than boolean-index assignment: it takes 0-d tensors too)."""
    factors = sign.masked_fill(sign.gt(0), etaplus)
    factors = factors.masked_fill(sign.lt(0), etaminus)
    return factors.masked_fill(sign.eq(0), 1)


def _single_tensor_rprop(
    params, grads, prevs, step_sizes, state_steps, *, step_size_min, step_size_max, etaminus, etaplus, maximize,
    differentiable,
):
    for i, param in enumerate(params):
        grad = grads[i] if not maximize else -grads[i]
        prev = prevs[i]
        step_size = step_sizes[i]
        step = state_steps[i]
        step.add_(1)
        if param.is_complex():
            grad = ember.view_as_real(grad)
            prev = ember.view_as_real(prev)
            param = ember.view_as_real(param)
            step_size = ember.view_as_real(step_size)
        # differentiable: mul's node keeps prev, which prev.copy_ below overwrites
        sign = _factors(grad.mul(prev.clone() if differentiable else prev).sign(), etaminus, etaplus)
        step_size.mul_(sign).clamp_(step_size_min, step_size_max)
        # Where the gradient changed sign, skip the update and forget the gradient (Rprop-).
        grad = grad.masked_fill(sign.eq(etaminus), 0)
        # differentiable: addcmul's node keeps step_size, which the next step's mul_ overwrites
        param.addcmul_(grad.sign(), step_size.clone() if differentiable else step_size, value=-1)
        prev.copy_(grad)


def _multi_tensor_rprop(
    params, grads, prevs, step_sizes, state_steps, *, step_size_min, step_size_max, etaminus, etaplus, maximize,
    differentiable,
):
    """The single-tensor loop's ops, one list op at a time over all parameters (the same bits)."""
    if differentiable:
        raise AssertionError("_foreach ops don't support autograd")
    if len(params) == 0:
        return
    if maximize:
        grads = ember._foreach_neg(grads)
    ember._foreach_add_(state_steps, 1)
    params, grads, prevs, step_sizes = _as_real(params), _as_real(grads), _as_real(prevs), _as_real(step_sizes)
    signs = [_factors(s, etaminus, etaplus) for s in ember._foreach_sign(ember._foreach_mul(grads, prevs))]
    ember._foreach_mul_(step_sizes, signs)
    for step_size in step_sizes:  # one clamp_ with both bounds, as the single-tensor loop
        step_size.clamp_(step_size_min, step_size_max)
    grads = [grad.masked_fill(sign.eq(etaminus), 0) for grad, sign in zip(grads, signs)]
    ember._foreach_addcmul_(params, ember._foreach_sign(grads), step_sizes, -1)
    ember._foreach_copy_(prevs, grads)
