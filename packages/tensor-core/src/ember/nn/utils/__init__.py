"""Utilities for neural networks (``torch.nn.utils`` counterpart): gradient clipping, parameter/vector
conversion, parametrizations (``parametrize``; ``parametrizations.weight_norm``/``spectral_norm``/``orthogonal``),
the older hook-based ``weight_norm``/``spectral_norm`` (and their ``remove_*``), pruning (``prune``) and
conv/linear-bn fusion."""

from . import clip_grad, convert_parameters, fusion, parametrizations, parametrize, prune  # noqa: F401
from .clip_grad import clip_grad_norm, clip_grad_norm_, clip_grad_value_  # noqa: F401
from .clip_grad import clip_grads_with_norm_, get_total_norm  # noqa: F401
from .convert_parameters import parameters_to_vector, vector_to_parameters  # noqa: F401
from .fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights  # noqa: F401
from . import rnn  # noqa: F401
from ._skip_init import skip_init  # noqa: F401
from ._spectral_norm_hooks import remove_spectral_norm, spectral_norm  # noqa: F401
from ._weight_norm_hooks import remove_weight_norm, weight_norm  # noqa: F401
