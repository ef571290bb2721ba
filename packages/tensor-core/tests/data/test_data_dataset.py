"""ember.utils.data datasets: TensorDataset, ConcatDataset, ChainDataset, StackDataset, Subset, random_split."""

import numpy as np
import pytest

import ember
from ember.utils.data import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)


class _Range(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


def test_dataset_base_getitem_raises():
    with pytest.raises(NotImplementedError, match="should implement __getitem__"):
        Dataset()[0]


def test_tensor_dataset_items_and_len():
    x = ember.arange(12.0).reshape(4, 3)
    y = ember.tensor([5, 6, 7, 8])
    ds = TensorDataset(x, y)
    assert len(ds) == 4
    xi, yi = ds[2]
    np.testing.assert_array_equal(xi.numpy(), np.arange(12.0).reshape(4, 3)[2])
    assert yi.item() == 7


def test_tensor_dataset_size_mismatch():
    with pytest.raises(ValueError, match="Size mismatch between tensors"):
        TensorDataset(ember.zeros(3), ember.zeros(4))


def test_concat_dataset_indexing():
    ds = ConcatDataset([[0, 1, 2], [10, 11], [20]])
    assert len(ds) == 6
    assert ds.cumulative_sizes == [3, 5, 6]
    assert [ds[i] for i in range(6)] == [0, 1, 2, 10, 11, 20]
    assert ds[-1] == 20 and ds[-6] == 0
    with pytest.raises(ValueError, match="absolute value of index"):
        ds[-7]


def test_concat_dataset_errors_and_add():
    with pytest.raises(ValueError, match="empty iterable"):
        ConcatDataset([])
    with pytest.raises(TypeError, match="does not support IterableDataset"):
        ConcatDataset([_Range(2)])

    class L(Dataset):
        def __init__(self, items):
            self.items = items

        def __getitem__(self, i):
            return self.items[i]

        def __len__(self):
            return len(self.items)

    both = L([1, 2]) + L([3])
    assert isinstance(both, ConcatDataset)
    assert [both[i] for i in range(len(both))] == [1, 2, 3]


def test_chain_dataset():
    chained = _Range(2) + _Range(3)
    assert isinstance(chained, ChainDataset)
    assert list(chained) == [0, 1, 0, 1, 2]
    assert len(chained) == 5
    with pytest.raises(TypeError, match="only supports IterableDataset"):
        list(ChainDataset([[1, 2]]))


def test_stack_dataset():
    assert StackDataset([1, 2], ["a", "b"])[1] == (2, "b")
    assert StackDataset(x=[1, 2], y=["a", "b"])[0] == {"x": 1, "y": "a"}
    with pytest.raises(ValueError, match="Size mismatch"):
        StackDataset([1, 2], [1])


def test_subset():
    s = Subset([10, 11, 12, 13, 14], [4, 1, 2])
    assert len(s) == 3
    assert [s[i] for i in range(3)] == [14, 11, 12]
    assert s[[0, 2]] == [14, 12]
    assert s.__getitems__([1, 0]) == [11, 14]


def test_random_split_lengths_disjoint_cover():
    parts = random_split(range(10), [3, 7], generator=ember.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [3, 7]
    values = [list(p) for p in parts]
    assert sorted(values[0] + values[1]) == list(range(10))
    assert not set(values[0]) & set(values[1])
    # The split is exactly the seeded permutation, cut at the offsets.
    perm = ember.randperm(10, generator=ember.Generator().manual_seed(0)).tolist()
    assert values[0] == perm[:3] and values[1] == perm[3:]


def test_random_split_fractions_remainder_round_robin():
    # floor(0.3*11)=3, floor(0.3*11)=3, floor(0.4*11)=4 → remainder 1 goes to the first split.
    parts = random_split(range(11), [0.3, 0.3, 0.4], generator=ember.Generator().manual_seed(1))
    assert [len(p) for p in parts] == [4, 3, 4]
    assert sorted(i for p in parts for i in p) == list(range(11))


def test_random_split_reproducible_with_manual_seed():
    ember.manual_seed(123)
    a = [list(p) for p in random_split(range(20), [10, 10])]
    ember.manual_seed(123)
    b = [list(p) for p in random_split(range(20), [10, 10])]
    ember.manual_seed(124)
    c = [list(p) for p in random_split(range(20), [10, 10])]
    assert a == b
    assert a != c


def test_random_split_errors():
    with pytest.raises(ValueError, match="Sum of input lengths"):
        random_split(range(10), [3, 3])
    with pytest.raises(ValueError, match="Fraction at index 1 is not between 0 and 1"):
        random_split(range(10), [0.5, -0.5, 1.0])
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0"):
        random_split(range(2), [1.0, 0.0])
