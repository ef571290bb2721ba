"""Load models published as a ``hubconf.py`` (``torch.hub`` counterpart).

A hub repository is a directory with a ``hubconf.py`` whose public callables are the entry points
(each builds and returns a model); an optional ``dependencies`` list names modules the entry points
need. :func:`load` with ``source="local"`` imports that file from a directory and calls an entry
point; :func:`list` and :func:`help` show the entry points and their docstrings.

**Trust.** Loading a hubconf runs its code, as importing any Python module does: only load
directories you trust. (ember's tensor files, by contrast, never run code on loading.)

**Remote sources.** ``source="github"`` would clone ``owner/repo[:ref]`` into :func:`get_dir`; ember
does not fetch repositories itself: it looks for an earlier download there (a directory
``owner_repo_ref``) and otherwise raises an error saying how to download one and load it with
``source="local"``. :func:`load_state_dict_from_url` downloads with :mod:`urllib` into
``get_dir()/checkpoints`` (once; atomically) and loads the file with :func:`ember.load`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

__all__ = ["load", "list", "help", "get_dir", "set_dir", "load_state_dict_from_url", "download_url_to_file"]

_HUBCONF = "hubconf.py"
_hub_dir = None


def get_dir():
    """The directory where downloads are cached: :func:`set_dir`'s, else ``$EMBER_HOME/hub``,
    else ``$XDG_CACHE_HOME/ember/hub`` (``~/.cache/ember/hub`` by default)."""
    if _hub_dir is not None:
        return _hub_dir
    if os.environ.get("EMBER_HOME"):
        return os.path.join(os.path.expanduser(os.environ["EMBER_HOME"]), "hub")
    cache = os.environ.get("XDG_CACHE_HOME", os.path.join("~", ".cache"))
    return os.path.join(os.path.expanduser(cache), "ember", "hub")


def set_dir(d):
    """Use directory ``d`` (a str or path-like) for hub downloads from now on."""
    global _hub_dir
    _hub_dir = os.path.expanduser(os.fspath(d))


def _check_source(source):
    if source not in ("github", "local"):
        raise ValueError(f'Unknown source: "{source}". Allowed values: "github" | "local".')


def _github_dir(repo):
    """The local copy of ``owner/repo[:ref]`` under :func:`get_dir`, or an error saying how to make one."""
    match = re.fullmatch(r"([\w.-]+)/([\w.-]+)(?::([\w./-]+))?", repo)
    if match is None:
        raise ValueError(f"repo_or_dir={repo!r} is not of the form 'owner/repo[:ref]' for source='github'")
    owner, name, ref = match.groups()
    folder = Path(get_dir()) / f"{owner}_{name}_{(ref or 'main').replace('/', '_')}"
    if (folder / _HUBCONF).is_file():
        return folder
    raise RuntimeError(
        f"ember.hub does not download repositories: no copy of {repo!r} in {folder}. Clone it, e.g. "
        f"`git clone https://github.com/{owner}/{name} {folder}`"
        + (f" and check out {ref!r}" if ref else "")
        + ", then load it with ember.hub.load(<that directory>, ..., source='local')"
    )


def _repo_dir(repo_or_dir, source):
    _check_source(source)
    folder = Path(repo_or_dir) if source == "local" else _github_dir(repo_or_dir)
    if not (folder / _HUBCONF).is_file():
        raise FileNotFoundError(f"{folder} has no {_HUBCONF}: not a hub repository")
    return folder


def _import_hubconf(folder):
    """Import ``folder/hubconf.py`` as a fresh module (with ``folder`` importable while it runs)."""
    name = f"ember_hubconf_{abs(hash(str(folder.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, folder / _HUBCONF)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(folder))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(folder))
    missing = [dep for dep in getattr(module, "dependencies", []) if importlib.util.find_spec(dep) is None]
    if missing:
        raise RuntimeError(f"Missing dependencies: {', '.join(missing)}")
    return module


def _entry_point(module, model):
    if not isinstance(model, str):
        raise ValueError(f"Invalid input: model should be the entry point's name (a str), got {type(model).__name__}")
    function = getattr(module, model, None)
    if function is None or not callable(function) or model.startswith("_"):
        raise RuntimeError(f"Cannot find callable {model} in hubconf")
    return function


def list(github, force_reload=False, skip_validation=False, trust_repo=None, verbose=True, source="github"):  # noqa: A001
    """The names of the entry points (public callables) of a hub repository's ``hubconf.py``.

    ``force_reload``, ``skip_validation``, ``trust_repo`` and ``verbose`` are accepted for
    PyTorch's signature; they concern downloading, which ember does not do (see the module notes).

    Raises:
        ValueError: for an unknown ``source``.
        FileNotFoundError: if the directory has no ``hubconf.py``.
        RuntimeError: for a github repository with no local copy, or missing ``dependencies``.
    """
    module = _import_hubconf(_repo_dir(github, source))
    return [name for name in dir(module) if callable(getattr(module, name)) and not name.startswith("_")]


def help(github, model, force_reload=False, skip_validation=False, trust_repo=None, source="github"):  # noqa: A001
    """The docstring of entry point ``model`` of a hub repository (errors as :func:`list`)."""
    return _entry_point(_import_hubconf(_repo_dir(github, source)), model).__doc__


def load(repo_or_dir, model, *args, source="github", trust_repo=None, force_reload=False, verbose=True,
         skip_validation=False, **kwargs):
    """Call entry point ``model`` of a hub repository with ``*args, **kwargs`` and return its result.

    Args:
        repo_or_dir (str or path-like): a directory holding ``hubconf.py`` (``source="local"``), or
            ``"owner/repo[:ref]"`` (``source="github"``: a copy already under :func:`get_dir`).
        model (str): the entry point's name.
        source (str): ``"github"`` (default, as in PyTorch) or ``"local"``.

    Returns:
        Whatever the entry point returns, usually an ``nn.Module``.

    Raises:
        ValueError: for an unknown ``source`` or a non-string ``model``.
        FileNotFoundError: if the directory has no ``hubconf.py``.
        RuntimeError: for a missing entry point, missing ``dependencies``, or a github repository
            with no local copy (the message says how to make one).

    Example::

        model = ember.hub.load("path/to/repo", "resnet18", source="local", pretrained=False)
    """
    folder = _repo_dir(os.fspath(repo_or_dir), source)
    return _entry_point(_import_hubconf(folder), model)(*args, **kwargs)


def download_url_to_file(url, dst, hash_prefix=None, progress=True):
    """Download ``url`` to the file ``dst``, atomically (a temporary file renamed into place).

    Args:
        hash_prefix (str, optional): the file's SHA-256 hex digest must start with it.
        progress (bool): show a tqdm progress bar when tqdm is installed.

    Raises:
        RuntimeError: if the download fails (no network, HTTP error) or the hash does not match;
            ``dst`` is then left as it was.
    """
    dst = os.path.expanduser(os.fspath(dst))
    folder = os.path.dirname(os.path.abspath(dst))
    os.makedirs(folder, exist_ok=True)
    digest = hashlib.sha256()
    handle, partial = tempfile.mkstemp(dir=folder, prefix=".download-", suffix=".partial")
    try:
        with os.fdopen(handle, "wb") as out:
            _copy_url(url, out, digest, progress)
        if hash_prefix is not None and not digest.hexdigest().startswith(hash_prefix):
            raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got "{digest.hexdigest()}")')
        os.replace(partial, dst)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


def _copy_url(url, out, digest, progress):
    try:
        response = urllib.request.urlopen(url, timeout=60)  # noqa: S310 - the user's URL, as PyTorch's
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise RuntimeError(f"could not download {url}: {exc}") from exc
    with response:
        total = response.headers.get("Content-Length") if hasattr(response, "headers") else None
        bar = _progress_bar(progress, total)
        while chunk := response.read(1 << 16):
            out.write(chunk)
            digest.update(chunk)
            if bar is not None:
                bar.update(len(chunk))
        if bar is not None:
            bar.close()


def _progress_bar(progress, total):
    if not progress:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=int(total) if total else None, unit="B", unit_scale=True, unit_divisor=1024)


_HASH_IN_NAME = re.compile(r"-([a-f0-9]+)\.")


def load_state_dict_from_url(url, model_dir=None, map_location=None, progress=True, check_hash=False,
                             file_name=None, weights_only=True):
    """Download a state-dict file once (into ``model_dir``, default ``get_dir()/checkpoints``) and load it.

    The file must be in ember's format (:func:`ember.save`); a PyTorch pickle raises
    :func:`ember.load`'s error with its conversion hint. ``check_hash``: the file name's
    ``name-<hexdigits>.ext`` part must prefix the file's SHA-256, as in PyTorch.

    Raises:
        RuntimeError: if the download fails or the hash does not match.
        ember.serialization.SerializationError: if the file is not an ember file.
    """
    import ember

    folder = os.path.join(get_dir(), "checkpoints") if model_dir is None else os.path.expanduser(os.fspath(model_dir))
    name = file_name or os.path.basename(urllib.parse.urlparse(url).path)
    if not name:
        raise ValueError(f"cannot tell a file name from url={url!r}: pass file_name")
    cached = os.path.join(folder, name)
    if not os.path.exists(cached):
        match = _HASH_IN_NAME.search(name) if check_hash else None
        download_url_to_file(url, cached, match.group(1) if match else None, progress=progress)
    return ember.load(cached, map_location=map_location, weights_only=weights_only)
