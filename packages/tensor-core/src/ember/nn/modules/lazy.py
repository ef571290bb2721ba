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
        self._load_hook = self._register_load_state_dict_pre_hook(self._lazy_load_hook)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters, with_kwargs=True)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        # Uninitialized placeholders are saved as they are (detaching them is not allowed).
        for name, param in self._parameters.items():
            if param is not None:
                if not (is_lazy(param) or keep_vars):
                    param = param.detach()
                destination[prefix + name] = param
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                if not (is_lazy(buf) or keep_vars):
                    buf = buf.detach()
                destination[prefix + name] = buf

    def _lazy_load_hook(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        """``load_state_dict`` pre-hook: materialize each placeholder whose key holds a real tensor,
        to that tensor's shape, so that the values can be copied in."""
        for name, param in itertools.chain(self._parameters.items(), self._buffers.items()):
            key = prefix + name
            if key in state_dict and param is not None:
                input_param = state_dict[key]
                if is_lazy(param) and not is_lazy(input_param):
                    with ember.no_grad():
                        param.materialize(input_param.shape)

    def initialize_parameters(self, *args, **kwargs):
        """Materialize the parameters from the first forward's arguments (implemented by subclasses).

        Raises:
            NotImplementedError: the subclass does not implement it.
        """
        raise NotImplementedError(f"initialize_parameters is not implemented for {self.__class__.__name__}")

    def has_uninitialized_params(self):
        """Whether any parameter or buffer is still an uninitialized placeholder."""
        for param in itertools.chain(self._parameters.values(), self._buffers.values()):
            if is_lazy(param):
                return True
        return False

    def _infer_parameters(self, module, args, kwargs=None):
        """Forward pre-hook: initialize from the input, remove the hooks, become ``cls_to_become``."""
        kwargs = kwargs if kwargs else {}
        module.initialize_parameters(*args, **kwargs)
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        module._load_hook.remove()
        delattr(module, "_initialize_hook")
        delattr(module, "_load_hook")
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become

    def _replicate_for_data_parallel(self):
        raise RuntimeError(
            "Modules with uninitialized parameters can't be used with `DataParallel`. "
            "Run a dummy forward pass to correctly initialize the modules"
        )


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
        factory_kwargs = {"device": device, "dtype": dtype}
        # bias=False: no tensor that would be replaced right away.
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(**factory_kwargs)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(**factory_kwargs)

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
        if self.has_uninitialized_params():
            with ember.no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()
        if self.in_features == 0:
            # Materialized by load_state_dict: take in_features from the loaded weight.
            if input.shape[-1] != self.weight.shape[-1]:
                raise AssertionError(
                    f"The in_features inferred from input: {input.shape[-1]} "
                    f"is not equal to in_features from self.weight: "
                    f"{self.weight.shape[-1]}"
                )
            self.in_features = input.shape[-1]


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
        if self.has_uninitialized_params():
            self.in_channels = self._get_in_channels(input)
            if self.in_channels % self.groups != 0:
                raise ValueError("in_channels must be divisible by groups")
            with ember.no_grad():
                if self.transposed:
                    self.weight.materialize((self.in_channels, self.out_channels // self.groups, *self.kernel_size))
                else:
                    self.weight.materialize((self.out_channels, self.in_channels // self.groups, *self.kernel_size))
                if self.bias is not None:
                    self.bias.materialize((self.out_channels,))
                self.reset_parameters()

    def _get_in_channels(self, input):
        num_spatial_dims = self._get_num_spatial_dims()
        num_dims_no_batch = num_spatial_dims + 1  # +1 for the channel dimension
        num_dims_batch = num_dims_no_batch + 1
        if input.dim() not in (num_dims_no_batch, num_dims_batch):
            raise RuntimeError(
                f"Expected {num_dims_no_batch}D (unbatched) or {num_dims_batch}D (batched) input "
                f"to {self.__class__.__name__}, but "
                f"got input of size: {input.shape}"
            )
        return input.shape[1] if input.dim() == num_dims_batch else input.shape[0]

    def _get_num_spatial_dims(self):
        return len(self.kernel_size)  # 1, 2 or 3, from the convolution the module becomes


def _lazy_conv_init(self, out_channels, bias, factory_kwargs):
    self.weight = UninitializedParameter(**factory_kwargs)
    self.out_channels = out_channels
    if bias:
        self.bias = UninitializedParameter(**factory_kwargs)


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
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode, **factory_kwargs)
        _lazy_conv_init(self, out_channels, bias, factory_kwargs)


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
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__(
            0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation, padding_mode, **factory_kwargs
        )
        _lazy_conv_init(self, out_channels, bias, factory_kwargs)


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
        factory_kwargs = {"device": device, "dtype": dtype}
        # affine and track_running_stats False: no tensors that would be replaced right away.
        super().__init__(0, eps, momentum, False, False, **factory_kwargs, bias=False)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if self.affine:
            self.weight = UninitializedParameter(**factory_kwargs)
            if bias:
                self.bias = UninitializedParameter(**factory_kwargs)
        if self.track_running_stats:
            self.running_mean = UninitializedBuffer(**factory_kwargs)
            self.running_var = UninitializedBuffer(**factory_kwargs)
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
