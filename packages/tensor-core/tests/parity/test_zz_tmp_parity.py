import numpy as np
import torch

import ember


def test_add_matches_torch():
    a = np.arange(5, dtype=np.float32)
    assert np.array_equal(np.asarray(ember.from_numpy(a) + ember.from_numpy(a)), (torch.from_numpy(a) * 2).numpy())
