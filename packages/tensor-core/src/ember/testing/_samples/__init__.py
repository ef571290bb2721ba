"""OpInfos of ember-core's ops, one module per op family (imported explicitly, in order)."""

from . import creation, indexing, linalg, nn_conv, nn_functional, pointwise, reductions, shape, views  # noqa: F401
