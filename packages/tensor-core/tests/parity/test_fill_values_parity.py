"""Fill values that are not numbers: the same error type and words as PyTorch (see ``test_fill_values.py``)."""

import pytest

torch = pytest.importorskip("torch")

from _parity_device import IS_PINNED_TORCH  # noqa: E402

import ember  # noqa: E402

NOT_NUMBERS = [None, "a", [1.0]]

CALLS = {
    "full": lambda lib, v: lib.full((2, 3), v),
    "full with dtype": lambda lib, v: lib.full((2, 3), v, dtype=lib.float32),
    "full_like": lambda lib, v: lib.full_like(lib.ones(2), v),
    "new_full": lambda lib, v: lib.ones(2).new_full((3,), v),
    "scalar_tensor": lambda lib, v: lib.scalar_tensor(v),
    "fill_": lambda lib, v: lib.ones(2).fill_(v),
}


def _error(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the type is what the test compares
        return exc
    return None


@pytest.mark.parametrize("value", NOT_NUMBERS, ids=lambda v: type(v).__name__)
@pytest.mark.parametrize("call", sorted(CALLS))
def test_non_number_fill_values_raise_as_in_pytorch(call, value):
    expected = _error(lambda: CALLS[call](torch, value))
    got = _error(lambda: CALLS[call](ember, value))
    assert type(expected) is TypeError
    assert type(got) is TypeError, f"ember gave {got!r}"
    # PyTorch lists fill_'s overloads; ember names the argument as for full. The words are compared
    # with the pinned PyTorch only: other releases list the overloads of `full` with a dtype too.
    if call != "fill_" and IS_PINNED_TORCH:
        assert str(got) == str(expected).replace("torch", "ember")
