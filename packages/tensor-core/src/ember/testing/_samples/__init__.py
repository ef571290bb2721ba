"""OpInfos of ember-core's ops, one module per op family (imported explicitly, in order)."""

from . import creation, fft, indexing, products, nn_conv, nn_activation, nn_norm, nn_embedding, nn_attention, nn_distance, nn_loss, pointwise, reductions, shape, views  # noqa: F401
from . import gather_scatter, grids, triangles_diagonals  # noqa: F401 - the other shape sample modules
from . import histograms, scans, sorting  # noqa: F401 - the other reduction sample modules
from . import nn_fold, nn_grid_sample, nn_interpolate, nn_padding, nn_pooling, nn_shuffle, nn_unpooling  # noqa: F401 - the other spatial sample modules
from . import linalg_det, linalg_eigen, linalg_factor, linalg_misc, linalg_norms, linalg_solve  # noqa: F401, E402
from . import special  # noqa: F401, E402 - ember.special's own ops
