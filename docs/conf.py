"""Sphinx configuration for Ember's documentation (built by ``nox -s docs``).

The API pages are generated from docstrings with autodoc; Google-style sections
(Args, Returns, Raises, Example) are read by napoleon, and every ``>>>`` example
is executed by ``sphinx-build -b doctest``.
"""

from __future__ import annotations

import datetime
import doctest
import functools
import importlib
import inspect
import re
import types
from importlib import metadata
from pathlib import Path

from sphinx.util import logging as sphinx_logging

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


# --------------------------------------------------------------------------- op families
# Each op module of the registry (ember._ops.OP_MODULES) is one family with one page.
# The page is prose written by hand around a line ``.. ember-op-family: <module>``
# (an RST comment), which the build replaces with a summary table and an entry for
# every public op that module registered (ember._ops.OPS_BY_MODULE), under the name
# a user calls it by. New ops therefore appear on their family's page by themselves;
# a new op module needs a page, and the build fails until it has one.

API_DIR = Path(__file__).resolve().parent / "api"
_OP_FAMILY = re.compile(r"^\.\. ember-op-family: (\S+)[ \t]*$", re.MULTILINE)
_AUTO_DIRECTIVE = re.compile(
    r"^\s*\.\. auto(?:function|class|exception|data|decorator)::\s+(ember\.[\w.]+)", re.MULTILINE
)

logger = sphinx_logging.getLogger(__name__)


def _resolve(qualified: str):
    """The object that a dotted name such as ``ember.nn.functional.relu`` names, or ``None``."""
    module_name, _, attr = qualified.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError):
        return None


def _api_pages() -> dict[str, str]:
    """The hand-written API pages' sources, by docname (``"api/ops/pointwise"``)."""
    root = API_DIR.parent
    return {
        page.relative_to(root).with_suffix("").as_posix(): page.read_text(encoding="utf-8")
        for page in sorted(API_DIR.rglob("*.rst"))
    }


@functools.cache
def hand_documented() -> frozenset[int]:
    """``id``s of the objects that the pages document with explicit auto directives."""
    objects = (_resolve(name) for text in _api_pages().values() for name in _AUTO_DIRECTIVE.findall(text))
    return frozenset(id(obj) for obj in objects if obj is not None)


def _exported_names() -> dict[int, list[str]]:
    """Every public name of each op, by the op's ``id``: ``ember.<name>`` first, then ``ember.nn.functional``'s.

    Among the ``ember.nn.functional`` names an alias comes before the registry name
    (``F.unfold`` before ``F.im2col``, the same op).
    """
    import ember
    import ember.nn.functional as F
    from ember._ops import Op

    top = [f"ember.{n}" for n in dir(ember) if not n.startswith("_") and isinstance(getattr(ember, n), Op)]
    functional = [f"ember.nn.functional.{n}" for n in F.__all__ if isinstance(getattr(F, n), Op)]
    names: dict[int, list[str]] = {}
    for qualified in top + functional:
        names.setdefault(id(_resolve(qualified)), []).append(qualified)
    for op_names in names.values():
        op_names.sort(key=lambda q: (q.startswith("ember.nn."), q.rsplit(".", 1)[1] == _resolve(q).name))
    return names


@functools.cache
def op_family_entries() -> dict[str, list[tuple[str, list[str]]]]:
    """For each op module, ``(name to document, other public names)`` per public op, in registration order.

    Ops without a public function (in-place variants such as ``add_``, which are
    Tensor methods, and private ops) are left out, as are ops that a page already
    documents by hand with its own auto directive.
    """
    from ember._ops import OP_MODULES, OPS_BY_MODULE, registry

    exported = _exported_names()
    families = {}
    for module in OP_MODULES:
        prefer_functional = module.__name__.rsplit(".", 1)[1].startswith("nn_")
        entries = []
        for op_name in OPS_BY_MODULE[module.__name__]:
            op = registry[op_name]
            names = exported.get(id(op))
            if not names or id(op) in hand_documented():
                continue
            if prefer_functional:  # PyTorch documents F.conv2d, not torch.conv2d
                names = sorted(names, key=lambda q: not q.startswith("ember.nn.functional."))
            entries.append((names[0], names[1:]))
        families[module.__name__] = entries
    return families


def _summary(obj) -> str:
    """The first paragraph of ``obj``'s docstring, on one line."""
    doc = inspect.getdoc(obj) or ""
    return " ".join(line.strip() for line in doc.split("\n\n", 1)[0].splitlines()) or "(no docstring)"


def _family_rst(module_name: str) -> str:
    """A table of a family's ops (name and summary line), then each op's entry."""
    entries = op_family_entries()[module_name]
    if not entries:
        return "This family has no public ops yet."
    rows = "\n".join(f"   * - :func:`~{name}`\n     - {_summary(_resolve(name))}" for name, _ in entries)
    blocks = [f".. list-table::\n   :class: ember-op-summary\n   :widths: 1 3\n\n{rows}"]
    for name, also in entries:
        block = f".. autofunction:: {name}"
        if also:
            block += "\n\n   Also available as " + ", ".join(f"``{a}``" for a in also) + "."
        blocks.append(block)
    return "\n\n".join(blocks)


def check_op_families(app) -> None:
    """Warn (an error under ``-W``) unless every op module has exactly one page, and each page names a real one."""
    from ember._ops import OP_MODULES

    claimed: dict[str, list[str]] = {}
    for docname, text in _api_pages().items():
        for module_name in _OP_FAMILY.findall(text):
            claimed.setdefault(module_name, []).append(docname)
    known = {module.__name__ for module in OP_MODULES}
    for module_name in sorted(known - set(claimed)):
        logger.warning(
            f"op module {module_name} has no API page: add one with a line '.. ember-op-family: {module_name}'"
        )
    for module_name, docnames in sorted(claimed.items()):
        if module_name not in known:
            logger.warning(f"{', '.join(docnames)}: {module_name} is not in ember._ops.OP_MODULES")
        elif len(docnames) > 1:
            logger.warning(f"op module {module_name} has several API pages: {', '.join(docnames)}")


def _fill_op_families(app, docname: str, source: list[str]) -> None:
    if not docname.startswith("api/"):
        return
    source[0] = _OP_FAMILY.sub(
        lambda m: _family_rst(m.group(1)) if m.group(1) in op_family_entries() else m.group(0), source[0]
    )


# --------------------------------------------------------------------------- coverage
# api/other.rst lists, at build time, every public name of `ember` (and of the
# subpackages in COVERED_MODULES, when installed) that no other API page documents
# (by hand or as an op of a family), so a new function is in the reference the day it
# lands (move it to the right page when convenient).

PLACEHOLDER = ".. ember-undocumented-names"
#: Modules whose public names must all appear in the API reference.
COVERED_MODULES = ("ember", "ember.autograd")


def documented_objects() -> set[int]:
    """``id``s of the objects that the API pages document, the op family pages included."""
    generated = (_resolve(name) for entries in op_family_entries().values() for name, _ in entries)
    return set(hand_documented()) | {id(obj) for obj in generated}


def undocumented_public_names(module_name: str = "ember") -> list[tuple[str, str]]:
    """``(name, directive)`` for each public callable or class of ``module_name`` that no page documents.

    An installed module that cannot be imported is an error; a module that is
    not installed (an optional distribution) has nothing to list.
    """
    import ember

    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            return []
        raise
    public = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
    documented = documented_objects()
    missing = []
    for name in sorted(public):
        obj = getattr(module, name, None)
        if id(obj) in documented or isinstance(obj, types.ModuleType) or isinstance(obj, ember.dtype):
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
    for module_name in COVERED_MODULES:
        for name, kind in undocumented_public_names(module_name):
            entries.append(f".. auto{kind}:: {module_name}.{name}" + ("\n   :members:" if kind == "class" else ""))
    body = "\n\n".join(entries) if entries else "Every public name is documented on the pages above."
    source[0] = source[0].replace(PLACEHOLDER, body)


# --------------------------------------------------------------------------- derivative table
# autograd.rst holds a line ``.. ember-derivative-table`` (an RST comment), which the
# build replaces with one table per op family: how autograd differentiates each op of
# the registry, read from ember-autograd's tables (``ember.autograd._table``), with each
# formula's source. A new formula is therefore documented the day it is registered.

DERIVATIVE_PLACEHOLDER = ".. ember-derivative-table"


@functools.cache
def _lambdas_by_line(filename: str) -> dict:
    """The ``ast.Lambda`` nodes of a Python file by first line (empty when the file cannot be read)."""
    import ast

    try:
        tree = ast.parse(Path(filename).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return {}
    found: dict[int, list] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Lambda):
            found.setdefault(node.lineno, []).append(node)
    return found


def _lambda_body(fn) -> str | None:
    """The source of a lambda's body (``grad * conj(other)``), or ``None`` when it cannot be found."""
    import ast

    code = fn.__code__
    names = list(code.co_varnames[: code.co_argcount + code.co_kwonlyargcount])
    candidates = [
        node
        for node in _lambdas_by_line(code.co_filename).get(code.co_firstlineno, [])
        if [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)] == names
    ]
    positions = getattr(code, "co_positions", None)  # Python 3.11+
    if len(candidates) > 1 and positions is not None:  # same parameters, same line: match by column
        columns = [  # where the body's instructions are (the (0, 0) spans belong to no source text)
            col for line, _, col, end in positions() if line == code.co_firstlineno and col is not None and end
        ]
        if columns:
            first = min(columns)
            candidates = [n for n in candidates if n.body.col_offset <= first <= (n.body.end_col_offset or 0)]
    if len(candidates) != 1:
        return None
    return ast.unparse(candidates[0].body)


def _only_raises(fn) -> bool:
    """Whether ``fn``'s body (after any docstring) is a single ``raise`` (an op PyTorch cannot differentiate either)."""
    import ast
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return False
    if not tree.body or not isinstance(tree.body[0], ast.FunctionDef):
        return False
    body = tree.body[0].body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    return len(body) == 1 and isinstance(body[0], ast.Raise)


def _formula_rst(formula) -> str:
    """One formula as RST: the inputs it gives gradients for, then its source (or name and parameters)."""
    inputs = ", ".join(f"``{name}``" for name in formula.inputs)
    if formula.joint:
        inputs += " (jointly)"
    fn = formula.fn
    if fn.__name__ == "<lambda>":
        body = _lambda_body(fn)
    elif _only_raises(fn):
        return f"{inputs}: raises ``NotImplementedError`` when needed, as in PyTorch"
    else:
        body = None
    if body is None:
        body = f"{fn.__name__}({', '.join(formula.params)})"
    return f"{inputs}: ``{body}``"


def derivative_rows(module_name: str) -> list[tuple[str, str, str]]:
    """``(op, how, details)`` for each op of a registry module, in registration order.

    In-place variants with a functional op are left out: autograd records them
    as that op followed by a copy, so they share its row.
    """
    from ember._ops import OPS_BY_MODULE, registry
    from ember.autograd import _table

    rows = []
    for op_name in OPS_BY_MODULE[module_name]:
        op = registry[op_name]
        if op.kind == "inplace" and op.functional is not None:
            continue
        how, entry = _table.lookup(op)
        if how == "formula":
            details = "; ".join(_formula_rst(f) for f in entry.formulas)
            if entry.nondiff_args:
                details += "; no gradient for " + ", ".join(f"``{n}``" for n in sorted(entry.nondiff_args))
            rows.append((op_name, "formula", details))
        elif how == "decomposition":
            rows.append((op_name, "through decomposition", "recorded as the ops of its decomposition"))
        elif how == "none":
            rows.append((op_name, "non-differentiable", "outputs never require grad"))
        elif op.decomposition is not None:
            rows.append((op_name, "through decomposition (default)", "composite without an entry"))
        else:
            rows.append((op_name, "not differentiable yet", "no entry: raises if a floating-point output needs grad"))
    return rows


def _derivative_table_rst() -> str:
    """The generated part of autograd.rst: a summary, then a table per op family."""
    from ember._ops import OP_MODULES

    try:
        import ember.autograd  # noqa: F401
    except ModuleNotFoundError as exc:  # not installed; a broken install still fails the build
        if exc.name != "ember.autograd":
            raise
        return "ember-autograd is not installed in the environment that built these docs."
    tables = []
    counts: dict[str, int] = {}
    for module in OP_MODULES:
        rows = derivative_rows(module.__name__)
        if not rows:
            continue
        for _, how, _ in rows:
            counts[how] = counts.get(how, 0) + 1
        family = module.__name__.rsplit(".", 1)[1]
        body = "\n".join(f"   * - ``{op}``\n     - {how}\n     - {details}" for op, how, details in rows)
        title = f"``{family}``"
        tables.append(
            f"{title}\n{'^' * len(title)}\n\n.. list-table::\n   :class: ember-derivative-table\n"
            f"   :header-rows: 1\n   :widths: 2 2 6\n\n   * - op\n     - how\n     - gradient\n{body}"
        )
    summary = ", ".join(f"{n} {how}" for how, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return f"Ops by how they are differentiated: {summary}.\n\n" + "\n\n".join(tables)


def _fill_derivative_table(app, docname: str, source: list[str]) -> None:
    if DERIVATIVE_PLACEHOLDER in source[0]:
        source[0] = source[0].replace(DERIVATIVE_PLACEHOLDER, _derivative_table_rst())


def setup(app):
    app.connect("builder-inited", check_op_families)
    app.connect("source-read", _fill_op_families)
    app.connect("source-read", _fill_other_page)
    app.connect("source-read", _fill_derivative_table)
