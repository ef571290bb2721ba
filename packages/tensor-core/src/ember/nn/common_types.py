"""Type aliases layer signatures use, under PyTorch's names (``torch.nn.common_types``).

``from torch.nn.common_types import _size_2_t`` is common in model code that defines its own
convolution or pooling layers; these are the same aliases (for annotations only).
"""

from __future__ import annotations

from typing import TypeVar

from .._tensor import Tensor

T = TypeVar("T")

_scalar_or_tuple_any_t = T | tuple[T, ...]
_scalar_or_tuple_1_t = T | tuple[T]
_scalar_or_tuple_2_t = T | tuple[T, T]
_scalar_or_tuple_3_t = T | tuple[T, T, T]
_scalar_or_tuple_4_t = T | tuple[T, T, T, T]
_scalar_or_tuple_5_t = T | tuple[T, T, T, T, T]
_scalar_or_tuple_6_t = T | tuple[T, T, T, T, T, T]

# Sizes: kernel sizes, strides, paddings, output sizes.
_size_any_t = _scalar_or_tuple_any_t[int]
_size_1_t = _scalar_or_tuple_1_t[int]
_size_2_t = _scalar_or_tuple_2_t[int]
_size_3_t = _scalar_or_tuple_3_t[int]
_size_4_t = _scalar_or_tuple_4_t[int]
_size_5_t = _scalar_or_tuple_5_t[int]
_size_6_t = _scalar_or_tuple_6_t[int]

# Output sizes where an entry may be None (adaptive pooling keeps that dimension).
_size_any_opt_t = _scalar_or_tuple_any_t[int | None]
_size_2_opt_t = _scalar_or_tuple_2_t[int | None]
_size_3_opt_t = _scalar_or_tuple_3_t[int | None]

# Scale factors (upsampling, fractional pooling).
_ratio_2_t = _scalar_or_tuple_2_t[float]
_ratio_3_t = _scalar_or_tuple_3_t[float]
_ratio_any_t = _scalar_or_tuple_any_t[float]

_tensor_list_t = _scalar_or_tuple_any_t[Tensor]

# max_pool's return_indices variants return a tensor or (tensor, indices).
_maybe_indices_t = _scalar_or_tuple_2_t[Tensor]
