"""PyTorch's ``torch.utils.data.distributed`` path: ``from ember.utils.data.distributed import
DistributedSampler`` (ember defines it with the other samplers in ``ember.utils.data.sampler``)."""

from .sampler import DistributedSampler

__all__ = ["DistributedSampler"]
