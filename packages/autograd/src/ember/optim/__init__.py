"""ember.optim: optimizers and learning-rate schedulers (PyTorch's ``torch.optim``).

Shipped by ember-autograd. Optimizers update parameters in place under
``ember.no_grad()`` from their ``.grad``; their ``state_dict()`` has PyTorch's
layout. Each optimizer has a single-tensor loop and a multi-tensor path over the
``ember._foreach_*`` list ops (``foreach=True``, the default for plain CPU tensors;
the same bits); ``differentiable=True`` records the step with autograd;
``fused=True`` raises (no fused kernels yet).
"""

from __future__ import annotations

from . import lr_scheduler
from .adagrad import Adagrad
from .adam import Adam
from .adamw import AdamW
from .optimizer import Optimizer, register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = [
    "Adagrad",
    "Adam",
    "AdamW",
    "Optimizer",
    "RMSprop",
    "SGD",
    "lr_scheduler",
    "register_optimizer_step_post_hook",
    "register_optimizer_step_pre_hook",
]

from . import swa_utils  # noqa: E402
from .adadelta import Adadelta  # noqa: E402
from .adamax import Adamax  # noqa: E402
from .lbfgs import LBFGS  # noqa: E402
from .nadam import NAdam  # noqa: E402
from .radam import RAdam  # noqa: E402
from .rprop import Rprop  # noqa: E402

__all__ += ["Adadelta", "Adamax", "LBFGS", "NAdam", "RAdam", "Rprop", "swa_utils"]
