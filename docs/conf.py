"""Sphinx configuration for Ember's documentation (built by ``nox -s docs``).

The API pages are generated from docstrings with autodoc; Google-style sections
(Args, Returns, Raises, Example) are read by napoleon, and every ``>>>`` example
is executed by ``sphinx-build -b doctest``.
"""

from __future__ import annotations

import datetime
import doctest
import re
import types
from importlib import metadata
from pathlib import Path

project = "Ember"
author = "The Ember developers"
copyright = f"{datetime.date.today().year}, {author}"
try:
    release = metadata.version("ember-core")
except metadata.PackageNotFoundError:  # building docs without ember-core installed
    release = "unknown"
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.doctest",
    "sphinx.ext.viewcode",
]

exclude_patterns = ["_build", "requirements.txt"]
templates_path: list[str] = []

# autodoc: document what has a docstring, in source order, with signatures as written.
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autoclass_content = "class"

# napoleon: Google-style docstrings only (STYLE.md).
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_include_init_with_doc = False
napoleon_use_rtype = False

# doctest: every example sees these names, as a user who typed `import ember` would.
doctest_global_setup = """
import numpy as np
import ember
"""
doctest_default_flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE | doctest.DONT_ACCEPT_TRUE_FOR_1

html_theme = "furo"
html_title = f"Ember {release}"
html_static_path: list[str] = []


# --------------------------------------------------------------------------- coverage
# api/other.rst lists, at build time, every public name of `ember` that no other
# API page documents, so a new function is in the reference the day it lands
# (move it to the right page when convenient).

API_DIR = Path(__file__).resolve().parent / "api"
PLACEHOLDER = ".. ember-undocumented-names"
_AUTO_DIRECTIVE = re.compile(
    r"^\s*\.\. auto(?:function|class|exception|data|decorator)::\s+(ember\.[\w.]+)", re.MULTILINE
)


def documented_names() -> set[str]:
    """Fully qualified names that the hand-written API pages document."""
    names: set[str] = set()
    for page in API_DIR.glob("*.rst"):
        if page.stem != "other":
            names.update(_AUTO_DIRECTIVE.findall(page.read_text(encoding="utf-8")))
    return names


def undocumented_public_names() -> list[tuple[str, str]]:
    """``(name, directive)`` for each public callable or class of ``ember`` that no page documents."""
    import ember

    public = getattr(ember, "__all__", None) or [n for n in dir(ember) if not n.startswith("_")]
    documented = documented_names()
    missing = []
    for name in sorted(public):
        obj = getattr(ember, name, None)
        if f"ember.{name}" in documented or isinstance(obj, types.ModuleType) or isinstance(obj, ember.dtype):
            continue  # documented, a subpackage, or a dtype (listed in the dtypes table)
        if not (isinstance(obj, type) or callable(obj)):
            continue  # data such as ember.default_generator, described in prose
        if not str(getattr(obj, "__module__", "") or "").startswith("ember"):
            continue  # a helper imported from elsewhere, not ember's API
        if isinstance(obj, type):
            kind = "exception" if issubclass(obj, BaseException) else "class"
        else:
            kind = "function"
        missing.append((name, kind))
    return missing


def _fill_other_page(app, docname: str, source: list[str]) -> None:
    if docname != "api/other" or PLACEHOLDER not in source[0]:
        return
    entries = []
    for name, kind in undocumented_public_names():
        entries.append(f".. auto{kind}:: ember.{name}" + ("\n   :members:" if kind == "class" else ""))
    body = "\n\n".join(entries) if entries else "Every public name is documented on the pages above."
    source[0] = source[0].replace(PLACEHOLDER, body)


def setup(app):
    app.connect("source-read", _fill_other_page)
