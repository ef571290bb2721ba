"""Sizes that cannot exist are refused before anything allocates (issue 18).

The probes that found the problem (``F.pad(x, (2**40, 0))``, ``interpolate(size=2**31)``, ...)
are kept here: on the meta device every output shape is checked to fit int64 (element count,
and bytes of the storage it spans); on the CPU an allocation that fails raises PyTorch's
RuntimeError instead of numpy's MemoryError. Sizes here are past what any machine can map
(2**59 bytes and more), so the tests hold however much memory the machine has and never touch it.
"""

import math

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember._alloc import INT64_MAX, AllocationError, check_sizes
from ember._meta import MetaArray

BIG = 2**57  # elements: 2**59 bytes of float32 fit int64 but no address space
OVER = 2**62  # elements: 2**64 bytes of float32 overflow int64 bytes, not the element count


def _calls(big):
    """Calls whose output has about ``big`` elements, by name: ``call(device)``."""
    return {
        "interpolate size": lambda d: F.interpolate(ember.ones(1, 1, 4, device=d), size=big),
        "interpolate scale_factor": lambda d: F.interpolate(ember.ones(1, 1, 4, device=d), scale_factor=big / 4),
        "interpolate 2d": lambda d: F.interpolate(ember.ones(1, 1, 2, 2, device=d), size=(big // 2**20, 2**20)),
        "pad": lambda d: F.pad(ember.ones(1, 1, 4, device=d), (big, 0)),
        "pad replicate": lambda d: F.pad(ember.ones(1, 1, 4, device=d), (big, 0), mode="replicate"),
        "empty": lambda d: ember.empty(big, device=d),
        "zeros": lambda d: ember.zeros(2, big // 2, device=d),
        "ones": lambda d: ember.ones(big, device=d),
        "full": lambda d: ember.full((big,), 1.5, device=d),
        "empty_strided": lambda d: ember.empty_strided((big,), (1,), device=d),
        "new_empty": lambda d: ember.ones(2, device=d).new_empty(big),
        "new_zeros": lambda d: ember.ones(2, device=d).new_zeros(big),
        "repeat": lambda d: ember.ones(1, device=d).repeat(big),
        "tile": lambda d: ember.ones(1, device=d).tile(big),
        "arange": lambda d: ember.arange(big, device=d, dtype=ember.float32),
        "linspace": lambda d: ember.linspace(0, 1, big, device=d),
        "rand": lambda d: ember.rand(big, device=d),
        "clone of an expanded view": lambda d: ember.ones(1, device=d).expand(big).clone(),
        "add to an expanded view": lambda d: ember.ones(1, device=d).expand(big) + 1,
        "repeat_interleave": lambda d: ember.ones(2, device=d).repeat_interleave(big // 2),
    }


@pytest.mark.parametrize("name", sorted(_calls(OVER)))
def test_storage_past_int64_bytes_is_refused_on_every_device(name):
    # 2**62 float32 elements: the count fits int64, the 2**64 bytes do not
    for device in ("meta", "cpu"):
        # on the CPU, an expanded view that large cannot be made at all (a numpy array must fit int64 bytes)
        with pytest.raises(RuntimeError, match="overflow|cannot describe"):
            _calls(OVER)[name](device)


@pytest.mark.parametrize("name", sorted(_calls(BIG)))
def test_sizes_that_fit_int64_have_meta_shapes_and_fail_to_allocate_on_cpu(name):
    call = _calls(BIG)[name]
    out = call("meta")
    assert math.prod(out.shape) >= BIG // 2
    with pytest.raises(RuntimeError, match="can't allocate memory on device 'cpu': you tried to allocate") as info:
        call("cpu")
    assert isinstance(info.value, MemoryError)  # still caught by code written against numpy's MemoryError


@pytest.mark.parametrize(
    "call",
    [
        lambda: ember.empty(2**32, 2**32, device="meta"),
        lambda: ember.ones(1, 1, device="meta").expand(2**32, 2**32),
        lambda: ember.eye(2**32, device="meta"),
        lambda: ember.outer(ember.ones(1, device="meta").expand(2**32), ember.ones(1, device="meta").expand(2**32)),
        lambda: ember.kron(ember.ones(1, device="meta").expand(2**32), ember.ones(1, device="meta").expand(2**32)),
        lambda: F.interpolate(ember.ones(1, 1, 4, device="meta"), scale_factor=1e30),
        lambda: ember.arange(0, 1e30, device="meta"),
        lambda: ember.cat([ember.ones(1, device="meta").expand(OVER)] * 2),
        lambda: F.pad(ember.ones(1, 1, 4, device="meta"), (2**63, 0)),
        lambda: ember.tril_indices(2**32, 2**32, device="meta"),
    ],
    ids=["empty", "expand", "eye", "outer", "kron", "interpolate 1e30", "arange 1e30", "cat", "pad 2**63",
         "tril_indices"],
)
def test_meta_tensors_of_more_than_int64_elements_are_refused(call):
    with pytest.raises(RuntimeError, match="numel: integer multiplication overflow"):
        call()


MORE_PROBES = {
    "one_hot": lambda d: F.one_hot(ember.zeros(2, dtype=ember.int64, device=d), OVER),
    "histc": lambda d: ember.histc(ember.ones(2, device=d), bins=OVER),
    "randperm": lambda d: ember.randperm(OVER, device=d),
    "randint": lambda d: ember.randint(0, 5, (OVER,), device=d),
    "F.unfold": lambda d: F.unfold(ember.ones(1, 1, 4, 4, device=d), kernel_size=1, padding=2**31),
    "conv1d padding": lambda d: F.conv1d(ember.ones(1, 1, 4, device=d), ember.ones(1, 1, 1, device=d), padding=OVER),
    "bilinear": lambda d: F.interpolate(ember.ones(1, 1, 2, 2, device=d), size=(2**31, 2**31), mode="bilinear"),
    "diag_embed": lambda d: ember.diag_embed(ember.ones(1, device=d).expand(2**32)),
    "new_full": lambda d: ember.ones(1, device=d).new_full((OVER,), 1.0),
    "cartesian_prod": lambda d: ember.cartesian_prod(ember.ones(1, device=d).expand(2**32),
                                                     ember.ones(1, device=d).expand(2**32)),
    "matmul": lambda d: ember.ones(1, 1, device=d).expand(2**32, 1) @ ember.ones(1, 1, device=d).expand(1, 2**32),
    "logspace": lambda d: ember.logspace(0, 1, OVER, device=d),
}


@pytest.mark.parametrize("name", sorted(MORE_PROBES))
@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_more_probes_are_refused(name, device):
    with pytest.raises(RuntimeError, match="overflow"):
        MORE_PROBES[name](device)


def test_bincount_checks_its_data_dependent_length():
    # the meta function cannot know the length; the kernel checks it before numpy allocates
    with pytest.raises(RuntimeError, match="Storage size calculation overflowed"):
        ember.bincount(ember.tensor([0]), minlength=OVER)
    with pytest.raises(RuntimeError, match="Storage size calculation overflowed"):
        ember.bincount(ember.tensor([0, OVER]))
    with pytest.raises(RuntimeError, match="you tried to allocate"):
        ember.bincount(ember.tensor([0, BIG]))
    assert ember.bincount(ember.tensor([0, 2, 2]), minlength=4).tolist() == [1, 0, 2, 0]


def test_an_expanded_view_may_be_larger_than_int64_bytes_on_meta():
    # it spans one element of storage (PyTorch allows it too)
    assert ember.ones(1, device="meta").expand(OVER).shape == (OVER,)
    with pytest.raises(RuntimeError, match="cannot describe"):  # numpy arrays cannot: a clear error, not numpy's
        ember.ones(1).expand(OVER)


def test_size_arguments_past_int64_are_type_errors_as_in_pytorch():
    with pytest.raises(TypeError, match="fit in int64"):
        ember.empty(2**63, device="meta")


def test_arange_counts_large_integer_ranges_exactly():
    # (end - start) / step in floats rounded 2**63 - 1 up to 2**63, and the CPU made an empty tensor of it
    assert ember.arange(0, 2**60 + 1, 3, device="meta").shape == ((2**60 + 1 + 2) // 3,)
    assert ember.arange(2**62, 2**62 + 5, device="meta").shape == (5,)
    assert ember.arange(2**53, 2**53 + 3).tolist() == [2**53, 2**53 + 1, 2**53 + 2]
    for device in ("meta", "cpu"):
        with pytest.raises(RuntimeError, match="Storage size calculation overflowed"):
            ember.arange(0, 2**63 - 1, device=device)


@pytest.mark.parametrize("offset", range(-6, 7))
@pytest.mark.parametrize("lower", [True, False])
def test_tri_indices_meta_counts_without_a_mask(offset, lower):
    fn = ember.tril_indices if lower else ember.triu_indices
    for row, col in [(0, 3), (3, 0), (1, 1), (4, 4), (3, 5), (5, 3), (6, 2)]:
        mask = (np.tril if lower else np.triu)(np.ones((row, col), bool), offset)
        assert fn(row, col, offset, device="meta").shape == (2, int(mask.sum())), (row, col)
        assert fn(row, col, offset).shape == (2, int(mask.sum()))


def test_tri_indices_of_a_huge_matrix_have_a_meta_shape():
    n = 2**29  # the old meta function built an n x n mask
    assert ember.tril_indices(n, n, device="meta").shape == (2, n * (n + 1) // 2)
    assert ember.triu_indices(n, n, 1, device="meta").shape == (2, n * (n - 1) // 2)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_the_check_sees_numpy_integer_sizes_that_wrap_around():
    # a product of numpy int64s wraps to 0 here; the check must not be fooled
    with pytest.raises(RuntimeError, match="numel: integer multiplication overflow"):
        MetaArray((np.int64(2**32), np.int64(2**32)), np.dtype(np.float32))


def test_check_sizes_limits():
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    check_sizes((INT64_MAX // 8,), f64)  # exactly fits
    with pytest.raises(RuntimeError, match="Storage size calculation overflowed"):
        check_sizes((INT64_MAX // 8 + 1,), f64)
    check_sizes((INT64_MAX,), f32, strides=(0,))  # an expanded view spans one element
    with pytest.raises(RuntimeError, match="Storage size calculation overflowed"):
        check_sizes((2, INT64_MAX // 16), f64, strides=(INT64_MAX // 16 + 1, 1), offset=1)
    with pytest.raises(RuntimeError, match="numel"):
        check_sizes((INT64_MAX, 2), f32, strides=(0, 0))
    check_sizes((0, 2**70), f32)  # empty: nothing to store


def test_allocation_error_is_a_runtime_and_memory_error():
    assert issubclass(AllocationError, RuntimeError) and issubclass(AllocationError, MemoryError)


def test_out_of_memory_error_has_pytorchs_names():
    # programs catch torch.cuda.OutOfMemoryError / torch.OutOfMemoryError to retry with smaller batches
    assert ember.OutOfMemoryError is ember.cuda.OutOfMemoryError is AllocationError
    with pytest.raises(ember.cuda.OutOfMemoryError, match=f"you tried to allocate {2**60} bytes"):
        ember.empty(2**58)  # 2**60 bytes: more than any address space, whatever the overcommit policy


def test_ordinary_sizes_still_work():
    x = F.pad(ember.ones(1, 1, 4), (2, 1))
    assert x.shape == (1, 1, 7) and x.sum().item() == 4
    assert F.interpolate(ember.ones(1, 1, 4), size=8).shape == (1, 1, 8)
    assert ember.ones(1, 1).expand(3, 4).shape == (3, 4)


@pytest.mark.cuda
def test_cuda_sizes_and_failed_allocations_raise_runtime_errors():
    with pytest.raises(RuntimeError, match="overflow"):
        ember.empty(OVER, device="cuda")  # refused by the meta check before CuPy is asked
    # CuPy's OutOfMemoryError (a MemoryError) becomes the same RuntimeError as on the CPU
    with pytest.raises(RuntimeError, match="can't allocate memory on device 'cuda") as info:
        ember.empty(BIG, device="cuda")
    assert isinstance(info.value, MemoryError)
    with pytest.raises(RuntimeError, match="can't allocate memory on device 'cuda"):
        F.pad(ember.ones(1, 1, 4, device="cuda"), (BIG, 0))
    assert ember.ones(3, device="cuda").sum().item() == 3  # the device is still usable


def test_failed_allocations_under_autograd_raise_runtime_errors():
    # autograd's recorders call the checked kernels directly; the dispatcher converts their errors too
    x = ember.ones(1, requires_grad=True)
    for call in (lambda: x.expand(BIG) * 2, lambda: ember.exp(x.expand(BIG)), lambda: F.pad(x.reshape(1, 1, 1), (BIG, 0))):
        with pytest.raises(RuntimeError, match="you tried to allocate"):
            call()
