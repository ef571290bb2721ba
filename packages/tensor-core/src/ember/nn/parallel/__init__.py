"""``ember.nn.parallel``: :class:`DataParallel` here; ``DistributedDataParallel`` from ember-distributed.

``from ember.nn.parallel import DistributedDataParallel`` works as in PyTorch once the
ember-distributed distribution is installed; it provides the class as
``ember.distributed.DistributedDataParallel``. Without it, reaching the name raises
:class:`ember._extensions.MissingDistributionError` naming ``ember-distributed``.
"""

from .data_parallel import DataParallel, data_parallel

# DistributedDataParallel stays out of __all__: `import *` must not need ember-distributed.
__all__ = ["DataParallel", "data_parallel"]


def __getattr__(name):
    # Looked up on each access (not cached), so installing ember-distributed later in the
    # process is seen, and a missing distribution is reported where the name is used.
    if name == "DistributedDataParallel":
        return _distributed_data_parallel()
    raise AttributeError(f"module 'ember.nn.parallel' has no attribute {name!r}")


def _distributed_data_parallel():
    from ..._extensions import MissingDistributionError, require

    try:
        from ember.distributed import DistributedDataParallel
    except (ImportError, MissingDistributionError):
        require("ember.nn.parallel.DistributedDataParallel", "ember-distributed")
    return DistributedDataParallel
