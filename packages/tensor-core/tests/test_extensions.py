"""``import ember`` loads extension distributions through entry points; a missing one is named."""

import ast
import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import re
import subprocess
import sys
import types
import warnings
from pathlib import Path

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
    with pytest.raises(
        _extensions.MissingDistributionError, match="pip install --find-links dist/wheels ember-autograd"
    ):
        ember.ones(1).register_hook(lambda g: g)
    # an ImportError for `try: import ember.fx except ImportError`, a RuntimeError as it was before
    assert issubclass(_extensions.MissingDistributionError, ImportError)
    assert issubclass(_extensions.MissingDistributionAttributeError, AttributeError)
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


# -- the one message, the one table ------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[3]  # the checkout: packages/tensor-core/tests/<this file>


def test_message_names_the_distribution_and_a_command_from_a_checkout():
    message = _extensions.missing_distribution_message("ember.fx", "ember-fx")
    assert message == (
        "ember.fx needs the 'ember-fx' distribution, which is not installed. From a checkout of the ember "
        "repository: nox -s wheels && pip install --find-links dist/wheels ember-fx "
        "(or: pip install ./packages/tensor-core ./packages/autograd ./packages/fx)"
    )
    # the distribution and the ember distributions it needs, dependencies first
    assert "(or: pip install ./packages/tensor-core ./packages/autograd)" in (
        _extensions.missing_distribution_message("ember.optim", "ember-autograd")
    )
    planned = _extensions.missing_distribution_message("ember.distributed", "ember-distributed")
    assert planned.startswith("ember.distributed needs the 'ember-distributed' distribution, which is not installed.")
    assert "not written yet" in planned and "packages/distributed/" in planned
    assert _extensions.missing_distribution_message("x", "other-dist").endswith(
        "Install it with: pip install other-dist"
    )


def test_require_keeps_its_signature():
    with pytest.raises(_extensions.MissingDistributionError) as info:
        _extensions.require("ember.nn.parallel.DistributedDataParallel", "ember-distributed")
    assert info.value.distribution == "ember-distributed"
    assert str(info.value).startswith("ember.nn.parallel.DistributedDataParallel needs the 'ember-distributed'")


def test_table_maps_the_modules_asked_for():
    provider = {module: dist.name for dist in _extensions.DISTRIBUTIONS.values() for module in dist.modules}
    expected = {
        "ember.autograd": "ember-autograd", "ember.optim": "ember-autograd",
        "ember.fx": "ember-fx", "ember.onnx": "ember-fx",
        "ember._dynamo": "ember-dynamo", "ember._inductor": "ember-inductor",
        "ember.distributed": "ember-distributed", "ember.mobile": "ember-mobile",
        "embervision": "ember-vision", "emberaudio": "ember-audio", "embertext": "ember-text",
        "embercsprng": "ember-csprng",
    }  # fmt: skip
    assert {module: provider[module] for module in expected} == expected


def test_written_distributions_list_only_modules_they_ship():
    # else `import ember.func` without ember-autograd would say "install ember-autograd", and after that
    # fail anyway
    for dist in _extensions.DISTRIBUTIONS.values():
        if not dist.written:
            continue
        src = ROOT / "packages" / dist.folder / "src"
        for module in dist.modules:
            path = src.joinpath(*module.split("."))
            assert path.is_dir() or path.with_suffix(".py").is_file(), f"{dist.name} lists {module}, not in {src}"


def _read_toml(path):
    tomllib = pytest.importorskip("tomllib", reason="tomllib needs Python 3.11")
    return tomllib.loads(path.read_text(encoding="utf-8"))


@pytest.mark.skipif(not (ROOT / "noxfile.py").is_file(), reason="needs a checkout of the repository (noxfile.py)")
def test_table_matches_the_checkout():
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    package_dirs = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "PACKAGE_DIRS"
    )
    assert package_dirs == tuple(dist.folder for dist in _extensions.DISTRIBUTIONS.values())
    for dist in _extensions.DISTRIBUTIONS.values():
        folder = ROOT / "packages" / dist.folder
        assert (folder / "pyproject.toml").is_file() == dist.written, f"flip `written` of {dist.name} in the table"
        if not dist.written:
            continue
        project = _read_toml(folder / "pyproject.toml")["project"]
        assert project["name"] == dist.name
        names = {re.match(r"[\w.-]+", req).group(0) for req in project.get("dependencies", [])}
        needed = {n for name in names if name.startswith("ember-") for n in _extensions._with_dependencies(name)}
        assert needed == set(_extensions._with_dependencies(dist.name)) - {dist.name}, dist.name
        if dist.name != "ember-core":  # every subpackage it ships is in the table
            shipped = {f"ember.{p.name}" for p in (folder / "src" / "ember").iterdir() if p.is_dir()}
            assert shipped - {"ember.__pycache__"} <= set(dist.modules), dist.name


# -- the finder and ember.__getattr__ ----------------------------------------------------------------


def test_finder_sits_last_once_and_never_shadows_an_installed_distribution(monkeypatch):
    finders = [f for f in sys.meta_path if type(f).__name__ == "MissingDistributionFinder"]
    assert len(finders) == 1
    # after the path finder that finds installed distributions (a module imported later may append its own
    # finder after ours, as six does for six.moves)
    assert sys.meta_path.index(importlib.machinery.PathFinder) < sys.meta_path.index(finders[0])
    _extensions._install_finder()
    assert [f for f in sys.meta_path if type(f).__name__ == "MissingDistributionFinder"] == finders
    finder = finders[0]
    assert finder.find_spec("ember.nn") is None  # not in the table
    assert finder.find_spec("ember.autograd") is None  # installed here (ember-autograd is a test dependency)
    monkeypatch.setattr(_extensions, "_installed", lambda distribution: False)
    monkeypatch.setitem(_extensions._PROVIDER, "ember.no_such_module", "ember-autograd")
    with pytest.raises(_extensions.MissingDistributionError, match="'ember-autograd'") as info:
        importlib.import_module("ember.no_such_module")
    assert info.value.name == "ember.no_such_module" and info.value.distribution == "ember-autograd"
    # a probe is told "absent", as for any missing module, instead of an error
    assert importlib.util.find_spec("ember.no_such_module") is None


def test_imports_of_a_missing_distribution(monkeypatch):
    # ember-mobile is not written yet, so it is certainly not installed
    for statement in ("import ember.mobile", "from ember import mobile", "import ember.mobile.lite"):
        with pytest.raises(_extensions.MissingDistributionError, match="^ember.mobile needs the 'ember-mobile'"):
            exec(statement, {"ember": ember})
    # attribute access: the same message as an AttributeError, so hasattr answers
    with pytest.raises(_extensions.MissingDistributionAttributeError, match="^ember.mobile needs the 'ember-mobile'"):
        ember.mobile  # noqa: B018
    assert not hasattr(ember, "mobile")
    with pytest.raises(ImportError, match="'ember-vision'"):
        import embervision  # noqa: F401
    assert importlib.util.find_spec("embervision") is None and importlib.util.find_spec("ember.mobile") is None
    monkeypatch.setitem(sys.modules, "ember._dynamo", None)  # ember-dynamo may be installed here: hide it
    with pytest.raises(_extensions.MissingDistributionError, match="'ember-dynamo'"):
        ember.compile(lambda x: x)
    assert "ember.mobile" not in sys.modules and "embervision" not in sys.modules


def test_a_module_its_installed_distribution_lacks_is_a_plain_error(monkeypatch):
    # a made-up module, mapped to ember-autograd (installed here), then to ember-mobile (not written yet)
    monkeypatch.setitem(_extensions._PROVIDER, "ember.no_such_module", "ember-autograd")
    with pytest.raises(ModuleNotFoundError) as info:
        importlib.import_module("ember.no_such_module")
    assert type(info.value) is ModuleNotFoundError
    assert not hasattr(ember, "no_such_module")  # ember.__getattr__: an AttributeError
    monkeypatch.setitem(_extensions._PROVIDER, "ember.no_such_module", "ember-mobile")
    with pytest.raises(
        _extensions.MissingDistributionAttributeError, match="^ember.no_such_module needs the 'ember-mobile'"
    ):
        ember.no_such_module  # noqa: B018


def test_attribute_imports_an_installed_submodule():
    assert ember.optim is importlib.import_module("ember.optim")
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        ember.no_such_name  # noqa: B018


# Runs `import ember` with ember-autograd and ember-fx hidden (their modules and their metadata), as in an
# environment where only ember-core is installed, whatever the layout (editable or not); prints one JSON line.
_ONLY_CORE = r"""
import importlib.metadata, json, re, sys

HIDDEN_DISTRIBUTIONS = {"ember_autograd", "ember_fx", "ember_inductor"}
HIDDEN_MODULES = ("ember.autograd", "ember.optim", "ember.func", "ember.fx", "ember.onnx", "ember.ao", "ember._inductor")


def normalize(name):
    return re.sub(r"[-_.]+", "_", name).lower()


class Hide:
    def __init__(self, inner):
        self.inner = inner

    def find_spec(self, name, path=None, target=None):
        if any(name == m or name.startswith(m + ".") for m in HIDDEN_MODULES):
            return None
        find = getattr(self.inner, "find_spec", None)
        return find(name, path, target) if find else None

    def find_distributions(self, *args, **kwargs):
        find = getattr(self.inner, "find_distributions", None)
        found = find(*args, **kwargs) if find else ()
        return [d for d in found if normalize(d.metadata["Name"]) not in HIDDEN_DISTRIBUTIONS]

    def invalidate_caches(self):
        if hasattr(self.inner, "invalidate_caches"):
            self.inner.invalidate_caches()


sys.meta_path[:] = [Hide(finder) for finder in sys.meta_path]
import ember
from ember._extensions import MissingDistributionError

results = {}
for statement in sys.argv[1:]:
    try:
        exec(statement, {"ember": ember})
        results[statement] = None
    except BaseException as exc:
        results[statement] = [type(exc).__name__, str(exc), isinstance(exc, ImportError), getattr(exc, "name", None)]
print(json.dumps(results))
"""

_WITHOUT_AUTOGRAD = {
    "import ember.autograd": "ember.autograd needs the 'ember-autograd'",
    "import ember.optim": "ember.optim needs the 'ember-autograd'",
    "from ember import optim": "ember.optim needs the 'ember-autograd'",
    "ember.optim.SGD": "ember.optim needs the 'ember-autograd'",
    "import ember.fx": "ember.fx needs the 'ember-fx'",
    "from ember import fx": "ember.fx needs the 'ember-fx'",
    "ember.fx.symbolic_trace": "ember.fx needs the 'ember-fx'",
    "import ember.onnx": "ember.onnx needs the 'ember-fx'",
    "import ember.onnx.export": "ember.onnx needs the 'ember-fx'",
    "import ember._inductor": "ember._inductor needs the 'ember-inductor'",
    "import emberaudio": "emberaudio needs the 'ember-audio'",
    "ember.ones(2, requires_grad=True).sum().backward()": "Tensor.backward() needs the 'ember-autograd'",
}


_ATTRIBUTE_ACCESS = ("ember.optim.SGD", "ember.fx.symbolic_trace")


def test_with_only_ember_core_every_missing_piece_is_named():
    probe = "assert __import__('importlib.util').util.find_spec('ember.fx') is None"
    no_attribute = "assert not hasattr(ember, 'fx') and getattr(ember, 'optim', None) is None"
    statements = [*_WITHOUT_AUTOGRAD, "ember.ones(2).add(1).sum()", probe, no_attribute]
    proc = subprocess.run(
        [sys.executable, "-c", _ONLY_CORE, *statements], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert results["ember.ones(2).add(1).sum()"] is None  # core works
    assert results[probe] is None  # importlib.util.find_spec answers None, as for any absent module
    assert results[no_attribute] is None  # hasattr and getattr with a default answer, as for any attribute
    for statement, start in _WITHOUT_AUTOGRAD.items():
        kind, message, is_import_error, _ = results[statement]
        if statement in _ATTRIBUTE_ACCESS:  # an AttributeError, so that hasattr/getattr(..., default) answer
            assert kind == "MissingDistributionAttributeError" and not is_import_error, (statement, results[statement])
        else:
            assert kind == "MissingDistributionError" and is_import_error, (statement, results[statement])
        assert message.startswith(start), (statement, message)
        distribution = start.split("'")[1]
        if _extensions.DISTRIBUTIONS[distribution].written:
            assert f"nox -s wheels && pip install --find-links dist/wheels {distribution} (or: " in message, message
    assert results["import ember.fx"][3] == "ember.fx"
