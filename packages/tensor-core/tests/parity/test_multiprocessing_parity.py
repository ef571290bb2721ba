"""ember.multiprocessing has torch.multiprocessing's names and sharing strategies."""

import pytest
import torch.multiprocessing

import ember.multiprocessing

pytestmark = pytest.mark.parity


def test_names_and_strategies_match():
    names = [n for n in torch.multiprocessing.__all__ if not n.startswith("_")]
    missing = [n for n in names if not hasattr(ember.multiprocessing, n)]
    assert missing == []
    assert ember.multiprocessing.get_all_sharing_strategies() == torch.multiprocessing.get_all_sharing_strategies()
    assert ember.multiprocessing.get_sharing_strategy() == torch.multiprocessing.get_sharing_strategy()
