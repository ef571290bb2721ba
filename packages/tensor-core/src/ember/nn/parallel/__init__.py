"""``ember.nn.parallel``: :class:`DataParallel` here; ``DistributedDataParallel`` from ember-distributed.

``from ember.nn.parallel import DistributedDataParallel`` works as in PyTorch. With the
ember-distributed distribution installed it is that distribution's class (exported as
``ember.distributed.DistributedDataParallel``); without it, it is a stand-in class, so that
scripts which import it but train on one process still run and ``isinstance`` checks answer
False, and constructing it raises :class:`ember._extensions.MissingDistributionError` naming
``ember-distributed``.
"""

from .data_parallel import DataParallel, data_parallel

# DistributedDataParallel stays out of __all__: `import *` must not need ember-distributed.
__all__ = ["DataParallel", "data_parallel"]


class _MissingDistributedDataParallel:
    """Stands for ``DistributedDataParallel`` while ember-distributed is not installed.

    Raises:
        MissingDistributionError: when constructed, naming ember-distributed.
    """

    def __new__(cls, *args, **kwargs):
        from ..._extensions import require

        require("ember.nn.parallel.DistributedDataParallel", "ember-distributed")


_MissingDistributedDataParallel.__name__ = _MissingDistributedDataParallel.__qualname__ = "DistributedDataParallel"


def __getattr__(name):
    # Looked up on each access (not cached), so installing ember-distributed later in the
    # process is seen.
    if name == "DistributedDataParallel":
        try:
            from ember.distributed import DistributedDataParallel
        except ImportError:  # MissingDistributionError included
            return _MissingDistributedDataParallel
        return DistributedDataParallel
    raise AttributeError(f"module 'ember.nn.parallel' has no attribute {name!r}")
