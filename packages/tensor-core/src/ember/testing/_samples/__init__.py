"""OpInfos of ember-core's ops, one module per op family (imported explicitly, in order)."""

from . import creation, indexing, pointwise, views  # noqa: F401
