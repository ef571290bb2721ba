"""Utilities: dispatch modes, out-of-tree backend registration, benchmarking, data, DLPack exchange."""
from . import data  # noqa: E402,F401 - ember.utils.data after `import ember`, as in PyTorch


def __getattr__(name):
    # ember.utils.benchmark, as torch.utils.benchmark, loaded on first use: computing never needs it and
    # importing it with ember would add tens of milliseconds to every `import ember`.
    if name in ("benchmark", "dlpack", "model_zoo", "tensorboard"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
