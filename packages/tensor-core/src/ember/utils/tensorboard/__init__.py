"""``ember.utils.tensorboard``: PyTorch's ``SummaryWriter``, backed by the ``tensorboard`` package.

Logs scalars, histograms, images, text, figures and hyperparameters as TensorBoard event files,
written by the ``tensorboard`` package's own pure-Python event-file writer (no TensorFlow, no
PyTorch). ``tensorboard`` is an optional dependency (``pip install tensorboard`` or
``pip install 'ember-core[tensorboard]'``): importing this module never imports it; the first use
of :class:`SummaryWriter` does, and without the package raises
:class:`ember._extensions.MissingDistributionError` (an :class:`ImportError`) saying what to install.

Example::

    from ember.utils.tensorboard import SummaryWriter

    with SummaryWriter("runs/exp1") as writer:
        for step in range(100):
            writer.add_scalar("loss", 1.0 / (step + 1), step)
"""

__all__ = ["SummaryWriter"]


def __getattr__(name):
    # SummaryWriter lives in _writer, which imports tensorboard (and protobuf): loaded on first use, so
    # `import ember.utils.tensorboard` stays cheap and works without the package.
    if name == "SummaryWriter":
        from ._writer import SummaryWriter

        return SummaryWriter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
