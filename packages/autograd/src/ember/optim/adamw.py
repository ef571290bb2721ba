"""AdamW: Adam with decoupled weight decay.

Reference: Loshchilov & Hutter, "Decoupled Weight Decay Regularization" (ICLR 2019);
PyTorch's ``torch.optim.AdamW`` (a subclass of Adam with ``decoupled_weight_decay=True``).
"""

from __future__ import annotations

from ember._tensor import Tensor

from .adam import Adam

__all__ = ["AdamW"]


class AdamW(Adam):
    """AdamW, PyTorch's ``torch.optim.AdamW``: :class:`~ember.optim.Adam` with decoupled weight decay.

    Each step first shrinks the parameter, ``theta = theta * (1 - lr * weight_decay)``, then applies
    the Adam update without weight decay in the gradient. Same state as Adam.

    Args:
        params (iterable): tensors or parameter-group dicts.
        lr (float, default 1e-3): learning rate.
        betas (tuple[float, float], default (0.9, 0.999)): decay rates of the two moments.
        eps (float, default 1e-8): added to the denominator.
        weight_decay (float, default 1e-2): decoupled weight decay coefficient.
        amsgrad (bool, default False): use the AMSGrad variant.
        maximize, foreach, capturable, differentiable, fused: as for :class:`~ember.optim.Adam`.

    Raises:
        ValueError: as :class:`~ember.optim.Adam`.
    """

    def __init__(
        self,
        params,
        lr: float | Tensor = 1e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        super().__init__(
            params,
            lr,
            betas,
            eps,
            weight_decay,
            amsgrad,
            foreach=foreach,
            maximize=maximize,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
            decoupled_weight_decay=True,
        )

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
