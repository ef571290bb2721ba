"""``ember.nn`` module classes. One import line per module file; each file defines ``__all__``."""

from .module import *  # noqa: F401,F403
from .container import *  # noqa: F401,F403
from .linear import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .pooling import *  # noqa: F401,F403
from .batchnorm import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .dropout import *  # noqa: F401,F403
from .activation import *  # noqa: F401,F403
from .flatten import *  # noqa: F401,F403
from .sparse import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .padding import *  # noqa: F401,F403
from .pixelshuffle import *  # noqa: F401,F403
from .upsampling import *  # noqa: F401,F403
from .distance import *  # noqa: F401,F403
from .fold import *  # noqa: F401,F403
from .channelshuffle import *  # noqa: F401,F403
from .unpool import *  # noqa: F401,F403
from .lazy import *  # noqa: F401,F403
from .attention import *  # noqa: F401,F403
from .transformer import *  # noqa: F401,F403
from .rnn import *  # noqa: F401,F403
from .adaptive import *  # noqa: F401,F403
from . import _paths  # noqa: E402

_paths.install()  # PyTorch's paths for names ember defines elsewhere (activation.MultiheadAttention, ...)


def __getattr__(name):
    # PyTorch's modules.utils / modules.instancenorm, imported on first use: imported eagerly they
    # would be caught by ember.nn's `from .modules import *` (ember.nn.utils is another package).
    if name in _paths.LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
