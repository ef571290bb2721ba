"""OpInfos of ember-core's ops, one module per op family (imported explicitly, in order)."""

from . import creation, indexing, linalg, nn_conv, nn_activation, nn_norm, nn_embedding, nn_attention, nn_distance, nn_loss, pointwise, reductions, shape, views  # noqa: F401
