"""ember.hub: entry points of a local hubconf.py, the errors for missing pieces and remote sources,
and load_state_dict_from_url over file:// URLs (download once, hash check, atomic)."""

import hashlib
import os

import numpy as np
import pytest

import ember

HUBCONF = '''
dependencies = ["numpy"]
import ember
from helper_module import HIDDEN

def mlp(out_features=2, bias=True):
    """An MLP with HIDDEN hidden units."""
    return ember.nn.Sequential(ember.nn.Linear(3, HIDDEN), ember.nn.ReLU(), ember.nn.Linear(HIDDEN, out_features, bias=bias))

def _not_an_entry_point():
    return None
'''


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "hubconf.py").write_text(HUBCONF)
    (tmp_path / "helper_module.py").write_text("HIDDEN = 7\n")
    return tmp_path


def test_load_list_and_help_from_a_local_directory(repo):
    model = ember.hub.load(repo, "mlp", 4, source="local", bias=False)
    assert isinstance(model, ember.nn.Sequential)
    assert model[0].out_features == 7 and model[2].out_features == 4 and model[2].bias is None
    assert ember.hub.list(str(repo), source="local") == ["mlp"]
    assert ember.hub.help(str(repo), "mlp", source="local") == "An MLP with HIDDEN hidden units."


def test_errors_name_what_is_missing(repo, tmp_path_factory):
    with pytest.raises(RuntimeError, match="Cannot find callable resnet in hubconf"):
        ember.hub.load(repo, "resnet", source="local")
    with pytest.raises(RuntimeError, match="Cannot find callable"):
        ember.hub.load(repo, "_not_an_entry_point", source="local")
    with pytest.raises(ValueError, match='Unknown source: "hf"'):
        ember.hub.load(repo, "mlp", source="hf")
    with pytest.raises(FileNotFoundError, match="hubconf.py"):
        ember.hub.load(tmp_path_factory.mktemp("empty"), "mlp", source="local")
    (repo / "hubconf.py").write_text('dependencies = ["numpy", "no_such_module_xyz"]\n')
    with pytest.raises(RuntimeError, match="Missing dependencies: no_such_module_xyz"):
        ember.hub.list(repo, source="local")


def test_github_sources_use_a_local_copy_or_say_how_to_make_one(repo, tmp_path_factory):
    hub_dir = tmp_path_factory.mktemp("hub")
    ember.hub.set_dir(hub_dir)
    try:
        assert ember.hub.get_dir() == str(hub_dir)
        with pytest.raises(RuntimeError, match="git clone https://github.com/owner/models"):
            ember.hub.load("owner/models:v1", "mlp")
        copy = hub_dir / "owner_models_v1"
        copy.mkdir()
        for name in ("hubconf.py", "helper_module.py"):
            (copy / name).write_text((repo / name).read_text())
        assert ember.hub.load("owner/models:v1", "mlp")[0].out_features == 7
        with pytest.raises(ValueError, match="owner/repo"):
            ember.hub.load("not a repo", "mlp")
    finally:
        ember.hub._hub_dir = None


def test_load_state_dict_from_url_downloads_once_and_checks_the_hash(tmp_path):
    state = {"w": ember.arange(6.0).reshape(2, 3)}
    source = tmp_path / "source.ember"
    ember.save(state, source)
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    url = source.resolve().as_uri()
    cache = tmp_path / "cache"
    loaded = ember.hub.load_state_dict_from_url(url, model_dir=cache, file_name=f"weights-{digest[:8]}.ember",
                                               check_hash=True, progress=False)
    np.testing.assert_array_equal(loaded["w"].numpy(), np.arange(6.0).reshape(2, 3))
    source.unlink()  # a second call reads the cached file
    again = ember.hub.load_state_dict_from_url(url, model_dir=cache, file_name=f"weights-{digest[:8]}.ember")
    np.testing.assert_array_equal(again["w"].numpy(), loaded["w"].numpy())


def test_failed_downloads_leave_nothing_behind(tmp_path):
    source = tmp_path / "w.ember"
    ember.save({"a": ember.ones(2)}, source)
    cache = tmp_path / "cache"
    with pytest.raises(RuntimeError, match="invalid hash value"):
        ember.hub.load_state_dict_from_url(source.resolve().as_uri(), model_dir=cache, file_name="w-00000000.ember",
                                           check_hash=True, progress=False)
    with pytest.raises(RuntimeError, match="could not download"):
        ember.hub.download_url_to_file((tmp_path / "missing").resolve().as_uri(), cache / "x", progress=False)
    assert os.listdir(cache) == []


def test_model_zoo_is_the_older_name():
    import ember.utils.model_zoo

    assert ember.utils.model_zoo.load_url is ember.hub.load_state_dict_from_url
