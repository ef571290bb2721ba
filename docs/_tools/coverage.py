"""Generate the table of docs/pytorch_coverage.rst: which of PyTorch's public modules Ember has.

Run from the repository root, with PyTorch and every ember distribution installed::

    python docs/_tools/coverage.py            # print the table
    python docs/_tools/coverage.py --write    # replace the table in docs/pytorch_coverage.rst

It walks PyTorch's public module tree (names without a leading underscore, three levels
deep: ``torch.nn.modules.activation``), imports the Ember module of the same path
(``torch`` -> ``ember``) and counts the public names of the PyTorch module that the Ember
module has. A module Ember lacks is one row, with its submodules counted but not listed, and
the reason from :data:`MISSING_REASONS`. The output is a ``list-table``; ``--write`` puts it
between the ``.. coverage-table-start`` and ``.. coverage-table-end`` comments of
docs/pytorch_coverage.rst, whose prose is written by hand.

Public names of a module: its ``__all__`` when it has one; otherwise the attributes without
a leading underscore that are not modules and were defined in PyTorch (not re-exported
``typing`` or standard-library names).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
import warnings
from pathlib import Path

MAX_DEPTH = 3  # torch.nn.modules.activation
SHOW_MISSING_NAMES = 6  # a partial module lists its missing names when there are at most this many

#: Where a missing module will come from, by the longest matching PyTorch prefix.
MISSING_REASONS = {
    "torch.distributed": "ember-distributed (packages/distributed, planned)",
    "torch.nn.parallel": "ember-distributed (DistributedDataParallel, replicate/scatter/gather)",
    "torch.multiprocessing": "not yet: internal modules (their public names are in ember.multiprocessing)",
    "torch._dynamo": "ember-dynamo (packages/dynamo: not yet this module)",
    "torch.compiler": "ember-dynamo (packages/dynamo: not yet this module)",
    "torch.export": "ember-dynamo (planned: export on top of the bytecode capture)",
    "torch._inductor": "ember-inductor (planned)",
    "torch.onnx": "not yet: exporter internals (ember.onnx.export, in ember-fx, needs none of them)",
    "torch.ao": "ember-fx (ember.ao, FX graph-mode quantization)",
    "torch.quantization": "ember-fx (ember.ao; torch.quantization is its deprecated alias)",
    "torch.nn.quantized": "ember-fx (ember.ao)",
    "torch.nn.quantizable": "ember-fx (ember.ao)",
    "torch.nn.qat": "ember-fx (ember.ao)",
    "torch.nn.intrinsic": "ember-fx (ember.ao)",
    "torch.jit": "not planned: TorchScript; ember.compile and ember.fx cover its uses",
    "torch.package": "not planned (pickle-based archives; ember.save never unpickles)",
    "torch.hub": "not yet",
    "torch.utils.model_zoo": "not yet (ember.hub.load_state_dict_from_url)",
    "torch.mobile": "ember-mobile (planned)",
    "torch.utils.mobile_optimizer": "ember-mobile (planned)",
    "torch.utils.bundled_inputs": "ember-mobile (planned)",
    "torch.xpu": "no backend: ember has cpu, cuda (and ROCm through CuPy), meta and out-of-tree devices",
    "torch.mps": "no backend (see torch.xpu)",
    "torch.mtia": "no backend (see torch.xpu)",
    "torch.cpu": "not yet (PyTorch's CPU stream/device shims)",
    "torch.distributions": "not yet",
    "torch.amp": "not yet: internal modules (their public names are in ember.amp)",
    "torch.cuda.amp": "not yet: internal modules (their public names are in ember.cuda.amp)",
    "torch.profiler": "not yet (Intel ITT and the Python tracer)",
    "torch.autograd.profiler": "not yet (ember.profiler has the recorder)",
    "torch.sparse": "not yet (semi-structured sparsity)",
    "torch.masked": "not yet (masked tensors)",
    "torch.nested": "not yet (nested tensors)",
    "torch.fft": "not yet",
    "torch.linalg": "not yet",
    "torch.special": "not yet",
    "torch.signal": "not yet",
    "torch.func": "not yet (ember.func, in ember-autograd)",
    "torch.utils.tensorboard": "not yet (ember.utils.tensorboard needs the tensorboard package)",
    "torch.utils.cpp_extension": "not planned (ember's extensions are Python and registered kernels)",
}

#: Third-party and standard-library modules some PyTorch modules re-export without __all__.
_FOREIGN_PREFIXES = ("typing", "collections", "functools", "enum", "abc", "dataclasses", "builtins")


def _public_names(module):
    names = getattr(module, "__all__", None)
    if names is not None:
        return sorted({n for n in names if isinstance(n, str)})
    result = set()
    for name, value in vars(module).items():
        if name.startswith("_") or inspect.ismodule(value):
            continue
        defined_in = getattr(value, "__module__", None) if (inspect.isclass(value) or callable(value)) else None
        if isinstance(defined_in, str) and defined_in.split(".")[0] in _FOREIGN_PREFIXES:
            continue
        if isinstance(defined_in, str) and not defined_in.startswith("torch"):
            continue
        result.add(name)
    return sorted(result)


def _import(name):
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - a module that cannot be imported here is absent for this table
        return None


def _submodules(module):
    path = vars(module).get("__path__")
    if path is None:
        return []
    names = []
    for info in pkgutil.iter_modules(path):
        if not info.name.startswith("_"):
            names.append(f"{module.__name__}.{info.name}")
    return sorted(names)


def _count_subtree(name, depth):
    """Number of importable public modules under ``name`` (for a collapsed row)."""
    module = _import(name)
    if module is None or depth >= MAX_DEPTH:
        return 0
    return sum(1 + _count_subtree(sub, depth + 1) for sub in _submodules(module) if _import(sub) is not None)


def _has(module, name):
    """Whether ``module`` has ``name`` (a name whose distribution is missing raises: it is absent)."""
    try:
        return hasattr(module, name)
    except Exception:  # noqa: BLE001 - MissingDistributionError and the like
        return False


def _reason(torch_name):
    best = ""
    for prefix in MISSING_REASONS:
        if (torch_name == prefix or torch_name.startswith(prefix + ".")) and len(prefix) > len(best):
            best = prefix
    return MISSING_REASONS.get(best, "not yet")


def _ember_module(torch_name):
    ember_name = "ember" + torch_name[len("torch") :]
    module = _import(ember_name)
    if module is not None:
        return module
    # A module-like attribute (ember.fx.experimental before its import, ember.backends.cudnn, ...)
    parent, _, leaf = ember_name.rpartition(".")
    parent_module = _import(parent)
    if parent_module is None or not _has(parent_module, leaf):
        return None
    value = getattr(parent_module, leaf)
    return value if inspect.ismodule(value) else None


def _status(names, present_names):
    missing = [n for n in names if n not in present_names]
    if not missing:
        return "present"
    status = f"partial: {len(names) - len(missing)} of {len(names)} names"
    if len(missing) <= SHOW_MISSING_NAMES:
        status += " (lacks " + ", ".join(f"``{n}``" for n in missing) + ")"
    return status


def _row(torch_name, names, ember_module):
    present = {n for n in names if _has(ember_module, n)}
    return (torch_name, _status(names, present), len(present), len(names))


def rows():
    """``(pytorch module, status, present names, public names)`` in tree order.

    The first rows are the ``torch`` namespace itself and the attributes of ``torch.Tensor``.
    Submodules Ember lacks under a module it has are grouped into one row per module, so a
    package of twenty ONNX opset modules reads as one line.
    """
    import torch

    import ember

    result = [
        _row("torch", _public_names(torch), ember),
        _row("torch.Tensor", sorted(n for n in dir(torch.Tensor) if not n.startswith("_")), ember.Tensor),
    ]

    def missing_row(torch_name, depth):
        below = _count_subtree(torch_name, depth)
        extra = f"; {below} submodule{'s' if below > 1 else ''}" if below else ""
        return (torch_name, f"missing: {_reason(torch_name)}{extra}", 0, 0)

    def visit(torch_name, depth):
        torch_module = _import(torch_name)
        if torch_module is None:
            return
        ember_module = _ember_module(torch_name)
        if ember_module is None:
            result.append(missing_row(torch_name, depth))
            return
        result.append(_row(torch_name, _public_names(torch_module), ember_module))
        if depth >= MAX_DEPTH:
            return
        absent = []
        for sub in _submodules(torch_module):
            if _import(sub) is None:
                continue
            if _ember_module(sub) is None:
                absent.append(sub)
            else:
                visit(sub, depth + 1)
        by_reason = {}
        for sub in absent:
            by_reason.setdefault(_reason(sub), []).append(sub)
        for reason, subs in by_reason.items():
            if len(subs) == 1:
                result.append(missing_row(subs[0], depth + 1))
                continue
            leaves = ", ".join(f"``{name.rsplit('.', 1)[1]}``" for name in subs)
            result.append((f"{torch_name}.*", f"missing: {reason}: {len(subs)} submodules ({leaves})", 0, 0))

    for sub in _submodules(torch):
        visit(sub, 1)
    return result


def render(table):
    import torch

    import ember

    present = sum(1 for _, status, _, _ in table if status == "present")
    partial = sum(1 for _, status, _, _ in table if status.startswith("partial"))
    missing = len(table) - present - partial
    lines = [
        f".. Generated by docs/_tools/coverage.py against PyTorch {torch.__version__.split('+')[0]} "
        f"and ember {ember.__version__}; do not edit by hand.",
        "",
        f"{len(table)} rows: {present} present, {partial} partial, {missing} missing "
        "(a missing package is one row, whatever its submodules).",
        "",
        ".. list-table::",
        "   :header-rows: 1",
        "   :widths: 40 60",
        "",
        "   * - PyTorch module",
        "     - In Ember",
    ]
    for name, status, _, _ in table:
        lines += [f"   * - ``{name}``", f"     - {status}"]
    return "\n".join(lines) + "\n"


PAGE = Path(__file__).resolve().parent.parent / "pytorch_coverage.rst"
START, END = ".. coverage-table-start", ".. coverage-table-end"


def write_page(table_text, page=PAGE):
    """Replace the text between the START and END comments of ``page`` with ``table_text``."""
    text = page.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"{page} lacks the {START!r} / {END!r} comments")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    page.write_text(f"{head}{START}\n\n{table_text}\n{END}{tail}", encoding="utf-8")


def main(argv=None):
    warnings.simplefilter("ignore")
    argv = sys.argv[1:] if argv is None else argv
    table_text = render(rows())
    if argv == ["--write"]:
        write_page(table_text)
    elif not argv:
        sys.stdout.write(table_text)
    else:
        raise SystemExit("usage: python docs/_tools/coverage.py [--write]")


if __name__ == "__main__":
    main()
