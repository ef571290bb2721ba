"""Anomaly mode: NaN gradients raise naming the node and showing where it was created."""

from __future__ import annotations

import threading
import warnings

import pytest

import ember
from ember.autograd import detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled, set_detect_anomaly


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Anomaly Detection has been enabled")
        yield


def _nan_graph():
    """sqrt at 0 has an infinite derivative; times a zero gradient it gives NaN in SqrtBackward0."""
    x = ember.tensor([0.0, 4.0], dtype=ember.float64, requires_grad=True)
    y = x.sqrt()  # the forward line the error must show
    return x, (y * 0).sum()


def test_nan_in_backward_raises_naming_node_and_forward_line():
    with detect_anomaly():
        x, loss = _nan_graph()
        with pytest.raises(RuntimeError) as info:
            loss.backward()
    message = str(info.value)
    assert "Function 'SqrtBackward0' returned nan values in its 0th output." in message
    assert __file__ in message or "test_anomaly.py" in message
    assert "y = x.sqrt()  # the forward line the error must show" in message
    assert x.grad is None  # nothing was accumulated past the failing node


def test_without_anomaly_mode_nan_propagates():
    x, loss = _nan_graph()
    loss.backward()
    values = x.grad.tolist()
    assert values[0] != values[0]  # NaN
    assert values[1] == 0.0


def test_check_nan_false_does_not_raise():
    with detect_anomaly(check_nan=False):
        assert is_anomaly_enabled() and not is_anomaly_check_nan_enabled()
        x, loss = _nan_graph()
        loss.backward()
    assert x.grad is not None
    assert is_anomaly_check_nan_enabled()


def test_nodes_created_outside_anomaly_mode_have_no_trace():
    x, loss = _nan_graph()
    with detect_anomaly():
        with pytest.raises(RuntimeError) as info:
            loss.backward()
    assert "returned nan values" in str(info.value)
    assert "x.sqrt()" not in str(info.value)


def test_error_in_backward_warns_with_forward_trace():
    class Broken(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            raise ValueError("broken backward")

    with detect_anomaly():
        x = ember.tensor([1.0], requires_grad=True)
        y = Broken.apply(x)  # the broken call
        with pytest.warns(UserWarning, match="Error detected in BrokenBackward") as record:
            with pytest.raises(ValueError, match="broken backward"):
                y.backward(ember.ones(1))
    text = "\n".join(str(w.message) for w in record)
    assert "y = Broken.apply(x)  # the broken call" in text


def test_detect_anomaly_warns_on_entry():
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        with detect_anomaly():
            pass


def test_detect_anomaly_as_decorator():
    @detect_anomaly()
    def run():
        assert is_anomaly_enabled()
        _, loss = _nan_graph()
        loss.backward()

    with pytest.raises(RuntimeError, match="SqrtBackward0"):
        run()
    assert not is_anomaly_enabled()


def test_set_detect_anomaly_function_and_context_manager():
    assert not is_anomaly_enabled()
    set_detect_anomaly(True)
    try:
        assert is_anomaly_enabled()
    finally:
        set_detect_anomaly(False)
    assert not is_anomaly_enabled()
    with set_detect_anomaly(True):
        assert is_anomaly_enabled()
    assert not is_anomaly_enabled()


def test_restored_after_exception():
    with pytest.raises(KeyError):
        with detect_anomaly():
            raise KeyError("x")
    assert not is_anomaly_enabled()


def test_no_false_positive_on_finite_gradients():
    with detect_anomaly():
        x = ember.tensor([1.0, 4.0], dtype=ember.float64, requires_grad=True)
        (x.sqrt() * x).sum().backward()
    assert x.grad.tolist() == pytest.approx([1.5, 3.0])


def test_anomaly_mode_is_process_wide():
    # unlike grad mode, PyTorch's anomaly mode is global: worker threads see it
    seen = {}

    def worker():
        seen["enabled"] = is_anomaly_enabled()

    with detect_anomaly():
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    assert seen["enabled"] is True
