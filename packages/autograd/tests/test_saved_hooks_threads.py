"""saved_tensors_hooks stay per thread while saving skips the thread-local lookup when none is open.

``graph._hooks_open`` counts the open contexts of all threads; saving a tensor reads the thread's
own stack only while it is nonzero. A context open in one thread must pack the tensors saved there
and no others; after every context closes the count is back to zero.
"""

from __future__ import annotations

import threading

import numpy as np

import ember
from ember.autograd import graph


def test_hooks_of_one_thread_do_not_reach_another():
    packed = []
    inside = threading.Event()
    done = threading.Event()

    def other_thread():
        with graph.saved_tensors_hooks(lambda t: packed.append("other") or t, lambda t: t):
            inside.set()
            done.wait(10)

    worker = threading.Thread(target=other_thread)
    worker.start()
    try:
        assert inside.wait(10)
        assert graph._hooks_open >= 1
        x = ember.tensor([0.5, 1.0], dtype=ember.float64, requires_grad=True)
        y = x.sin()  # saved here, in a thread without hooks: not packed by the other thread's hook
        assert packed == []
        with graph.saved_tensors_hooks(lambda t: packed.append("main") or t, lambda t: t):
            z = x.cos()
        assert packed == ["main"]
        (y + z).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), np.cos([0.5, 1.0]) - np.sin([0.5, 1.0]), rtol=1e-12)
    finally:
        done.set()
        worker.join(10)
    assert graph._hooks_open == 0
