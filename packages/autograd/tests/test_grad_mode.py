"""Grad modes: ``no_grad``, ``enable_grad``, ``set_grad_enabled``, ``inference_mode``.

Each is a context manager and a decorator, restores the previous mode on exit
(exceptions included) and is thread-local, as in PyTorch.
"""

from __future__ import annotations

import threading

import pytest

import ember
import ember.autograd as autograd


def _leaf():
    return ember.tensor([1.0, 2.0], requires_grad=True)


def test_autograd_reexports_core_modes():
    assert autograd.no_grad is ember.no_grad
    assert autograd.enable_grad is ember.enable_grad
    assert autograd.set_grad_enabled is ember.set_grad_enabled
    assert autograd.inference_mode is ember.inference_mode
    assert autograd.is_grad_enabled is ember.is_grad_enabled


class TestNoGrad:
    def test_context_manager(self):
        x = _leaf()
        assert ember.is_grad_enabled()
        with ember.no_grad():
            assert not ember.is_grad_enabled()
            y = x * 2
        assert ember.is_grad_enabled()
        assert not y.requires_grad and y.grad_fn is None
        assert (x * 2).requires_grad

    def test_decorator(self):
        @ember.no_grad()
        def f(t):
            assert not ember.is_grad_enabled()
            return t * 2

        y = f(_leaf())
        assert not y.requires_grad
        assert ember.is_grad_enabled()
        assert f.__name__ == "f"

    def test_bare_decorator(self):
        @ember.no_grad
        def f():
            return ember.is_grad_enabled()

        assert f() is False

    def test_decorated_generator_runs_its_body_without_grad(self):
        @ember.no_grad()
        def gen():
            yield ember.is_grad_enabled()
            yield ember.is_grad_enabled()

        assert list(gen()) == [False, False]
        assert ember.is_grad_enabled()

    def test_restored_after_exception(self):
        with pytest.raises(ValueError):
            with ember.no_grad():
                raise ValueError("boom")
        assert ember.is_grad_enabled()

    def test_nesting(self):
        with ember.no_grad():
            with ember.no_grad():
                assert not ember.is_grad_enabled()
            assert not ember.is_grad_enabled()
        assert ember.is_grad_enabled()

    def test_inplace_on_leaf_allowed(self):
        x = _leaf()
        with ember.no_grad():
            x.mul_(2.0)
        assert x.is_leaf and x.requires_grad
        assert x.detach().tolist() == [2.0, 4.0]


class TestEnableGrad:
    def test_inside_no_grad(self):
        x = _leaf()
        with ember.no_grad():
            with ember.enable_grad():
                assert ember.is_grad_enabled()
                y = x * 2
            assert not ember.is_grad_enabled()
        assert y.requires_grad and y.grad_fn is not None

    def test_decorator_inside_no_grad(self):
        @ember.enable_grad()
        def f(t):
            return t * t

        x = _leaf()
        with ember.no_grad():
            y = f(x)
            assert not ember.is_grad_enabled()
        y.backward(ember.ones(2))
        assert x.grad.tolist() == [2.0, 4.0]


class TestSetGradEnabled:
    def test_as_function(self):
        try:
            ember.set_grad_enabled(False)
            assert not ember.is_grad_enabled()
            assert not (_leaf() * 2).requires_grad
        finally:
            ember.set_grad_enabled(True)
        assert ember.is_grad_enabled()

    @pytest.mark.parametrize("mode", [True, False])
    def test_context_manager(self, mode):
        with ember.no_grad():
            with ember.set_grad_enabled(mode):
                assert ember.is_grad_enabled() is mode
                assert (_leaf() * 2).requires_grad is mode
            assert not ember.is_grad_enabled()
        assert ember.is_grad_enabled()

    def test_decorator(self):
        @ember.set_grad_enabled(False)
        def f():
            return ember.is_grad_enabled()

        assert ember.is_grad_enabled()  # defining it does not change the mode
        assert f() is False
        assert ember.is_grad_enabled()


class TestInferenceMode:
    def test_context_manager(self):
        x = _leaf()
        assert not ember.is_inference_mode_enabled()
        with ember.inference_mode():
            assert ember.is_inference_mode_enabled()
            assert not ember.is_grad_enabled()
            y = x * 2
        assert not ember.is_inference_mode_enabled()
        assert ember.is_grad_enabled()
        assert not y.requires_grad

    def test_decorator(self):
        @ember.inference_mode()
        def f(t):
            return t * 2, ember.is_inference_mode_enabled()

        y, inside = f(_leaf())
        assert inside and not y.requires_grad
        assert not ember.is_inference_mode_enabled()

    def test_disabled(self):
        with ember.inference_mode(False):
            assert not ember.is_inference_mode_enabled()
            assert (_leaf() * 2).requires_grad

    def test_disabled_inside_enabled_turns_grad_back_on(self):
        # PyTorch: inference_mode(False) sets grad mode on, whatever the mode outside
        with ember.inference_mode():
            with ember.inference_mode(False):
                assert ember.is_grad_enabled()
                assert (_leaf() * 2).requires_grad

    def test_bare_decorator(self):
        @ember.inference_mode
        def f():
            return ember.is_inference_mode_enabled()

        assert f() is True


class TestThreadLocal:
    def _in_thread(self, fn):
        result = {}

        def run():
            try:
                result["value"] = fn()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
                result["error"] = exc

        t = threading.Thread(target=run)
        t.start()
        t.join()
        if "error" in result:
            raise result["error"]
        return result["value"]

    def test_thread_does_not_see_no_grad_of_another(self):
        with ember.no_grad():
            assert self._in_thread(ember.is_grad_enabled) is True
            assert self._in_thread(lambda: (_leaf() * 2).requires_grad) is True
            assert not ember.is_grad_enabled()

    def test_no_grad_in_thread_does_not_leak(self):
        inside = threading.Event()
        release = threading.Event()
        seen = {}

        def worker():
            with ember.no_grad():
                seen["worker"] = ember.is_grad_enabled()
                inside.set()
                release.wait(10)

        t = threading.Thread(target=worker)
        t.start()
        try:
            assert inside.wait(10)
            assert ember.is_grad_enabled()  # the main thread is unaffected while the worker is in no_grad
            assert (_leaf() * 2).requires_grad
        finally:
            release.set()
            t.join()
        assert seen["worker"] is False

    def test_inference_mode_is_thread_local(self):
        with ember.inference_mode():
            assert self._in_thread(ember.is_inference_mode_enabled) is False

    def test_backward_in_thread(self):
        def work():
            x = _leaf()
            (x * x).backward(ember.ones(2))
            return x.grad.tolist()

        with ember.no_grad():
            assert self._in_thread(work) == [2.0, 4.0]
