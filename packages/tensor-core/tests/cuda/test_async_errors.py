"""ember.cuda._async_errors: flagged errors wait for the next synchronizing call, then raise once (CPU test)."""

import pytest

from ember.cuda import _async_errors


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    monkeypatch.setattr(_async_errors, "_pending", {})


def _flag(values):
    """A stand-in for a device flag: its check raises while the flag is set, and resets it."""
    def check():
        if values:
            value = values.pop()
            raise IndexError(f"Target {value} is out of bounds.")
    return check


def test_nothing_pending_is_a_no_op():
    _async_errors.raise_pending()


def test_a_deferred_error_is_raised_once_at_the_next_call():
    _async_errors.defer("a", _flag([7]))
    with pytest.raises(IndexError, match="Target 7"):
        _async_errors.raise_pending()
    _async_errors.raise_pending()  # consumed


def test_one_check_per_key_and_every_flag_is_read():
    first, second = [3], [5]
    _async_errors.defer("a", _flag([1]))
    _async_errors.defer("a", _flag(first))  # the same flag, deferred again: one read
    _async_errors.defer("b", _flag(second))
    with pytest.raises(IndexError, match="Target 3"):
        _async_errors.raise_pending()
    assert first == [] and second == []  # the other key's flag was read (and reset) too
    _async_errors.raise_pending()


def test_a_clean_flag_raises_nothing():
    _async_errors.defer("a", _flag([]))
    _async_errors.raise_pending()
