"""Batch normalisation: ``BatchNorm1d/2d/3d`` (running statistics, ``momentum=None`` for a
cumulative average, ``track_running_stats``), and ``SyncBatchNorm`` (a placeholder until
distributed lands), as in ``torch.nn``.

Reference: Ioffe & Szegedy, "Batch Normalization: Accelerating Deep Network Training by Reducing
Internal Covariate Shift" (2015).
"""

from __future__ import annotations

import ember

from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm"]


class _NormBase(Module):
    """Parameters (``weight``, ``bias``) and buffers (``running_mean``, ``running_var``,
    ``num_batches_tracked``) shared by batch and instance norm, in PyTorch's registration order."""

    _version = 2
    __constants__ = ["track_running_stats", "momentum", "eps", "num_features", "affine"]

    def __init__(
        self,
        num_features,
        eps=1e-5,
        momentum=0.1,
        affine=True,
        track_running_stats=True,
        device=None,
        dtype=None,
        *,
        bias=True,
    ):
        placement = {"device": device, "dtype": dtype}
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if self.affine:
            self.weight = Parameter(ember.empty(num_features, **placement))
            if bias:
                self.bias = Parameter(ember.empty(num_features, **placement))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if self.track_running_stats:
            self.register_buffer("running_mean", ember.zeros(num_features, **placement))
            self.register_buffer("running_var", ember.ones(num_features, **placement))
            self.register_buffer(
                "num_batches_tracked",
                ember.tensor(0, dtype=ember.long, device=device),
            )
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        """Running mean to 0, running variance to 1, ``num_batches_tracked`` to 0."""
        if self.track_running_stats:
            with ember.no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self):
        """Reset the running statistics, then ``weight`` to 1 and ``bias`` to 0."""
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input):
        raise NotImplementedError

    def extra_repr(self):
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}"
        )

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ):
        """Load as :meth:`Module._load_from_state_dict`; a state dict older than version 2 (or
        without version metadata) that lacks ``num_batches_tracked`` loads with that buffer
        unchanged (0 for a fresh module), as in PyTorch."""
        key = prefix + "num_batches_tracked"
        # Version 2 added the num_batches_tracked buffer: an older checkpoint without it keeps the
        # module's own count (0 when the module is new or on the meta device, which has no value).
        from_before_v2 = local_metadata.get("version", None) is None or local_metadata["version"] < 2
        if from_before_v2 and self.track_running_stats and key not in state_dict:
            current = self.num_batches_tracked
            usable = current is not None and current.device.type != "meta"
            state_dict[key] = current if usable else ember.tensor(0, dtype=ember.long)
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )


class _BatchNorm(_NormBase):
    def forward(self, input):
        self._check_input_dim(input)
        # momentum=None: cumulative moving average, factor 1 / num_batches_tracked.
        exponential_average_factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with ember.no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:
                exponential_average_factor = 1.0 / float(self.num_batches_tracked.item())
        # Batch statistics in training, or in eval when no running statistics are kept.
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        use_running = not self.training or self.track_running_stats
        return F.batch_norm(
            input,
            self.running_mean if use_running else None,
            self.running_var if use_running else None,
            self.weight,
            self.bias,
            bn_training,
            exponential_average_factor,
            self.eps,
        )


class BatchNorm1d(_BatchNorm):
    """Batch norm over a 2-D ``(N, C)`` or 3-D ``(N, C, L)`` input, per channel ``C``.

    ``y = (x - E[x]) / sqrt(Var[x] + eps) * weight + bias``, with batch statistics (biased variance)
    in training and the running statistics in eval. Running statistics are updated in training as
    ``running = (1 - momentum) * running + momentum * batch`` (unbiased variance); with
    ``momentum=None`` the factor is ``1 / num_batches_tracked`` (a cumulative average).

    Args:
        num_features (int): ``C``.
        eps (float): added to the variance. Default 1e-5.
        momentum (float or None): running-statistics factor. Default 0.1.
        affine (bool): learn ``weight`` (init 1) and ``bias`` (init 0). Default ``True``.
        bias (bool, keyword-only): with ``affine``, learn the bias. Default ``True``.
        track_running_stats (bool): keep ``running_mean``/``running_var``/``num_batches_tracked``
            buffers; when ``False`` batch statistics are used in eval too. Default ``True``.

    Raises:
        ValueError: the input is not 2-D or 3-D.
    """

    def _check_input_dim(self, input):
        if input.dim() != 2 and input.dim() != 3:
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch norm over a 4-D ``(N, C, H, W)`` input; arguments as :class:`BatchNorm1d`.

    Raises:
        ValueError: the input is not 4-D.

    Example:
        >>> import ember
        >>> ember.nn.BatchNorm2d(100)(ember.randn(20, 100, 35, 45)).shape
        ember.Size([20, 100, 35, 45])
    """

    def _check_input_dim(self, input):
        if input.dim() != 4:
            raise ValueError(f"expected 4D input (got {input.dim()}D input)")


class BatchNorm3d(_BatchNorm):
    """Batch norm over a 5-D ``(N, C, D, H, W)`` input; arguments as :class:`BatchNorm1d`.

    Raises:
        ValueError: the input is not 5-D.
    """

    def _check_input_dim(self, input):
        if input.dim() != 5:
            raise ValueError(f"expected 5D input (got {input.dim()}D input)")


class SyncBatchNorm(_BatchNorm):
    """Batch norm whose statistics are meant to be reduced over every process of a group.

    Until ``ember.distributed`` exists there is only one process, and like PyTorch's outside an
    initialized process group it computes exactly what :class:`BatchNorm1d`/``2d``/``3d`` compute
    (same parameters, buffers and state-dict keys), so models that use it build, train on one
    process, save and load. Asking for synchronization (a ``process_group``) raises in training.

    Args:
        num_features (int): ``C`` of an ``(N, C, *)`` input.
        eps, momentum, affine, track_running_stats, device, dtype, bias: as :class:`BatchNorm1d`.
        process_group (optional): the group to synchronize over; any value but ``None`` raises
            ``NotImplementedError`` in a training forward, since no process groups exist yet.

    Raises:
        ValueError: the input has fewer than 2 dims.
        NotImplementedError: a training forward with a ``process_group``.

    Example:
        >>> import ember
        >>> ember.nn.SyncBatchNorm(3)(ember.randn(4, 3, 2)).shape
        ember.Size([4, 3, 2])
    """

    def __init__(
        self,
        num_features,
        eps=1e-5,
        momentum=0.1,
        affine=True,
        track_running_stats=True,
        process_group=None,
        device=None,
        dtype=None,
        *,
        bias=True,
    ):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input):
        if self.training and self.process_group is not None:
            raise NotImplementedError(
                "SyncBatchNorm cannot synchronize batch statistics across processes: ember.distributed does "
                "not exist yet. Use process_group=None (single-process batch norm) or BatchNorm1d/2d/3d."
            )
        return super().forward(input)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """Replace every ``BatchNorm*d`` in ``module`` (recursively) by a :class:`SyncBatchNorm` sharing
        its parameters and buffers; returns the converted module (a new object for a top-level
        batch norm, ``module`` itself otherwise).

        Example:
            >>> from ember import nn
            >>> nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(nn.BatchNorm2d(3)))[0]
            SyncBatchNorm(3, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)
        """
        converted = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            converted = cls(
                module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats,
                process_group, bias=getattr(module, "bias", None) is not None or not module.affine,
            )
            if module.affine:
                with ember.no_grad():
                    converted.weight = module.weight
                    converted.bias = module.bias
            converted.running_mean = module.running_mean
            converted.running_var = module.running_var
            converted.num_batches_tracked = module.num_batches_tracked
            converted.training = module.training
        for name, child in module.named_children():
            converted.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return converted
