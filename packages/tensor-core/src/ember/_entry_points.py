"""The entry points of one group, found without importing :mod:`importlib.metadata` where that is safe.

``import ember`` loads the modules registered under the ``ember.extensions`` entry-point group.
Importing :mod:`importlib.metadata` (which imports email, zipfile, csv and pathlib) costs about
30 ms, more than the scan itself and a tenth of ``import ember``. In the common layout, where every
``sys.path`` entry is a plain directory and only the standard path finder lists distributions,
:func:`entry_points` reads the same files in the same order as ``importlib.metadata.entry_points``:
the ``*.dist-info`` and ``*.egg-info`` directories of each ``sys.path`` entry, the first
distribution of each (normalised) name only, and its ``entry_points.txt``. Any other layout (a zip
file or an egg on ``sys.path``, a finder of its own that lists distributions) goes through
:mod:`importlib.metadata` itself.
"""

from __future__ import annotations

import functools
import importlib
import importlib.machinery
import os
import re
import sys

__all__ = ["EntryPoint", "entry_points"]

_METADATA_DIRS = (".dist-info", ".egg-info")
# importlib.metadata.EntryPoint's syntax: "module", "module:attr.attr", optional "[extras]"
_VALUE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")


class EntryPoint:
    """One entry point: ``name = value`` of section ``[group]`` of an ``entry_points.txt``."""

    __slots__ = ("name", "value", "group")

    def __init__(self, name, value, group):
        self.name, self.value, self.group = name, value, group

    def load(self):
        """Import the module the entry point names and return the object it names in it."""
        match = _VALUE.match(self.value)
        if match is None:
            raise ValueError(f"entry point {self.name!r} has a malformed value {self.value!r}")
        module = importlib.import_module(match.group("module"))
        return functools.reduce(getattr, filter(None, (match.group("attr") or "").split(".")), module)

    def __repr__(self):
        return f"EntryPoint(name={self.name!r}, value={self.value!r}, group={self.group!r})"


def entry_points(group):
    """The entry points of ``group`` of every installed distribution, in ``importlib.metadata``'s order."""
    dirs = _metadata_dirs()
    if dirs is None:
        import importlib.metadata

        return list(importlib.metadata.entry_points(group=group))
    found = []
    for path in dirs:
        try:
            with open(os.path.join(path, "entry_points.txt"), encoding="utf-8") as file:
                text = file.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
            continue
        found.extend(EntryPoint(name, value, group) for section, name, value in _parse(text) if section == group)
    return found


def _metadata_dirs():
    """The metadata directory of each distribution, first of its name on sys.path; None for other layouts."""
    if any(
        hasattr(finder, "find_distributions") and finder is not importlib.machinery.PathFinder
        for finder in sys.meta_path
    ):
        return None
    seen, dirs = set(), []
    for root in sys.path:
        try:
            children = os.listdir(root or ".")
        except OSError:
            if os.path.exists(root):  # a zip file: importlib.metadata reads inside it
                return None
            continue
        if os.path.basename(root).lower().endswith(".egg"):
            return None
        for child in children:
            if not child.lower().endswith(_METADATA_DIRS):
                continue
            if not child.endswith(_METADATA_DIRS):
                return None  # (".DIST-INFO": importlib.metadata then reads the name from the metadata)
            key = _normalize(child.rpartition(".")[0].partition("-")[0])
            if key not in seen:
                seen.add(key)
                dirs.append(os.path.join(root, child))
    return dirs


def _normalize(name):
    """A distribution name as importlib.metadata compares them (PEP 503, with underscores)."""
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _parse(text):
    """``(section, name, value)`` for each ``name = value`` line of an INI-like ``entry_points.txt``."""
    section = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
        elif section is not None:
            name, _, value = line.partition("=")
            yield section, name.strip(), value.strip()
