"""Which ops autocast casts, and to what, per device type (PyTorch's documented op lists).

Four policies:

``lower``
    the op runs in the region's lower-precision dtype (float16 or bfloat16): its floating inputs are cast
    to it (matrix products, convolutions, linear).
``float32``
    the op runs in float32: its lower-precision inputs are cast up (losses, some reductions and
    numerically sensitive functions).
``float32_unless_dtype``
    like ``float32``, unless the call passes ``dtype=`` itself (``sum``, ``softmax``, ``cumsum`` on cuda).
``promote``
    the op runs in the widest floating dtype among its inputs (``cat`` of a float32 and a bfloat16 tensor
    runs in float32).
``banned``
    the op refuses to run in an autocast region (``binary_cross_entropy`` on cuda: unsafe in float16).

Ops in no list run in whatever dtype their inputs have. Only floating tensors other than float64 on the
region's device type are cast, as in PyTorch. Names are ember's op names (``cross_entropy`` is
PyTorch's ``cross_entropy_loss``).
"""

from __future__ import annotations

__all__ = ["POLICIES", "policy_of", "AUTOCAST_OPS"]

_FFT = (
    "fft_fft", "fft_ifft", "fft_fft2", "fft_ifft2", "fft_fftn", "fft_ifftn", "fft_rfft", "fft_irfft", "fft_rfft2",
    "fft_irfft2", "fft_rfftn", "fft_irfftn", "fft_hfft", "fft_ihfft",
)

# PyTorch decomposes these (CompositeImplicitAutograd) into matrix products that autocast then casts, so
# their results come out in the lower dtype; ember's decompositions run below the autocast mode, so the
# op itself is listed instead.
_IMPLICIT_PRODUCTS = ("einsum", "tensordot", "inner", "matrix_power", "linalg_matrix_power", "linalg_multi_dot",
                      "chain_matmul")

_CPU_LOWER = (
    "conv1d", "conv2d", "conv3d", "convolution", "bmm", "mm", "linalg_vecdot", "baddbmm", "addmm", "addbmm",
    "linear", "matmul", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "prelu",
    "scaled_dot_product_attention", *_IMPLICIT_PRODUCTS,
)

_CPU_FLOAT32 = (
    "avg_pool3d", "binary_cross_entropy", "grid_sample", "polar", "prod", "quantile", "nanquantile", "cdist",
    "trace", "view_as_complex", "cholesky", "cholesky_inverse", "cholesky_solve", "inverse", "lu_solve", "orgqr",
    "pinverse", "max_pool3d", "max_pool3d_with_indices", "max_unpool2d", "max_unpool3d", "adaptive_avg_pool3d",
    "mse_loss", "cosine_embedding_loss", "nll_loss", "hinge_embedding_loss", "poisson_nll_loss", "smooth_l1_loss",
    "cross_entropy", "l1_loss", "huber_loss", "margin_ranking_loss", "soft_margin_loss", "triplet_margin_loss",
    "multi_margin_loss", "ctc_loss", "kl_div", "multilabel_margin_loss", "binary_cross_entropy_with_logits",
    *_FFT,
    "linalg_cond", "linalg_matrix_rank", "linalg_solve", "linalg_cholesky", "linalg_svdvals", "linalg_eigvals",
    "linalg_eigvalsh", "linalg_inv", "linalg_householder_product", "linalg_tensorinv", "linalg_tensorsolve", "qr",
    "svd", "triangular_solve", "adaptive_max_pool3d", "adaptive_max_pool3d_with_indices", "linalg_qr",
    "linalg_cholesky_ex", "linalg_svd", "linalg_eig", "linalg_eigh", "linalg_lstsq", "linalg_inv_ex",
)

_CPU_PROMOTE = ("stack", "cat", "concat", "concatenate", "index_copy")

_CUDA_LOWER = (
    "matmul", "addbmm", "addmm", "addmv", "addr", "baddbmm", "bmm", "chain_matmul", "linalg_multi_dot", "conv1d",
    "conv2d", "conv3d", "convolution", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "linear", "mm",
    "mv", "prelu", "scaled_dot_product_attention",
    *(name for name in _IMPLICIT_PRODUCTS if name != "tensordot"),  # tensordot is on cuda's promote list
)

_CUDA_FLOAT32 = (
    "pow", "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log1p", "log2", "reciprocal", "rsqrt",
    "sinh", "tan", "softplus", "binary_cross_entropy_with_logits", "cosine_embedding_loss", "cdist",
    "cosine_similarity", "cross_entropy", "group_norm", "hinge_embedding_loss", "kl_div", "l1_loss", "layer_norm",
    "margin_ranking_loss", "mse_loss", "multilabel_margin_loss", "multi_margin_loss", "nll_loss", "norm",
    "normalize", "pdist", "poisson_nll_loss", "smooth_l1_loss", "soft_margin_loss", "triplet_margin_loss",
    "linalg_vector_norm", "linalg_matrix_norm",
)

_CUDA_FLOAT32_UNLESS_DTYPE = ("prod", "softmax", "softmin", "log_softmax", "cumprod", "cumsum", "sum")

_CUDA_PROMOTE = (
    "addcdiv", "addcmul", "atan2", "bilinear", "cross", "linalg_cross", "dot", "grid_sample", "index_put",
    "scatter_add", "tensordot", "stack", "cat", "concat", "concatenate", "index_copy",
)


def _table(**lists):
    table = {}
    for policy, names in lists.items():
        for name in names:
            table[name] = policy
    return table


#: device type -> {op name -> policy}
POLICIES = {
    "cpu": _table(lower=_CPU_LOWER, float32=_CPU_FLOAT32, promote=_CPU_PROMOTE),
    "cuda": _table(
        lower=_CUDA_LOWER, float32=_CUDA_FLOAT32, float32_unless_dtype=_CUDA_FLOAT32_UNLESS_DTYPE,
        promote=_CUDA_PROMOTE, banned=("binary_cross_entropy",),
    ),
}

#: every op name some device casts: the autocast mode passes any other op straight through
AUTOCAST_OPS = frozenset({"pad", *(name for table in POLICIES.values() for name in table)})

# F.pad runs reflection_pad1d/2d and replication_pad1d/2d/3d in float32 on the cpu (PyTorch's cpu list
# names those kernels); ember has one pad op, so its mode and padding length decide.
_CPU_FLOAT32_PADS = {"reflect": (2, 4), "replicate": (2, 4, 6)}


def policy_of(op_name, device_type, args, kwargs):
    """The policy of one call on ``device_type`` (None: run as is)."""
    if op_name == "pad" and device_type == "cpu":
        mode = args[2] if len(args) > 2 else kwargs.get("mode", "constant")
        pad = args[1] if len(args) > 1 else kwargs.get("pad", ())
        return "float32" if len(pad) in _CPU_FLOAT32_PADS.get(mode, ()) else None
    table = POLICIES.get(device_type)
    return None if table is None else table.get(op_name)
