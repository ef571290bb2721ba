"""Stochastic weight averaging and exponential moving averages of model weights.

:class:`AveragedModel` keeps a running (SWA) or exponential (EMA) average of a model's parameters;
:class:`SWALR` anneals the learning rate to a constant SWA value; :func:`update_bn` recomputes
batch-norm statistics for the averaged weights.

References: Izmailov et al., "Averaging Weights Leads to Wider Optima and Better Generalization"
(UAI 2018); PyTorch's ``torch/optim/swa_utils.py``.
"""

from __future__ import annotations

import itertools
import math
import warnings
from copy import deepcopy

import ember
from ember._tensor import Tensor
from ember.nn import Module

from .lr_scheduler import LRScheduler, _format_param

__all__ = [
    "AveragedModel",
    "update_bn",
    "SWALR",
    "get_ema_multi_avg_fn",
    "get_swa_multi_avg_fn",
    "get_ema_avg_fn",
    "get_swa_avg_fn",
]


def _is_float_or_complex(t: Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def get_ema_multi_avg_fn(decay: float = 0.999):
    """An in-place EMA update of lists of tensors: ``ema = decay * ema + (1 - decay) * current``.

    Args:
        decay (float, default 0.999): in ``[0, 1]``.

    Returns:
        Callable ``(ema_param_list, current_param_list, num_averaged) -> None`` for ``multi_avg_fn``.

    Raises:
        ValueError: ``decay`` outside ``[0, 1]``.
    """
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")

    def ema_update(ema_param_list, current_param_list, _):
        with ember.no_grad():
            if _is_float_or_complex(ema_param_list[0]):
                for p_ema, p_model in zip(ema_param_list, current_param_list):
                    p_ema.lerp_(p_model, 1 - decay)
            else:
                for p_ema, p_model in zip(ema_param_list, current_param_list):
                    p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    """An in-place running-mean update of lists of tensors: ``avg = avg + (current - avg) / (n + 1)``.

    Returns:
        Callable ``(averaged_param_list, current_param_list, num_averaged) -> None`` for ``multi_avg_fn``.
    """

    def swa_update(averaged_param_list, current_param_list, num_averaged):
        with ember.no_grad():
            n = num_averaged.item() if isinstance(num_averaged, Tensor) else num_averaged
            if _is_float_or_complex(averaged_param_list[0]):
                for p_avg, p_model in zip(averaged_param_list, current_param_list):
                    p_avg.lerp_(p_model, 1 / (n + 1))
            else:
                for p_avg, p_model in zip(averaged_param_list, current_param_list):
                    p_avg.copy_(p_avg + (p_model - p_avg) / (n + 1))

    return swa_update


def get_ema_avg_fn(decay: float = 0.999):
    """An EMA update of one tensor, returning ``decay * ema + (1 - decay) * current``.

    Args:
        decay (float, default 0.999): in ``[0, 1]``.

    Returns:
        Callable ``(ema_param, current_param, num_averaged) -> Tensor`` for ``avg_fn``.

    Raises:
        ValueError: ``decay`` outside ``[0, 1]``.
    """
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")

    def ema_update(ema_param, current_param, num_averaged):
        with ember.no_grad():
            return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """A running-mean update of one tensor, returning ``avg + (current - avg) / (num_averaged + 1)``.

    Returns:
        Callable ``(averaged_param, current_param, num_averaged) -> Tensor`` for ``avg_fn``.
    """

    def swa_update(averaged_param, current_param, num_averaged):
        with ember.no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` whose parameters are an average of ``model``'s over calls to :meth:`update_parameters`.

    The first call copies the parameters; later calls apply ``avg_fn`` / ``multi_avg_fn``
    (default: the equal-weight running mean of SWA). Without ``use_buffers``, buffers (such as
    batch-norm statistics) are copied from ``model`` at each update, not averaged; run
    :func:`update_bn` afterwards to recompute them for the averaged weights.

    Args:
        model (Module): the model to average (deep-copied into ``self.module``).
        device (optional): device for the averaged copy.
        avg_fn (callable, optional): ``(averaged, current, num_averaged) -> Tensor`` per tensor.
        multi_avg_fn (callable, optional): ``(averaged_list, current_list, num_averaged) -> None``,
            updating the lists in place (e.g. :func:`get_ema_multi_avg_fn`).
        use_buffers (bool, default False): average the buffers together with the parameters.

    Attributes:
        module (Module): the averaged copy; ``forward`` calls it.
        n_averaged (Tensor): int64 buffer, the number of models averaged so far.

    Raises:
        AssertionError: both ``avg_fn`` and ``multi_avg_fn`` given.

    Example::

        >>> ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))
        >>> for x in loader:
        ...     train_step(model, x)
        ...     ema.update_parameters(model)
    """

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", ember.tensor(0, dtype=ember.long, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        """Run the averaged copy."""
        return self.module(*args, **kwargs)

    def update_parameters(self, model) -> None:
        """Fold ``model``'s current parameters (and buffers with ``use_buffers``) into the average."""
        with ember.no_grad():
            self._update_parameters(model)

    def _update_parameters(self, model) -> None:
        self_param = (
            itertools.chain(self.module.parameters(), self.module.buffers()) if self.use_buffers else self.parameters()
        )
        model_param = itertools.chain(model.parameters(), model.buffers()) if self.use_buffers else model.parameters()
        self_param_detached = []
        model_param_detached = []
        copy_param = bool(self.n_averaged == 0)
        for p_averaged, p_model in zip(self_param, model_param):
            p_model_ = p_model.detach().to(p_averaged.device)
            self_param_detached.append(p_averaged.detach())
            model_param_detached.append(p_model_)
            if copy_param:
                p_averaged.detach().copy_(p_model_)

        n_averaged = int(self.n_averaged.item())
        if n_averaged > 0:
            if self.multi_avg_fn is not None or self.avg_fn is None:
                # Group by (device, dtype), as PyTorch does for its multi-tensor kernels.
                groups: dict = {}
                for p_averaged, p_model in zip(self_param_detached, model_param_detached):
                    key = (str(p_averaged.device), p_averaged.dtype)
                    groups.setdefault(key, ([], []))
                    groups[key][0].append(p_averaged)
                    groups[key][1].append(p_model)
                multi_avg_fn = self.multi_avg_fn if self.multi_avg_fn is not None else get_swa_multi_avg_fn()
                for self_params, model_params in groups.values():
                    multi_avg_fn(self_params, model_params, self.n_averaged.to(self_params[0].device))
            else:
                for p_averaged, p_model in zip(self_param_detached, model_param_detached):
                    n = self.n_averaged.to(p_averaged.device)
                    p_averaged.detach().copy_(self.avg_fn(p_averaged.detach(), p_model, n))

        if not self.use_buffers:
            # Keep the buffers (e.g. batch-norm running statistics) in sync with the model.
            for b_swa, b_model in zip(self.module.buffers(), model.buffers()):
                b_swa.detach().copy_(b_model.detach().to(b_swa.device))
        self.n_averaged.add_(1)


def update_bn(loader, model, device=None) -> None:
    """Recompute the batch-norm running statistics of ``model`` with one pass over ``loader``.

    Each batch-norm module's statistics are reset and re-estimated as a cumulative average
    (``momentum=None``) in training mode; the momenta and the training flag are restored afterwards.

    Args:
        loader (iterable): batches; a list/tuple batch contributes its first element.
        model (Module): the model (typically an :class:`AveragedModel`).
        device (optional): moves each batch there before the forward pass.
    """
    from ember.nn.modules.batchnorm import _BatchNorm

    with ember.no_grad():
        momenta = {}
        for module in model.modules():
            if isinstance(module, _BatchNorm):
                module.reset_running_stats()
                momenta[module] = module.momentum
        if not momenta:
            return
        was_training = model.training
        model.train()
        for module in momenta:
            module.momentum = None
        for input in loader:
            if isinstance(input, (list, tuple)):
                input = input[0]
            if device is not None:
                input = input.to(device)
            model(input)
        for bn_module in momenta:
            bn_module.momentum = momenta[bn_module]
        model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's lr to a fixed ``swa_lr`` over ``anneal_epochs``, then hold it.

    With ``alpha_t = anneal_func(min(1, t / anneal_epochs))`` (cosine: ``(1 - cos(pi x)) / 2``;
    linear: ``x``), ``lr_t = swa_lr * alpha_t + lr_0 * (1 - alpha_t)``, computed recursively from the
    group's current lr so that it composes with other schedulers.

    Args:
        optimizer (Optimizer): the wrapped optimizer.
        swa_lr (float or list): the target lr, one for all groups or one per group.
        anneal_epochs (int, default 10): epochs of annealing (0 switches at the first step).
        anneal_strategy (str, default "cos"): "cos" or "linear".
        last_epoch (int, default -1): see :class:`~ember.optim.lr_scheduler.LRScheduler`.

    Raises:
        ValueError: an unknown ``anneal_strategy``, a negative or non-integer ``anneal_epochs``, or a
            list ``swa_lr`` of the wrong length.
    """

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1) -> None:
        swa_lrs = _format_param("swa_lr", optimizer, swa_lr)
        for lr, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ["cos", "linear"]:
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self):
        """The annealed lr of each group for the current step."""
        if not self._get_lr_called_within_step:
            warnings.warn(
                "To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                UserWarning,
                stacklevel=2,
            )
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        prev_lrs = [
            self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha) for group in self.optimizer.param_groups
        ]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [group["swa_lr"] * alpha + lr * (1 - alpha) for group, lr in zip(self.optimizer.param_groups, prev_lrs)]

    def _set_anneal_func(self, anneal_strategy) -> None:
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal

    def state_dict(self) -> dict:
        """Every attribute except the optimizer and the anneal function."""
        return {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore the attributes saved by :meth:`state_dict`."""
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
