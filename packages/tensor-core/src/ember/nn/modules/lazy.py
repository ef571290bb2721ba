"""Lazy modules, as in ``torch.nn``: :class:`LazyModuleMixin` and ``LazyLinear``,
``LazyConv1d/2d/3d``, ``LazyConvTranspose1d/2d/3d``, ``LazyBatchNorm1d/2d/3d``.

A lazy module is built without its input size (``in_features``, ``in_channels``,
``num_features``); its parameters (and BatchNorm's running statistics) are
:class:`~ember.nn.parameter.UninitializedParameter` / ``UninitializedBuffer`` placeholders. The first
call runs a forward pre-hook that reads the input's shape, materializes the placeholders, draws
the usual initial values (``reset_parameters``), removes its hooks and switches the instance to
``cls_to_become`` (``LazyLinear`` becomes :class:`Linear`), as PyTorch does. Loading a state dict
into a lazy module materializes its placeholders to the stored shapes instead.

Example:
    >>> import ember
    >>> m = ember.nn.LazyLinear(4)
    >>> m.weight
    <UninitializedParameter>
    >>> m(ember.randn(2, 3)).shape
    ember.Size([2, 4])
    >>> type(m).__name__, tuple(m.weight.shape)
    ('Linear', (4, 3))
"""

from __future__ import annotations

import itertools

import ember

from ..parameter import UninitializedBuffer, UninitializedParameter, is_lazy
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d, _BatchNorm, _NormBase
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .linear import Linear
from .normalization import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, _InstanceNorm

__all__ = [
    "LazyModuleMixin",
    "LazyLinear",
    "LazyConv1d",
    "LazyConv2d",
    "LazyConv3d",
    "LazyConvTranspose1d",
    "LazyConvTranspose2d",
    "LazyConvTranspose3d",
    "LazyBatchNorm1d",
    "LazyBatchNorm2d",
    "LazyBatchNorm3d",
    "LazyInstanceNorm1d",
    "LazyInstanceNorm2d",
    "LazyInstanceNorm3d",
]


class LazyModuleMixin:
    """Mixin for modules whose parameter shapes are inferred from the first input.

    A subclass lists the mixin first (``class LazyLinear(LazyModuleMixin, Linear)``), creates its
    parameters as ``UninitializedParameter``, and implements :meth:`initialize_parameters`, which
    materializes them from the input and calls ``reset_parameters``. ``cls_to_become`` names the
    class the instance turns into once initialized (``None``: keep the class).

    Until initialized, the module's ``state_dict`` holds the uninitialized placeholders, and
    ``load_state_dict`` materializes them to the loaded shapes. Optimizers should be built after
    the first forward (a placeholder has no data to optimize).

    Raises:
        RuntimeError: (first forward) ``initialize_parameters`` left a parameter uninitialized.
    """

    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Both hooks are removed (and these attributes deleted) once the module is initialized.
        self._load_hook = self._register_load_state_dict_pre_hook(self._materialize_from_checkpoint)
        self._initialize_hook = self.register_forward_pre_hook(self._initialize_on_first_call, with_kwargs=True)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        # Placeholders have no data to detach: they go into the state dict as they are.
        for name, tensor in self._state_tensors():
            keep = keep_vars or is_lazy(tensor)
            destination[prefix + name] = tensor if keep else tensor.detach()

    def _materialize_from_checkpoint(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ):
        """``load_state_dict`` pre-hook: give each placeholder the shape of the real tensor stored
        under its key, so that the loader can copy the values in."""
        members = itertools.chain(self._parameters.items(), self._buffers.items())
        for name, placeholder in members:
            stored = state_dict.get(prefix + name)
            if placeholder is None or stored is None:
                continue
            if is_lazy(placeholder) and not is_lazy(stored):
                with ember.no_grad():
                    placeholder.materialize(stored.shape)

    def initialize_parameters(self, *args, **kwargs):
        """Materialize the parameters from the first forward's arguments (implemented by subclasses).

        Raises:
            NotImplementedError: the subclass does not implement it.
        """
        raise NotImplementedError(f"initialize_parameters is not implemented for {self.__class__.__name__}")

    def has_uninitialized_params(self):
        """Whether any parameter or buffer is still an uninitialized placeholder."""
        return any(is_lazy(t) for t in itertools.chain(self._parameters.values(), self._buffers.values()))

    def _initialize_on_first_call(self, module, args, kwargs=None):
        """Forward pre-hook: initialize from the input, then stop being lazy (no more hooks, and the
        class ``cls_to_become``)."""
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
        for hook_attribute in ("_initialize_hook", "_load_hook"):
            getattr(module, hook_attribute).remove()
            delattr(module, hook_attribute)
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become


class LazyLinear(LazyModuleMixin, Linear):
    """A :class:`Linear` whose ``in_features`` is inferred from the first input's last dimension.

    Args:
        out_features (int): size of each output sample.
        bias (bool): learn an additive bias. Default ``True``.
        device, dtype: of the parameters once materialized.

    Shape: input ``(*, H_in)``, output ``(*, out_features)``; after the first call the module is a
    :class:`Linear` with ``in_features = H_in`` and PyTorch's default initialisation.
    """

    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        # Built as Linear(0, 0, bias=False), so that no tensor is allocated only to be replaced.
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        """Draw the initial values (as :class:`Linear`) once the parameters are materialized."""
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        """Set ``in_features = input.shape[-1]``, materialize ``weight``/``bias`` and initialize them.

        Raises:
            AssertionError: (after ``load_state_dict``) the input's last dimension differs from the
                loaded weight's, as in PyTorch.
        """
        features = input.shape[-1]
        if self.has_uninitialized_params():
            self.in_features = features
            with ember.no_grad():
                self.weight.materialize((self.out_features, features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()
        elif self.in_features == 0:
            # load_state_dict materialized the weight: the input must agree with its shape.
            if features != self.weight.shape[-1]:
                raise AssertionError(
                    f"The in_features inferred from input: {features} "
                    f"is not equal to in_features from self.weight: "
                    f"{self.weight.shape[-1]}"
                )
            self.in_features = features


class _LazyConvXdMixin(LazyModuleMixin):
    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):
        """Set ``in_channels`` from the input's channel dimension, materialize and initialize.

        Raises:
            RuntimeError: the input does not have ``spatial + 1`` or ``spatial + 2`` dimensions.
            ValueError: ``in_channels`` is not divisible by ``groups``.
        """
        if not self.has_uninitialized_params():
            return
        self.in_channels = self._channels_of(input)
        if self.in_channels % self.groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        # Transposed convolutions store their weight as (in, out / groups, *kernel).
        if self.transposed:
            channel_dims = (self.in_channels, self.out_channels // self.groups)
        else:
            channel_dims = (self.out_channels, self.in_channels // self.groups)
        with ember.no_grad():
            self.weight.materialize((*channel_dims, *self.kernel_size))
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()

    def _channels_of(self, input):
        """The channel count of a batched ``(N, C, *spatial)`` or unbatched ``(C, *spatial)`` input."""
        unbatched_rank = len(self.kernel_size) + 1
        if input.dim() == unbatched_rank:
            return input.shape[0]
        if input.dim() == unbatched_rank + 1:
            return input.shape[1]
        raise RuntimeError(
            f"Expected {unbatched_rank}D (unbatched) or {unbatched_rank + 1}D (batched) input "
            f"to {self.__class__.__name__}, but "
            f"got input of size: {input.shape}"
        )


def _lazy_conv_init(self, out_channels, bias, placement):
    self.weight = UninitializedParameter(**placement)
    self.out_channels = out_channels
    if bias:
        self.bias = UninitializedParameter(**placement)


class _LazyConvNd(_LazyConvXdMixin):
    """The constructor of the lazy convolutions: their non-lazy class's arguments without ``in_channels``."""

    def __init__(
        self,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups=1,
        bias=True,
        padding_mode="zeros",
        device=None,
        dtype=None,
    ):
        placement = {"device": device, "dtype": dtype}
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode, **placement)
        _lazy_conv_init(self, out_channels, bias, placement)


class _LazyConvTransposeNd(_LazyConvXdMixin):
    """The constructor of the lazy transposed convolutions (their argument order differs from the convolutions')."""

    def __init__(
        self,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups=1,
        bias=True,
        dilation=1,
        padding_mode="zeros",
        device=None,
        dtype=None,
    ):
        placement = {"device": device, "dtype": dtype}
        super().__init__(
            0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation, padding_mode, **placement
        )
        _lazy_conv_init(self, out_channels, bias, placement)


class LazyConv1d(_LazyConvNd, Conv1d):
    """A :class:`Conv1d` whose ``in_channels`` is inferred from the first input (``input.size(1)``,
    or ``size(0)`` unbatched). Arguments as :class:`Conv1d` without ``in_channels``; becomes a
    :class:`Conv1d` after the first call."""

    cls_to_become = Conv1d


class LazyConv2d(_LazyConvNd, Conv2d):
    """A :class:`Conv2d` whose ``in_channels`` is inferred from the first input; arguments as
    :class:`Conv2d` without ``in_channels``; becomes a :class:`Conv2d` after the first call.

    Example:
        >>> import ember
        >>> m = ember.nn.LazyConv2d(8, 3)
        >>> m(ember.randn(1, 3, 5, 5)).shape, type(m).__name__
        (ember.Size([1, 8, 3, 3]), 'Conv2d')
    """

    cls_to_become = Conv2d


class LazyConv3d(_LazyConvNd, Conv3d):
    """A :class:`Conv3d` whose ``in_channels`` is inferred from the first input; arguments as
    :class:`Conv3d` without ``in_channels``; becomes a :class:`Conv3d` after the first call."""

    cls_to_become = Conv3d


class LazyConvTranspose1d(_LazyConvTransposeNd, ConvTranspose1d):
    """A :class:`ConvTranspose1d` whose ``in_channels`` is inferred from the first input; arguments
    as :class:`ConvTranspose1d` without ``in_channels``; becomes a :class:`ConvTranspose1d`."""

    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTransposeNd, ConvTranspose2d):
    """A :class:`ConvTranspose2d` whose ``in_channels`` is inferred from the first input; arguments
    as :class:`ConvTranspose2d` without ``in_channels``; becomes a :class:`ConvTranspose2d`."""

    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTransposeNd, ConvTranspose3d):
    """A :class:`ConvTranspose3d` whose ``in_channels`` is inferred from the first input; arguments
    as :class:`ConvTranspose3d` without ``in_channels``; becomes a :class:`ConvTranspose3d`."""

    cls_to_become = ConvTranspose3d


class _LazyNormBase(LazyModuleMixin, _NormBase):
    def __init__(
        self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None, *, bias=True
    ):
        placement = {"device": device, "dtype": dtype}
        # affine and track_running_stats False: no tensors that would be replaced right away.
        super().__init__(0, eps, momentum, False, False, **placement, bias=False)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if self.affine:
            self.weight = UninitializedParameter(**placement)
            if bias:
                self.bias = UninitializedParameter(**placement)
        if self.track_running_stats:
            self.running_mean = UninitializedBuffer(**placement)
            self.running_var = UninitializedBuffer(**placement)
            self.num_batches_tracked = ember.tensor(0, dtype=ember.long, device=device)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def _feature_dim(self, input):
        return 1

    def initialize_parameters(self, input):
        """Set ``num_features`` to the input's channel count (dim 1, or dim 0 of an unbatched instance
        norm input), materialize the parameters and running statistics, and initialize them
        (weight 1, bias 0, running mean 0, running variance 1)."""
        if self.has_uninitialized_params():
            self.num_features = input.shape[self._feature_dim(input)]
            with ember.no_grad():
                if self.affine:
                    self.weight.materialize((self.num_features,))
                    if self.bias is not None:
                        self.bias.materialize((self.num_features,))
                if self.track_running_stats:
                    self.running_mean.materialize((self.num_features,))
                    self.running_var.materialize((self.num_features,))
                self.reset_parameters()


class LazyBatchNorm1d(_LazyNormBase, _BatchNorm):
    """A :class:`BatchNorm1d` whose ``num_features`` is inferred from ``input.size(1)``; arguments
    as :class:`BatchNorm1d` without ``num_features``; becomes a :class:`BatchNorm1d`.

    Raises:
        ValueError: the input is not 2-D or 3-D.
    """

    cls_to_become = BatchNorm1d

    def _check_input_dim(self, input):
        if input.dim() != 2 and input.dim() != 3:
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class LazyBatchNorm2d(_LazyNormBase, _BatchNorm):
    """A :class:`BatchNorm2d` whose ``num_features`` is inferred from ``input.size(1)``; becomes a
    :class:`BatchNorm2d`.

    Raises:
        ValueError: the input is not 4-D.
    """

    cls_to_become = BatchNorm2d

    def _check_input_dim(self, input):
        if input.dim() != 4:
            raise ValueError(f"expected 4D input (got {input.dim()}D input)")


class LazyBatchNorm3d(_LazyNormBase, _BatchNorm):
    """A :class:`BatchNorm3d` whose ``num_features`` is inferred from ``input.size(1)``; becomes a
    :class:`BatchNorm3d`.

    Raises:
        ValueError: the input is not 5-D.
    """

    cls_to_become = BatchNorm3d

    def _check_input_dim(self, input):
        if input.dim() != 5:
            raise ValueError(f"expected 5D input (got {input.dim()}D input)")


class _LazyInstanceNorm(_LazyNormBase, _InstanceNorm):
    def _feature_dim(self, input):
        # Unbatched inputs have no N: the channels are dim 0.
        return input.dim() - self._no_batch_dim


class LazyInstanceNorm1d(_LazyInstanceNorm):
    """An :class:`InstanceNorm1d` whose ``num_features`` is inferred from the input's channels;
    arguments as :class:`InstanceNorm1d` without ``num_features`` (but ``affine=True`` and
    ``track_running_stats=True`` by default, as in PyTorch); becomes an :class:`InstanceNorm1d`.

    Raises:
        ValueError: the input is not 2-D or 3-D.

    Example:
        >>> import ember
        >>> m = ember.nn.LazyInstanceNorm1d()
        >>> _ = m(ember.randn(2, 3, 5))
        >>> type(m).__name__, m.num_features, m.weight.shape
        ('InstanceNorm1d', 3, ember.Size([3]))
    """

    cls_to_become = InstanceNorm1d
    _no_batch_dim = 2
    _valid_dims = (2, 3)


class LazyInstanceNorm2d(_LazyInstanceNorm):
    """An :class:`InstanceNorm2d` with ``num_features`` inferred from the input; see
    :class:`LazyInstanceNorm1d`.

    Raises:
        ValueError: the input is not 3-D or 4-D.
    """

    cls_to_become = InstanceNorm2d
    _no_batch_dim = 3
    _valid_dims = (3, 4)


class LazyInstanceNorm3d(_LazyInstanceNorm):
    """An :class:`InstanceNorm3d` with ``num_features`` inferred from the input; see
    :class:`LazyInstanceNorm1d`.

    Raises:
        ValueError: the input is not 4-D or 5-D.
    """

    cls_to_become = InstanceNorm3d
    _no_batch_dim = 4
    _valid_dims = (4, 5)
