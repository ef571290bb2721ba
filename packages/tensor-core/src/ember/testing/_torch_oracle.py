"""PyTorch as the tests' oracle: converting ember values and finding an op's PyTorch counterpart.

Used by the parity tests of every package (``tests/parity/``). PyTorch is
imported when these functions run, never by ember itself.
"""

from __future__ import annotations

import numpy as np

import ember

__all__ = ["to_torch", "torch_counterpart"]


def to_torch(value):
    """``value`` with ember tensors, dtypes and devices replaced by PyTorch's (CPU), recursively.

    Tensors are copied (bfloat16 through float32, which numpy lacks); tuples,
    lists and dicts keep their structure; a ``device`` keyword becomes ``"cpu"``.
    """
    import torch

    if isinstance(value, ember.Tensor):
        data = value.detach()._host_array()
        if data.dtype.name == "bfloat16":
            return torch.from_numpy(np.array(data.astype(np.float32))).to(torch.bfloat16)
        return torch.from_numpy(np.array(data, copy=True))
    if isinstance(value, ember.dtype):
        return getattr(torch, value.name)
    if isinstance(value, ember.device):
        return torch.device("cpu")
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(to_torch(v) for v in value)
    if isinstance(value, list):
        return [to_torch(v) for v in value]
    if isinstance(value, dict):
        return {k: ("cpu" if k == "device" else to_torch(v)) for k, v in value.items()}
    return value


def torch_counterpart(info):
    """The PyTorch function matching OpInfo ``info``, and why there is none.

    Returns:
        tuple: ``(function, None)``, or ``(None, reason)`` when PyTorch has no such function.
    """
    import torch

    if info.torch_fn is not None:
        return info.torch_fn, None
    path = info.torch_name or info.name
    if path.startswith("Tensor."):
        method = path.split(".", 1)[1]
        return (lambda input, *args, **kwargs: getattr(input, method)(*args, **kwargs)), None
    target = torch
    for part in path.split("."):
        target = getattr(target, part, None)
        if target is None:
            break
    nn_op = "nn.functional" in info.op.tags or "nn.functional_only" in info.op.tags
    if target is None and nn_op and info.name in dir(torch.nn.functional):
        target = getattr(torch.nn.functional, info.name)
    if target is None:
        return None, f"no torch.{path}"
    return target, None
