"""Bad input against PyTorch (issue 18): impossible sizes, and the cases where the two disagree.

Sizes: where PyTorch refuses a size (int64 overflow on meta, a failed allocation on the CPU)
ember raises the same exception type, and where PyTorch's meta device accepts one ember gives
the same shape. Disagreements (see ``test_bad_input_choices.py`` and docs/internals.rst,
"Robustness"): ember follows PyTorch's own meta functions and decompositions where its CPU
kernels take a shortcut; the checks of PyTorch's eager answers pin the difference, so a PyTorch
release that changes them fails here and the docs get updated.
"""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as TF  # noqa: E402
from _parity_device import require_pinned_torch  # noqa: E402

import ember  # noqa: E402
import ember.nn.functional as EF  # noqa: E402

NAN = float("nan")
BIG, OVER = 2**57, 2**62


def _sized_calls(big):
    return {
        "interpolate size": lambda lib, F, d: F.interpolate(lib.ones(1, 1, 4, device=d), size=big),
        "interpolate scale_factor": lambda lib, F, d: F.interpolate(lib.ones(1, 1, 4, device=d), scale_factor=big / 4),
        "pad": lambda lib, F, d: F.pad(lib.ones(1, 1, 4, device=d), (big, 0)),
        "pad replicate": lambda lib, F, d: F.pad(lib.ones(1, 1, 4, device=d), (big, 0), mode="replicate"),
        "empty": lambda lib, F, d: lib.empty(big, device=d),
        "zeros": lambda lib, F, d: lib.zeros(big, device=d),
        "full": lambda lib, F, d: lib.full((big,), 2.0, device=d),
        "new_empty": lambda lib, F, d: lib.ones(2, device=d).new_empty(big),
        "repeat": lambda lib, F, d: lib.ones(1, device=d).repeat(big),
        "tile": lambda lib, F, d: lib.ones(1, device=d).tile(big),
        "arange": lambda lib, F, d: lib.arange(big, device=d),
        "linspace": lambda lib, F, d: lib.linspace(0, 1, big, device=d),
        "randn": lambda lib, F, d: lib.randn(big, device=d),
        "clone of an expanded view": lambda lib, F, d: lib.ones(1, device=d).expand(big // 4).clone(),
    }


def _outcome(fn):
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - the type is what the test compares
        return exc


@pytest.mark.parametrize("name", sorted(_sized_calls(BIG)))
def test_huge_sizes_as_in_pytorch(name):
    for big in (BIG, OVER):
        call = _sized_calls(big)[name]
        for device in ("meta", "cpu"):
            expected = _outcome(lambda: call(torch, TF, device))
            got = _outcome(lambda: call(ember, EF, device))
            if name == "randn" and big == OVER and device == "meta":
                # PyTorch's meta randn skips the storage check its meta empty does; ember refuses both
                assert isinstance(got, RuntimeError) and "overflow" in str(got)
            elif isinstance(expected, Exception):
                assert isinstance(expected, RuntimeError), expected
                assert isinstance(got, RuntimeError), f"{device}, {big}: ember gave {got!r}, PyTorch {expected!r}"
            else:
                assert device == "meta"
                assert not isinstance(got, Exception), f"{big}: ember raised {got!r}"
                assert tuple(got.shape) == tuple(expected.shape) and str(got.dtype)[6:] == str(expected.dtype)[6:]


@pytest.mark.parametrize(
    "call",
    [
        lambda lib: lib.empty(2**32, 2**32, device="meta"),
        lambda lib: lib.ones(1, 1, device="meta").expand(2**32, 2**32),
        lambda lib: lib.eye(2**32, device="meta"),
        lambda lib: lib.outer(lib.ones(1, device="meta").expand(2**32), lib.ones(1, device="meta").expand(2**32)),
        lambda lib: lib.arange(0, 2**63 - 1, device="meta"),
    ],
    ids=["empty", "expand", "eye", "outer", "arange"],
)
def test_more_than_int64_elements_on_meta_as_in_pytorch(call):
    with pytest.raises(RuntimeError, match="overflow"):
        call(torch)
    with pytest.raises(RuntimeError, match="overflow"):
        call(ember)


def test_expanded_meta_view_past_int64_bytes_as_in_pytorch():
    assert tuple(ember.ones(1, device="meta").expand(OVER).shape) == tuple(torch.ones(1, device="meta").expand(OVER).shape)


def test_size_argument_past_int64_is_a_type_error_as_in_pytorch():
    with pytest.raises(TypeError):
        torch.empty(2**63, device="meta")
    with pytest.raises(TypeError):
        ember.empty(2**63, device="meta")


# -- margin losses with NaN: ember follows PyTorch's decomposition, not its CPU kernel -----------------


MARGIN_INPUTS = [
    [[0.1, NAN, 0.3], [0.2, 0.5, 0.1]],
    [[NAN, 0.2, 0.3], [0.4, 0.1, 0.2]],
    [[0.3, 0.2, 0.1], [0.1, 0.2, 0.3]],
]


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("x", MARGIN_INPUTS)
def test_multi_margin_loss_matches_pytorchs_decomposition(x, p):
    from torch._decomp import decomposition_table

    decomposition = decomposition_table[torch.ops.aten.multi_margin_loss.default]
    target = [0, 1]
    expected = decomposition(torch.tensor(x, dtype=torch.float64), torch.tensor(target), p, 1.0, None, 0)
    got = EF.multi_margin_loss(ember.tensor(x, dtype=ember.float64), ember.tensor(target), p=p, reduction="none")
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-12)
    eager = TF.multi_margin_loss(torch.tensor(x, dtype=torch.float64), torch.tensor(target), p=p, reduction="none")
    if not any(math.isnan(v) for row in x for v in row):
        np.testing.assert_allclose(got.numpy(), eager.numpy(), rtol=1e-12)
    else:
        require_pinned_torch("PyTorch's CPU kernel dropping NaN hinge terms")
        assert not eager.isnan().any()  # the eager CPU kernel drops NaN terms: the difference the docs list
        assert np.isnan(got.numpy()).any()


def test_multilabel_margin_loss_nan_against_pytorch():
    x = [[0.1, NAN, 0.3, 0.4], [0.2, 0.5, 0.1, 0.0]]
    target = [[3, 0, -1, 1], [0, 1, 2, -1]]
    got = EF.multilabel_margin_loss(ember.tensor(x), ember.tensor(target), reduction="none")
    eager = TF.multilabel_margin_loss(torch.tensor(x), torch.tensor(target), reduction="none")
    assert math.isnan(got[0].item())
    np.testing.assert_allclose(got[1].item(), eager[1].item(), rtol=1e-6)  # the row without NaN agrees
    require_pinned_torch("PyTorch's CPU kernel dropping NaN hinge terms")
    assert not math.isnan(eager[0].item())


# -- kthvalue among ties: same values; ember's index is the stable sort's, PyTorch's unspecified ------


def test_kthvalue_ties_against_pytorch():
    rng = np.random.default_rng(1)
    data = rng.integers(0, 3, size=(5, 50)).astype(np.float32)
    for k in (1, 10, 25, 50):
        got = ember.kthvalue(ember.tensor(data), k, dim=1)
        expected = torch.kthvalue(torch.tensor(data), k, dim=1)
        np.testing.assert_array_equal(got.values.numpy(), expected.values.numpy())
        rows = np.arange(data.shape[0])
        # both indices point at the k-th value; ember's is the one a stable sort puts there
        np.testing.assert_array_equal(data[rows, expected.indices.numpy()], expected.values.numpy())
        np.testing.assert_array_equal(got.indices.numpy(), np.argsort(data, axis=1, kind="stable")[:, k - 1])
    v = [3.0, 1.0, 2.0, 1.0, 1.0, 5.0]
    require_pinned_torch("PyTorch's CPU quickselect order among ties")
    assert [torch.kthvalue(torch.tensor(v), k).indices.item() for k in (1, 2, 3)] == [3, 4, 1]
    assert [ember.kthvalue(ember.tensor(v), k).indices.item() for k in (1, 2, 3)] == [1, 3, 4]


# -- pixel_unshuffle of empty inputs: ember follows PyTorch's meta function ---------------------------


@pytest.mark.parametrize("shape", [(0, 4, 4, 4), (2, 0, 4, 4), (2, 1, 0, 4)])
def test_pixel_unshuffle_of_empty_inputs_matches_pytorchs_meta(shape):
    expected = TF.pixel_unshuffle(torch.ones(*shape, device="meta"), 2).shape
    assert tuple(EF.pixel_unshuffle(ember.ones(*shape), 2).shape) == tuple(expected)
    require_pinned_torch("PyTorch's CPU pixel_unshuffle returning empty inputs unchanged")
    assert tuple(TF.pixel_unshuffle(torch.ones(*shape), 2).shape) == shape


# -- convolution without input channels: the empty sum plus the bias ------------------------------------


def test_convolution_without_input_channels_is_the_limit_of_a_zero_channel():
    bias = [0.5, -1.0]
    got = EF.conv2d(ember.ones(2, 0, 4, 4), ember.ones(2, 0, 3, 3), ember.tensor(bias))
    # one input channel of zeros contributes nothing: PyTorch's answer for the same sum
    expected = TF.conv2d(torch.zeros(2, 1, 4, 4), torch.ones(2, 1, 3, 3), torch.tensor(bias))
    np.testing.assert_array_equal(got.numpy(), expected.numpy())
    require_pinned_torch("PyTorch's convolution dropping out_channels without input channels")
    assert tuple(TF.conv2d(torch.ones(2, 0, 4, 4), torch.ones(2, 0, 3, 3), torch.tensor(bias)).shape) == (2, 0, 2, 2)
