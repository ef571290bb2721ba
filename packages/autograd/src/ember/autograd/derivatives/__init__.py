"""The derivative table's entries, one module per op family (see :mod:`ember.autograd._table`).

Each module registers formulas with :func:`~ember.autograd._table.derivative`,
composite ops differentiated through their decomposition with
:func:`~ember.autograd._table.through_decomposition`, and non-differentiable
ops with :func:`~ember.autograd._table.nondifferentiable`.
"""

from . import (  # noqa: F401
    creation,
    fft,
    indexing,
    linalg_det,
    linalg_eigen,
    linalg_factor,
    linalg_misc,
    linalg_norms,
    linalg_solve,
    nn_conv,
    nn_fold,
    nn_grid_sample,
    nn_interpolate,
    nn_padding,
    nn_pooling,
    nn_shuffle,
    nn_unpooling,
    nn_activation,
    nn_norm,
    nn_embedding,
    nn_attention,
    nn_loss,
    pointwise,
    products,
    random,
    random_distributions,
    reductions,
    shape,
    special,
    views,
)
