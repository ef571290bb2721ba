"""Fixtures shared by ember-dynamo's tests: empty compile caches, and the stand-in translator."""

from __future__ import annotations

import pytest


@pytest.fixture
def fresh_caches():
    """The test starts from empty compile caches, so no test sees another's compiled code."""
    import ember._dynamo as dynamo

    dynamo.reset()
    yield
    dynamo.reset()


@pytest.fixture
def fake(monkeypatch, fresh_caches):
    """The runtime captures with :class:`fake_capture.FakeTranslator` (make_fx), not the real translator."""
    from fake_capture import FakeTranslator

    from ember._dynamo import frames

    translator = FakeTranslator()
    monkeypatch.setattr(frames, "_translate", translator)
    return translator
