"""ember.utils.data samplers: order, reproducibility, distributions, distributed partitions."""

import collections
import math

import numpy as np
import pytest

import ember
from ember.utils.data import (
    BatchSampler,
    DistributedSampler,
    RandomSampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)


def test_sequential_sampler():
    s = SequentialSampler(range(4))
    assert list(s) == [0, 1, 2, 3]
    assert len(s) == 4


def test_random_sampler_is_permutation_and_seeded():
    a = list(RandomSampler(range(50), generator=ember.Generator().manual_seed(7)))
    b = list(RandomSampler(range(50), generator=ember.Generator().manual_seed(7)))
    c = list(RandomSampler(range(50), generator=ember.Generator().manual_seed(8)))
    assert sorted(a) == list(range(50))
    assert a == b
    assert a != c
    # With a generator the sampler yields exactly ember.randperm's stream.
    assert a == ember.randperm(50, generator=ember.Generator().manual_seed(7)).tolist()


def test_random_sampler_follows_manual_seed():
    s = RandomSampler(range(30))
    ember.manual_seed(0)
    a = list(s)
    second_epoch = list(s)
    ember.manual_seed(0)
    b = list(s)
    assert a == b
    assert a != second_epoch  # a fresh shuffle per epoch


def test_random_sampler_num_samples_without_replacement():
    s = RandomSampler(range(4), num_samples=10, generator=ember.Generator().manual_seed(0))
    out = list(s)
    assert len(out) == len(s) == 10
    # Two full permutations, then 2 more indices without repeats.
    assert sorted(out[:4]) == sorted(out[4:8]) == [0, 1, 2, 3]
    assert len(set(out[8:])) == 2


def test_random_sampler_with_replacement():
    s = RandomSampler(range(3), replacement=True, num_samples=100, generator=ember.Generator().manual_seed(0))
    out = list(s)
    assert len(out) == 100
    assert set(out) == {0, 1, 2}  # 100 draws from 3 values: each appears (prob of missing one ~ 3*(2/3)^100)


def test_random_sampler_errors():
    with pytest.raises(TypeError, match="replacement should be a boolean value"):
        RandomSampler(range(3), replacement=1)
    with pytest.raises(ValueError, match="num_samples should be a positive integer value"):
        RandomSampler(range(3), num_samples=0)
    with pytest.raises(ValueError, match="num_samples should be a positive integer value"):
        RandomSampler([], num_samples=None)


def test_subset_random_sampler():
    idx = [10, 20, 30, 40]
    a = list(SubsetRandomSampler(idx, generator=ember.Generator().manual_seed(3)))
    perm = ember.randperm(4, generator=ember.Generator().manual_seed(3)).tolist()
    assert a == [idx[i] for i in perm]
    assert len(SubsetRandomSampler(idx)) == 4


def test_weighted_random_sampler_distribution():
    weights = [1.0, 2.0, 3.0, 4.0]
    n = 20000
    s = WeightedRandomSampler(weights, n, generator=ember.Generator().manual_seed(0))
    counts = collections.Counter(s)
    expected = np.array(weights) / sum(weights) * n
    observed = np.array([counts[i] for i in range(4)])
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    # 3 degrees of freedom: P(chi2 > 16.27) = 0.001.
    assert chi2 < 16.27, (observed, expected, chi2)
    assert s.weights.dtype is ember.float64


def test_weighted_random_sampler_zero_weight_and_no_replacement():
    s = WeightedRandomSampler([0.0, 1.0, 0.0, 1.0], 200, generator=ember.Generator().manual_seed(1))
    assert set(s) == {1, 3}
    s = WeightedRandomSampler([1.0, 1.0, 1.0], 3, replacement=False, generator=ember.Generator().manual_seed(1))
    assert sorted(s) == [0, 1, 2]


def test_weighted_random_sampler_errors():
    with pytest.raises(ValueError, match="num_samples should be a positive integer value"):
        WeightedRandomSampler([1.0], 0)
    with pytest.raises(ValueError, match="replacement should be a boolean value"):
        WeightedRandomSampler([1.0], 1, replacement=None)
    with pytest.raises(ValueError, match="weights should be a 1d sequence"):
        WeightedRandomSampler([[1.0, 2.0]], 1)


@pytest.mark.parametrize(
    "n, bs, drop_last", [(10, 3, False), (10, 3, True), (9, 3, False), (2, 5, False), (2, 5, True)]
)
def test_batch_sampler(n, bs, drop_last):
    s = BatchSampler(SequentialSampler(range(n)), bs, drop_last)
    batches = list(s)
    expected = [list(range(i, min(i + bs, n))) for i in range(0, n, bs)]
    if drop_last:
        expected = [b for b in expected if len(b) == bs]
    assert batches == expected
    assert len(s) == len(expected)


def test_batch_sampler_errors():
    with pytest.raises(ValueError, match="batch_size should be a positive integer value"):
        BatchSampler(range(3), 0, False)
    with pytest.raises(ValueError, match="batch_size should be a positive integer value"):
        BatchSampler(range(3), True, False)
    with pytest.raises(ValueError, match="drop_last should be a boolean value"):
        BatchSampler(range(3), 2, 0)


def test_distributed_sampler_partitions_with_padding():
    n, world = 10, 3
    shares = [list(DistributedSampler(range(n), num_replicas=world, rank=r, shuffle=False)) for r in range(world)]
    # total_size = 12: indices 0..9 then 0, 1 again; rank r takes r, r+3, ...
    assert shares == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]
    assert all(len(DistributedSampler(range(n), num_replicas=world, rank=r)) == 4 for r in range(world))


def test_distributed_sampler_drop_last_disjoint():
    n, world = 10, 3
    shares = [
        list(DistributedSampler(range(n), num_replicas=world, rank=r, shuffle=True, seed=5, drop_last=True))
        for r in range(world)
    ]
    assert [len(s) for s in shares] == [3, 3, 3]
    flat = [i for s in shares for i in s]
    assert len(set(flat)) == 9  # disjoint, no padding
    perm = ember.randperm(n, generator=ember.Generator().manual_seed(5)).tolist()[:9]
    assert shares[1] == perm[1:9:3]


def test_distributed_sampler_shuffle_epoch_and_seed():
    def share(epoch, seed=0, rank=0):
        s = DistributedSampler(range(16), num_replicas=2, rank=rank, seed=seed)
        s.set_epoch(epoch)
        return list(s)

    assert share(0) == share(0)
    assert share(0) != share(1)
    assert share(0, seed=1) == share(1, seed=0)  # the shuffle is seeded with seed + epoch
    assert sorted(share(3, rank=0) + share(3, rank=1)) == list(range(16))


def test_distributed_sampler_padding_longer_than_dataset():
    shares = [list(DistributedSampler(range(2), num_replicas=5, rank=r, shuffle=False)) for r in range(5)]
    assert shares == [[0], [1], [0], [1], [0]]


def test_distributed_sampler_errors():
    with pytest.raises(ValueError, match=r"Invalid rank 2, rank should be in the interval \[0, 1\]"):
        DistributedSampler(range(4), num_replicas=2, rank=2)
    with pytest.raises(RuntimeError, match="Requires distributed package to be available"):
        DistributedSampler(range(4))


def test_distributed_sampler_num_samples_formula():
    for n in range(1, 12):
        for world in range(1, 5):
            s = DistributedSampler(range(n), num_replicas=world, rank=0, drop_last=True)
            if n % world:
                assert s.num_samples == math.ceil((n - world) / world)
            else:
                assert s.num_samples == n // world
