"""Stochastic gradient descent, with momentum, dampening, Nesterov momentum and weight decay.

Reference: PyTorch's ``torch.optim.SGD``; Nesterov momentum as in Sutskever et al., "On the
importance of initialization and momentum in deep learning" (ICML 2013).
"""

from __future__ import annotations

from ember._tensor import Tensor

from .optimizer import Optimizer, _evaluate_closure, _to_scalar, _use_grad_for_differentiable

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
        foreach (bool, optional): accepted for compatibility; ember runs the single-tensor loop.
        differentiable (bool, default False): run the step with autograd enabled.
        fused (bool, optional): accepted for compatibility; ``fused=True`` runs the same loop.

    Raises:
        ValueError: a negative ``lr``, ``momentum`` or ``weight_decay``; Nesterov without momentum
            or with dampening; a tensor ``lr`` with more than one element.

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
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")

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
        super().__init__(params, defaults)
        if fused:
            if differentiable:
                raise RuntimeError("`fused` does not support `differentiable`")
            if foreach:
                raise RuntimeError("`fused` and `foreach` cannot be `True` together.")

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
            )

            if group["momentum"] != 0:
                for p, buf in zip(params, momentum_buffer_list):
                    self.state[p]["momentum_buffer"] = buf
        return loss


def sgd(params, grads, momentum_buffer_list, *, weight_decay, momentum, lr, dampening, nesterov, maximize):
    """Functional SGD (PyTorch's ``torch.optim.sgd.sgd``, single-tensor form); see :class:`SGD`.

    ``momentum_buffer_list`` entries that are ``None`` are replaced by the new buffers in place.
    """
    lr = _to_scalar(lr)
    for i, param in enumerate(params):
        grad = grads[i] if not maximize else -grads[i]
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        if momentum != 0:
            buf = momentum_buffer_list[i]
            if buf is None:
                buf = grad.clone().detach()
                momentum_buffer_list[i] = buf
            else:
                buf.mul_(momentum).add_(grad, alpha=1 - dampening)
            if nesterov:
                grad = grad.add(buf, alpha=momentum)
            else:
                grad = buf
        param.add_(grad, alpha=-lr)
