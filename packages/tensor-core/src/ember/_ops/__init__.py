"""The op registry (``ember._ops``): every public operator, defined once.

See :mod:`ember._ops._registry` for what an entry holds and
:mod:`ember._ops._dispatch` for how calls reach kernels. The op modules are
imported here explicitly, in dependency order, and each one's ops are recorded
in :data:`OPS_BY_MODULE` (the API reference has a section per op module).
"""

import importlib
import sys

from . import _registry
from ._registry import COMPOSITE, PRIM, Op, defop, get, registry

#: The registry names that each op module registered, by module name
#: (``OPS_BY_MODULE["ember._ops.pointwise"] == ("add", "add_", ...)``), in registration order.
OPS_BY_MODULE: dict[str, tuple[str, ...]] = {}


def _import_op_module(name):
    """Import the op module ``ember._ops.<name>`` and record the ops it registered in OPS_BY_MODULE.

    Raises:
        RuntimeError: if the module was already imported (by an op module imported before it,
            which would register its ops under the wrong module).
    """
    qualified = f"{__name__}.{name}"
    if qualified in sys.modules:
        raise RuntimeError(
            f"{qualified} was imported before ember._ops imports it in order; "
            "an earlier op module must not import a later one at import time"
        )
    first = len(registry)
    module = importlib.import_module(qualified)
    OPS_BY_MODULE[qualified] = tuple(list(registry)[first:])
    return module


creation = _import_op_module("creation")
views = _import_op_module("views")
pointwise = _import_op_module("pointwise")  # arithmetic; the other pointwise families follow
unary_math = _import_op_module("unary_math")
comparison = _import_op_module("comparison")
bitwise_logical = _import_op_module("bitwise_logical")
binary_math = _import_op_module("binary_math")
ternary = _import_op_module("ternary")
pointwise_backward = _import_op_module("pointwise_backward")
pointwise_aliases = _import_op_module("pointwise_aliases")
indexing = _import_op_module("indexing")
random = _import_op_module("random")
random_distributions = _import_op_module("random_distributions")  # gamma, poisson, binomial
sums = _import_op_module("sums")
variance = _import_op_module("variance")
extrema = _import_op_module("extrema")
all_any = _import_op_module("all_any")
norms = _import_op_module("norms")
scans = _import_op_module("scans")
sorting = _import_op_module("sorting")
order_statistics = _import_op_module("order_statistics")
unique = _import_op_module("unique")
histograms = _import_op_module("histograms")
searching = _import_op_module("searching")
joining = _import_op_module("joining")
view_composites = _import_op_module("view_composites")
reordering = _import_op_module("reordering")
masks = _import_op_module("masks")
gather_scatter = _import_op_module("gather_scatter")
index_along_dim = _import_op_module("index_along_dim")
repeating = _import_op_module("repeating")
take_put = _import_op_module("take_put")
triangles_diagonals = _import_op_module("triangles_diagonals")
grids = _import_op_module("grids")
matmul = _import_op_module("matmul")
addmm = _import_op_module("addmm")
tensor_products = _import_op_module("tensor_products")
distances = _import_op_module("distances")
einsum = _import_op_module("einsum")
# ember.linalg's factorizations and solvers (registry names "linalg_*", tagged "submodule"), then norms
linalg_det = _import_op_module("linalg_det")
linalg_solve = _import_op_module("linalg_solve")
linalg_factor = _import_op_module("linalg_factor")
linalg_eigen = _import_op_module("linalg_eigen")
linalg_norms = _import_op_module("linalg_norms")
linalg_misc = _import_op_module("linalg_misc")
nn_padding = _import_op_module("nn_padding")
nn_conv = _import_op_module("nn_conv")
nn_fold = _import_op_module("nn_fold")
nn_pooling = _import_op_module("nn_pooling")
nn_unpooling = _import_op_module("nn_unpooling")
nn_interpolate = _import_op_module("nn_interpolate")
nn_grid_sample = _import_op_module("nn_grid_sample")
nn_shuffle = _import_op_module("nn_shuffle")
nn_activation = _import_op_module("nn_activation")
nn_softmax = _import_op_module("nn_softmax")
nn_dropout = _import_op_module("nn_dropout")
nn_linear = _import_op_module("nn_linear")
nn_norm = _import_op_module("nn_norm")
nn_embedding = _import_op_module("nn_embedding")
nn_attention = _import_op_module("nn_attention")
nn_loss_regression = _import_op_module("nn_loss_regression")
nn_loss_classification = _import_op_module("nn_loss_classification")
nn_loss_distribution = _import_op_module("nn_loss_distribution")
nn_loss_margin = _import_op_module("nn_loss_margin")
nn_loss_ctc = _import_op_module("nn_loss_ctc")
fft = _import_op_module("fft")
special = _import_op_module("special")  # torch.special's functions that have no ember.<name> op (ember.special)

#: The op modules, in registration order. Each lists its Tensor methods in ``METHODS``
#: (and ``ALIASES``, ``OPERATORS`` for dunder methods), which ember._tensor_methods installs.
OP_MODULES = (
    creation, views, pointwise, unary_math, comparison, bitwise_logical, binary_math, ternary, pointwise_backward,
    pointwise_aliases, indexing, random, random_distributions,
    sums, variance, extrema, all_any, norms, scans, sorting, order_statistics, unique, histograms, searching,
    joining, view_composites, reordering, masks, gather_scatter, index_along_dim, repeating, take_put,
    triangles_diagonals, grids,
    matmul, addmm, tensor_products, distances, einsum,
    linalg_det, linalg_solve, linalg_factor, linalg_eigen, linalg_norms, linalg_misc, nn_padding, nn_conv, nn_fold,
    nn_pooling, nn_unpooling, nn_interpolate, nn_grid_sample, nn_shuffle,
    nn_activation, nn_softmax, nn_dropout, nn_linear, nn_norm, nn_embedding, nn_attention,
    nn_loss_regression, nn_loss_classification, nn_loss_distribution, nn_loss_margin, nn_loss_ctc,
    fft,
)

__all__ = [
    "Op",
    "registry",
    "defop",
    "get",
    "PRIM",
    "COMPOSITE",
    "public_ops",
    "nn_functional_ops",
    "OP_MODULES",
    "OPS_BY_MODULE",
]

# Registry names that are not public functions of the ember namespace (PyTorch has
# them only as Tensor methods, under another name, or as ATen ops: torch.ops.aten.tanh_backward).
_NOT_PUBLIC = {"slice", "view_as", "expand_as", "repeat", "tanh_backward", "sigmoid_backward", "threshold_backward"}


def public_ops():
    """The ops exported as ``ember.<name>``: not private, not in-place variants, not ``nn.functional``-only,
    not tagged ``submodule`` (exported from a submodule only: ``fft_fft`` is ``ember.fft.fft``)."""
    return {
        name: op
        for name, op in _registry.registry.items()
        if not name.startswith("_") and op.kind != "inplace" and name not in _NOT_PUBLIC
        and "nn.functional_only" not in op.tags and "submodule" not in op.tags
    }


def nn_functional_ops():
    """The ops exported as ``ember.nn.functional.<name>``: tagged ``nn.functional`` or ``nn.functional_only``."""
    return {
        name: op
        for name, op in _registry.registry.items()
        if "nn.functional" in op.tags or "nn.functional_only" in op.tags
    }
