"""Neural-network building blocks: ``ember.nn.functional`` (functional ops), ``Parameter`` and
``Module`` with its containers and layers (``ember.nn.modules``)."""

from . import functional  # noqa: F401
from .parameter import *  # noqa: F401,F403
from .modules import *  # noqa: F401,F403
from . import init  # noqa: F401,E402
from . import utils  # noqa: F401,E402
from . import parallel  # noqa: F401,E402
from . import common_types  # noqa: F401,E402 - PyTorch's annotation aliases (_size_2_t, ...)
from .parallel import DataParallel  # noqa: F401,E402
