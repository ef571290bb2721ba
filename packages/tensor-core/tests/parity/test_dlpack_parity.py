"""DLPack between ember and PyTorch: each imports the other's tensors and capsules without a copy."""

import numpy as np
import pytest
import torch
import torch.utils.dlpack

import ember
import ember.utils.dlpack

pytestmark = pytest.mark.parity


def test_torch_tensors_and_capsules_into_ember():
    t = torch.arange(6.0).reshape(2, 3)
    e = ember.from_dlpack(t)
    e[0, 1] = -5
    assert t[0, 1].item() == -5
    e2 = ember.utils.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(t))
    np.testing.assert_array_equal(e2.numpy(), t.numpy())


def test_ember_tensors_and_capsules_into_torch():
    e = ember.arange(6, dtype=ember.int32).reshape(3, 2)
    t = torch.from_dlpack(e)
    t[2, 1] = 40
    assert e[2, 1].item() == 40
    t2 = torch.utils.dlpack.from_dlpack(ember.utils.dlpack.to_dlpack(e))
    t2[0, 0] = 7
    assert e[0, 0].item() == 7 and t2.dtype == torch.int32
