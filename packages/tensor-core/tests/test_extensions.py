"""``import ember`` loads extension distributions through entry points."""

import importlib.metadata
import sys
import types
import warnings

import pytest

import ember
from ember import _extensions


class _FakeEntryPoint:
    def __init__(self, name, value, loader):
        self.name, self.value, self._loader = name, value, loader

    def load(self):
        return self._loader()


def test_entry_points_are_loaded(monkeypatch):
    loaded = []

    def good():
        loaded.append("good")
        return types.ModuleType("good")

    def bad():
        raise ImportError("broken extension")

    points = [_FakeEntryPoint("good", "fake_good", good), _FakeEntryPoint("bad", "fake_bad", bad)]
    monkeypatch.setattr(_extensions, "entry_points", lambda group: points if group == "ember.extensions" else [])
    monkeypatch.setattr(_extensions, "_loaded", [])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _extensions.load_extensions()
        _extensions.load_extensions()  # a second call loads nothing twice
    assert loaded == ["good"]
    assert _extensions.loaded_extensions() == ["fake_good"]
    assert any("bad" in str(w.message) and "broken extension" in str(w.message) for w in caught)


def test_path_is_extended_for_other_distributions():
    assert isinstance(ember.__path__, list) and len(ember.__path__) >= 1
    assert any(p.rstrip("/").endswith("ember") for p in ember.__path__)


def test_missing_feature_error_names_the_distribution(monkeypatch):
    monkeypatch.setattr(_extensions, "autograd", _extensions._AutogradSlot())  # as without ember-autograd
    with pytest.raises(_extensions.MissingDistributionError, match="pip install ember-autograd"):
        ember.ones(1).register_hook(lambda g: g)
    assert issubclass(_extensions.MissingDistributionError, RuntimeError)


def test_compiled_extension_is_present():
    assert ember._C.get_num_threads() >= 1
    before = ember._C.get_num_threads()
    ember._C.set_num_threads(1)
    if ember._C.has_openmp:
        assert ember._C.get_num_threads() == 1
    ember._C.set_num_threads(before)
    with pytest.raises(ValueError, match="positive number of threads"):
        ember._C.set_num_threads(0)
    assert "ember" in sys.modules
