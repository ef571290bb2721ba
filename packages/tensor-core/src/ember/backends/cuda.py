"""CUDA library switches (``torch.backends.cuda``): stored and readable, most without effect in ember.

* :data:`matmul` holds cuBLAS precision switches: ``matmul.allow_tf32`` (default False),
  ``matmul.allow_fp16_reduced_precision_reduction`` and
  ``matmul.allow_bf16_reduced_precision_reduction`` (default True). Ember's CUDA matrix
  products compute float32 in float32 (no TF32) whatever ``allow_tf32`` says; the flags are
  stored so that programs that set them run.
* The scaled-dot-product-attention switches (:func:`enable_flash_sdp`,
  :func:`flash_sdp_enabled`, ..., :func:`sdp_kernel`) choose among PyTorch's fused attention
  kernels. Ember's ``scaled_dot_product_attention`` has one implementation; the switches are
  stored and read back only.
* :func:`is_built` says whether ember's CUDA backend is installed (CuPy can be imported);
  whether a GPU is present is :func:`ember.cuda.is_available`.

Example:
    >>> import ember
    >>> ember.backends.cuda.matmul.allow_tf32
    False
    >>> ember.backends.cuda.flash_sdp_enabled()
    True
"""

from __future__ import annotations

import contextlib
import importlib.util
import warnings

from ._flags import check_bool

__all__ = [
    "is_built",
    "matmul",
    "enable_flash_sdp",
    "flash_sdp_enabled",
    "enable_mem_efficient_sdp",
    "mem_efficient_sdp_enabled",
    "enable_math_sdp",
    "math_sdp_enabled",
    "enable_cudnn_sdp",
    "cudnn_sdp_enabled",
    "sdp_kernel",
]


def is_built():
    """Whether ember's CUDA backend is installed here (CuPy imports); a GPU may still be missing."""
    return importlib.util.find_spec("cupy") is not None


class _MatmulFlags:
    """cuBLAS precision switches (``ember.backends.cuda.matmul.<flag>``), type-checked; no effect in ember."""

    _DEFAULTS = {
        "allow_tf32": False,
        "allow_fp16_reduced_precision_reduction": True,
        "allow_bf16_reduced_precision_reduction": True,
    }

    def __init__(self):
        object.__setattr__(self, "_values", dict(self._DEFAULTS))

    def __getattr__(self, name):
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        raise AttributeError(f"Unknown attribute {name}")

    def __setattr__(self, name, value):
        if name not in self._values:
            raise AttributeError(f"Unknown attribute {name}")
        self._values[name] = check_bool(f"ember.backends.cuda.matmul.{name}", value)

    def __repr__(self):
        return "ember.backends.cuda.matmul(" + ", ".join(f"{k}={v}" for k, v in self._values.items()) + ")"


#: cuBLAS precision switches: ``ember.backends.cuda.matmul.allow_tf32 = True`` and the like.
matmul = _MatmulFlags()

_SDP = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def _sdp_switches(kind):
    def enable(enabled):
        _SDP[kind] = check_bool(f"ember.backends.cuda.enable_{kind}_sdp", enabled)

    def query():
        return _SDP[kind]

    enable.__name__, query.__name__ = f"enable_{kind}_sdp", f"{kind}_sdp_enabled"
    enable.__doc__ = (
        f"Allow or forbid PyTorch's {kind} attention kernel. Stored only: ember's "
        "scaled_dot_product_attention has one implementation."
    )
    query.__doc__ = f"Whether the {kind} attention kernel is allowed (see :func:`enable_{kind}_sdp`)."
    return enable, query


enable_flash_sdp, flash_sdp_enabled = _sdp_switches("flash")
enable_mem_efficient_sdp, mem_efficient_sdp_enabled = _sdp_switches("mem_efficient")
enable_math_sdp, math_sdp_enabled = _sdp_switches("math")
enable_cudnn_sdp, cudnn_sdp_enabled = _sdp_switches("cudnn")


@contextlib.contextmanager
def sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True, enable_cudnn=True):
    """Context manager setting the four attention-kernel switches inside the block (deprecated in PyTorch).

    Stored only, as the switches are (see :func:`enable_flash_sdp`).
    """
    warnings.warn(
        "ember.backends.cuda.sdp_kernel() is deprecated, as in PyTorch; its switches have no effect in ember",
        FutureWarning,
        stacklevel=3,
    )
    saved = dict(_SDP)
    try:
        enable_flash_sdp(enable_flash)
        enable_math_sdp(enable_math)
        enable_mem_efficient_sdp(enable_mem_efficient)
        enable_cudnn_sdp(enable_cudnn)
        yield
    finally:
        _SDP.update(saved)
