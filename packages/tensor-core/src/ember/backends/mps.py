"""Apple's Metal backend (``torch.backends.mps``): ember has none, so both answers are False."""

__all__ = ["is_available", "is_built"]


def is_available():
    """Whether MPS (Apple GPU) tensors can be created: always False in ember."""
    return False


def is_built():
    """Whether ember was built with MPS support: always False."""
    return False
